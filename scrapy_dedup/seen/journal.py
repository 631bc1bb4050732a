"""The frontier journal: which requests a crawl admitted and has not finished, kill-safe (no Scrapy imports).

Why: a seen set and a request queue are two stores, and after a SIGKILL they disagree
(requests lost, or fetched twice: :mod:`scrapy_dedup.jobdir`, docs/reliability.md).
This journal is the one record both are repaired from.

One append-only file. Each record is framed and checksummed; it is written
with one ``write`` system call, so a killed process leaves every whole record
it wrote in the kernel's hands (a power loss is another matter: records are
not fsynced one by one):

* ``A`` (admitted): a sequence number, the request's fingerprint (empty for a
  request that bypasses the seen set) and an opaque payload (the serialized
  request). Written *before* the caller marks the request seen, so no request
  is ever seen and unrecorded.
* ``D`` (done): a sequence number whose request is finished: its page was
  handled and everything it produced was admitted first.
* ``O`` (opened) and ``C`` (closed cleanly): a run's start and its clean end,
  after which the caller's own queue can be trusted.

:meth:`FrontierJournal.open` reads the file back: every admitted fingerprint
(to put back into a seen set restored from an older checkpoint), the pending
requests (admitted, not done), and whether the last run closed cleanly. A
torn record at the end (a kill in mid-write) is cut off and counted; a record
whose checksum fails anywhere else stops the reading there and is reported
too. :meth:`compact` rewrites the file atomically with only the pending
requests, once the seen set has been checkpointed (so finished requests'
fingerprints are safe in it): the file stays the size of the frontier, not of
the crawl.
"""
from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from scrapy_dedup._util.files import atomic_write

MAGIC = b"scrapy-dedup frontier journal 1\n"
_FRAME = struct.Struct("<IIc")  # body length, CRC-32 of kind + body, kind
_SEQ = struct.Struct("<Q")
ADMITTED, DONE, OPENED, CLOSED = b"A", b"D", b"O", b"C"
_KINDS = (ADMITTED, DONE, OPENED, CLOSED)
#: a record longer than this is taken for corruption, not read into memory
MAX_RECORD = 64 << 20


class JournalError(ValueError):
    """A journal file that is not one (bad magic line): refused, never read as empty."""


@dataclass
class Replay:
    """What a journal file held when it was opened."""

    #: fingerprints of every request admitted since the last compaction (pending or done)
    fingerprints: list[bytes] = field(default_factory=list)
    #: sequence number -> (fingerprint, payload) of requests admitted and not done, in admission order
    pending: dict[int, tuple[bytes, bytes]] = field(default_factory=dict)
    #: False when a run was opened and never closed cleanly (killed); True for a new journal too
    clean: bool = True
    #: runs recorded (opened) in the file
    runs: int = 0
    #: bytes cut off the end: a record torn by a kill, or everything after a damaged one
    cut_bytes: int = 0
    #: True when a whole record was damaged (bad checksum or kind), not merely torn at the end by a kill
    damaged: bool = False


def _frame(kind: bytes, body: bytes) -> bytes:
    return _FRAME.pack(len(body), zlib.crc32(body, zlib.crc32(kind)), kind) + body


def _admitted_body(seq: int, fingerprint: bytes, payload: bytes) -> bytes:
    return _SEQ.pack(seq) + bytes((len(fingerprint),)) + fingerprint + payload


class FrontierJournal:
    """An append-only, checksummed log of admitted and finished requests, in one file (see the module doc).

    Not thread-safe: the Scrapy adapter calls it from the reactor thread only.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._file: IO[bytes] | None = None
        self._next_seq = 1

    # --- reading ---

    def read(self) -> Replay:
        """What the file holds, without opening a run or changing the file (an empty Replay if there is none)."""
        return self._read()[0] if self.path.exists() else Replay()

    def open(self) -> Replay:
        """Read the file (if any), cut a torn tail, start appending; returns what it held."""
        replay, size = self._read() if self.path.exists() else (Replay(), 0)
        self._file = open(self.path, "r+b" if self.path.exists() else "w+b", buffering=0)  # noqa: SIM115
        if size == 0:
            self._file.write(MAGIC)
        else:
            self._file.truncate(size)  # a torn or damaged tail must not sit before the next records
            self._file.seek(size)
        self._append(OPENED, b"")
        return replay

    def _read(self) -> tuple[Replay, int]:
        replay = Replay()
        done: set[int] = set()
        admitted: dict[int, tuple[bytes, bytes]] = {}
        open_runs = 0
        with open(self.path, "rb") as src:
            data_size = os.fstat(src.fileno()).st_size
            if src.read(len(MAGIC)) != MAGIC:
                raise JournalError(f"{self.path} is not a scrapy-dedup frontier journal (bad magic line)")
            good = len(MAGIC)
            for kind, body, end in _records(src):
                if kind in (_TORN, _DAMAGED):  # stop here: nothing after it can be trusted in order
                    replay.damaged = kind == _DAMAGED
                    break
                good = end
                if kind == ADMITTED:
                    (seq,) = _SEQ.unpack_from(body)
                    fp_len = body[_SEQ.size]
                    fingerprint = bytes(body[_SEQ.size + 1:_SEQ.size + 1 + fp_len])
                    admitted[seq] = (fingerprint, bytes(body[_SEQ.size + 1 + fp_len:]))
                    if fingerprint:
                        replay.fingerprints.append(fingerprint)
                    self._next_seq = max(self._next_seq, seq + 1)
                elif kind == DONE:
                    (seq,) = _SEQ.unpack_from(body)
                    done.add(seq)
                elif kind == OPENED:
                    replay.runs += 1
                    open_runs = 1
                elif kind == CLOSED:
                    open_runs = 0
        replay.cut_bytes = data_size - good
        replay.clean = open_runs == 0
        replay.pending = {seq: entry for seq, entry in admitted.items() if seq not in done}
        return replay, good

    # --- writing ---

    def _append(self, kind: bytes, body: bytes) -> None:
        if self._file is None:
            raise ValueError("the frontier journal is not open")
        self._file.write(_frame(kind, body))  # unbuffered: one write() per record

    def admitted(self, fingerprint: bytes, payload: bytes) -> int:
        """Record a request about to be admitted; returns its sequence number (for :meth:`done`)."""
        if len(fingerprint) > 255:
            raise ValueError("a fingerprint longer than 255 bytes cannot be journaled")
        seq = self._next_seq
        self._next_seq += 1
        self._append(ADMITTED, _admitted_body(seq, fingerprint, payload))
        return seq

    def done(self, seq: int) -> None:
        """Record that request ``seq`` is finished (everything it led to was admitted before)."""
        self._append(DONE, _SEQ.pack(seq))

    def compact(self) -> int:
        """Rewrite the file with only the pending requests (atomically); returns how many were kept.

        Call it only once every fingerprint admitted so far is safe in a seen-set
        checkpoint: the fingerprints of finished requests leave the journal.
        """
        if self._file is None:
            raise ValueError("the frontier journal is not open")
        self._file.close()
        self._file = None
        replay, _ = self._read()

        def write(out: IO[bytes]) -> None:
            out.write(MAGIC)
            out.write(_frame(OPENED, b""))  # this run is still open: a kill after the compaction is unclean
            for seq, (fingerprint, payload) in replay.pending.items():
                out.write(_frame(ADMITTED, _admitted_body(seq, fingerprint, payload)))

        atomic_write(self.path, write)
        self._file = open(self.path, "r+b", buffering=0)  # noqa: SIM115
        self._file.seek(0, os.SEEK_END)
        return len(replay.pending)

    def close(self, clean: bool = True) -> None:
        """Mark the run closed cleanly (the caller's queue then holds the pending requests) and close."""
        if self._file is None:
            return
        if clean:
            self._append(CLOSED, b"")
        self._file.close()
        self._file = None


_TORN, _DAMAGED = b"torn", b"damaged"


def _records(src: IO[bytes]) -> Iterator[tuple[bytes, memoryview, int]]:
    """(kind, body, end offset) per whole record, then (_TORN or _DAMAGED, b"", offset) if one is bad.

    Torn: the file ends inside the record (a kill in mid-write). Damaged: a whole
    record whose checksum or kind is wrong (the disk, or another writer).
    """
    offset = src.tell()
    while True:
        head = src.read(_FRAME.size)
        if not head:
            return
        if len(head) < _FRAME.size:
            yield _TORN, memoryview(b""), offset
            return
        length, crc, kind = _FRAME.unpack(head)
        if kind not in _KINDS or length > MAX_RECORD:
            yield _DAMAGED, memoryview(b""), offset
            return
        body = src.read(length)
        if len(body) < length:
            yield _TORN, memoryview(b""), offset
            return
        if zlib.crc32(body, zlib.crc32(kind)) != crc:
            yield _DAMAGED, memoryview(b""), offset
            return
        offset += _FRAME.size + length
        yield kind, memoryview(body), offset
