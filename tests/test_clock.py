"""The one periodic clock of the Scrapy layer: runs until stopped, outlives a failing callback."""
from __future__ import annotations

import logging

import pytest_twisted
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler
from twisted.internet import reactor
from twisted.internet.task import deferLater

from scrapy_dedup.clock import start_clock


@pytest_twisted.inlineCallbacks
def test_a_callback_that_raises_is_logged_and_counted_and_the_clock_goes_on(caplog):
    stats = MemoryStatsCollector(get_crawler())
    calls = []

    def tick():
        calls.append(1)
        if len(calls) == 1:
            raise OSError("disk full")

    clock = start_clock(0.02, tick, name="the test checkpoint", stats=stats)
    with caplog.at_level(logging.ERROR, logger="scrapy_dedup.clock"):
        yield deferLater(reactor, 0.2, lambda: None)
    assert len(calls) >= 3  # still running after the failure
    assert stats.get_value("dedup/clock/errors") == 1
    [line] = [r for r in caplog.records if "the test checkpoint failed" in r.getMessage()]
    assert line.exc_info[0] is OSError
    clock.stop()
    clock.stop()  # stopping twice does nothing
    assert not clock.running
    after = len(calls)
    yield deferLater(reactor, 0.1, lambda: None)
    assert len(calls) == after
