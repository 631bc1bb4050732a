"""The types the audit's parts share: an opened input, a page record, a bad line, the error, a method's decision.

Below both readers (:mod:`.dump` for JSON Lines, :mod:`.warc` for WARC), so that
either can build them and neither imports the other to do so.
"""
from __future__ import annotations

from typing import Any, BinaryIO, Callable, NamedTuple, Optional, Union

from scrapy_dedup.content.clusters import Clusters
from scrapy_dedup.content.report import DuplicationReport
from scrapy_dedup.content.simhash import exact_hash_words, words

__all__ = ["DumpError", "Input", "PageRecord", "BadLine", "Decision", "CountingDecider", "SketchFingerprint",
           "SketchDecider", "sketch_fingerprint"]


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
        self.clusters: Clusters[int] = Clusters()  # the engine's union-find, over page indexes

    def skip(self, kind: str) -> None:
        """A response that is not a page: ``non_html`` (structured text) or ``non_text``."""
        self.skipped["non_html" if kind == "non_html" else "non_text"] += 1

    def decide(self, index: int, kind: str, matched: int = -1, distance: float = 0.0) -> Decision:
        """Count a decision on page ``index``; a duplicate of a named kept page joins its cluster."""
        self.counts[kind] += 1
        if matched >= 0:
            self.clusters.add_pair(matched, index)
        return Decision(kind, matched, distance)

    def count_copy(self, index: int, decision: Decision) -> None:
        """An identical copy of an earlier page (its decision given): counted, clustered with what it matched."""
        self.decide(index, decision.kind, decision.matched)

    def report(self) -> DuplicationReport:
        return DuplicationReport.from_counts(**self.counts, clusters=self.clusters.count(2),
                                             largest_cluster=self.clusters.largest(),
                                             skipped_non_text=self.skipped["non_text"],
                                             skipped_non_html=self.skipped["non_html"])


class SketchFingerprint(NamedTuple):
    """A page as the minhash and lshbloom methods see it (picklable, made in the worker processes)."""

    exact: bytes
    sketch: Any  # the method's sketch of the page (a numpy array); None for a degenerate page
    words: int


def sketch_fingerprint(text: str, min_words: int, sketch: Callable[[list[str]], Any]) -> SketchFingerprint:
    """``text``'s fingerprint with ``sketch(tokens)``; below ``min_words`` words (or no sketch) degenerate."""
    tokens = words(text)
    if len(tokens) < min_words:
        return SketchFingerprint(b"", None, len(tokens))
    return SketchFingerprint(exact_hash_words(tokens), sketch(tokens), len(tokens))


class SketchDecider(CountingDecider):
    """The one decision path of the sketch methods: degenerate, then the exact layer (named), then the
    method's near layer; only kept (unique) pages are recorded, as the engine records them."""

    def _exact_kept(self, exact: bytes) -> Optional[int]:
        """The kept page with this exact digest, or None."""
        raise NotImplementedError

    def _near(self, index: int, sketch: Any) -> Optional[Decision]:
        """The near-duplicate decision on a page with no exact twin (counted), or None: unique."""
        raise NotImplementedError

    def _named_near(self, sketch: Any) -> list[tuple[int, float]]:
        """Every kept page ``(index, distance)`` near ``sketch`` that the method can name (``--all-pairs``)."""
        raise NotImplementedError

    def _keep(self, index: int, fp: SketchFingerprint) -> None:
        """Record a unique page."""
        raise NotImplementedError

    def check(self, index: int, url: str, fp: SketchFingerprint) -> Decision:
        if fp.sketch is None:
            return self.decide(index, "degenerate")
        kept = self._exact_kept(fp.exact)
        if kept is not None:
            return self.decide(index, "exact", kept)
        return self._near(index, fp.sketch) or self.decide(index, "unique")

    def all_matches(self, index: int, fp: SketchFingerprint) -> list[tuple[int, float, str]]:
        if fp.sketch is None:
            return []
        kept = self._exact_kept(fp.exact)
        out = [(kept, 0.0, "exact")] if kept is not None else []
        out.extend((key, d, "near") for key, d in self._named_near(fp.sketch) if key != kept)
        return sorted(out)

    def commit(self, index: int, fp: SketchFingerprint, decision: Decision) -> None:
        if decision.kind == "unique":
            self._keep(index, fp)
