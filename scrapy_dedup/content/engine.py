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
  one atomic step: the exact layer first (a compact table of 16-byte hashes), then the
  simhash index, whose candidates within ``VerifyRule.radius`` bits are verified
  by a per-page sketch (:mod:`scrapy_dedup.content.sketch`: estimated Jaccard
  resemblance and one-sided shingle differences). Only unique pages are
  inserted; a duplicate points at the kept page it matched. :class:`MemoryContentStore` is the in-process store;
  ``RedisContentStore`` (``content/stores/``) shares one across processes.
* :class:`ContentDeduplicator` combines the two, returns a :class:`Verdict` per
  page and keeps the counts and clusters of the :class:`DuplicationReport`.
"""
from __future__ import annotations

import functools
import hashlib
import os
import struct
import zlib
import threading
from dataclasses import dataclass, replace
from typing import IO, Any, Literal, Protocol, Tuple, Union, runtime_checkable

import numpy as np

from scrapy_dedup.content.clusters import Clusters
from scrapy_dedup.content.compact import DigestTable, StringList
from scrapy_dedup.content.representative import ClusterRepresentatives, UrlKey
from scrapy_dedup._util.files import atomic_write
from scrapy_dedup.content.index import IndexFileError, SimhashIndex, read_exactly
from scrapy_dedup.content.simhash import (
    SUPPORTED_BITS,
    exact_hash_words,
    hamming,
    simhash_of_word_hashes,
    token_hashes,
    words,
)
from scrapy_dedup.content.sketch import (
    DEFAULT_SKETCH_SIZE,
    LONG_PAGE,
    MAX_SKETCH_SIZE,
    Sketch,
    SketchStore,
    VerifyRule,
    make_sketch,
)
from scrapy_dedup.content.report import DuplicationReport

__all__ = [
    "ContentFingerprint",
    "ContentFingerprinter",
    "ContentStore",
    "MemoryContentStore",
    "ContentDeduplicator",
    "Verdict",
    "Kind",
    "DEFAULT_MIN_WORDS",
    "DEFAULT_SKETCH_SIZE",
    "VerifyRule",
]

Kind = Literal["unique", "exact", "near", "degenerate"]
KINDS: tuple[str, ...] = ("unique", "exact", "near", "degenerate")
DEFAULT_MIN_WORDS = 20
#: undecidable pages named in the report (the others are counted)
UNDECIDABLE_NAMED = 10
StoreAnswer = Tuple[str, Union[str, None], Union[int, None]]


@dataclass(frozen=True)
class ContentFingerprint:
    """What the engine keeps of a page: exact hash (16 bytes), simhash, number of words,
    and the verification sketch (None when the fingerprinter makes none)."""

    exact: bytes
    simhash: int
    words: int
    sketch: Sketch | None = None


class ContentFingerprinter:
    """Main text -> :class:`ContentFingerprint`, with one tokenization for both hashes."""

    def __init__(self, shingle_size: int = 5, bits: int = 64, min_words: int = DEFAULT_MIN_WORDS,
                 sketch_size: int = DEFAULT_SKETCH_SIZE):
        if not isinstance(shingle_size, int) or shingle_size < 1:
            raise ValueError(f"shingle_size must be a positive integer, got {shingle_size!r}")
        if bits not in SUPPORTED_BITS:
            raise ValueError(f"bits must be 64 or 128, got {bits!r}")
        if not isinstance(min_words, int) or min_words < shingle_size:
            raise ValueError(
                f"min_words ({min_words!r}) must be at least shingle_size ({shingle_size}): "
                "a page needs one whole shingle to be fingerprinted"
            )
        if not isinstance(sketch_size, int) or not 0 <= sketch_size <= MAX_SKETCH_SIZE:
            raise ValueError(f"sketch_size must be an integer in [0, {MAX_SKETCH_SIZE}], got {sketch_size!r}")
        self.shingle_size = shingle_size
        self.bits = bits
        self.min_words = min_words
        self.sketch_size = sketch_size

    def __repr__(self) -> str:
        return (f"ContentFingerprinter(shingle_size={self.shingle_size}, bits={self.bits}, "
                f"min_words={self.min_words}, sketch_size={self.sketch_size})")

    def fingerprint(self, text: str) -> ContentFingerprint:
        """Fingerprint ``text`` (the output of :func:`~scrapy_dedup.content.text.page_text`).

        Simhash and sketch come from one pass over the shingle hashes.
        """
        tokens = words(text)
        return self.fingerprint_hashes(token_hashes(tokens), exact_hash_words(tokens))

    def fingerprint_hashes(self, word_hashes: np.ndarray, exact: bytes) -> ContentFingerprint:
        """The fingerprint of a text from its words' hashes (``token_hashes``) and its ``exact`` hash
        (``exact_hash_words``): the same as :meth:`fingerprint`'s of that text."""
        simhash, shingles = simhash_of_word_hashes(word_hashes, self.shingle_size, self.bits)
        sketch = make_sketch(shingles, self.sketch_size) if self.sketch_size and len(word_hashes) else None
        return ContentFingerprint(exact=exact, simhash=simhash, words=len(word_hashes), sketch=sketch)

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

    def add_unless_exact(self, url: str, fp: ContentFingerprint) -> StoreAnswer:
        """Atomically: ``("exact", kept_url, 0)`` when ``fp``'s exact hash is stored, else
        ``("unique", None, None)`` after storing ``fp`` under ``url`` *without* a near search: another text
        of a page already kept (its re-check, ``content/boilerplate.py``), which must be found by what is
        near it even when it is near the page's own older entry (nearness is not transitive)."""
        ...

    def close(self) -> None:
        """Release resources (connections); persisting is the caller's explicit ``save``."""
        ...


_STORE_MAGIC = b"SDSTORE\x00"
_STORE_VERSION = 3  # 2: sketches after the index; 3: a CRC-32 of everything before it at the end
# (versions 1 and 2 still load: 1 without sketches, both without the whole-file check)


class _Crc32Stream:
    """Passes reads or writes through to ``f`` and keeps the CRC-32 of the bytes seen.

    The index part of the file has its own checksum; this one covers the URLs, exact
    hashes and sketches too, so a flipped bit anywhere is refused, not loaded.
    """

    def __init__(self, f: IO[bytes]):
        self.f = f
        self.crc = 0

    def write(self, data: bytes) -> int:
        self.crc = zlib.crc32(data, self.crc)
        return self.f.write(data)

    def read(self, size: int = -1) -> bytes:
        data = self.f.read(size)
        self.crc = zlib.crc32(data, self.crc)
        return data
_STORE_HEADER = struct.Struct("<8sHHQQ")  # magic, version, reserved, pages, url bytes
# then: uint32 length of each URL, the URLs (UTF-8), 16-byte exact hash per page, the SimhashIndex,
# (version 2) uint32 sketch size (0: no sketches) and the SketchStore


class MemoryContentStore:
    """In-process store: exact hash -> page id, a :class:`SimhashIndex` of ids, id -> URL, id -> sketch.

    Compact (no Python object per kept page): the exact hashes in a
    :class:`~scrapy_dedup.content.compact.DigestTable` (16 bytes + an int32 slot or two),
    the URLs as UTF-8 in a :class:`~scrapy_dedup.content.compact.StringList` (their
    bytes + 8), the index (about 25 bytes), the sketches packed in a :class:`SketchStore`.
    An exact hash that is not 16 bytes long is stored as its 16-byte BLAKE2b.

    ``verify`` (a :class:`VerifyRule`, None to switch the stage off) decides the
    simhash candidates within ``verify.radius`` bits by their sketches; without it,
    or for a page without a sketch, a candidate within ``threshold`` bits is a
    near duplicate (the plain simhash rule).

    Thread-safe: ``check_and_add`` holds one lock across both layers.
    """

    def __init__(self, threshold: int = 3, bands: int = 4, bits: int = 64, allow_approximate: bool = False, *,
                 sketch_size: int = DEFAULT_SKETCH_SIZE, verify: VerifyRule | None = VerifyRule()):
        self.index = SimhashIndex(threshold, bands, bits, allow_approximate)
        if verify is not None and not sketch_size:
            raise ValueError("verification needs sketches: sketch_size must be > 0 when verify is set")
        self.verify = verify
        self.sketch_size = sketch_size if verify is not None else 0
        self.sketches: SketchStore | None = SketchStore(sketch_size) if self.sketch_size else None
        self._exact = DigestTable(16)
        self._urls = StringList()
        self._lock = threading.Lock()

    @property
    def threshold(self) -> int:
        return self.index.threshold

    @property
    def bits(self) -> int:
        return self.index.bits

    @property
    def bands(self) -> int:
        return self.index.bands

    @property
    def allow_approximate(self) -> bool:
        return self.index.allow_approximate

    def __len__(self) -> int:
        """Kept (unique) pages stored."""
        return len(self._urls)

    def check_and_add(self, url: str, fp: ContentFingerprint) -> StoreAnswer:
        return self._check_and_add(url, fp, near=True)

    def add_unless_exact(self, url: str, fp: ContentFingerprint) -> StoreAnswer:
        return self._check_and_add(url, fp, near=False)

    def _check_and_add(self, url: str, fp: ContentFingerprint, near: bool) -> StoreAnswer:
        with self._lock:
            exact = _exact_key(fp.exact)
            kept = self._exact.position_of(exact)
            if kept is not None:
                return "exact", self._urls[kept], 0
            page_id = len(self._urls)
            if not near:
                self.index.add(page_id, fp.simhash)
                if self.sketches is not None:
                    self.sketches.add(fp.sketch)
            elif self.sketches is None:
                match = self.index.add_if_new(page_id, fp.simhash)
                if match is not None:
                    kept, distance = match
                    return "near", self._urls[kept], distance
            else:
                match = self._verified_match(fp)
                if match is not None:
                    kept, distance = match
                    return "near", self._urls[kept], distance
                self.index.add(page_id, fp.simhash)
                self.sketches.add(fp.sketch)
            self._exact.append(exact)
            self._urls.append(url)
            return "unique", None, None

    def _verified_match(self, fp: ContentFingerprint) -> tuple[int, int] | None:
        """The closest kept page that the verification stage accepts, as ``(page_id, distance)``."""
        rule, sketches = self.verify, self.sketches
        assert rule is not None and sketches is not None
        threshold = self.index.threshold
        radius = max(rule.radius, threshold)
        candidates = dict((pos, d) for pos, d in self.index.query_radius(fp.simhash, radius))
        sketch = fp.sketch
        if sketch is not None:
            for pos in sketches.candidates(sketch):
                if pos not in candidates:
                    d = hamming(fp.simhash, self.index.fingerprint_at(pos))
                    if d <= radius:
                        candidates[pos] = d
        for pos, d in sorted(candidates.items(), key=lambda item: (item[1], item[0])):
            kept = sketches.get(pos)
            if sketch is None or kept is None:
                if d <= threshold:
                    return pos, d
            elif rule.near(sketch, kept, self.sketch_size):
                return pos, d
        return None

    def url(self, page_id: int) -> str:
        return self._urls[page_id]

    @property
    def nbytes(self) -> dict[str, int]:
        """Bytes held per part: ``index`` (simhash tables and LSH tables), ``sketches`` (apart),
        ``exact`` (hashes and their table), ``urls``."""
        index = self.index.nbytes + (self.sketches.nbytes_tables if self.sketches is not None else 0)
        return {"index": index, "sketches": self.sketches.nbytes_sketches if self.sketches is not None else 0,
                "exact": self._exact.nbytes, "urls": self._urls.nbytes}

    def close(self) -> None:
        """Nothing to release (call :meth:`save` to persist)."""

    # -- persistence: one file, written atomically --

    def save(self, path: str | os.PathLike) -> None:
        """Write URLs, exact hashes, the index and the sketches to ``path`` atomically (for resumed crawls)."""
        atomic_write(path, self._write_to)

    def _write_to(self, raw: IO[bytes]) -> None:
        f = _Crc32Stream(raw)
        with self._lock:
            urls, lengths = self._urls.encoded()
            f.write(_STORE_HEADER.pack(_STORE_MAGIC, _STORE_VERSION, 0, len(self._urls), len(urls)))
            f.write(lengths.astype("<u4").tobytes())
            f.write(urls)
            f.write(self._exact.to_bytes())
            self.index.write_to(f)
            f.write(struct.pack("<I", self.sketch_size))
            if self.sketches is not None:
                self.sketches.write_to(f)
            raw.write(struct.pack("<I", f.crc))

    def load_into(self, path: str | os.PathLike) -> None:
        """Replace this store's contents by the store saved at ``path`` (resuming a crawl).

        The saved index must have this store's threshold, bands and bits, and its
        sketches this store's sketch size, else ``ValueError`` (a changed configuration
        would silently change what counts as a duplicate). A file saved without
        sketches (version 1, or the stage off) loads into a verifying store: its pages
        have no sketch and are matched by the plain threshold rule.
        """
        loaded = self.load(path)
        mine = (self.index.threshold, self.index.bands, self.index.bits)
        theirs = (loaded.index.threshold, loaded.index.bands, loaded.index.bits)
        if mine != theirs:
            raise ValueError(f"saved content store has threshold/bands/bits {theirs}, this store {mine}")
        sketches = loaded.sketches
        if self.sketch_size and sketches is None:
            sketches = SketchStore(self.sketch_size)
            for _ in range(len(loaded)):
                sketches.add(None)
        elif not self.sketch_size:
            sketches = None
        elif sketches is not None and sketches.size != self.sketch_size:
            raise ValueError(f"saved content store has sketch size {sketches.size}, this store {self.sketch_size}")
        with self._lock:
            self.index, self._exact, self._urls, self.sketches = loaded.index, loaded._exact, loaded._urls, sketches

    @classmethod
    def load(cls, path: str | os.PathLike, verify: VerifyRule | None = VerifyRule()) -> MemoryContentStore:
        """Read a store written by :meth:`save` (``IndexFileError`` if damaged).

        ``verify`` is the rule of the returned store when the file holds sketches.
        """
        with open(path, "rb") as fh:
            f = _Crc32Stream(fh)
            magic, version, _, pages, url_bytes = _STORE_HEADER.unpack(read_exactly(f, _STORE_HEADER.size))
            if magic != _STORE_MAGIC:
                raise IndexFileError("not a scrapy-dedup content store file")
            if version not in (1, 2, _STORE_VERSION):
                raise IndexFileError(f"content store file version {version} is not supported")
            lengths = np.frombuffer(read_exactly(f, 4 * pages), dtype="<u4")
            if int(lengths.sum()) != url_bytes:
                raise IndexFileError("content store file is corrupt (URL lengths)")
            raw = read_exactly(f, url_bytes)
            if not _valid_utf8_items(raw, lengths):
                raise IndexFileError("content store file is corrupt (URLs)")
            urls = StringList.from_encoded(raw, lengths)
            del raw
            digests = read_exactly(f, 16 * pages)
            index = SimhashIndex.read_from(f)
            sketches = None
            if version >= 2:
                (size,) = struct.unpack("<I", read_exactly(f, 4))
                if size:
                    try:
                        sketches = SketchStore.read_from(f, read_exactly)
                    except ValueError as exc:
                        raise IndexFileError(f"content store file is corrupt (sketches: {exc})") from None
                    if sketches.size != size:
                        raise IndexFileError("content store file is corrupt (sketch size)")
            if version >= 3:
                expected = f.crc
                (stored,) = struct.unpack("<I", read_exactly(fh, 4))
                if stored != expected:
                    raise IndexFileError("content store file is corrupt (checksum mismatch)")
            if fh.read(1):
                raise IndexFileError("content store file has trailing data")
        if len(urls) != pages or len(index) != pages or (sketches is not None and len(sketches) != pages):
            raise IndexFileError("content store file is inconsistent (page counts differ)")
        size = sketches.size if sketches is not None else 0
        store = cls(index.threshold, index.bands, index.bits, index.allow_approximate, sketch_size=size,
                    verify=verify if size else None)
        store.index = index
        store.sketches = sketches if size and verify is not None else None
        store.sketch_size = size if store.sketches is not None else 0
        store._urls = urls
        store._exact = DigestTable.from_bytes(digests, 16)
        return store


def _valid_utf8_items(data: bytes, lengths: np.ndarray) -> bool:
    """True when ``data`` cut at ``lengths`` is a sequence of valid UTF-8 strings (surrogates allowed)."""
    try:
        data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return False
    starts = np.cumsum(lengths, dtype=np.int64)[:-1]
    starts = starts[starts < len(data)]
    # a whole that decodes could still be cut inside a character: no item may start with a continuation byte
    return not bool(np.any((np.frombuffer(data, dtype=np.uint8)[starts] & 0xC0) == 0x80)) if len(starts) else True


def _exact_key(exact: bytes) -> bytes:
    """The 16-byte exact-layer key of a fingerprint's exact hash (the fingerprinter's are 16 already)."""
    if len(exact) == 16:
        return exact
    return hashlib.blake2b(exact, digest_size=16).digest()


@functools.lru_cache(maxsize=16)
def _empty_store(threshold: int, bands: int, bits: int, allow_approximate: bool, sketch_size: int,
                 verify: VerifyRule | None) -> MemoryContentStore:
    """An empty store of these parameters, never written to: its tables' buckets at their first size, for
    :meth:`ContentDeduplicator.pair_matches`."""
    return MemoryContentStore(threshold, bands, bits, allow_approximate, sketch_size=sketch_size, verify=verify)


def verify_rule_from_settings(cfg: Any) -> VerifyRule | None:
    """The :class:`VerifyRule` of a :class:`~scrapy_dedup.settings.DedupSettings` (or any object with
    ``sketch_size``, ``verify_radius``, ``verify_jaccard``, ``verify_max_diff``, ``verify_min_jaccard``);
    None when ``sketch_size`` is 0 (the verification stage off)."""
    if not getattr(cfg, "sketch_size", 0):
        return None
    return VerifyRule(radius=max(cfg.verify_radius, cfg.hamming_threshold), jaccard=cfg.verify_jaccard,
                      max_diff=cfg.verify_max_diff, min_jaccard=cfg.verify_min_jaccard,
                      long_page=LONG_PAGE)


@dataclass(frozen=True)
class Verdict:
    """The decision for one page.

    ``kept_url`` and ``distance`` are set for duplicates (distance 0 for exact): the
    kept page this one matched (in ``drop`` mode, the page whose item was kept);
    ``cluster`` names the page's cluster by its first-seen page, an id that stays the
    same for every member (the page itself when unique, None when degenerate);
    ``representative``, set for duplicates, is the member the representative policy
    prefers among those seen so far (:mod:`scrapy_dedup.content.representative`).
    ``same_request``: False when the page matched a kept page of the same URL that another
    request fetched (a fragment the crawl keeps, another POST body): then it is no refetch.
    """

    kind: Kind
    url: str
    kept_url: str | None = None
    distance: int | None = None
    cluster: str | None = None
    representative: str | None = None
    same_request: bool = True

    @property
    def is_duplicate(self) -> bool:
        return self.kind in ("exact", "near")

    @property
    def is_refetch(self) -> bool:
        """A duplicate of the page the same request fetched before (a ``dont_filter`` request, a page in
        flight at a kill fetched again on resume): whether its first item was stored is unknown."""
        return self.is_duplicate and self.kept_url == self.url and self.same_request


class ContentDeduplicator:
    """Fingerprint, check, count: ``check(url, text) -> Verdict``, ``report() -> DuplicationReport``.

    Thread-safe: the store's check-and-insert is atomic, and the counts and
    clusters are updated under a lock, so concurrent callers never let both of
    a duplicate pair through.
    """

    def __init__(self, fingerprinter: ContentFingerprinter, store: ContentStore, representative: str = "first", *,
                 times_are_arrivals: bool = False, url_key: UrlKey | None = None):
        store_bits = getattr(store, "bits", fingerprinter.bits)
        if store_bits != fingerprinter.bits:
            raise ValueError(f"fingerprinter makes {fingerprinter.bits}-bit simhashes, store holds {store_bits}-bit")
        store_sketch = getattr(store, "sketch_size", 0)
        if store_sketch and fingerprinter.sketch_size != store_sketch:
            raise ValueError(f"fingerprinter makes {fingerprinter.sketch_size}-value sketches, "
                             f"store verifies with {store_sketch}")
        self.fingerprinter = fingerprinter
        self.store = store
        self.clusters: Clusters[Any] = Clusters()  # URLs, and (URL, n) for a URL fetched again
        # Local to this process, as the clusters are: the store (Redis too) only ever names the kept page.
        # ``times_are_arrivals``: the pages' timestamps are their fetch times (see ClusterRepresentatives).
        # ``url_key``: the sort key of a URL, for every representative policy but ``first`` (content/representative.py)
        self.representatives = ClusterRepresentatives(representative, times_are_arrivals=times_are_arrivals,
                                                      url_key=url_key)
        self._counts = dict.fromkeys(KINDS, 0)
        self._skipped_non_text = 0
        self._skipped_non_html = 0
        self._undecidable = 0
        self._undecidable_urls: list[str] = []
        self._lock = threading.Lock()

    @classmethod
    def in_memory(
        cls, *, shingle_size: int = 5, bits: int = 64, min_words: int = DEFAULT_MIN_WORDS, threshold: int = 3,
        bands: int = 4, allow_approximate: bool = False, sketch_size: int = DEFAULT_SKETCH_SIZE,
        verify: VerifyRule | None = VerifyRule(),
    ) -> ContentDeduplicator:
        """A deduplicator over a fresh :class:`MemoryContentStore` (``verify=None``: plain simhash rule)."""
        sketch_size = sketch_size if verify is not None else 0
        return cls(
            ContentFingerprinter(shingle_size, bits, min_words, sketch_size),
            MemoryContentStore(threshold, bands, bits, allow_approximate, sketch_size=sketch_size, verify=verify),
        )

    def fingerprint(self, text: str) -> ContentFingerprint:
        return self.fingerprinter.fingerprint(text)

    def check(self, url: str, text: str) -> Verdict:
        """Decide for one page's main text (fingerprinting runs outside the lock)."""
        return self.check_fingerprint(url, self.fingerprinter.fingerprint(text))

    def check_fingerprint(self, url: str, fp: ContentFingerprint, degenerate: bool | None = None, *,
                          timestamp: float | None = None, declares: str | None = None) -> Verdict:
        """Decide for an already computed fingerprint; degenerate pages never reach the store.

        ``degenerate`` overrides this deduplicator's own ``min_words`` rule (a per-domain
        fingerprinter decided it); None asks :meth:`ContentFingerprinter.is_degenerate`.
        ``timestamp`` (``newest``) and ``declares`` (the page's ``rel="canonical"`` target,
        ``canonical``) are what the representative policy may look at.
        """
        if degenerate is None:
            degenerate = self.fingerprinter.is_degenerate(fp)
        if degenerate:
            with self._lock:
                self._counts["degenerate"] += 1
            return Verdict("degenerate", url)
        with self._lock:
            return self._count_answer(url, self.store.check_and_add(url, fp), timestamp, declares)

    def record_answer(self, url: str, answer: StoreAnswer, *, timestamp: float | None = None,
                      declares: str | None = None) -> Verdict:
        """Count and cluster a store answer the caller got itself: a caller that asks the store about
        one page more than once (boilerplate learning: the reduced text, then the whole text) counts
        the page once, with the answer it decided on."""
        with self._lock:
            return self._count_answer(url, answer, timestamp, declares)

    def record_undecidable(self, url: str, *, timestamp: float | None = None,
                           declares: str | None = None) -> Verdict:
        """Keep a page that cannot be judged: after its host's template is left out, fewer than ``min_words``
        words are left (boilerplate learning). It is counted unique (a kept page, never dropped) and
        undecidable; it is not stored (nothing of its own could match a later page) and the first
        :data:`UNDECIDABLE_NAMED` are named in the report."""
        with self._lock:
            self._undecidable += 1
            if len(self._undecidable_urls) < UNDECIDABLE_NAMED:
                self._undecidable_urls.append(url)
            return self._count_answer(url, ("unique", None, None), timestamp, declares)

    def pair_matches(self, a: ContentFingerprint, b: ContentFingerprint) -> bool:
        """Whether ``b`` is a duplicate of ``a`` by this deduplicator's store rule: the answer for ``b`` of a
        two-page store holding ``a`` (a :class:`MemoryContentStore` of the store's threshold, bands, bits, sketch size
        and verification rule), taken directly: the exact hashes, the distance, then, for a candidate of that
        store (within the threshold, or within the radius and in one bucket of its simhash or sketch tables),
        the sketch rule."""
        store = self.store
        size = getattr(store, "sketch_size", 0)
        # The store's banding too (an approximate index raised here before, from a store the user set up).
        empty = _empty_store(getattr(store, "threshold", 3), getattr(store, "bands", 4), self.fingerprinter.bits,
                             getattr(store, "allow_approximate", False), size,
                             getattr(store, "verify", None) if size else None)
        if _exact_key(a.exact) == _exact_key(b.exact):
            return True
        distance = hamming(a.simhash, b.simhash)
        threshold, rule, sketches = empty.threshold, empty.verify, empty.sketches
        # An exact index finds every page within the threshold (more bands than bits of threshold); an
        # approximate one only those sharing a band, as beyond the threshold.
        banded = distance > threshold or empty.allow_approximate
        if sketches is None or rule is None:
            return distance <= threshold and (not banded or empty.index.bucket_mates(a.simhash, b.simhash))
        if distance > max(rule.radius, threshold):
            return False
        if banded and not empty.index.bucket_mates(a.simhash, b.simhash) and not (
                a.sketch is not None and b.sketch is not None and sketches.bucket_mates(a.sketch, b.sketch)):
            return False  # not a candidate of the two-page store
        kept = sketches.stored(a.sketch)
        if b.sketch is None or kept is None:
            return distance <= threshold
        return rule.near(b.sketch, kept, empty.sketch_size)

    def _count_answer(self, url: str, answer: StoreAnswer, timestamp: float | None,
                      declares: str | None) -> Verdict:
        """Count one store answer, cluster a duplicate with its kept page and keep the cluster's
        representative (under ``_lock``)."""
        kind, kept_url, distance = answer
        if kind not in KINDS or kind == "degenerate":
            raise ValueError(f"store answered an unknown kind {kind!r}")
        self._counts[kind] += 1
        reps = self.representatives
        if kind == "unique":
            reps.note_kept(url, timestamp, declares)
            return Verdict("unique", url, None, None, url)
        if kept_url is None:
            raise ValueError(f"store answered {kind!r} without the kept page's URL")
        # The same URL fetched again is one more page of its cluster (as a dump's second record
        # is in the offline audit), not the same node twice.
        member: Any = url if url != kept_url else (url, self._counts["exact"] + self._counts["near"])
        clusters = self.clusters
        new_kept, before = True, []
        if reps.policy != "first":  # which clusters this pair joins: their representatives are merged
            new_kept = kept_url not in clusters
            before = [clusters.representative(n) for n in (kept_url, member) if n in clusters]
        cluster = clusters.add_pair(kept_url, member)
        representative = reps.join(cluster, kept_url, url, timestamp, declares, merged=before, new_kept=new_kept)
        return Verdict(kind, url, kept_url, distance, cluster, representative)  # type: ignore[arg-type]

    def skip_non_text(self, count: int = 1) -> None:
        """Count responses that were not fingerprinted (images, PDFs, binary)."""
        with self._lock:
            self._skipped_non_text += count

    def skip_non_html(self, count: int = 1) -> None:
        """Count text responses that are structured data, not pages (JSON, XML feeds, CSS, JavaScript)."""
        with self._lock:
            self._skipped_non_html += count

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def report(self) -> DuplicationReport:
        """The numbers so far (clusters of two or more pages, largest cluster)."""
        with self._lock:
            c = self._counts
            report = DuplicationReport.from_counts(
                exact=c["exact"], near=c["near"], unique=c["unique"], degenerate=c["degenerate"],
                clusters=self.clusters.count(2), largest_cluster=self.clusters.largest(),
                skipped_non_text=self._skipped_non_text, skipped_non_html=self._skipped_non_html,
                undecidable=self._undecidable,
            )
            return replace(report, undecidable_named=tuple(self._undecidable_urls)) if self._undecidable else report

    def close(self) -> None:
        self.store.close()
