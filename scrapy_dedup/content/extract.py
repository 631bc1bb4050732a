"""One extraction path: how every caller turns a page into the main text that is fingerprinted.

The crawl's middleware, an item's ``DEDUP_CONTENT_FIELD``, DUST learning, the
offline audit and the DUST miner all call :func:`extract_text` with an
:class:`ExtractionPolicy`, so a page gives the same text, and so the same
fingerprint, wherever it is judged. The policy's defaults are the engine's
(:data:`~scrapy_dedup.content.params.ENGINE_PARAMS`); a crawl may override them per
host (``DEDUP_CONTENT_POLICIES``). No Scrapy imports.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from scrapy_dedup.content.params import BY_KEY, ParamError
from scrapy_dedup.content.text import page_blocks_titled, page_text

__all__ = ["ExtractionPolicy", "Extraction", "extract_text", "POLICY_KEYS"]

#: the parameters an extraction policy holds (the keys ``DEDUP_CONTENT_POLICIES`` may override)
POLICY_KEYS = ("strip_tags", "strip_selectors", "min_words", "max_bytes", "boilerplate", "paragraphs")


@dataclass(frozen=True)
class ExtractionPolicy:
    """What is left out of a page's text (``strip_tags``, ``strip_selectors``), how much of it is read
    (``max_bytes``), how many words make it a page (``min_words``, below it: degenerate), and whether its
    host's boilerplate is learnt and left out of its fingerprint (``boilerplate``: the text is then cut in
    blocks, :func:`~scrapy_dedup.content.text.page_blocks`), and whether its blocks are deduplicated
    (``paragraphs``: :mod:`scrapy_dedup.content.paragraphs`, blocks too)."""

    strip_tags: tuple[str, ...] = BY_KEY["strip_tags"].default
    strip_selectors: tuple[str, ...] = BY_KEY["strip_selectors"].default
    min_words: int = BY_KEY["min_words"].default
    max_bytes: int = BY_KEY["max_bytes"].default
    boilerplate: bool = BY_KEY["boilerplate"].default
    paragraphs: bool = BY_KEY["paragraphs"].default

    @property
    def needs_blocks(self) -> bool:
        """Whether a page's text is cut in blocks under this policy (boilerplate learning, paragraph dedup)."""
        return self.boilerplate or self.paragraphs

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> "ExtractionPolicy":
        """The policy of converted engine values (a crawl's settings, an audit's config): other keys ignored."""
        return cls(**{key: values[key] for key in POLICY_KEYS if key in values})

    def overridden(self, overrides: Mapping[str, Any], name: str = "policy") -> "ExtractionPolicy":
        """This policy with ``overrides`` (keys of :data:`POLICY_KEYS`, any case) converted and applied.

        Raises :class:`~scrapy_dedup.content.params.ParamError` naming ``name[key]``.
        """
        changes: dict[str, Any] = {}
        for key, value in overrides.items():
            low = str(key).lower()
            if low not in POLICY_KEYS:
                raise ParamError(f"{name}: unknown key {key!r} (expected one of {', '.join(POLICY_KEYS)})")
            changes[low] = BY_KEY[low].convert(value, f"{name}[{key!r}]")
        return replace(self, **changes)


@dataclass(frozen=True)
class Extraction:
    """The main text of one page (:attr:`text`), whether its source was cut at the policy's ``max_bytes``, and
    its blocks (``" ".join(blocks) == text``) and name when blocks are asked for (else None): ``title``, its
    ``<title>``, headings and subtitle (:func:`~scrapy_dedup.content.text.page_blocks_titled`; None without a
    title or a heading). Made with blocks, ``given_text`` is None and the text is joined from them when first
    read: a caller that learns boilerplate may read only the blocks (the offline audit), and the join of a
    page's blocks is not free (blocks of other string widths are widened character by character)."""

    given_text: str | None
    truncated: bool
    blocks: list[str] | None = None
    title: str | None = None

    @cached_property
    def text(self) -> str:
        """The page's main text: the text given, or its blocks joined by spaces."""
        return self.given_text if self.given_text is not None else " ".join(self.blocks or ())


def extract_text(source: Any, policy: ExtractionPolicy, *, encoding: str | None = None,
                 blocks: bool = False) -> Extraction:
    """The main text of ``source`` under ``policy``: one function for every caller.

    ``source`` is what :func:`~scrapy_dedup.content.text.page_text` takes: ``bytes``
    (decoded by ``encoding`` if given, else as ``page_text`` says), ``str``, or a parsed
    tree (a tree is not cut: it was parsed already). ``bytes`` and ``str`` longer than
    ``max_bytes`` are cut there first (``str``: characters, close enough for a cap).
    ``blocks``: also cut the text at block elements (``Extraction.blocks``, for boilerplate learning).
    Raises only for a bad CSS selector in the policy (``ValueError``).
    """
    truncated = isinstance(source, (bytes, str)) and len(source) > policy.max_bytes
    if truncated:
        source = source[: policy.max_bytes]
    if blocks:  # the same text, cut at block elements (one pass): a caller that learns boilerplate
        cut, title = page_blocks_titled(source, strip_tags=policy.strip_tags,
                                        strip_selectors=policy.strip_selectors, encoding=encoding)
        return Extraction(None, truncated, cut, title)
    text = page_text(source, strip_tags=policy.strip_tags, strip_selectors=policy.strip_selectors, encoding=encoding)
    return Extraction(text, truncated)
