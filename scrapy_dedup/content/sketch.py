"""The verification stage: a small per-page sketch that says how much two candidate pages differ.

Why: a 64-bit simhash is a coarse summary. A one-word edit, a changed number or a
"generated at" line on a page of a few hundred words moves it by more than the
3-bit threshold (recall lost), while two short templated siblings that differ by
a dozen words can land within 3 bits (precision lost). The banded simhash index
stays the candidate generator; every candidate within ``radius`` bits is then
*verified* against a sketch of the kept page, in both directions: a candidate a
few bits beyond the threshold is accepted when the sketch says near, and one
within the threshold is rejected when the sketch says the pages differ too much.

The sketch (Broder 1997, bottom-k)
---------------------------------
For a page with ``n`` distinct word shingles (the same 5-word shingles and 64-bit
hashes the simhash votes with, see :func:`~scrapy_dedup.content.simhash.simhash_and_shingle_hashes`):
the ``size`` smallest distinct values of the shingle hashes' top 32 bits (sorted,
4 bytes each), and ``n``. From two sketches: ``U`` = the ``size`` smallest values of
their union, ``m`` = how many of ``U`` are in both; ``J = m / |U|`` estimates the
Jaccard resemblance of the two shingle sets (exact when the union has at most
``size`` shingles), and with the shingle counts it gives the *absolute* number of
shingles found in one page only: ``common = J (n_a + n_b) / (1 + J)``,
``only_a = n_a - common``, ``only_b = n_b - common``.

The decision rule (:class:`VerifyRule`)
--------------------------------------
A candidate within ``radius`` simhash bits is a near duplicate when::

    J >= min_jaccard and min(only_a, only_b) <= max_diff      (defaults 0.6 and 10)
    or (J >= jaccard and both pages have >= long_page shingles)  (defaults 0.85 and 256)

The first clause is what separates a near duplicate from a templated sibling on
short pages, where Jaccard alone cannot: an edit of one or two words or a
changed number leaves at most ``2 x 5`` shingles on each side; a block *added*
to one copy (a "generated at" line, a footer in a plain ``<div>``) leaves almost
none on the other side; a templated sibling with a dozen or more words of its
own has at least 16 shingles of its own on *both* sides. ``min_jaccard`` keeps a
short page from being absorbed by a long page that merely contains it.

Limits, measured and stated plainly: the estimate is exact while the two pages
together have at most ``size`` distinct shingles, and its resolution is about
``n / size`` shingles beyond. The default ``size`` 256 makes the absolute clause
exact on pages of up to about 230 words, where templated siblings are hardest
to tell from edits; from ``long_page`` (256) shingles on, the relative clause
also applies, so a sibling that differs from a long page by less than
``(1 - jaccard) / (1 + jaccard)`` of its shingles (8% at 0.85: 20 shingles,
about 16 words, at 256 shingles) is reported as its near duplicate. A smaller
sketch (64 values, 256 bytes) measured the same benchmark F1 but merged 21% of
200-word sibling pairs with 12-24 words of their own (``docs/benchmarks.md``).

Candidates beyond the banded index (:class:`SketchStore` tables)
-----------------------------------------------------------------
Four plain banding tables on 16-bit blocks find pairs within 3 bits for sure, and
pairs a few bits beyond only when they happen to share a block. So the sketch also
feeds ``LSH_TABLES`` small hash tables (one-permutation hashing, Li et al. 2012):
the sketch's values are split into ``2 * LSH_TABLES`` bins by their low 3 bits; a
bin's value is its smallest member (a min-hash of that bin); table ``t`` is keyed
by bins ``2t`` and ``2t + 1``. Two pages with resemblance ``J`` share a table key
with probability about ``J**2``, so a pair at ``J = 0.8`` is a candidate with
probability ``1 - (1 - 0.64)**4 = 0.98``. Each table costs 4 bytes per page in
memory (chained int32 ``next`` arrays), and every candidate is still checked by
its simhash distance (``<= radius``) before its sketch is read.

Bytes per kept page (defaults, ``size = 256``): sketch 1,024 + shingle count 4 +
length 2 = 1,030 bytes (packed: a page with fewer distinct shingles stores only
those, a page without a sketch 6 bytes), stored apart from the index; LSH tables
16 bytes.
"""
from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, NamedTuple, Optional

import numpy as np

from scrapy_dedup._util.mix import fmix64, fmix64_array

if TYPE_CHECKING:  # typeshed's "has .read(n)" / ".write(b)" protocols: the files may be CRC-keeping wrappers
    from _typeshed import SupportsRead, SupportsWrite

__all__ = [
    "Sketch",
    "Resemblance",
    "VerifyRule",
    "SketchStore",
    "make_sketch",
    "resemblance",
    "lsh_keys",
    "DEFAULT_SKETCH_SIZE",
    "LSH_TABLES",
    "MAX_SKETCH_SIZE",
    "LONG_PAGE",
]

DEFAULT_SKETCH_SIZE = 256
LONG_PAGE = 256  # shingles: the relative clause applies from here (see the module doc)
MAX_SKETCH_SIZE = 1024
LSH_TABLES = 4
_BINS = 2 * LSH_TABLES
_EMPTY_BIN = 0xFFFFFFFF
_M32 = 0xFFFFFFFF
_MIN_HEAD_BITS = 10
_MAX_LOAD = 4
_I32_MAX = 2**31 - 1


class Resemblance(NamedTuple):
    """Estimated resemblance of two pages' shingle sets."""

    jaccard: float
    only_a: float  # shingles estimated to be in the first page only
    only_b: float  # shingles estimated to be in the second page only


@dataclass(frozen=True)
class Sketch:
    """Bottom-``size`` sketch of one page: sorted 32-bit values (big-endian bytes) and the shingle count."""

    values: bytes
    shingles: int
    _ints: tuple = field(default=(), compare=False, repr=False)

    @classmethod
    def from_ints(cls, values: Iterable[int], shingles: int) -> "Sketch":
        ints = tuple(values)
        return cls(struct.pack(f">{len(ints)}I", *ints), int(shingles), ints)

    @classmethod
    def from_bytes(cls, blob: bytes) -> "Sketch":
        """Inverse of :meth:`to_bytes` (4-byte big-endian shingle count, then the values)."""
        if len(blob) < 4 or len(blob) % 4:
            raise ValueError("a sketch is a 4-byte count followed by 4-byte values")
        (shingles,) = struct.unpack_from(">I", blob)
        return cls.from_ints(struct.unpack_from(f">{len(blob) // 4 - 1}I", blob, 4), shingles)

    def to_bytes(self) -> bytes:
        return struct.pack(">I", self.shingles) + self.values

    def __reduce__(self):
        # Pickled (to and from worker processes) as its bytes only: the cached tuple of Python ints
        # is 256 objects, about 4 times the bytes, and is rebuilt on demand.
        return (Sketch, (self.values, self.shingles))

    @property
    def ints(self) -> tuple:
        """The values as Python ints (sorted ascending)."""
        if self._ints or not self.values:
            return self._ints
        ints = struct.unpack(f">{len(self.values) // 4}I", self.values)
        object.__setattr__(self, "_ints", ints)
        return ints

    def __len__(self) -> int:
        return len(self.values) // 4


def make_sketch(shingle_hashes: np.ndarray, size: int = DEFAULT_SKETCH_SIZE) -> Sketch:
    """The bottom-``size`` sketch of a page from its distinct 64-bit shingle hashes (any order)."""
    top = (np.asarray(shingle_hashes, dtype=np.uint64) >> np.uint64(32)).astype(np.uint32)
    if len(top) > 4 * size:  # partition first: O(n) instead of sorting every shingle
        top = np.partition(top, 4 * size)[: 4 * size]
    top.sort()  # then the distinct values in order (np.unique's, without its hash table: twice as fast here)
    if len(top) > 1:
        top = top[np.concatenate(([True], top[1:] != top[:-1]))]
    values = top[:size]
    return Sketch(values.astype(">u4").tobytes(), int(len(shingle_hashes)), tuple(values.tolist()))


def resemblance(a: Sketch, b: Sketch, size: int) -> Resemblance:
    """Estimated Jaccard resemblance and one-sided differences of two pages (see the module doc).

    The arithmetic is mirrored exactly by the Redis script (IEEE doubles, same order).
    """
    if not a.values or not b.values:
        return Resemblance(1.0 if a.values == b.values else 0.0, float(a.shingles), float(b.shingles))
    # The merge of the two sorted lists, in numpy (a Python loop over 256 values each took 3-4 times as long):
    # both sorted together, a value of both pages is there twice in a row. U is the first ``size`` distinct
    # values; the values of both pages among them are the repeats at or below U's last value.
    merged = np.frombuffer(a.values + b.values, dtype=">u4").astype(np.uint32)
    merged.sort()
    repeated = merged[1:] == merged[:-1]
    distinct = len(merged) - int(np.count_nonzero(repeated))
    if distinct <= size:
        taken, matches = distinct, len(merged) - distinct
    else:
        last = merged[np.concatenate(([True], ~repeated))][size - 1]
        taken, matches = size, int(np.searchsorted(merged, last, side="right")) - size
    jaccard = matches / taken
    common = jaccard * (a.shingles + b.shingles) / (1 + jaccard)
    return Resemblance(jaccard, a.shingles - common, b.shingles - common)


@dataclass(frozen=True)
class VerifyRule:
    """When a candidate within ``radius`` simhash bits is a near duplicate (module doc, "decision rule")."""

    radius: int = 20
    jaccard: float = 0.85
    max_diff: float = 10
    min_jaccard: float = 0.6
    long_page: int = LONG_PAGE

    def __post_init__(self) -> None:
        if not isinstance(self.radius, int) or self.radius < 0:
            raise ValueError(f"radius must be a non-negative integer, got {self.radius!r}")
        if not 0.0 < self.jaccard <= 1.0:
            raise ValueError(f"jaccard must be in (0, 1], got {self.jaccard!r}")
        if not 0.0 <= self.min_jaccard <= self.jaccard:
            raise ValueError(f"min_jaccard must be in [0, jaccard], got {self.min_jaccard!r}")
        if self.max_diff < 0:
            raise ValueError(f"max_diff must be >= 0, got {self.max_diff!r}")
        if not isinstance(self.long_page, int) or self.long_page < 0:
            raise ValueError(f"long_page must be a non-negative integer, got {self.long_page!r}")

    def accepts(self, r: Resemblance, shingles_a: int, shingles_b: int) -> bool:
        """The rule on an estimate for pages of ``shingles_a`` and ``shingles_b`` shingles."""
        j = r.jaccard
        if j >= self.jaccard and min(shingles_a, shingles_b) >= self.long_page:
            return True
        return j >= self.min_jaccard and min(r.only_a, r.only_b) <= self.max_diff + 1e-9  # float slack

    def near(self, a: Sketch, b: Sketch, size: int) -> bool:
        return self.accepts(resemblance(a, b, size), a.shingles, b.shingles)


def lsh_keys(sketch: Sketch) -> list[int]:
    """``LSH_TABLES`` 32-bit keys: table ``t`` combines the minimum of bins ``2t`` and ``2t + 1``.

    A value's bin is its low 3 bits; a bin with no value in the sketch is ``0xFFFFFFFF``.
    """
    bins = [_EMPTY_BIN] * _BINS
    missing = _BINS
    for v in sketch.ints:  # ascending: the first value seen in a bin is its minimum
        b = v & 7
        if bins[b] == _EMPTY_BIN:
            bins[b] = v
            missing -= 1
            if not missing:
                break
    return [fmix64((bins[2 * t] << 32) | bins[2 * t + 1]) >> 32 for t in range(LSH_TABLES)]


def _np_lsh_keys(values: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """:func:`lsh_keys` of consecutive pages at once: a ``(pages, LSH_TABLES)`` uint64 array.

    ``values`` are the pages' sketch values back to back (each page's ascending),
    ``lengths`` how many each page has. A page without values gets the keys of
    all-empty bins (the store never links it).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    n = len(lengths)
    if not n:
        return np.zeros((0, LSH_TABLES), dtype=np.uint64)
    vals = np.asarray(values, dtype=np.uint32)
    bins: np.ndarray = np.full(n * _BINS, _EMPTY_BIN, dtype=np.uint32)  # uint32, then uint64 per page row
    if len(vals):
        slot = np.repeat(np.arange(n, dtype=np.int64) * _BINS, lengths) + (vals & np.uint32(7))
        np.minimum.at(bins, slot, vals)  # a bin's value is its smallest member
        del slot
    bins = bins.reshape(n, _BINS).astype(np.uint64)
    out = np.empty((n, LSH_TABLES), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for t in range(LSH_TABLES):
            x = (bins[:, 2 * t] << np.uint64(32)) | bins[:, 2 * t + 1]
            out[:, t] = fmix64_array(x) >> np.uint64(32)
    return out


_BLOCK = 256  # pages per offset checkpoint (a page's values start = its block's start + lengths before it)
_CHUNK_PAGES = 1024  # pages per vectorized step when rebuilding or saving (bounds the temporary memory)


class SketchStore:
    """Sketches of kept pages by position (0, 1, 2, ...), and the LSH tables that find candidates.

    Positions are the content store's page ids; pages may have no sketch (``None``).
    Compact: the values of all sketches back to back in one ``uint32`` array (a page
    with fewer than ``size`` distinct shingles, or none, takes only what it has), a
    ``uint16`` length and a ``uint32`` shingle count per page, the start of every
    256th page (8 bytes per 256 pages), and per table a chained hash table (``int32``
    head and next arrays). At the defaults: 1,024 + 6 bytes per full sketch, 6 bytes
    per page without one, 16 bytes of LSH chains per page.
    """

    def __init__(self, size: int = DEFAULT_SKETCH_SIZE):
        if not isinstance(size, int) or not 1 <= size <= MAX_SKETCH_SIZE:
            raise ValueError(f"sketch size must be an integer in [1, {MAX_SKETCH_SIZE}], got {size!r}")
        self.size = size
        self._values = array("I")
        self._lengths = array("H")
        self._shingles = array("I")
        self._block_starts = array("q")
        self._head_bits = _MIN_HEAD_BITS
        self._heads = [array("i", [-1]) * (1 << self._head_bits) for _ in range(LSH_TABLES)]
        self._next = [array("i") for _ in range(LSH_TABLES)]

    def __len__(self) -> int:
        return len(self._lengths)

    def add(self, sketch: Optional[Sketch]) -> int:
        """Append the sketch of the next page (``None``: no sketch); returns its position."""
        pos = len(self._lengths)
        if pos >= _I32_MAX:
            raise OverflowError("SketchStore holds at most 2**31 - 1 pages")
        if pos % _BLOCK == 0:
            self._block_starts.append(len(self._values))
        ints = sketch.ints[: self.size] if sketch is not None else ()
        self._values.extend(ints)
        self._lengths.append(len(ints))
        self._shingles.append(min(sketch.shingles, _M32) if sketch is not None else 0)
        keys = lsh_keys(sketch) if sketch is not None and ints else None
        for t in range(LSH_TABLES):
            nxt = self._next[t]
            if keys is None:
                nxt.append(-1)
                continue
            head = self._heads[t]
            b = keys[t] >> (32 - self._head_bits)
            nxt.append(head[b])
            head[b] = pos
        if (1 << self._head_bits) * _MAX_LOAD < pos + 1 and self._head_bits < 30:
            self._rebuild(self._head_bits + 2)
        return pos

    def _start(self, pos: int) -> int:
        """Index in ``_values`` of page ``pos``'s first value."""
        first = pos - pos % _BLOCK
        start = self._block_starts[pos // _BLOCK]
        return start + sum(self._lengths[first:pos]) if pos > first else start

    def get(self, pos: int) -> Optional[Sketch]:
        n = self._lengths[pos]
        if not n:
            return None
        start = self._start(pos)
        return Sketch.from_ints(self._values[start : start + n], self._shingles[pos])

    def candidates(self, sketch: Sketch) -> set[int]:
        """Positions of pages sharing at least one LSH table key with ``sketch`` (plus bucket neighbours)."""
        found: set[int] = set()
        if not len(sketch):
            return found
        shift = 32 - self._head_bits
        for t, key in enumerate(lsh_keys(sketch)):
            nxt = self._next[t]
            i = self._heads[t][key >> shift]
            while i >= 0:
                found.add(i)
                i = nxt[i]
        return found

    def bucket_mates(self, a: Sketch, b: Sketch) -> bool:
        """Whether :meth:`candidates` of ``b`` walks a chain that ``a``, added now, would be linked in: one LSH
        table puts both in one bucket at the store's present size (False when either has no values: such a
        page is in no chain). A store holding ``a`` alone has the buckets of an empty one."""
        if not a.ints[: self.size] or not len(b):
            return False
        shift = 32 - self._head_bits
        return any(x >> shift == y >> shift for x, y in zip(lsh_keys(a), lsh_keys(b)))

    def stored(self, sketch: Optional[Sketch]) -> Optional[Sketch]:
        """What :meth:`get` gives back of ``sketch`` once added (its first ``size`` values, its shingle count
        capped at 32 bits; None for no values)."""
        if sketch is None or not sketch.ints:
            return None
        if len(sketch.ints) <= self.size and sketch.shingles <= _M32:
            return sketch
        return Sketch.from_ints(array("I", sketch.ints[: self.size]), min(sketch.shingles, _M32))

    @property
    def nbytes_sketches(self) -> int:
        """Bytes of the sketches, lengths, shingle counts and block starts."""
        return sum(a.itemsize * len(a) for a in (self._values, self._lengths, self._shingles, self._block_starts))

    @property
    def nbytes_tables(self) -> int:
        """Bytes of the LSH tables (heads and chains)."""
        return sum(a.itemsize * len(a) for a in (*self._heads, *self._next))

    def _chunks(self) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """``(first page, lengths, values)`` of consecutive runs of at most ``_CHUNK_PAGES`` pages (copies)."""
        n = len(self._lengths)
        for first in range(0, n, _CHUNK_PAGES):
            last = min(first + _CHUNK_PAGES, n)
            start = self._block_starts[first // _BLOCK]
            end = self._block_starts[last // _BLOCK] if last < n else len(self._values)
            if last < n and last % _BLOCK:
                end = self._start(last)
            lengths = np.array(self._lengths[first:last], dtype=np.uint16)
            values = np.array(self._values[start:end], dtype=np.uint32)
            yield first, lengths, values

    def _rebuild(self, head_bits: int) -> None:
        """Rebuild every table for a larger head (amortized: heads grow 4x), vectorized in chunks of pages."""
        self._head_bits = head_bits
        n = len(self._lengths)
        heads = [np.full(1 << head_bits, -1, dtype=np.int32) for _ in range(LSH_TABLES)]
        nexts = [np.full(n, -1, dtype=np.int32) for _ in range(LSH_TABLES)]
        for first, lengths, values in self._chunks():  # oldest first: chains end up newest -> oldest
            has = lengths > 0
            if not has.any():
                continue
            positions = (np.nonzero(has)[0] + first).astype(np.int32)
            keys = _np_lsh_keys(values, lengths)[has]
            for t in range(LSH_TABLES):
                head, nxt = heads[t], nexts[t]
                buckets = (keys[:, t] >> np.uint64(32 - head_bits)).astype(np.int64)
                order = np.argsort(buckets, kind="stable")
                sb, sp = buckets[order], positions[order]
                same = np.zeros(len(sb), dtype=bool)
                same[1:] = sb[1:] == sb[:-1]
                nxt[sp[same]] = sp[np.nonzero(same)[0] - 1]  # within the chunk: the previous one
                nxt[sp[~same]] = head[sb[~same]]  # the chunk's oldest of a bucket: the bucket's old head
                last = np.ones(len(sb), dtype=bool)
                last[:-1] = ~same[1:]
                head[sb[last]] = sp[last]
        self._heads = [array("i", h.tobytes()) for h in heads]
        self._next = [array("i", x.tobytes()) for x in nexts]

    # -- persistence (inside the content store file) --

    _HEADER = struct.Struct("<IQ")  # size, pages

    def write_to(self, f: SupportsWrite[bytes]) -> None:
        """Header, lengths, shingle counts, then ``size`` slots per page (unused ones 0), little-endian.

        The file keeps the fixed-slot layout of earlier versions, so files written before the
        packed in-memory layout load unchanged and vice versa.
        """
        f.write(self._HEADER.pack(self.size, len(self)))
        for arr, dtype in ((self._lengths, "<u2"), (self._shingles, "<u4")):
            if len(arr):
                data = np.frombuffer(arr, dtype=np.uint16 if arr.typecode == "H" else np.uint32)
                f.write(data.astype(dtype).tobytes())
                del data  # release the buffer export before the array may grow again
        slots = np.arange(self.size)
        for _, lengths, values in self._chunks():
            padded = np.zeros((len(lengths), self.size), dtype="<u4")
            padded[slots[None, :] < lengths[:, None]] = values  # row by row: each page's values in order
            f.write(padded.tobytes())

    @classmethod
    def read_from(cls, f: SupportsRead[bytes],
                  read_exactly: Callable[[SupportsRead[bytes], int], bytes]) -> "SketchStore":
        size, pages = cls._HEADER.unpack(read_exactly(f, cls._HEADER.size))
        store = cls(size)
        lengths = np.frombuffer(read_exactly(f, 2 * pages), dtype="<u2").astype(np.uint16)
        shingles = np.frombuffer(read_exactly(f, 4 * pages), dtype="<u4")
        if pages and int(lengths.max()) > size:
            raise ValueError("sketch lengths exceed the sketch size")
        slots = np.arange(size)
        values = array("I")
        for first in range(0, pages, _CHUNK_PAGES):
            chunk = lengths[first:first + _CHUNK_PAGES]
            padded = np.frombuffer(read_exactly(f, 4 * size * len(chunk)), dtype="<u4").reshape(len(chunk), size)
            values.frombytes(padded[slots[None, :] < chunk[:, None]].astype(np.uint32).tobytes())
        starts = np.concatenate(([0], np.cumsum(lengths, dtype=np.int64)))[:-1][::_BLOCK] if pages else ()
        store._lengths = array("H", lengths.tobytes())
        store._shingles = array("I", shingles.astype(np.uint32).tobytes())
        store._values = values
        store._block_starts = array("q", np.asarray(starts, dtype=np.int64).tobytes())
        bits = _MIN_HEAD_BITS
        while (1 << bits) * _MAX_LOAD < pages and bits < 30:
            bits += 2
        store._rebuild(bits)
        return store
