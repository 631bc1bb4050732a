"""URL policies: which optional canonicalization switches apply, per domain.

A :class:`UrlPolicy` is a frozen set of switches (see docs/canonicalization.md's switches
table) plus user extensions of the tracking and session parameter lists.
:class:`DomainMap` is the generic "most specific domain wins" lookup, reused
by the content policies; :class:`PolicyMap` is a ``DomainMap[UrlPolicy]``
built from the ``DEDUP_URL_POLICY`` / ``DEDUP_URL_POLICIES`` settings.

This module imports nothing from Scrapy.
"""
from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

__all__ = ["SWITCHES", "UrlPolicy", "DomainMap", "PolicyMap", "normalize_domain"]

#: the optional switches, in the order the canonicalizer applies them, with their defaults
SWITCHES: dict[str, bool] = {
    "strip_tracking": True,
    "strip_session": True,
    "sort_query": True,
    "drop_fragment": True,
    "strip_trailing_slash": False,
    "strip_www": False,
    "ignore_scheme": False,
    "drop_index": False,
}

_LIST_KEYS = ("tracking_params", "session_params")


def _param_list(value: Any, where: str) -> tuple[str, ...]:
    """A list of parameter names (``name`` or ``prefix*``), lowercased; a comma-separated string is accepted."""
    if isinstance(value, str):
        value = [v for v in value.split(",")]
    if not isinstance(value, (list, tuple, set, frozenset)):
        raise ValueError(f"{where} must be a list of parameter names, got {type(value).__name__}")
    names: list[str] = []
    for item in value:
        if not isinstance(item, str):
            raise ValueError(f"{where} must contain only strings, got {item!r}")
        name = item.strip().lower()
        if not name or name == "*" or "*" in name[:-1]:
            raise ValueError(f"{where}: {item!r} is not a parameter name or a 'prefix*' pattern")
        if any(c in name for c in "&=#?"):
            raise ValueError(f"{where}: {item!r} cannot be a query parameter name")
        names.append(name)
    return tuple(sorted(set(names)))


@dataclass(frozen=True)
class UrlPolicy:
    """Which optional canonicalization steps run, and extra parameter names to strip.

    Frozen and hashable, so compiled forms can be cached per policy.
    ``tracking_params`` / ``session_params`` *extend* the built-in lists
    (exact names, or ``prefix*`` patterns; matched case-insensitively).
    """

    strip_tracking: bool = True
    strip_session: bool = True
    sort_query: bool = True
    drop_fragment: bool = True
    strip_trailing_slash: bool = False
    strip_www: bool = False
    ignore_scheme: bool = False
    drop_index: bool = False
    tracking_params: tuple[str, ...] = ()
    session_params: tuple[str, ...] = ()

    @classmethod
    def from_mapping(
        cls,
        mapping: Mapping[str, Any],
        setting: str = "DEDUP_URL_POLICY",
        base: UrlPolicy | None = None,
    ) -> UrlPolicy:
        """Build a policy from a settings dict, overriding ``base`` (default: the built-in policy).

        Extra ``tracking_params`` / ``session_params`` are added to those of ``base``.
        Raises ``ValueError`` naming ``setting`` and the bad key: a typo in a
        switch name must fail at start-up, not silently keep the default.
        """
        base = base if base is not None else cls()
        if mapping is None:
            return base
        if not isinstance(mapping, Mapping):
            raise ValueError(f"{setting} must be a dict of switches, got {type(mapping).__name__}")
        changes: dict[str, Any] = {}
        for key, value in mapping.items():
            if key in SWITCHES:
                if not isinstance(value, bool):
                    raise ValueError(f"{setting}: {key!r} must be True or False, got {value!r}")
                changes[key] = value
            elif key in _LIST_KEYS:
                extra = _param_list(value, f"{setting}[{key!r}]")
                changes[key] = tuple(sorted(set(getattr(base, key)) | set(extra)))
            else:
                known = ", ".join(list(SWITCHES) + list(_LIST_KEYS))
                raise ValueError(f"{setting}: unknown key {key!r}; known keys: {known}")
        return replace(base, **changes)

    def switches(self) -> dict[str, bool]:
        """The switch values, by name."""
        return {name: getattr(self, name) for name in SWITCHES}


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


class PolicyMap(DomainMap[UrlPolicy]):
    """``DomainMap[UrlPolicy]``: the default policy and per-domain overrides of it."""

    __slots__ = ()

    @classmethod
    def from_settings_values(
        cls,
        default: Mapping[str, Any] | UrlPolicy | None = None,
        per_domain: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        setting: str = "DEDUP_URL_POLICY",
        per_domain_setting: str = "DEDUP_URL_POLICIES",
    ) -> PolicyMap:
        """Build from the values of ``DEDUP_URL_POLICY`` and ``DEDUP_URL_POLICIES``.

        Each domain's dict overrides the default policy (not the built-in one),
        so a site-wide choice made in ``DEDUP_URL_POLICY`` holds everywhere unless
        a domain says otherwise.
        """
        base = default if isinstance(default, UrlPolicy) else UrlPolicy.from_mapping(default or {}, setting=setting)
        policies: dict[str, UrlPolicy] = {}
        for domain, overrides in (per_domain or {}).items():
            if not isinstance(domain, str) or not domain.strip(". "):
                raise ValueError(f"{per_domain_setting}: keys must be domain names, got {domain!r}")
            if isinstance(overrides, UrlPolicy):
                policies[domain] = overrides
            else:
                policies[domain] = UrlPolicy.from_mapping(
                    overrides or {}, setting=f"{per_domain_setting}[{domain!r}]", base=base
                )
        return cls(base, policies)
