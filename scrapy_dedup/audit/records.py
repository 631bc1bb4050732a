"""The types the audit's parts share: an opened input, a page record, a bad line, the error, a method's decision.

Below both readers (:mod:`.dump` for JSON Lines, :mod:`.warc` for WARC), so that
either can build them and neither imports the other to do so.
"""
from __future__ import annotations

from typing import Any, BinaryIO, NamedTuple, Optional, Union

from scrapy_dedup.content.clusters import Clusters
from scrapy_dedup.content.report import DuplicationReport

__all__ = ["DumpError", "Input", "PageRecord", "BadLine", "Decision", "CountingDecider"]


class Decision(NamedTuple):
    """A method's decision on one page (every method of :mod:`.methods` and :mod:`.lshbloom` gives these)."""

    kind: str  # unique | exact | near | degenerate (the engine's kinds)
    matched: int  # index of the kept page a duplicate matched, else -1 (also a near duplicate lshbloom cannot name)
    distance: float  # bits (simhash) or 1 - Jaccard (minhash); 0 for new and degenerate pages


class DumpError(ValueError):
    """A dump that cannot be read at all, or a bad line under ``--strict``."""


class Input(NamedTuple):
    """An opened input: its format and the stream to read it from.

    ``format`` is ``"jsonl"`` or ``"warc"``. A JSON Lines ``stream`` gives the lines'
    bytes (gzip already undone); a WARC ``stream`` gives the file's own bytes, and
    ``compressed`` says whether they are gzip members (the WARC reader decompresses
    them one at a time, so that a damaged member costs its own records only).
    """

    format: str
    stream: BinaryIO
    compressed: bool


class PageRecord(NamedTuple):
    """One page: its line (JSON Lines) or record (WARC) number, URL and content.

    ``content`` is text (``is_html`` False), HTML as ``str``, or, from a WARC, the HTTP
    payload as ``bytes``, decoded by :func:`~scrapy_dedup.content.text.page_text` with
    ``encoding`` (the HTTP header's charset; None: the page's own declaration, else UTF-8).
    ``timestamp``: the page's time as the input gives it (a WARC-Date, a ``--timestamp-field``
    value), read by the worker; None when the input has none.
    """

    line: int
    url: str
    content: Union[str, bytes]
    is_html: bool
    encoding: Optional[str] = None
    timestamp: Any = None


class BadLine(NamedTuple):
    line: int
    reason: str


class CountingDecider:
    """The counts, skips, copies and clusters of a decider that keeps its own (minhash, lshbloom; the simhash
    decider has the engine's): what :meth:`report` builds the duplication report from."""

    def __init__(self) -> None:
        self.counts = {"unique": 0, "exact": 0, "near": 0, "degenerate": 0}
        self.skipped = {"non_text": 0, "non_html": 0}
        self.clusters = Clusters()  # the engine's union-find, over page indexes

    def skip(self, kind: str) -> None:
        """A response that is not a page: ``non_html`` (structured text) or ``non_text``."""
        self.skipped["non_html" if kind == "non_html" else "non_text"] += 1

    def count_copy(self, index: int, decision: Decision) -> None:
        """An identical copy of an earlier page (its decision given): counted, clustered with what it matched."""
        self.counts[decision.kind] += 1
        if decision.kind in ("exact", "near") and decision.matched >= 0:
            self.clusters.add_pair(decision.matched, index)

    def report(self) -> DuplicationReport:
        return DuplicationReport.from_counts(**self.counts, clusters=self.clusters.count(2),
                                             largest_cluster=self.clusters.largest(),
                                             skipped_non_text=self.skipped["non_text"],
                                             skipped_non_html=self.skipped["non_html"])
