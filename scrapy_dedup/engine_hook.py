"""The one place that touches Scrapy's internals: "the engine is done with this request", the
scheduler's dupefilter, the crawler's request fingerprinter, pausing and closing the spider, "the engine
starts closing" (:func:`on_close_start`).

Every such access goes through :func:`internal`, which checks that the attribute
exists and refuses to start, naming it and who needs it, on a Scrapy version
without it (a future ``ExecutionEngine`` without ``_slot.remove_request``), instead
of an ``AttributeError`` in the middle of a crawl.

Scrapy has no signal for "done". Kill-safe state needs it: a request may be forgotten
(acknowledged in a Redis queue, marked done in the frontier journal) only once its
download ended *and* its outcome was handled, which is the moment the engine removes
it from its in-progress set, ``ExecutionEngine._slot.remove_request(request)`` (the
same in Scrapy 2.13 to 2.19; docs/reliability.md, "Why a queue in Redis needs
acknowledgements", has why earlier moments lose pages). :func:`on_request_done` wraps
that method once per engine slot and calls every registered callback before the
engine's own code (removing the last request may close the spider, and what closes
must already know the request is done).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

from scrapy.exceptions import NotConfigured

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request

logger = logging.getLogger(__name__)

_CALLBACKS = "_scrapy_dedup_done_callbacks"
#: the crawler's attribute with the reason one of our components asked the engine to close the spider with
_CLOSING = "_scrapy_dedup_closing_reason"


class EngineHookMissing(NotConfigured):
    """This Scrapy version lacks an internal a component of ours needs (named in the message)."""


#: what each part of a path is called in messages
_OWNERS = {"engine": "ExecutionEngine", "_slot": "ExecutionEngine._slot",
           "scheduler": "ExecutionEngine._slot.scheduler"}


def internal(crawler: "Crawler", path: str, *, who: str) -> Any:
    """``crawler.<path>`` (``"engine._slot.remove_request"``), checked: the one door to Scrapy's internals.

    None while there is no engine or no engine slot yet (a component used on its own,
    or before the spider opens). Raises :class:`EngineHookMissing`, naming the
    attribute and ``who`` needs it, when an object on the way lacks it.
    """
    value: Any = crawler
    owner = "Crawler"
    for part in path.split("."):
        try:
            value = getattr(value, part)
        except RuntimeError:  # Scrapy >= 2.14: Crawler.engine before the crawl starts
            return None
        except AttributeError:
            raise EngineHookMissing(
                f"{who} needs Scrapy's {owner}.{part} (Scrapy 2.13 to 2.19 have it); this Scrapy version has "
                "no such attribute, so it cannot run safely") from None
        if value is None and part in ("engine", "_slot"):
            return None
        owner = _OWNERS.get(part, f"{owner}.{part}")
    return value


def on_request_done(crawler: "Crawler", callback: Callable[["Request"], None], *, who: str) -> bool:
    """Call ``callback(request)`` each time the engine is done with a request; False without an engine slot.

    Raises :class:`EngineHookMissing` (naming ``who`` and the hook) when the
    engine has a slot but no such method. A callback that raises is logged and
    does not stop the engine's own bookkeeping.
    """
    remove = internal(crawler, "engine._slot.remove_request", who=who)
    if remove is None:
        return False
    slot = crawler.engine._slot
    callbacks: list[Callable[["Request"], None]] | None = getattr(slot, _CALLBACKS, None)
    if callbacks is None:
        callbacks = []
        setattr(slot, _CALLBACKS, callbacks)

        def remove_request(request: "Request") -> None:
            try:
                for done in callbacks:
                    try:
                        done(request)
                    except Exception:  # bookkeeping of ours must never break the engine's
                        logger.exception("Error in a request-done callback for %s", request)
            finally:
                remove(request)

        # an instance attribute of this slot shadows the class's method (the engine calls it on the slot)
        setattr(slot, "remove_request", remove_request)  # noqa: B010
    callbacks.append(callback)
    return True


_CLOSE_CALLBACKS = "_scrapy_dedup_close_callbacks"


def on_close_start(crawler: "Crawler", callback: Callable[[str], None], *, who: str) -> bool:
    """Call ``callback(reason)`` once when the engine starts closing the spider, whatever closes it (the end
    of the requests, a ``CLOSESPIDER_*`` limit, a shutdown signal, a component of ours), before the engine
    stops taking requests and while the item pipelines are still open; False without an engine.

    Scrapy sends no signal at that moment (``spider_closed`` comes after the pipelines are closed): the
    engine's close method (``close_spider_async``, Scrapy >= 2.14; ``close_spider`` before) is wrapped
    once per engine. A callback that raises is logged and does not stop the close.
    """
    engine = internal(crawler, "engine", who=who)
    if engine is None:
        return False
    name = "close_spider_async" if hasattr(engine, "close_spider_async") else "close_spider"
    close = internal(crawler, f"engine.{name}", who=who)
    callbacks: list[Callable[[str], None]] | None = getattr(engine, _CLOSE_CALLBACKS, None)
    if callbacks is None:
        callbacks = []
        setattr(engine, _CLOSE_CALLBACKS, callbacks)
        started: list[bool] = []

        def run(reason: str) -> None:
            if started or getattr(getattr(engine, "_slot", None), "closing", None) is not None:
                return  # closing already (a second caller waits for the first close)
            started.append(True)
            for closing in callbacks:
                try:
                    closing(reason)
                except Exception:  # ours must never stop the engine from closing
                    logger.exception("Error in a close-start callback (reason %s)", reason)

        if name == "close_spider_async":
            async def close_spider_async(*, reason: str = "cancelled") -> None:
                run(reason)
                await close(reason=reason)

            setattr(engine, name, close_spider_async)
        else:  # Scrapy 2.13
            def close_spider(spider: Any, reason: str = "cancelled") -> Any:
                run(reason)
                return close(spider, reason)

            setattr(engine, name, close_spider)
    callbacks.append(callback)
    return True


def close_spider_soon(crawler: "Crawler", reason: str) -> bool:
    """Ask the engine to close the spider with ``reason`` outside the caller's call (a dupefilter or a queue
    answering the engine), once the engine runs. False when there is no engine to ask.

    Why wait for the engine to run: a component that finds Redis unreachable while the
    spider opens must not close it half-open (Scrapy would close a scraper that has no
    slot yet and log a cascade of tracebacks). The reason asked for first is kept
    (:func:`closing_reason`).
    """
    engine = internal(crawler, "engine", who=f"Closing the spider with reason {reason!r}")
    if engine is None:
        return False
    if getattr(crawler, _CLOSING, None) is None:
        setattr(crawler, _CLOSING, reason)
    from twisted.internet import reactor

    def close() -> None:
        if engine.spider is None:
            return
        if not engine.running:  # still opening the spider: once it runs
            # Twisted types the reactor through zope interfaces (no self), read right only by the mypy-zope plugin
            reactor.callLater(0.05, close)  # type: ignore[arg-type]
            return
        close_async = getattr(engine, "close_spider_async", None)  # Scrapy >= 2.14
        if close_async is not None:
            from scrapy.utils.defer import deferred_from_coro

            deferred_from_coro(close_async(reason=reason))
        else:  # Scrapy < 2.14
            engine.close_spider(engine.spider, reason)

    reactor.callLater(0, close)  # type: ignore[arg-type]  # zope-interface typing, as above
    return True


def closing_reason(crawler: "Crawler") -> str | None:
    """The reason a component of ours asked the engine to close the spider with, or None."""
    return getattr(crawler, _CLOSING, None)


def stop_at_start(crawler: "Crawler", reason: str) -> bool:
    """End a crawl that cannot start (its Redis is unreachable) before it fetches anything.

    Pauses the engine (``ExecutionEngine.pause``: it takes no request out of the
    scheduler, so nothing a previous run queued is fetched, and the spider cannot
    look idle and close as ``finished``), then closes the spider with ``reason`` as
    soon as the engine runs. False when there is no engine (a component used on its own).
    The crawl then counts as a failed start: ``scrapy crawl`` exits non-zero (``settings.start_failed``,
    once the engine has stopped, when nothing reads the spider any more).
    """
    from scrapy import signals

    from scrapy_dedup.settings import start_failed

    pause = internal(crawler, "engine.pause", who=f"Closing the spider with reason {reason!r} at start")
    if pause is None:
        return False
    pause()
    crawler.signals.connect(lambda: start_failed(crawler), signal=signals.engine_stopped, weak=False)
    return close_spider_soon(crawler, reason)


def scheduler_dupefilter(crawler: "Crawler") -> Any:
    """The dupefilter of the crawl's scheduler (``ExecutionEngine._slot.scheduler.df``), or None.

    Scrapy's and scrapy-redis's schedulers both keep it as ``df``; a scheduler
    without one (or no engine slot yet) gives None, and the caller does without.
    """
    scheduler = internal(crawler, "engine._slot.scheduler", who="AckPriorityQueue (pairing with the dupefilter)")
    return getattr(scheduler, "df", None)

