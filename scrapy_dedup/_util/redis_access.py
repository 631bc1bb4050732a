"""What the configured Redis user may do, probed when a crawl starts (no Scrapy imports).

A missing permission is not an outage: waiting never cures it. Met in the middle of a
crawl, it was taken for one (a user without ``EVALSHA``, ``SADD`` or ``BITFIELD`` had every
page skip its duplicate check under ``fail_open``, or the crawl retry for its budget and
close under ``retry``, the log saying Redis "is unavailable"). So each component runs the
commands it will need once at start, on probe keys shaped like its own keys (a key-pattern
ACL judges them as it will judge the real ones), and refuses to start with one line per
missing command or key. The probes write only probe keys, set to expire, then deleted.

A plain ``redis://`` URL to a TLS port is also found here: the server drops the plain
connection, which looks like an outage, so the start-up error names the mismatch instead.
"""
from __future__ import annotations

import socket
import ssl
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit

#: seconds a probe key lives if the user may not delete it
PROBE_TTL = 60
#: how the name of every probe key ends (:func:`probe_key`)
PROBE_SUFFIXES = (":probe", ":probe}")


def probe_key(key: str) -> str:
    """A key of the same shape as ``key`` (the same hash tag, the same prefix) that no store uses."""
    return key[:-1] + ":probe}" if key.endswith("}") else key + ":probe"


def is_permission_error(exc: BaseException) -> bool:
    """``NOPERM`` (a command, a key or a channel an ACL does not grant), whatever class redis-py gave it."""
    from redis import exceptions as e

    no_permission = getattr(e, "NoPermissionError", ())
    return isinstance(exc, no_permission) or str(exc).startswith("NOPERM")


def missing_permissions(client: Any, probes: Iterable[Sequence[Any]], cleanup: Iterable[str] = ()) -> list[str]:
    """The probes ``client``'s user may not run, each as ``"SADD on key 'k' (NOPERM ...)"``; a connection error
    is raised (an outage, for the caller's policy).

    ``probes``: commands with their arguments, the key second (``("SADD", key, "x")``); any other
    error (a wrong type, an unknown script, a command the server lacks) counts as permitted: the ACL
    let it through. ``cleanup``: probe keys to expire and delete afterwards, as far as allowed.
    """
    from redis.exceptions import ResponseError

    missing = []
    for command, *args in probes:
        try:
            client.execute_command(command, *args)
        except ResponseError as exc:  # the server's reply; a connection that fails is the caller's outage
            if is_permission_error(exc):
                key = args[2] if command in ("EVAL", "EVALSHA") and len(args) > 2 else (
                    args[0] if args and command not in ("SCRIPT", "SCAN") else None)  # (their first: no key)
                where = f" on key {key!r}" if isinstance(key, str) else ""
                name = f"{command} {args[0]}" if command == "SCRIPT" else command  # (its subcommand: no key)
                missing.append(f"{name}{where} ({str(exc).splitlines()[0]})")
    for key in cleanup:
        for command in ("EXPIRE", "DEL"):
            try:
                client.execute_command(command, key, *((PROBE_TTL,) if command == "EXPIRE" else ()))
            except Exception:  # a user that may write but not delete: the key expires
                pass
    return missing


def speaks_tls(url: str, timeout: float) -> bool:
    """Whether the server of a plain ``redis://`` URL completes a TLS handshake (it wants ``rediss://``)."""
    parts = urlsplit(url)
    if parts.scheme != "redis":
        return False
    try:
        host, port = parts.hostname or "localhost", parts.port or 6379
    except ValueError:
        return False
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # only asking whether it speaks TLS, not trusting it
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw:
            with context.wrap_socket(raw, server_hostname=host):
                return True
    except (OSError, ValueError):
        return False


def certificate_checks_off(url: str, params: dict[str, Any] | None) -> bool:
    """Whether ``ssl_cert_reqs`` (in ``params`` or the URL's query) turns certificate checks off."""
    value = (params or {}).get("ssl_cert_reqs")
    if value is None:
        for item in urlsplit(url).query.split("&"):
            name, _, given = item.partition("=")
            if name == "ssl_cert_reqs":
                value = given
    if value is None:
        return False
    return value == ssl.CERT_NONE or str(value).strip().lower() in ("none", "cert_none")
