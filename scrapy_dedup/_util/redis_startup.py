"""The Redis start-up check, beside the outage policy (``redis_policy.py``): what must fail at start-up
(refused credentials, a TLS server named with ``redis://``, a user without the commands it needs) and
what is an outage like any other (a server down: the policy's one line when it is first met)."""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from scrapy_dedup._util.redis_access import missing_permissions, speaks_tls
from scrapy_dedup._util.redis_conn import mask_url
from scrapy_dedup._util.redis_policy import RedisStartupError, describe, is_transient

__all__ = ["check_at_start"]


def check_at_start(client: Any, url: str, *, secrets: Iterable[str], what: str, probes: Any = None,
                   log: logging.Logger, key_setting: str, url_setting: str = "DEDUP_REDIS_URL",
                   logged: Callable[[RedisStartupError], RedisStartupError] = lambda error: error) -> bool:
    """Refused credentials or TLS fail at start-up (:class:`RedisStartupError`, the URL masked); whether
    Redis answered. ``probes``: the commands the user must be allowed (``missing_permissions``'s probes);
    ``what`` names the store in the messages, ``key_setting`` and ``url_setting`` the settings of its key and
    URL; ``logged`` marks an error this function logged itself (the caller's mark, so that the start-up's
    refusal is told once).

    A store that fails open (pages kept unchecked while Redis is away) meets a server that is down
    at start as an outage like any other, not a start-up error; it is told (the policy's one line)
    when a page meets it. Not here: a Redis seen set on the same server closes the crawl at start
    with its own line, and no page comes.
    """
    try:
        client.ping()
        missing = missing_permissions(client, *probes) if probes is not None else []
    except Exception as exc:
        if is_transient(exc):
            if url.startswith("redis://") and speaks_tls(url, timeout=2.0):
                message = (f"{what}: the server at {mask_url(url)} speaks TLS: "
                           f"{url_setting} must start with rediss://")
                log.error("%s", message)
                raise logged(RedisStartupError(message)) from None
            return False
        raise RedisStartupError(
            f"{what}: cannot use Redis at {mask_url(url)} ({describe(exc, secrets)}); "
            f"check {url_setting} and {url_setting.replace('_URL', '_PARAMS')} (password, TLS options)") from None
    if missing:
        message = (f"{what}: the Redis user of {mask_url(url)} may not run what the crawl "
                   f"needs: {'; '.join(missing)}. Grant it (ACL SETUSER) or use another user or "
                   f"{key_setting}")
        log.error("%s", message)  # (Scrapy's lines of a start-up that failed follow)
        raise logged(RedisStartupError(message))
    return True
