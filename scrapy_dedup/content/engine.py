"""The content engine: one object used by the crawl and by the offline report alike.

* :class:`ContentFingerprinter` turns main text into a :class:`ContentFingerprint`
  (exact hash, simhash, word count) and decides whether a page is *degenerate*:
  fewer than ``min_words`` words (default 20, never below one shingle). Short
  error and placeholder pages ("403 Forbidden", "Coming soon") share most of
  their few words; fingerprinting them would cluster unrelated URLs, so they are
  counted apart and never reach the store: ten identical "403 Forbidden" pages at
  ten URLs are ten degenerate pages, not nine duplicates. 20 words is about two
  sentences: below it a 5-word shingle set is too small for simhash to tell a
  one-word edit from a different page.
* A :class:`ContentStore` answers "is this fingerprint new?" and remembers it in
  one atomic step: the exact layer first (dict of 16-byte hashes), then the
  simhash index. Only unique pages are inserted; a duplicate points at the kept
  page it matched. :class:`MemoryContentStore` is the in-process store;
  ``RedisContentStore`` (``content/redis_index.py``) shares one across processes.
* :class:`ContentDeduplicator` combines the two, returns a :class:`Verdict` per
  page and keeps the counts and clusters of the :class:`DuplicationReport`.
"""
from __future__ import annotations

import os
import struct
import threading
from dataclasses import dataclass
from typing import BinaryIO, Literal, Protocol, Tuple, Union, runtime_checkable

import numpy as np

from scrapy_dedup.content.clusters import Clusters
from scrapy_dedup.content.index import IndexFileError, SimhashIndex, _atomic_write, _read_exactly
from scrapy_dedup.content.simhash import SUPPORTED_BITS, exact_hash_words, simhash_words, words
from scrapy_dedup.report import DuplicationReport

__all__ = [
    "ContentFingerprint",
    "ContentFingerprinter",
    "ContentStore",
    "MemoryContentStore",
    "ContentDeduplicator",
    "Verdict",
    "Kind",
    "DEFAULT_MIN_WORDS",
]

Kind = Literal["unique", "exact", "near", "degenerate"]
KINDS: tuple[str, ...] = ("unique", "exact", "near", "degenerate")
DEFAULT_MIN_WORDS = 20
StoreAnswer = Tuple[str, Union[str, None], Union[int, None]]


@dataclass(frozen=True)
class ContentFingerprint:
    """What the engine keeps of a page: exact hash (16 bytes), simhash, number of words."""

    exact: bytes
    simhash: int
    words: int


class ContentFingerprinter:
    """Main text -> :class:`ContentFingerprint`, with one tokenization for both hashes."""

    def __init__(self, shingle_size: int = 5, bits: int = 64, min_words: int = DEFAULT_MIN_WORDS):
        if not isinstance(shingle_size, int) or shingle_size < 1:
            raise ValueError(f"shingle_size must be a positive integer, got {shingle_size!r}")
        if bits not in SUPPORTED_BITS:
            raise ValueError(f"bits must be 64 or 128, got {bits!r}")
        if not isinstance(min_words, int) or min_words < shingle_size:
            raise ValueError(
                f"min_words ({min_words!r}) must be at least shingle_size ({shingle_size}): "
                "a page needs one whole shingle to be fingerprinted"
            )
        self.shingle_size = shingle_size
        self.bits = bits
        self.min_words = min_words

    def __repr__(self) -> str:
        return f"ContentFingerprinter(shingle_size={self.shingle_size}, bits={self.bits}, min_words={self.min_words})"

    def fingerprint(self, text: str) -> ContentFingerprint:
        """Fingerprint ``text`` (the output of :func:`~scrapy_dedup.content.text.page_text`)."""
        tokens = words(text)
        return ContentFingerprint(
            exact=exact_hash_words(tokens),
            simhash=simhash_words(tokens, self.shingle_size, self.bits),
            words=len(tokens),
        )

    def is_degenerate(self, fp: ContentFingerprint) -> bool:
        """Too short to fingerprint reliably: counted apart, never deduplicated or clustered."""
        return fp.words < self.min_words


@runtime_checkable
class ContentStore(Protocol):
    """Where kept pages' fingerprints live (in memory, or shared in Redis)."""

    def check_and_add(self, url: str, fp: ContentFingerprint) -> StoreAnswer:
        """Atomically: ``("exact", kept_url, 0)``, ``("near", kept_url, distance)``, or
        ``("unique", None, None)`` after storing ``fp`` under ``url``."""
        ...

    def close(self) -> None:
        """Release resources (connections); persisting is the caller's explicit ``save``."""
        ...


_STORE_MAGIC = b"SDSTORE\x00"
_STORE_VERSION = 1
_STORE_HEADER = struct.Struct("<8sHHQQ")  # magic, version, reserved, pages, url bytes
# then: uint32 length of each URL, the URLs (UTF-8), 16-byte exact hash per page, the SimhashIndex


class MemoryContentStore:
    """In-process store: exact hash -> page id, a :class:`SimhashIndex` of ids, id -> URL.

    Thread-safe: ``check_and_add`` holds one lock across both layers.
    """

    def __init__(self, threshold: int = 3, bands: int = 4, bits: int = 64, allow_approximate: bool = False):
        self.index = SimhashIndex(threshold, bands, bits, allow_approximate)
        self._exact: dict[bytes, int] = {}
        self._urls: list[str] = []
        self._lock = threading.Lock()

    @property
    def threshold(self) -> int:
        return self.index.threshold

    @property
    def bits(self) -> int:
        return self.index.bits

    def __len__(self) -> int:
        """Kept (unique) pages stored."""
        return len(self._urls)

    def check_and_add(self, url: str, fp: ContentFingerprint) -> StoreAnswer:
        with self._lock:
            kept = self._exact.get(fp.exact)
            if kept is not None:
                return "exact", self._urls[kept], 0
            page_id = len(self._urls)
            match = self.index.add_if_new(page_id, fp.simhash)
            if match is not None:
                kept, distance = match
                return "near", self._urls[kept], distance
            self._exact[fp.exact] = page_id
            self._urls.append(url)
            return "unique", None, None

    def url(self, page_id: int) -> str:
        return self._urls[page_id]

    def close(self) -> None:
        """Nothing to release (call :meth:`save` to persist)."""

    # -- persistence: one file, written atomically --

    def save(self, path: str | os.PathLike) -> None:
        """Write URLs, exact hashes and the index to ``path`` atomically (for resumed crawls)."""
        _atomic_write(path, self._write_to)

    def _write_to(self, f: BinaryIO) -> None:
        with self._lock:
            by_id = [b""] * len(self._urls)
            for digest, page_id in self._exact.items():
                by_id[page_id] = digest
            if any(len(d) != 16 for d in by_id):
                raise ValueError("MemoryContentStore can only save 16-byte exact hashes")
            encoded = [u.encode("utf-8", "surrogatepass") for u in self._urls]
            lengths = np.array([len(e) for e in encoded], dtype="<u4").tobytes()
            urls = b"".join(encoded)
            f.write(_STORE_HEADER.pack(_STORE_MAGIC, _STORE_VERSION, 0, len(self._urls), len(urls)))
            f.write(lengths)
            f.write(urls)
            f.write(b"".join(by_id))
            self.index.write_to(f)

    def load_into(self, path: str | os.PathLike) -> None:
        """Replace this store's contents by the store saved at ``path`` (resuming a crawl).

        The saved index must have this store's threshold, bands and bits, else ``ValueError``
        (a changed configuration would silently change what counts as a duplicate).
        """
        loaded = self.load(path)
        mine = (self.index.threshold, self.index.bands, self.index.bits)
        theirs = (loaded.index.threshold, loaded.index.bands, loaded.index.bits)
        if mine != theirs:
            raise ValueError(f"saved content store has threshold/bands/bits {theirs}, this store {mine}")
        with self._lock:
            self.index, self._exact, self._urls = loaded.index, loaded._exact, loaded._urls

    @classmethod
    def load(cls, path: str | os.PathLike) -> MemoryContentStore:
        """Read a store written by :meth:`save` (``IndexFileError`` if damaged)."""
        with open(path, "rb") as f:
            magic, version, _, pages, url_bytes = _STORE_HEADER.unpack(_read_exactly(f, _STORE_HEADER.size))
            if magic != _STORE_MAGIC:
                raise IndexFileError("not a scrapy-dedup content store file")
            if version != _STORE_VERSION:
                raise IndexFileError(f"content store file version {version} is not supported")
            lengths = np.frombuffer(_read_exactly(f, 4 * pages), dtype="<u4")
            if int(lengths.sum()) != url_bytes:
                raise IndexFileError("content store file is corrupt (URL lengths)")
            raw = _read_exactly(f, url_bytes)
            ends = np.cumsum(lengths).tolist()
            urls = [raw[a:b].decode("utf-8", "surrogatepass") for a, b in zip([0] + ends[:-1], ends)]
            digests = _read_exactly(f, 16 * pages)
            index = SimhashIndex.read_from(f)
        if len(urls) != pages or len(index) != pages:
            raise IndexFileError("content store file is inconsistent (page counts differ)")
        store = cls(index.threshold, index.bands, index.bits, index.allow_approximate)
        store.index = index
        store._urls = urls
        store._exact = {digests[16 * i : 16 * i + 16]: i for i in range(pages)}
        return store


@dataclass(frozen=True)
class Verdict:
    """The decision for one page.

    ``kept_url`` and ``distance`` are set for duplicates (distance 0 for exact);
    ``cluster`` is the representative URL of the page's cluster: the first-seen
    page for duplicates, the page itself when unique, None when degenerate.
    """

    kind: Kind
    url: str
    kept_url: str | None = None
    distance: int | None = None
    cluster: str | None = None

    @property
    def is_duplicate(self) -> bool:
        return self.kind in ("exact", "near")


class ContentDeduplicator:
    """Fingerprint, check, count: ``check(url, text) -> Verdict``, ``report() -> DuplicationReport``.

    Thread-safe: the store's check-and-insert is atomic, and the counts and
    clusters are updated under a lock, so concurrent callers never let both of
    a duplicate pair through.
    """

    def __init__(self, fingerprinter: ContentFingerprinter, store: ContentStore):
        store_bits = getattr(store, "bits", fingerprinter.bits)
        if store_bits != fingerprinter.bits:
            raise ValueError(f"fingerprinter makes {fingerprinter.bits}-bit simhashes, store holds {store_bits}-bit")
        self.fingerprinter = fingerprinter
        self.store = store
        self.clusters: Clusters[str] = Clusters()
        self._counts = dict.fromkeys(KINDS, 0)
        self._skipped_non_text = 0
        self._lock = threading.Lock()

    @classmethod
    def in_memory(
        cls, *, shingle_size: int = 5, bits: int = 64, min_words: int = DEFAULT_MIN_WORDS, threshold: int = 3,
        bands: int = 4, allow_approximate: bool = False,
    ) -> ContentDeduplicator:
        """A deduplicator over a fresh :class:`MemoryContentStore`."""
        return cls(
            ContentFingerprinter(shingle_size, bits, min_words),
            MemoryContentStore(threshold, bands, bits, allow_approximate),
        )

    def fingerprint(self, text: str) -> ContentFingerprint:
        return self.fingerprinter.fingerprint(text)

    def check(self, url: str, text: str) -> Verdict:
        """Decide for one page's main text (fingerprinting runs outside the lock)."""
        return self.check_fingerprint(url, self.fingerprinter.fingerprint(text))

    def check_fingerprint(self, url: str, fp: ContentFingerprint, degenerate: bool | None = None) -> Verdict:
        """Decide for an already computed fingerprint; degenerate pages never reach the store.

        ``degenerate`` overrides this deduplicator's own ``min_words`` rule (a per-domain
        fingerprinter decided it); None asks :meth:`ContentFingerprinter.is_degenerate`.
        """
        if degenerate is None:
            degenerate = self.fingerprinter.is_degenerate(fp)
        if degenerate:
            with self._lock:
                self._counts["degenerate"] += 1
            return Verdict("degenerate", url)
        with self._lock:
            kind, kept_url, distance = self.store.check_and_add(url, fp)
            if kind not in KINDS or kind == "degenerate":
                raise ValueError(f"store answered an unknown kind {kind!r}")
            self._counts[kind] += 1
            if kind == "unique":
                return Verdict("unique", url, None, None, url)
            cluster = self.clusters.add_pair(kept_url, url)
        return Verdict(kind, url, kept_url, distance, cluster)  # type: ignore[arg-type]

    def skip_non_text(self, count: int = 1) -> None:
        """Count responses that were not fingerprinted (images, PDFs, binary)."""
        with self._lock:
            self._skipped_non_text += count

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def report(self) -> DuplicationReport:
        """The numbers so far (clusters of two or more pages, largest cluster)."""
        with self._lock:
            c = self._counts
            return DuplicationReport.from_counts(
                exact=c["exact"], near=c["near"], unique=c["unique"], degenerate=c["degenerate"],
                clusters=self.clusters.count(2), largest_cluster=self.clusters.largest(),
                skipped_non_text=self._skipped_non_text,
            )

    def close(self) -> None:
        self.store.close()
