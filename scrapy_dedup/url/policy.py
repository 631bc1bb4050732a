"""URL policies: which optional canonicalization switches apply, per domain.

A :class:`UrlPolicy` is a frozen set of switches (see docs/canonicalization.md's switches
table) plus user extensions of the tracking and session parameter lists.
:class:`DomainMap` (``_util/domains.py``, re-exported here) is the generic "most specific domain
wins" lookup, shared with the content policies; :class:`PolicyMap` is a ``DomainMap[UrlPolicy]``
built from the ``DEDUP_URL_POLICY`` / ``DEDUP_URL_POLICIES`` settings.

This module imports nothing from Scrapy.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from scrapy_dedup._util.domains import DomainMap, normalize_domain

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
