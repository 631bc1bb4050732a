"""Loaded DUST rules are claims the crawl checks (real local site, real crawls): a rules file whose rules
merge distinct pages loses no page; its wrong rules are explored, withdrawn, counted and logged, and what
they dropped is fetched after all; its right rules stay in force."""
from __future__ import annotations

import pytest
from pytest_twisted import inlineCallbacks

from scrapy_dedup.url.dust import DustRule, RuleSet
from tests import dustsite
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite
from tests.test_crawl_dust import ADDON, SiteSpider

#: rules that fold distinct pages: listing pages, categories, and every story onto /story
WRONG = [DustRule("drop_param", param="page"), DustRule("drop_param", param="category"),
         DustRule("drop_param", param="id", prefix="/story")]
#: rules true on this site
RIGHT = [DustRule("drop_param", param="print"), DustRule("drop_param", param="sid")]


@pytest.mark.crawl
@inlineCallbacks
def test_a_rules_file_that_merges_distinct_pages_loses_none_its_bad_rules_withdrawn(tmp_path, caplog):
    rules_file = tmp_path / "rules.json"
    RuleSet({dustsite.HOST: WRONG + RIGHT}).save(rules_file)
    settings = {**ADDON, "DEDUP_DUST_RULES": str(rules_file), "DEDUP_DUST_RULES_OUT": str(tmp_path / "out.json")}
    with caplog.at_level("INFO", logger="scrapy_dedup.dust_learning"):
        with LocalSite(dustsite.router) as site:
            crawler = yield run_crawl(SiteSpider, settings, start_urls=[site.url(dustsite.HOST)])
            fetched = site.fetched()
    waste, pages = dustsite.waste(fetched)
    assert pages == dustsite.distinct_pages(), sorted(dustsite.distinct_pages() - pages)
    stats = crawler.stats
    withdrawn = stats.get_value("dedup/dust/loaded_withdrawn", 0)
    assert withdrawn == stats.get_value("dedup/dust/deactivated") >= len(WRONG)
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("DEDUP_DUST_RULES: ") and "withdrawn" in m for m in messages), messages
    # every wrong rule withdrawn; a true one may go with it (blamed with it on one explored URL: waste, no loss)
    kept = {(r.param, r.prefix) for r in RuleSet.load(tmp_path / "out.json").hosts.get(dustsite.HOST, [])}
    assert not kept & {(r.param, r.prefix) for r in WRONG} and kept <= {(r.param, r.prefix) for r in RIGHT}
    assert stats.get_value("dedup/url/rule/dust") > 0
    print(f"loaded rules checked: {len(fetched)} fetches, waste {waste:.1%}, {withdrawn} rule(s) withdrawn")


@pytest.mark.crawl
@pytest.mark.parametrize("learn", [False, True], ids=["loaded-only", "learning"])
@inlineCallbacks
def test_a_loaded_alias_table_that_sends_articles_to_the_home_page_loses_none(tmp_path, caplog, learn):
    """A generated DUST site (tests/dustgen.py). The rules file's alias table sends every URL of half the
    articles to ``/`` (wrong: taken on trust, those pages were never fetched), beside the site's own redirects
    (right: old URLs to the new ones). The table is on trial, one claim as a rule is: the first URL it sends
    elsewhere is fetched as it is and compared with the target's page; on the first difference the whole
    table is withdrawn (each alias counted, logged at WARNING) and what it held back is sent again, so every
    page is fetched (``tests/test_crawl_dust.py``'s shoe site shows a true table staying in force)."""
    from tests import dustgen

    dustgen.require_content()
    site = dustgen.generate(2006, docs=15)
    universe = site.universe()
    pages = {path_qs: truth.page for path_qs, truth in universe.items()
             if truth.kind == "page" and site.pages[truth.page].kind == "doc"}
    sent_home = set(sorted(set(pages.values()))[::2])
    wrong = {path_qs: "/" for path_qs, page in pages.items() if page in sent_home}
    right = {path_qs: truth.location for path_qs, truth in universe.items()
             if truth.kind == "redirect" and truth.location not in wrong}
    assert len(wrong) >= 50 and len(right) >= 20
    rules_file = tmp_path / "rules.json"
    RuleSet({}, aliases={site.host: {**right, **wrong}}).save(rules_file)
    settings = {**ADDON, "DEDUP_DUST_RULES": str(rules_file), "DEDUP_DUST_RULES_OUT": str(tmp_path / "out.json"),
                "DEDUP_DUST_LEARN": learn}
    site.reset_log()
    with caplog.at_level("INFO", logger="scrapy_dedup.dust_learning"):
        with LocalSite(site.router) as local:
            crawler = yield run_crawl(SiteSpider, settings, start_urls=[local.url(site.host)],
                                      allowed_domains=[site.host])
            fetched = list(site.log)
    score = dustgen.score(site, fetched, [item["url"] for item in crawler.items])
    lost = sorted(site.distinct_pages() - {site.truth(p).page for p in fetched if site.truth(p).kind == "page"})
    stats = crawler.stats
    withdrawn = stats.get_value("dedup/dust/loaded_withdrawn", 0)
    print(f"loaded aliases on trial: {len(fetched)} fetches, {score.distinct} of {score.reachable} pages, "
          f"lost {len(lost)}; {withdrawn} aliases withdrawn ({len(wrong)} wrong, {len(right)} right)")
    assert not lost, lost
    assert withdrawn == len(wrong) + len(right)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(m.startswith("DEDUP_DUST_RULES: ") and "withdrawn" in m for m in warnings), warnings
    kept = RuleSet.load(tmp_path / "out.json").aliases.get(site.host, {})  # (the file written loads)
    assert not {k for k, target in kept.items() if wrong.get(k) == target}  # (learned aliases may be there)


@pytest.mark.crawl
@inlineCallbacks
def test_an_alias_table_sending_articles_to_an_unreadable_home_page_loses_none(tmp_path, caplog):
    """The fault round's case: a 1,241-page site (tests/faultcrawl.py) whose home page is one link (too short
    for the learner to read), and a rules file whose alias table sends 58 articles to ``/``. No fetched page
    stands for ``/``'s key, so the first article explored answers a readable page where the target answered
    none: the table is withdrawn and every article fetched (before: the 58 were never fetched)."""
    from tests.faultcrawl import FollowSpider, ResumeSite

    site = ResumeSite(lists=40, per_list=30, delay=0)
    paths = site.paths()
    assert len(paths) == 1241
    rules_file = tmp_path / "rules.json"
    RuleSet({}, aliases={"site.test": {f"/a/{i}": "/" for i in range(58)}}).save(rules_file)
    settings = {**ADDON, "DEDUP_DUST_RULES": str(rules_file)}
    with caplog.at_level("WARNING", logger="scrapy_dedup.dust_learning"):
        with LocalSite(site.route) as local:
            crawler = yield run_crawl(FollowSpider, settings, start_url=local.url("site.test"))
            fetched = local.fetched()
    lost = sorted(set(paths) - {path for _, path in fetched})
    withdrawn = crawler.stats.get_value("dedup/dust/loaded_withdrawn")
    print(f"alias table to an unreadable page: {len(fetched)} fetches, lost {len(lost)}, {withdrawn} withdrawn")
    assert not lost, lost
    assert withdrawn == 58
    assert len(fetched) <= len(paths) + 2  # the table's exploration, and / once more at most
    assert any(r.getMessage().startswith("DEDUP_DUST_RULES: ") for r in caplog.records)
