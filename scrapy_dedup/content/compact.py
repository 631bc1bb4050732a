"""Compact per-page containers: no Python object per stored page.

A Python ``str`` costs about 50 bytes plus its characters, a ``bytes`` of 16
about 50, a dict entry 40-100 (with its growth slack), an ``int`` 28-32: for a
store of a million pages those add up to more than the index itself. These
containers keep the same data in a few contiguous buffers:

* :class:`StringList`: strings as UTF-8 in one ``bytearray`` plus an ``int64``
  end offset per item (the characters + 8 bytes per item);
* :class:`DigestTable`: fixed-width digests (the exact-duplicate hashes) by
  position in one ``bytearray`` plus an open-addressing table of ``int32``
  positions (16 + 8 to 16 bytes per item at 16-byte digests).

Neither imports anything from Scrapy; both are used by the content store and
the offline report.
"""
from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator

import numpy as np

__all__ = ["StringList", "DigestTable"]

_I32_MAX = 2**31 - 1


class StringList:
    """An append-only list of ``str``, stored as UTF-8 in one buffer (``surrogatepass``: any str round-trips)."""

    __slots__ = ("_data", "_ends")

    def __init__(self, items: Iterable[str] = ()) -> None:
        self._data = bytearray()
        self._ends = array("q")
        for item in items:
            self.append(item)

    def append(self, item: str) -> int:
        """Add ``item``; returns its position."""
        self._data += item.encode("utf-8", "surrogatepass")
        self._ends.append(len(self._data))
        return len(self._ends) - 1

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, position: int) -> str:
        ends = self._ends
        if position < 0:
            position += len(ends)
        end = ends[position]  # IndexError for a position out of range
        start = ends[position - 1] if position else 0
        return self._data[start:end].decode("utf-8", "surrogatepass")

    def __iter__(self) -> Iterator[str]:
        for i in range(len(self._ends)):
            yield self[i]

    def encoded(self) -> tuple[bytes, np.ndarray]:
        """``(all UTF-8 bytes, uint32 length of each item)``: the content store's file layout."""
        ends = np.frombuffer(self._ends, dtype=np.int64) if len(self._ends) else np.zeros(0, np.int64)
        lengths = np.diff(ends, prepend=0).astype(np.uint32)
        del ends  # release the buffer export before the array may grow again
        return bytes(self._data), lengths

    @classmethod
    def from_encoded(cls, data: bytes, lengths: np.ndarray) -> "StringList":
        """Inverse of :meth:`encoded` (lengths must sum to ``len(data)``)."""
        out = cls()
        out._data = bytearray(data)
        out._ends = array("q", np.cumsum(lengths, dtype=np.int64).tobytes())
        return out

    @property
    def nbytes(self) -> int:
        return len(self._data) + 8 * len(self._ends)


class DigestTable:
    """Fixed-width digests by position, with a hash table for ``position_of(digest)``.

    The digests are uniformly distributed hashes (BLAKE2b), so their first 8 bytes
    are the table's hash. Linear probing over an ``int32`` table kept at most half
    full; it doubles (vectorized re-insert) when it would pass that.
    """

    __slots__ = ("width", "_digests", "_table", "_mask", "_count")

    def __init__(self, width: int = 16) -> None:
        if not isinstance(width, int) or width < 8:
            raise ValueError(f"digest width must be an integer >= 8, got {width!r}")
        self.width = width
        self._digests = bytearray()
        self._count = 0
        self._table = array("i", [-1]) * 1024
        self._mask = 1023

    def __len__(self) -> int:
        return self._count

    def digest_at(self, position: int) -> bytes:
        if not 0 <= position < self._count:
            raise IndexError(position)
        w = self.width
        return bytes(self._digests[position * w:(position + 1) * w])

    def position_of(self, digest: bytes) -> int | None:
        """The position of ``digest`` (the first one appended), or None."""
        w, data, table, mask = self.width, self._digests, self._table, self._mask
        slot = int.from_bytes(digest[:8], "little") & mask
        while True:
            pos = table[slot]
            if pos < 0:
                return None
            if data[pos * w:(pos + 1) * w] == digest:
                return pos
            slot = (slot + 1) & mask

    def append(self, digest: bytes) -> int:
        """Store ``digest`` at the next position (even if already present: the first stays the one found)."""
        if len(digest) != self.width:
            raise ValueError(f"digest must be {self.width} bytes, got {len(digest)}")
        pos = self._count
        if pos >= _I32_MAX:
            raise OverflowError("DigestTable holds at most 2**31 - 1 digests")
        self._digests += digest
        self._count = pos + 1
        if 2 * self._count > len(self._table):
            self._rebuild(2 * len(self._table))
        else:
            table, mask = self._table, self._mask
            slot = int.from_bytes(digest[:8], "little") & mask
            while table[slot] >= 0:
                slot = (slot + 1) & mask
            table[slot] = pos
        return pos

    @classmethod
    def from_bytes(cls, data: bytes, width: int = 16) -> "DigestTable":
        """A table over ``len(data) // width`` concatenated digests (positions in order)."""
        if len(data) % width:
            raise ValueError("digest data is not a whole number of digests")
        out = cls(width)
        out._digests = bytearray(data)
        out._count = len(data) // width
        size = 1024
        while size < 2 * out._count:
            size *= 2
        out._rebuild(size)
        return out

    def to_bytes(self) -> bytes:
        return bytes(self._digests)

    @property
    def nbytes(self) -> int:
        return len(self._digests) + 4 * len(self._table)

    def _rebuild(self, size: int) -> None:
        """Re-insert every digest into a table of ``size`` slots, in rounds (vectorized linear probing).

        Each round places, for every free target slot, the lowest pending position
        aiming at it; the others move one slot on. Positions are placed in order of
        their home slots' runs, and every slot between an entry's home and its place
        is occupied: exactly what the lookup's probe sequence needs. A duplicate
        digest is found at its first position because lower positions win ties.
        """
        n, w = self._count, self.width
        table = np.full(size, -1, dtype=np.int32)
        mask = size - 1
        if n:
            raw = np.frombuffer(bytes(self._digests), dtype=np.uint8).reshape(n, w)[:, :8]
            home = np.ascontiguousarray(raw).view("<u8").ravel().astype(np.uint64)
            pending = np.arange(n, dtype=np.int64)
            target = (home & np.uint64(mask)).astype(np.int64)
            while len(pending):
                free = table[target] < 0
                # among the pending entries aiming at a free slot, the first (lowest position) wins
                order = np.lexsort((pending, target))
                t_sorted, p_sorted, f_sorted = target[order], pending[order], free[order]
                first = np.ones(len(order), dtype=bool)
                first[1:] = t_sorted[1:] != t_sorted[:-1]
                win = first & f_sorted
                table[t_sorted[win]] = p_sorted[win].astype(np.int32)
                keep = ~win
                pending = p_sorted[keep]
                target = (t_sorted[keep] + 1) & mask
        self._table = array("i", table.tobytes())
        self._mask = mask
