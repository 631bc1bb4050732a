"""The duplicate-finding methods of the audit, behind one small interface (``lshbloom``: its own module).

* ``simhash`` (default): the crawl's own engine,
  :class:`scrapy_dedup.content.engine.ContentDeduplicator` over a
  :class:`~scrapy_dedup.content.engine.MemoryContentStore`, with the same
  fingerprinter (so an offline audit and a crawl agree page for page).
* ``minhash``: datasketch ``MinHash`` + ``MinHashLSH`` over the same word
  shingles, with the same exact layer and the same degenerate-page rule, for
  corpora where a Jaccard estimate matters more than speed. Candidates from the
  LSH are verified against the stored signatures (estimated Jaccard at least
  ``jaccard_threshold``); the reported "distance" is ``1 - Jaccard``.

A method gives a picklable ``fingerprint(text)`` for the worker processes and
a ``decider(expected_pages)`` (the dump's records when counted ahead, else None)
that takes the decisions in the main process, in dump order. A decider also
counts the responses that are not pages (``skip``: a WARC's JSON or images,
counted apart as the crawl counts them) and the identical copies of a page that
a WARC stores as revisits (``count_copy``: the decision is its twin's, taken by
the runner; the decider adds it to its numbers and clusters).
Pages are identified in the engine by their index in the dump (the URLs are
kept apart by the runner), so a URL that occurs twice is still two pages.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

import numpy as np

from scrapy_dedup.audit.config import AuditConfig
from scrapy_dedup.audit.lshbloom import LshBloomMethod
from scrapy_dedup.audit.records import Decision, SketchDecider, SketchFingerprint, sketch_fingerprint
from scrapy_dedup.content.engine import ContentDeduplicator, ContentFingerprinter
from scrapy_dedup.content.judge import memory_store
from scrapy_dedup.content.index import SimhashIndex

__all__ = ["Decision", "make_method", "SimhashMethod", "MinhashMethod", "MissingExtraError"]


class MissingExtraError(RuntimeError):
    """An optional dependency (e.g. datasketch for ``--method minhash``) is not installed."""


def make_method(cfg: AuditConfig) -> "SimhashMethod | MinhashMethod | LshBloomMethod":
    if cfg.method == "lshbloom":
        return LshBloomMethod(cfg)
    return MinhashMethod(cfg) if cfg.method == "minhash" else SimhashMethod(cfg)


# --- simhash: the crawl's engine ------------------------------------------------------------------

class SimhashMethod:
    def __init__(self, cfg: AuditConfig):
        self.cfg = cfg
        self.fingerprinter = ContentFingerprinter(shingle_size=cfg.shingle_size, bits=cfg.fingerprint_bits,
                                                  min_words=cfg.min_words, sketch_size=cfg.sketch_size)

    def fingerprint(self, text: str) -> Any:
        return self.fingerprinter.fingerprint(text)

    def decider(self, expected_pages: Optional[int] = None) -> "SimhashDecider":
        return SimhashDecider(self.cfg, self.fingerprinter)


class SimhashDecider:
    def __init__(self, cfg: AuditConfig, fingerprinter: Any):
        self.cfg = cfg
        self.fingerprinter = fingerprinter
        self.engine = ContentDeduplicator(fingerprinter, memory_store(cfg))
        self._all: Optional[Any] = None  # a second SimhashIndex, only for --all-pairs
        self._exact_first: dict = {}
        self._copies = {"exact": 0, "near": 0, "degenerate": 0}  # revisits, beside the engine's own counts

    def check(self, index: int, url: str, fp: Any) -> Decision:
        # The page's index is its key in the engine (URLs are kept by the runner; a URL may repeat).
        verdict = self.engine.check_fingerprint(str(index), fp)
        if verdict.is_duplicate:
            return Decision(verdict.kind, int(verdict.kept_url or -1), float(verdict.distance or 0))
        return Decision(verdict.kind, -1, 0.0)

    def all_matches(self, index: int, fp: Any) -> list[tuple[int, float, str]]:
        """Every kept page within the threshold of ``fp`` (not only the first match): ``--all-pairs``."""
        if self._all is None:
            self._all = SimhashIndex(self.cfg.hamming_threshold, self.cfg.bands, self.cfg.fingerprint_bits,
                                     allow_approximate=self.cfg.allow_approximate)
        out = []
        exact_kept = self._exact_first.get(fp.exact)
        if exact_kept is not None:
            out.append((exact_kept, 0.0, "exact"))
        for key, distance in self._all.query(fp.simhash):
            if key != exact_kept:
                out.append((int(key), float(distance), "near"))
        return sorted(out)

    def commit(self, index: int, fp: Any, decision: Decision) -> None:
        # The engine has recorded the page already; only the --all-pairs index needs it.
        if self._all is not None and decision.kind == "unique":
            self._all.add(index, fp.simhash)
            self._exact_first.setdefault(fp.exact, index)

    def skip(self, kind: str) -> None:
        """A response that is not a page: ``non_html`` (structured text) or ``non_text``."""
        if kind == "non_html":
            self.engine.skip_non_html()
        else:
            self.engine.skip_non_text()

    def count_copy(self, index: int, decision: Decision) -> None:
        """An identical copy of an earlier page (its decision given): counted, and clustered with what it matched."""
        self._copies[decision.kind] += 1
        if decision.kind in ("exact", "near"):
            self.engine.clusters.add_pair(str(decision.matched), str(index))

    def report(self):
        report = self.engine.report()
        copies = self._copies
        if not any(copies.values()):
            return report
        return replace(report, total=report.total + sum(copies.values()), exact=report.exact + copies["exact"],
                       near=report.near + copies["near"], degenerate=report.degenerate + copies["degenerate"])


# --- minhash: datasketch --------------------------------------------------------------------------

def _datasketch():
    try:
        import datasketch
    except ImportError:
        raise MissingExtraError("--method minhash needs datasketch: pip install 'scrapy-dedup[minhash]'") from None
    return datasketch


class MinhashMethod:
    def __init__(self, cfg: AuditConfig):
        self.cfg = cfg
        self._ds = _datasketch()
        # One permutation set for all pages (datasketch derives it from num_perm and seed).
        self._template = self._ds.MinHash(num_perm=cfg.num_perm, seed=1)

    def fingerprint(self, text: str) -> SketchFingerprint:
        return sketch_fingerprint(text, self.cfg.min_words, self._signature)

    def _signature(self, tokens: list[str]) -> np.ndarray:
        """uint64[num_perm]: the MinHash of the page's distinct word shingles."""
        k = self.cfg.shingle_size
        shingles = {" ".join(tokens[i:i + k]).encode("utf-8") for i in range(len(tokens) - k + 1)}
        m = self._template.copy()
        m.update_batch(list(shingles))
        return m.hashvalues.astype(np.uint64)

    def decider(self, expected_pages: Optional[int] = None) -> "MinhashDecider":
        return MinhashDecider(self.cfg, self._ds, self._template)


class MinhashDecider(SketchDecider):
    """Exact layer first, then LSH candidates verified by their estimated Jaccard similarity."""

    def __init__(self, cfg: AuditConfig, ds: Any, template: Any):
        super().__init__()
        self.cfg = cfg
        self.ds = ds
        # Rebuilding a MinHash from stored values: reuse the permutations (not regenerated per page) and,
        # on datasketch >= 2, name the hashing scheme they came from.
        self._rebuild = {"num_perm": cfg.num_perm, "seed": 1, "permutations": template.permutations}
        if getattr(template, "scheme", None) is not None:
            self._rebuild["scheme"] = template.scheme
        params = (cfg.lsh_bands, cfg.lsh_rows) if cfg.lsh_bands else None
        self.lsh = ds.MinHashLSH(threshold=cfg.jaccard_threshold, num_perm=cfg.num_perm, params=params)
        self.exact: dict[bytes, int] = {}
        self.signatures = np.zeros((1024, cfg.num_perm), dtype=np.uint64)
        self.slot: dict[int, int] = {}  # page index -> row of self.signatures (kept pages only)

    def _minhash(self, signature: np.ndarray) -> Any:
        return self.ds.MinHash(hashvalues=signature, **self._rebuild)

    def _named_near(self, signature: np.ndarray) -> list[tuple[int, float]]:
        out = []
        for key in self.lsh.query(self._minhash(signature)):
            jaccard = float(np.count_nonzero(self.signatures[self.slot[key]] == signature)) / self.cfg.num_perm
            if jaccard >= self.cfg.jaccard_threshold:
                out.append((key, 1.0 - jaccard))
        return out

    def _exact_kept(self, exact: bytes) -> Optional[int]:
        return self.exact.get(exact)

    def _near(self, index: int, signature: np.ndarray) -> Optional[Decision]:
        candidates = self._named_near(signature)
        if not candidates:
            return None
        key, distance = min(candidates, key=lambda kd: (kd[1], kd[0]))  # most similar, then oldest
        return self.decide(index, "near", key, distance)

    def _keep(self, index: int, fp: SketchFingerprint) -> None:
        row = len(self.slot)
        if row >= len(self.signatures):
            grown = np.zeros((len(self.signatures) * 2, self.cfg.num_perm), dtype=np.uint64)
            grown[:row] = self.signatures
            self.signatures = grown
        self.signatures[row] = fp.sketch
        self.slot[index] = row
        self.exact[fp.exact] = index
        self.lsh.insert(index, self._minhash(fp.sketch), check_duplication=False)
