"""The duplication numbers, shared by the crawl-end report and the offline ``scrapy-dedup report``.

Counting rules
--------------
* Every fingerprinted page is exactly one of: **unique** (kept; the first of its
  cluster), **exact** duplicate (same normalized words as a kept page), **near**
  duplicate (within the Hamming threshold of a kept page) or **degenerate** (fewer
  words than ``min_words``: not fingerprinted for duplicates, never clustered).
* ``total = exact + near + unique + degenerate``: "Total URLs" includes the
  degenerate pages (they were fetched and looked at), and every percentage is
  over that total. Responses that were not fingerprinted are not in the total:
  they are counted apart, binary ones as ``skipped_non_text``, structured text
  (JSON, XML feeds, CSS, JavaScript) as ``skipped_non_html``.
* ``undecidable`` pages are among the unique ones: with boilerplate learning, once
  their host's template was left out fewer than ``min_words`` words were left, so
  nothing of their own could show them to be a duplicate; they are kept, and the
  first of them are named (``undecidable_named``).
* ``redundant = exact + near``: the pages a deduplicating crawl would not keep.
* ``clusters`` counts clusters of two or more pages; ``largest_cluster`` is the
  size of the largest one (0 when there are no duplicates). A page is a fetch
  (a record of a dump): the same URL fetched twice with the same content is a
  cluster of two pages, in a crawl as in the offline audit.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

__all__ = ["DuplicationReport", "format_percent", "url_lines", "saved_fetch_lines", "paragraph_lines", "bucket_canary",
           "content_stats"]


def format_percent(part: int, whole: int) -> str:
    """``part / whole`` as a percentage with one decimal, or more where one would round to a lie.

    99.994% is not "100.0%" and 0.004% is not "0.0%": a share that is not all
    (or not none) is never printed as if it were.
    """
    if not whole:
        return "0.0%"
    value = 100.0 * part / whole
    for digits in range(1, 7):
        text = f"{value:.{digits}f}"
        if not ((part != whole and float(text) >= 100.0) or (part and float(text) <= 0.0)):
            return f"{text}%"
    return ">99.9999%" if part != whole and value > 50 else "<0.0001%"


@dataclass(frozen=True)
class DuplicationReport:
    """Counts of one crawl or dump; see the module doc for what each number means."""

    total: int
    exact: int
    near: int
    unique: int
    degenerate: int
    clusters: int
    largest_cluster: int
    skipped_non_text: int = 0
    skipped_non_html: int = 0
    undecidable: int = 0
    undecidable_named: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name == "undecidable_named":
                continue
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"DuplicationReport.{f.name} must be a non-negative integer, got {value!r}")
        parts = self.exact + self.near + self.unique + self.degenerate
        if self.total != parts:
            raise ValueError(
                f"DuplicationReport.total ({self.total}) must equal exact + near + unique + degenerate ({parts})"
            )
        if self.undecidable > self.unique:
            raise ValueError(f"DuplicationReport.undecidable ({self.undecidable}) is a part of unique ({self.unique})")
        object.__setattr__(self, "undecidable_named", tuple(self.undecidable_named))

    @classmethod
    def from_counts(
        cls, *, exact: int, near: int, unique: int, degenerate: int, clusters: int, largest_cluster: int,
        skipped_non_text: int = 0, skipped_non_html: int = 0, undecidable: int = 0,
    ) -> DuplicationReport:
        """Build a report whose ``total`` is the sum of the four page kinds."""
        return cls(exact + near + unique + degenerate, exact, near, unique, degenerate, clusters,
                   largest_cluster, skipped_non_text, skipped_non_html, undecidable)

    # -- derived numbers --

    @property
    def redundant(self) -> int:
        """Pages a deduplicating crawl would drop: exact + near duplicates."""
        return self.exact + self.near

    def _ratio(self, n: int) -> float:
        return n / self.total if self.total else 0.0

    @property
    def exact_ratio(self) -> float:
        return self._ratio(self.exact)

    @property
    def near_ratio(self) -> float:
        return self._ratio(self.near)

    @property
    def unique_ratio(self) -> float:
        return self._ratio(self.unique)

    @property
    def degenerate_ratio(self) -> float:
        return self._ratio(self.degenerate)

    @property
    def redundant_ratio(self) -> float:
        """Share of all fingerprinted pages that are duplicates (the number ``--fail-above`` gates on)."""
        return self._ratio(self.redundant)

    # -- renderings --

    def to_dict(self) -> dict[str, Any]:
        """All counts, derived numbers and ratios, JSON-ready."""
        data: dict[str, Any] = asdict(self)
        if self.undecidable_named:  # names, not a count: not among the stats
            data["undecidable_named"] = list(self.undecidable_named)
        else:
            del data["undecidable_named"]
        data["redundant"] = self.redundant
        for name in ("exact", "near", "unique", "degenerate", "redundant"):
            data[f"{name}_ratio"] = getattr(self, f"{name}_ratio")
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DuplicationReport:
        """Inverse of :meth:`to_dict` (derived keys are ignored)."""
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})

    def to_stats(self, prefix: str = "dedup/content/") -> dict[str, int | float]:
        """Flat Scrapy-stats keys: counts as ints, ratios as floats rounded to 4 places."""
        return {prefix + key: round(value, 4) if isinstance(value, float) else value
                for key, value in self.to_dict().items() if isinstance(value, (int, float))}

    def to_text(self) -> str:
        """The human block: the three numbers first, percentages over the total."""

        def pct(n: int) -> str:
            return f"({format_percent(n, self.total)})"

        rows = [
            ("Total URLs:", f"{self.total}", ""),
            ("Exact duplicates:", f"{self.exact}", pct(self.exact)),
            ("Near duplicates:", f"{self.near}", pct(self.near)),
            ("Unique pages:", f"{self.unique}", pct(self.unique)),
            ("Duplicate clusters:", f"{self.clusters}", f"(largest cluster: {self.largest_cluster} pages)"),
            ("Redundant pages:", f"{self.redundant}", pct(self.redundant)),
            ("Degenerate pages:", f"{self.degenerate}",
             f"{pct(self.degenerate)} too short to fingerprint; counted apart"),
        ]
        if self.undecidable:
            rows.append(("Undecidable pages:", f"{self.undecidable}",
                         f"{pct(self.undecidable)} kept: only their host's template was left"))
            rows.extend(("", "", f"  {url}") for url in self.undecidable_named)
            if self.undecidable > len(self.undecidable_named):
                rows.append(("", "", f"  ... and {self.undecidable - len(self.undecidable_named)} more"))
        if self.skipped_non_text:
            rows.append(("Skipped non-text:", f"{self.skipped_non_text}", "(not in the total)"))
        if self.skipped_non_html:
            rows.append(("Skipped non-HTML:", f"{self.skipped_non_html}", "(JSON, XML, CSS, JS; not in the total)"))
        label_width = max(len(r[0]) for r in rows) + 2
        number_width = max(len(r[1]) for r in rows) + 2
        return "\n".join(f"{a:<{label_width}}{b:<{number_width}}{c}".rstrip() for a, b, c in rows)


# --- the crawl-end report's lines (the extension logs them at spider_closed) ---

def url_lines(stats: Mapping[str, Any], requests: Mapping[str, int]) -> list[str]:
    """The crawl-end report's URL lines, from the crawl's stats; ``requests``: the requests the scheduler
    asked its dupefilter about (``checked``) and those it filtered, when the dupefilter is not ours."""
    get = stats.get
    filtered = get("dupefilter/filtered", 0)
    seen = get("dedup/seen/checked")
    if seen is None:  # a dupefilter other than ours: the engine's count
        seen, filtered = requests.get("checked", 0), requests.get("filtered", 0)
    lines = [
        "URL layer:",
        f"  Requests seen:           {seen}",
        f"  Filtered as duplicates:  {filtered}  ({format_percent(filtered, seen)})",
    ]
    lines += saved_fetch_lines(stats)
    lines.append(f"  URLs canonicalized:      {get('dedup/url/canonicalized', 0)}")
    lines.append(f"  Unparsable URLs:         {get('dedup/url/unparsable', 0)}")
    return lines


def saved_fetch_lines(stats: Mapping[str, Any]) -> list[str]:
    """The report's fetches saved against Scrapy's own dupefilter, and the switches they are owed to
    (``dedup/url/saved``; absent when the dupefilter is not one of ours or the fingerprinter not ours)."""
    saved = stats.get("dedup/url/saved")
    if saved is None:
        return []
    lines = [f"  Fetches saved:           {saved}  (requests Scrapy's own dupefilter would have fetched)"]
    by_switch = sorted((key.rsplit("/", 1)[-1], value) for key, value in stats.items()
                       if key.startswith("dedup/url/saved/"))
    if by_switch:
        lines.append("  Saved by:                " + ", ".join(f"{name} {count}" for name, count in by_switch))
    return lines


def paragraph_lines(paragraphs: Any, store_errors: int = 0) -> list[str]:
    """The block-level ratio beside the page-level one (a ``ParagraphDeduplicator``'s counts), the hosts
    repeating most, and the pages whose blocks were taken as new while the seen set was away."""
    total = paragraphs.total
    lines = [f"  Repeated blocks:       {total.duplicates} of {total.blocks}  "
             f"({format_percent(total.duplicates, total.blocks)}; blocks of at least {paragraphs.min_chars} "
             f"characters, {total.short} shorter ones not counted)"]
    for host, counts in list(paragraphs.by_host())[:5]:
        if counts.duplicates:
            lines.append(f"    {host or '-'}: {counts.duplicates} of {counts.blocks} "
                         f"({format_percent(counts.duplicates, counts.blocks)})")
    if store_errors:
        lines.append(f"  Pages whose blocks were taken as new (seen set away): {store_errors}")
    return lines


def bucket_canary(size: int, pages: int, params: Any) -> int:
    """``size``, the largest bucket of an index of ``pages`` kept pages, when far above chance (else 0):
    many pages share a fingerprint block (a WARNING says so).

    Random fingerprints spread evenly over the 2**(bits/bands) keys of a band; a
    bucket above DEDUP_CANARY_SIZE and 8 times the even share means many pages
    fingerprint alike: usually boilerplate (a template, a cookie wall) in the text.
    """
    even_share = pages / 2 ** (params.fingerprint_bits // params.bands)
    if size <= max(params.canary_size, 8 * even_share):
        return 0
    logging.getLogger("scrapy_dedup.extensions").warning(  # the crawl's line, under the logger it always had
        "One bucket of the content index holds %d pages (DEDUP_CANARY_SIZE %d): many kept pages "
        "share a fingerprint block, usually because their text is mostly boilerplate; check "
        "DEDUP_STRIP_SELECTORS for the site, or audit with DEDUP_CONTENT_ACTION='tag'",
        size, params.canary_size,
    )
    return size


def content_stats(report: DuplicationReport, events: Mapping[str, int], store: Any = None) -> dict[str, Any]:
    """Every ``dedup/content/*`` stat of a crawl, from the one place each number is kept.

    The page kinds, clusters and skips are counted by the engine (``report``: the numbers the
    offline audit computes the same way); what only a crawl meets (extraction and store errors,
    truncated bodies, canary warnings) in ``events``. The stats are a copy, never counted apart:
    after each page the crawl copies the numbers it changed (so a stats reader at ``spider_closed``
    that runs before the extension, or a mid-crawl look, sees them), and at the end all of these,
    with the report's derived numbers (total, clusters, ratios), which are not written per page
    (each costs a few microseconds). ``dedup/content/fingerprinted`` is the report's total (every
    judged page).
    """
    values: dict[str, Any] = report.to_stats(prefix="dedup/content/")
    values["dedup/content/fingerprinted"] = report.total
    values.update((f"dedup/content/{name}", count) for name, count in events.items())
    races = getattr(store, "races_kept_twice", 0)  # a sharded Redis index: near duplicates kept in a race
    if races:
        values["dedup/content/near_kept_twice"] = races
    return values
