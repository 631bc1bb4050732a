"""What an audit found: the numbers, the clusters, the sampled pairs; as text and as JSON.

Built by :func:`scrapy_dedup.audit.runner.audit_dump`, read by the outputs (the text and
JSON report, :mod:`.html`): its own module so that the outputs need not import the run.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from scrapy_dedup.audit.config import AuditConfig
from scrapy_dedup.audit.dump import BadLines, FieldNames
from scrapy_dedup.audit.mirrors import MirrorReport
from scrapy_dedup.audit.warc import describe_counts
from scrapy_dedup.content.report import format_percent

__all__ = ["AuditResult", "ClusterSummary", "SamplePair"]


@dataclass
class ClusterSummary:
    cluster: int
    size: int
    representative: str
    members: list  # [(url, kind, distance)] of the flagged members, at most MEMBERS_SHOWN


@dataclass
class SamplePair:
    url_a: str
    url_b: str
    kind: str
    distance: Any
    category: str
    diff: list
    #: the blocks of each page (kept, flagged) its host's template left out of its fingerprint
    boilerplate: tuple = ()


@dataclass
class AuditResult:
    """Everything the outputs need; built by :func:`audit_dump`."""

    source: str
    config: AuditConfig
    report: Any  # scrapy_dedup.content.report.DuplicationReport
    bad_lines: BadLines
    lines_read: int
    elapsed: float
    jobs: int
    distance_histogram: dict = field(default_factory=dict)
    cluster_sizes: dict = field(default_factory=dict)
    largest_clusters: list = field(default_factory=list)
    samples: list = field(default_factory=list)
    flagged_pairs: int = 0
    categories: dict = field(default_factory=dict)
    sample_pages: list = field(default_factory=list)  # (kept index, flagged index) of each sample
    unit: str = "line"  # what the input's numbers count: "line" (JSON Lines) or "record" (WARC)
    input_format: str = "jsonl"
    input_counts: dict = field(default_factory=dict)  # WARC: records by type, responses by what they were
    pages_parsed: int = 0  # records extracted, over all passes and the mirrors report (each once: the pages)
    undated: int = 0  # representative "newest": pages without a usable timestamp (ranked after the dated ones)
    mirrors: Optional[MirrorReport] = None  # what causes the mirrors (``scrapy-dedup report`` fills it)
    #: with ``paragraphs``: the block-level counts (audit/paragraphs.py ``ParagraphAudit.summary``), else None
    paragraphs: dict | None = None

    # numbers --------------------------------------------------------------------------------------
    @property
    def numbers(self) -> dict:
        return self.report.to_dict()

    @property
    def redundant_ratio(self) -> float:
        return self.report.redundant_ratio

    def number_rows(self) -> list[tuple[str, str, str]]:
        """(label, value, note) rows of the HTML page's numbers table, the order of ``to_text``."""
        n = self.numbers
        total = n["total"]

        def pct(x: int) -> str:
            return f"{100.0 * x / total:.1f}%" if total else "0.0%"

        return [
            ("Total URLs", str(total), ""),
            ("Exact duplicates", str(n["exact"]), pct(n["exact"])),
            ("Near duplicates", str(n["near"]), pct(n["near"])),
            ("Unique pages", str(n["unique"]), pct(n["unique"])),
            ("Duplicate clusters", str(n["clusters"]), f"largest cluster: {n['largest_cluster']} URLs"),
            ("Redundant pages", str(n["redundant"]), pct(n["redundant"])),
            ("Degenerate pages", str(n["degenerate"]), "too short to fingerprint; counted apart"),
            *([("Undecidable pages", str(n["undecidable"]), "kept: only their host's template was left; "
                + ", ".join(n.get("undecidable_named", [])) + (" ..." if n["undecidable"] > len(
                    n.get("undecidable_named", [])) else ""))] if n.get("undecidable") else []),
            *([("Repeated blocks", f"{p['duplicate_blocks']} of {p['blocks']}",
                f"{format_percent(p['duplicate_blocks'], p['blocks'])} of the blocks (paragraph dedup)")]
              if (p := self.paragraphs) is not None else []),
            (f"Bad {self.unit}s", str(self.bad_lines.count), "skipped; see below" if self.bad_lines.count else ""),
        ]

    def method_summary(self) -> str:
        c = self.config
        if c.method == "lshbloom":
            return (f"{c.lshbloom_bands} bands of {c.lshbloom_rows} rows in a Bloom filter, false flags <= "
                    f"{c.lshbloom_error_rate:g}, shingles of {c.shingle_size}; near duplicates counted, not named")
        if c.method == "minhash":
            lsh = f", {c.lsh_bands}x{c.lsh_rows} LSH" if c.lsh_bands else ""
            return f"{c.num_perm} permutations, Jaccard >= {c.jaccard_threshold}{lsh}, shingles of {c.shingle_size}"
        return (f"{c.fingerprint_bits}-bit simhash, shingles of {c.shingle_size}, threshold {c.hamming_threshold} "
                f"bits, {c.bands} bands")

    def representative_text(self) -> str:
        """Which member names each cluster (and, for ``newest``, how many pages had no time to go by)."""
        c = self.config
        text = f"Clusters named by: {c.representative}"
        if c.representative == "newest":
            source = (f"field {c.timestamp_field!r}" if c.timestamp_field and self.input_format == "jsonl"
                      else "WARC-Date" if self.input_format == "warc" else "dump order")
            text += f" ({source}; {self.undated} pages without a usable time, ranked after the others)"
        return text

    def paragraph_text(self) -> str:
        """The block-level line: repeated blocks over counted blocks, what was counted, and in what set."""
        p = self.paragraphs
        assert p is not None
        return (f"{'Repeated blocks:':<21}{p['duplicate_blocks']} of {p['blocks']}  "
                f"({format_percent(p['duplicate_blocks'], p['blocks'])}; blocks of at least {p['min_chars']} "
                f"characters, {p['short_blocks']} shorter ones not counted; {p['store']} set)")

    def elapsed_text(self) -> str:
        rate = self.lines_read / self.elapsed if self.elapsed > 0 else 0.0
        return (f"{self.lines_read} {self.unit}s in {self.elapsed:.1f} s ({rate:.0f} {self.unit}s/s, "
                f"{self.jobs} job(s), {self.pages_parsed} page(s) parsed)")

    def to_text(self) -> str:
        lines = [self.report.to_text()]  # the engine's block: the three numbers first
        if self.paragraphs is not None:  # the block-level ratio, beside the page-level one
            lines.append(self.paragraph_text())
        if self.bad_lines.count:
            lines.append(f"{'Bad ' + self.unit + 's:':<21}{self.bad_lines.count} (skipped)")
            lines.append(f"Bad {self.unit}s by reason:")
            lines.extend(self.bad_lines.describe(FieldNames(self.config.url_field, self.config.html_field,
                                                            self.config.text_field)))
        if self.input_format == "warc":
            lines.extend(describe_counts(self.input_counts))
        if self.categories:
            lines.append("Flagged pairs by likely category:")
            for name, count in sorted(self.categories.items(), key=lambda kv: -kv[1]):
                lines.append(f"  {count:>8}  {name}")
        if self.mirrors is not None:
            lines.extend(self.mirrors.lines())
        lines.append(self.representative_text())
        lines.append(f"Method: {self.config.method} ({self.method_summary()}); {self.elapsed_text()}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "format": self.input_format,
            "numbers": self.numbers,
            "redundant_ratio": self.redundant_ratio,
            **({"duplicate_block_ratio": self.paragraphs["duplicate_block_ratio"], "paragraphs": self.paragraphs}
               if self.paragraphs is not None else {}),
            "bad_lines": self.bad_lines.to_dict(),  # WARC: bad records, numbered by record
            **({"warc": dict(sorted(self.input_counts.items()))} if self.input_format == "warc" else {}),
            "categories": self.categories,
            "distance_histogram": {str(k): v for k, v in sorted(self.distance_histogram.items())},
            "cluster_sizes": {str(k): v for k, v in sorted(self.cluster_sizes.items())},
            "largest_clusters": [{"cluster": c.cluster, "size": c.size, "representative": c.representative}
                                 for c in self.largest_clusters],
            "representative_policy": self.config.representative,
            **({"pages_without_timestamp": self.undated} if self.config.representative == "newest" else {}),
            **({"mirrors": self.mirrors.to_dict()} if self.mirrors is not None else {}),
            "config": self.config.to_dict(),
            "lines_read": self.lines_read,
            "elapsed_seconds": round(self.elapsed, 3),
            "pages_parsed": self.pages_parsed,
            "jobs": self.jobs,
        }
