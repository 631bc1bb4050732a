"""Redis connections shared by the seen sets and the content index (no Scrapy imports).

Every log line and exception message that names a Redis server goes through
:func:`mask_url`, so a password in ``DEDUP_REDIS_URL`` never reaches a log.
"""
from __future__ import annotations

import importlib
from typing import Any
from urllib.parse import urlsplit, urlunsplit

SUPPORTED_SCHEMES = ("redis", "rediss", "unix")


def mask_url(url: str) -> str:
    """Return ``url`` with any password replaced by ``***``.

    ``redis://user:secret@host:6379/0`` -> ``redis://user:***@host:6379/0``;
    a ``password=`` query parameter is masked too.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable redis url>"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user, sep, _password = userinfo.partition(":")
        netloc = f"{user}:***@{hostport}" if sep else f"***@{hostport}"
        # A bare "secret@host" is a password in redis-py's parsing.
        if not sep and user:
            netloc = f"***@{hostport}"
    query = parts.query
    if "password=" in query:
        query = "&".join(
            "password=***" if q.startswith("password=") else q for q in query.split("&")
        )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def validate_url(url: str, setting: str = "DEDUP_REDIS_URL") -> str:
    """Check that ``url`` is a Redis URL redis-py can open; raise ``ValueError`` naming ``setting``."""
    if not isinstance(url, str) or not url:
        raise ValueError(f"{setting} must be a redis://, rediss:// or unix:// URL, got {url!r}")
    scheme = urlsplit(url).scheme.lower()
    if scheme not in SUPPORTED_SCHEMES:
        raise ValueError(
            f"{setting} must start with redis://, rediss:// or unix://, got {mask_url(url)!r}"
        )
    return url


def _load_class(path_or_class: Any) -> Any:
    if isinstance(path_or_class, str):
        module, _, name = path_or_class.rpartition(".")
        return getattr(importlib.import_module(module), name)
    return path_or_class


def connect(url: str, params: dict[str, Any] | None = None) -> Any:
    """Open a client for ``url``.

    ``params`` are passed to the client's ``from_url``; the special key
    ``redis_cls`` (a class or dotted path, e.g. ``"redis.cluster.RedisCluster"``)
    chooses the client class, as scrapy-redis's ``REDIS_PARAMS`` does.
    """
    import redis  # imported here so that importing the core stays cheap

    params = dict(params or {})
    cls = _load_class(params.pop("redis_cls", redis.Redis))
    params.setdefault("socket_timeout", 30)
    params.setdefault("socket_connect_timeout", 10)
    params.setdefault("health_check_interval", 30)
    validate_url(url)
    return cls.from_url(url, **params)
