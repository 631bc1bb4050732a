"""The Redis start-up check, beside the outage policy (``redis_policy.py``): what must fail at start-up.

Refused credentials, a TLS server named with ``redis://``, a user without the commands it needs, and
a server that cannot be reached within ``DEDUP_REDIS_STARTUP_SECONDS``: each a start-up error under
either ``DEDUP_REDIS_ON_ERROR``. Why the last one too, even under ``fail_open``: that policy is about
outages of a crawl that runs on its shared state; a crawl that never reached that state would run
alone, each process fetching and keeping what the others already have, with nothing in its exit
status to say so (docs/reliability.md, "Redis unreachable as the crawl starts")."""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from scrapy_dedup._util.redis_access import missing_permissions, speaks_tls
from scrapy_dedup._util.redis_conn import mask_url
from scrapy_dedup._util.redis_policy import RedisStartupError, describe, is_transient, wait_until_reachable

__all__ = ["check_at_start", "unreachable_at_start"]


def unreachable_at_start(what: str, where: str, url_setting: str, seconds: float, error: BaseException,
                         secrets: Iterable[str]) -> RedisStartupError:
    """The start-up error of a Redis that did not answer within ``DEDUP_REDIS_STARTUP_SECONDS``: ``what`` (the
    component), ``where`` (the masked URL or host), ``url_setting`` (the setting it came from, ``default``: none),
    the last error."""
    if url_setting == "default":
        url_setting = "the default of DEDUP_REDIS_URL, which is unset"
    return RedisStartupError(
        f"{what}: cannot reach Redis at {where} (from {url_setting}) within {seconds:g} s "
        f"(DEDUP_REDIS_STARTUP_SECONDS): {describe(error, secrets)}; the crawl cannot start without it, under "
        "either DEDUP_REDIS_ON_ERROR")


def check_at_start(client: Any, url: str, *, secrets: Iterable[str], what: str, wait_seconds: float,
                   probes: Any = None, log: logging.Logger, key_setting: str, url_setting: str = "DEDUP_REDIS_URL",
                   logged: Callable[[RedisStartupError], RedisStartupError] = lambda error: error) -> None:
    """Wait up to ``wait_seconds`` for Redis to answer, then check what the crawl needs of it; any failure is a
    :class:`RedisStartupError` (the URL masked), logged as one ERROR line where marked ``logged``.

    ``probes``: the commands the user must be allowed (``missing_permissions``'s probes); ``what`` names the
    store in the messages, ``key_setting`` and ``url_setting`` the settings of its key and URL; ``logged``
    marks an error this function logged itself (the caller's mark, so that the start-up's refusal is told once).
    """
    secrets = tuple(secrets)
    try:
        error = wait_until_reachable(client, wait_seconds)
        missing = missing_permissions(client, *probes) if error is None and probes is not None else []
    except Exception as exc:
        if not is_transient(exc):
            raise RedisStartupError(
                f"{what}: cannot use Redis at {mask_url(url)} ({describe(exc, secrets)}); "
                f"check {url_setting} and {url_setting.replace('_URL', '_PARAMS')} (password, TLS options)") from None
        error, missing = exc, []  # (it answered, then went away)
    if error is not None:
        if url.startswith("redis://") and speaks_tls(url, timeout=2.0):
            refusal = RedisStartupError(f"{what}: the server at {mask_url(url)} speaks TLS: "
                                        f"{url_setting} must start with rediss://")
        else:
            refusal = unreachable_at_start(what, mask_url(url), url_setting, wait_seconds, error, secrets)
        log.error("%s", refusal)
        raise logged(refusal) from None
    if missing:
        message = (f"{what}: the Redis user of {mask_url(url)} may not run what the crawl "
                   f"needs: {'; '.join(missing)}. Grant it (ACL SETUSER) or use another user or "
                   f"{key_setting}")
        log.error("%s", message)  # (Scrapy's lines of a start-up that failed follow)
        raise logged(RedisStartupError(message))
