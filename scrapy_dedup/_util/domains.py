"""Per-domain values: the "most specific domain wins" lookup shared by the URL policies (``url/policy.py``)
and the content policies (``content/extract.py``); no Scrapy, no URL or content logic."""
from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from typing import Generic, TypeVar

__all__ = ["DomainMap", "normalize_domain"]

T = TypeVar("T")


def normalize_domain(domain: str) -> str:
    """A configured domain as the canonicalizer writes hosts: lowercase, no dots around, punycode."""
    domain = domain.strip().strip(".").lower()
    if domain.startswith("[") and domain.endswith("]"):
        domain = domain[1:-1]
    if not domain.isascii():
        import idna

        try:
            domain = idna.encode(domain, uts46=True, transitional=False).decode("ascii")
        except (idna.IDNAError, UnicodeError, ValueError):
            pass  # kept as given: it simply never matches a canonical host
    return domain


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class DomainMap(Generic[T]):
    """Per-domain values with a default; the most specific configured domain wins.

    A value configured for ``example.com`` applies to ``example.com`` and every
    subdomain (``a.b.example.com``) but not to ``notexample.com``; a value for
    ``shop.example.com`` beats it for ``eu.shop.example.com``. IP addresses match
    only exactly. Lookups are cached per host (crawls see few hosts); the cache is
    bounded and simply cleared when full.
    """

    __slots__ = ("default", "per_domain", "_cache", "_max_cache")

    def __init__(self, default: T, per_domain: Mapping[str, T] | None = None, *, max_cache: int = 100_000):
        self.default = default
        self.per_domain: dict[str, T] = {normalize_domain(d): v for d, v in (per_domain or {}).items()}
        self._cache: dict[str, T] = {}
        self._max_cache = max_cache

    def lookup(self, host: str) -> T:
        """The value for ``host`` (a host name as in a canonical URL, without port)."""
        try:
            return self._cache[host]
        except KeyError:
            pass
        value = self._resolve(host)
        if len(self._cache) >= self._max_cache:
            self._cache.clear()
        self._cache[host] = value
        return value

    def _resolve(self, host: str) -> T:
        if not self.per_domain:
            return self.default
        name = host.lower().rstrip(".")
        if name.startswith("[") and name.endswith("]"):
            name = name[1:-1]
        if name in self.per_domain:
            return self.per_domain[name]
        if _is_ip(name):
            return self.default
        dot = name.find(".")
        while dot != -1:
            name = name[dot + 1:]
            if name in self.per_domain:
                return self.per_domain[name]
            dot = name.find(".")
        return self.default

    def values(self) -> Iterable[T]:
        """The default, then every per-domain value."""
        yield self.default
        yield from self.per_domain.values()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(default={self.default!r}, per_domain={self.per_domain!r})"
