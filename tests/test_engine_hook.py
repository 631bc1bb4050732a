"""Scrapy's internals are reached through one checked function: a Scrapy without one refuses to start, naming it."""
from __future__ import annotations

import pytest
from pytest_twisted import inlineCallbacks
from scrapy.core import engine as scrapy_engine

from scrapy_dedup.engine_hook import EngineHookMissing, internal
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite
from tests.test_crawl_dupefilters import LinkSpider, filter_settings, link_graph


@pytest.mark.crawl
@inlineCallbacks
def test_a_scrapy_without_the_engine_hook_refuses_to_start_naming_it(tmp_path, monkeypatch):
    """A future Scrapy whose engine slot has no remove_request: the JOBDIR frontier cannot know when a request is
    done, so the crawl must not start (before, the check ran in a spider_opened handler, whose error Scrapy only
    logs: the crawl went on without the hook)."""
    monkeypatch.delattr(scrapy_engine._Slot, "remove_request")
    with LocalSite(link_graph) as site:
        with pytest.raises(EngineHookMissing, match=r"ExecutionEngine\._slot\.remove_request") as info:
            yield run_crawl(LinkSpider, filter_settings("bloom", None, JOBDIR=str(tmp_path)),
                            start_urls=[site.url("a.test")])
        assert not site.hits
    assert "JOBDIR frontier" in str(info.value)


class _Crawler:
    """A crawler of a Scrapy version that lacks what is asked for."""

    def __init__(self, **attributes):
        self.__dict__.update(attributes)


def test_each_missing_internal_is_named_with_who_needs_it():
    with pytest.raises(EngineHookMissing, match=r"OutermostCanonicalFingerprinter needs Scrapy's "
                                                r"Crawler\.request_fingerprinter"):
        internal(_Crawler(), "request_fingerprinter", who="OutermostCanonicalFingerprinter")
    with pytest.raises(EngineHookMissing, match=r"ExecutionEngine\.pause"):
        internal(_Crawler(engine=_Crawler()), "engine.pause", who="x")
    with pytest.raises(EngineHookMissing, match=r"ExecutionEngine\._slot\.scheduler"):
        internal(_Crawler(engine=_Crawler(_slot=_Crawler())), "engine._slot.scheduler", who="x")
    # no engine or no slot yet: a component used on its own, nothing to refuse
    assert internal(_Crawler(engine=None), "engine._slot.remove_request", who="x") is None
    assert internal(_Crawler(engine=_Crawler(_slot=None)), "engine._slot.remove_request", who="x") is None
