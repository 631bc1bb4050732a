"""Fingerprint generations: what wrote the keys of a persisted seen set.

A request fingerprint is a function of the canonical URL, so a seen set (a JOBDIR's Bloom
filter and frontier journal, a Redis seen set) only answers for the canonicalization that
wrote it: resumed under other URL policies, other DUST rules, another fingerprinter chain,
or a w3lib or scrapy-dedup whose canonical forms differ, every old key misses and the
pages already fetched are fetched (and their items delivered) again, without a word.

A :class:`Generation` names those inputs: the package's and w3lib's versions, a digest of
the URL policies, a digest of the DUST rules, the fingerprinter chain's class paths. It is
recorded beside the keys when a store is first written and compared at every start:
:func:`check` refuses a difference with one message naming each input that changed and the
setting that accepts a new generation (``DEDUP_ACCEPT_NEW_GENERATION``). A new generation
cannot skip what the old one fetched (the stores keep fingerprints, not URLs), so accepting
one is the user's decision, never the default.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Iterable

from scrapy_dedup.url.policy import DomainMap, UrlPolicy

__all__ = ["ACCEPT_SETTING", "Generation", "GenerationChanged", "check", "generation_of"]

#: the setting that lets a crawl record a new generation over a store written by another
ACCEPT_SETTING = "DEDUP_ACCEPT_NEW_GENERATION"
FORMAT = 1


class GenerationChanged(RuntimeError):
    """A persisted store was written under another canonicalization (the message names what changed)."""


@dataclass(frozen=True)
class Generation:
    """What writes a crawl's request fingerprints; each field compared on its own."""

    scrapy_dedup: str
    w3lib: str
    url_policies: str  #: digest of every host's switches (DEDUP_URL_POLICY, DEDUP_URL_POLICIES)
    dust_rules: str  #: digest of the DUST rules loaded at start ("none"; "+learned" when learned online)
    fingerprinters: str  #: the fingerprinter chain, outermost first, " > " between class paths

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, **{f.name: getattr(self, f.name) for f in fields(self)}},
                          sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> Generation | None:
        """The recorded generation; None when ``text`` is not one (damaged, or of a later format)."""
        try:
            data = json.loads(text)
            if data.get("format") != FORMAT:
                return None
            return cls(**{f.name: str(data[f.name]) for f in fields(cls)})
        except (ValueError, TypeError, KeyError, AttributeError):
            return None

    def changes(self, recorded: Generation) -> list[str]:
        """``"w3lib 2.4.0 -> 2.5.0"``-like lines, one per field that differs from ``recorded``."""
        out = []
        for f in fields(self):
            old, new = getattr(recorded, f.name), getattr(self, f.name)
            if old != new:
                out.append(f"{_LABELS[f.name]} {old} -> {new}")
        return out


_LABELS = {
    "scrapy_dedup": "scrapy-dedup",
    "w3lib": "w3lib (its canonicalize_url)",
    "url_policies": "the URL policies (DEDUP_URL_POLICY, DEDUP_URL_POLICIES), digest",
    "dust_rules": "the DUST rules (DEDUP_DUST_RULES), digest",
    "fingerprinters": "the fingerprinter chain (REQUEST_FINGERPRINTER_CLASS, "
                      "DEDUP_FALLBACK_REQUEST_FINGERPRINTER_CLASS)",
}


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def _policy_json(policy: UrlPolicy) -> dict[str, Any]:
    return {f.name: getattr(policy, f.name) for f in fields(policy)}


def _package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"


def generation_of(policies: DomainMap[UrlPolicy] | None, dust: Any, fingerprinters: Iterable[str], *,
                  learning: bool = False) -> Generation:
    """The generation of a crawl: its canonicalizer's ``policies`` and ``dust`` rules (a ``RuleSet`` or None),
    the class paths of its ``fingerprinters`` (outermost first); ``learning``: DUST rules are learned online."""
    from scrapy_dedup import __version__

    policy_value: Any = None
    if policies is not None:
        policy_value = {"default": _policy_json(policies.default),
                        "per_domain": {d: _policy_json(p) for d, p in sorted(policies.per_domain.items())}}
    rules = "none"
    if dust is not None:
        data = dust.to_json()
        data = {"hosts": data.get("hosts", {}), "aliases": data.get("aliases", {})}
        rules = "none" if not data["hosts"] and not data["aliases"] else _digest(data)
    if learning:
        rules += "+learned"
    return Generation(scrapy_dedup=__version__, w3lib=_package_version("w3lib"),
                      url_policies=_digest(policy_value) if policies is not None else "none",
                      dust_rules=rules, fingerprinters=" > ".join(fingerprinters))


def check(current: Generation, recorded_text: str | bytes | None, *, holds_keys: bool, where: str,
          accept: bool) -> tuple[bool, str | None]:
    """Compare ``current`` with the generation recorded for a store (``where`` names it in messages).

    Returns ``(write, warning)``: whether to record ``current`` now, and a line to log at WARNING (a new
    generation accepted). Raises :class:`GenerationChanged` when the store ``holds_keys`` written by
    another generation (or by one that recorded none) and ``accept`` is False.
    """
    recorded = Generation.from_json(recorded_text) if recorded_text is not None else None
    if recorded == current:
        return False, None
    if not holds_keys:  # nothing written under the old generation can be misread
        return True, None
    if recorded is None:
        what = ("no generation is recorded (written before scrapy-dedup recorded one)" if recorded_text is None
                else "its generation record is unreadable")
    else:
        what = "it was written under another canonicalization: " + "; ".join(current.changes(recorded))
    if not accept:
        raise GenerationChanged(
            f"{where}: {what}. Its fingerprints would not match this crawl's, so the pages it holds would be "
            f"fetched again. Restore the old settings or versions, start with an empty store, or set "
            f"{ACCEPT_SETTING}=True to record this generation and accept those refetches")
    return True, (f"{where}: {what}; a new generation is recorded as {ACCEPT_SETTING}=True says (pages the "
                  f"old one fetched may be fetched again)")
