"""One periodic clock for the Scrapy layer (checkpoints, journal compaction): :func:`start_clock`.

Why one helper: each periodic job used to carry its own clock (a count of requests
looked at every 1,024 calls, a time checked at each journal write, Twisted's
``LoopingCall``), each with its own way to fail. Here a callback runs every
``seconds`` on the crawl's event loop (Scrapy's ``create_looping_call`` on Scrapy >=
2.14, asyncio's loop under the asyncio reactor; Twisted's ``LoopingCall`` on 2.13),
and an exception of the callback is logged and counted (``dedup/clock/errors``)
without stopping the clock: a looping call whose function raises stops silently.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)


class Clock:
    """A running periodic call; :meth:`stop` ends it (once; stopping a stopped clock does nothing)."""

    def __init__(self, seconds: float, callback: Callable[[], Any], *, name: str,
                 stats: StatsCollector | None = None):
        self.name = name
        self.callback = callback
        self.stats = stats
        try:
            from scrapy.utils.asyncio import create_looping_call
        except ImportError:  # Scrapy 2.13
            # the same call on Twisted's reactor (Scrapy's helper returns a LoopingCall there); its type differs
            from twisted.internet.task import LoopingCall as create_looping_call  # type: ignore[assignment]
        self._call = create_looping_call(self._tick)
        self._call.start(seconds, now=False)

    def _tick(self) -> None:
        try:
            self.callback()
        except Exception:  # the clock must outlive one failed run: the next one may succeed
            logger.exception("%s failed; it runs again at the next tick (dedup/clock/errors)", self.name)
            if self.stats is not None:
                self.stats.inc_value("dedup/clock/errors")

    @property
    def running(self) -> bool:
        return bool(self._call.running)

    def stop(self) -> None:
        if self._call.running:
            self._call.stop()


def start_clock(seconds: float, callback: Callable[[], Any], *, name: str,
                stats: StatsCollector | None = None) -> Clock:
    """Call ``callback()`` every ``seconds`` (the first time ``seconds`` from now) until ``.stop()``.

    ``name`` says in the log line what failed when the callback raises (counted in
    ``dedup/clock/errors`` of ``stats``).
    """
    return Clock(seconds, callback, name=name, stats=stats)
