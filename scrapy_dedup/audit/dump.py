"""Reading a scrape dump: JSON Lines, optionally gzip-compressed, one page per line.

A dump is whatever a crawl wrote (``scrapy crawl -O pages.jsonl``, a custom
pipeline, another tool), so bad lines are expected: invalid JSON, a record
without the URL or content field, a field of the wrong type, undecodable bytes.
Policy: each bad line is counted with its line number and reason
(:class:`BadLines`) and skipped; the run goes on unless ``strict`` is set, in
which case the first bad line raises :class:`DumpError`. An empty line is not
a page and not an error.

The reader yields raw lines (bytes) with their numbers, and
:func:`parse_record` turns one line into a :class:`PageRecord`: the split lets
``--jobs N`` workers parse JSON in parallel while one process reads the file.

The other input format is WARC (:mod:`scrapy_dedup.audit.warc`): :func:`open_input`
tells the two apart by their first bytes, not their names, and :func:`input_items`
gives either one as the same ``(number, item)`` stream. The types both readers build
are in :mod:`scrapy_dedup.audit.records`.
"""
from __future__ import annotations

import gzip
import io
import json
import sys
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Optional, Union

from scrapy_dedup.audit.records import BadLine, DumpError, Input, PageRecord
from scrapy_dedup.audit.warc import WarcReader, audit_items, starts_like_warc, warc_prefix_possible

__all__ = ["FieldNames", "PageRecord", "BadLine", "BadLines", "DumpError", "read_lines", "parse_record",
           "decode_record", "page_record", "open_input", "Input", "input_items"]

#: Reasons are kept at most this many per kind with their line numbers (the count is always exact).
MAX_EXAMPLES = 20


@dataclass(frozen=True)
class FieldNames:
    """Names of the record fields: the URL, the content (HTML preferred, else plain text), the page's time."""

    url: str = "url"
    html: str = "html"
    text: str = "text"
    timestamp: Optional[str] = None


@dataclass
class BadLines:
    """Count of bad lines by reason, with the first line numbers of each (for the report)."""

    count: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[int]] = field(default_factory=dict)
    seen_keys: dict[str, int] = field(default_factory=dict)  # keys of records missing a field: the hint
    unit: str = "line"  # what the numbers count: JSON Lines lines, or WARC records

    def add(self, bad: BadLine, keys: tuple[str, ...] = ()) -> None:
        self.count += 1
        self.by_reason[bad.reason] = self.by_reason.get(bad.reason, 0) + 1
        lines = self.examples.setdefault(bad.reason, [])
        if len(lines) < MAX_EXAMPLES:
            lines.append(bad.line)
        for key in keys[:50]:
            if len(self.seen_keys) < 200 or key in self.seen_keys:
                self.seen_keys[key] = self.seen_keys.get(key, 0) + 1

    def to_dict(self) -> dict:
        return {"count": self.count,
                "reasons": [{"reason": r, "count": n, "lines": self.examples[r]}
                            for r, n in sorted(self.by_reason.items(), key=lambda kv: -kv[1])]}

    def describe(self, fields: FieldNames) -> list[str]:
        """Human lines for the text report: counts, first line numbers, and a field-name hint."""
        out = []
        for reason, n in sorted(self.by_reason.items(), key=lambda kv: -kv[1]):
            lines = ", ".join(map(str, self.examples[reason]))
            more = ", ..." if n > len(self.examples[reason]) else ""
            out.append(f"  {n:>8}  {reason} ({self.unit} {lines}{more})")
        if self.seen_keys and any(r.startswith("missing field") for r in self.by_reason):
            common = sorted(self.seen_keys, key=lambda k: -self.seen_keys[k])[:10]
            out.append(f"  hint: records have the fields {', '.join(common)}; choose them with "
                       f"--url-field / --html-field / --text-field (now {fields.url!r}, {fields.html!r}, "
                       f"{fields.text!r})")
        return out


class _Prefixed(io.RawIOBase):
    """The bytes already read from a stream that cannot seek (the sniffed magic), then the rest of it."""

    def __init__(self, prefix: bytes, stream: BinaryIO):
        self._prefix = prefix
        self._stream = stream
        self._read = getattr(stream, "read1", stream.read)  # at most one read: lines flow as a pipe delivers them

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._prefix[: len(buffer)] if self._prefix else self._read(len(buffer))
        self._prefix = self._prefix[len(data):]
        buffer[: len(data)] = data
        return len(data)


GZIP_MAGIC = b"\x1f\x8b"
#: raw bytes of a gzip member read at most to see whether it holds a WARC record (its header is within the first KB)
_GZIP_SNIFF_LIMIT = 1 << 16


def _sniff_gzip(read: Any, head: bytes) -> tuple[bytes, bool]:
    """``head`` (gzip's magic) and what more was read of the first member; whether it decompresses to a WARC header.

    Reads as little as a pipe has to give (``read`` is one read of at most the size asked),
    and stops as soon as the decompressed start says yes or no.
    """
    decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = b""
    raw = head
    fed = 0
    while True:
        try:
            out += decompressor.decompress(raw[fed:])
        except zlib.error:
            return raw, False  # not gzip after all, or damaged at once: JSON Lines' reader says so
        fed = len(raw)
        if starts_like_warc(out):
            return raw, True
        if not warc_prefix_possible(out) or decompressor.eof or len(raw) >= _GZIP_SNIFF_LIMIT:
            return raw, False
        more = read(4096)
        if not more:
            return raw, False
        raw += more


def _sniffed(raw: BinaryIO) -> Input:
    """``raw`` with its format told by its first bytes; never seeks a stream that cannot.

    gzip's magic bytes: decompressed for JSON Lines (``GzipFile``), left as it is for a
    WARC file (a ``.warc.gz`` is one gzip member per record: the WARC reader takes them
    one at a time). ``WARC/1.0`` or ``WARC/1.1``: a WARC file. Anything else: JSON Lines.
    A FIFO, a pipe as ``/dev/stdin`` or a shell's ``<(zcat dump.gz)`` cannot seek back
    over the bytes read: those are handed back in front of the rest instead.
    """
    seekable = raw.seekable()
    start = raw.tell() if seekable else 0
    read = getattr(raw, "read1", raw.read)  # at most one read: a pipe is not waited on for more than it has
    head = raw.read(2)  # a buffered read returns 2 bytes unless the stream ends first
    is_warc = False
    if head == GZIP_MAGIC:
        head, is_warc = _sniff_gzip(read, head)
    else:
        while warc_prefix_possible(head) and not starts_like_warc(head):
            more = read(16)
            if not more:
                break
            head += more
        is_warc = starts_like_warc(head)
    compressed = head[:2] == GZIP_MAGIC
    if seekable:
        raw.seek(start)
        stream = raw
    else:
        stream = io.BufferedReader(_Prefixed(head, raw), buffer_size=1 << 16)
    if is_warc:
        return Input("warc", stream, compressed)
    if compressed:
        return Input("jsonl", gzip.GzipFile(fileobj=stream), True)  # type: ignore[arg-type]
    return Input("jsonl", stream, False)


@contextmanager
def open_input(path: str, what: str = "dump") -> Iterator[Input]:
    """Open ``path`` for binary reading and tell its format, closing what it opened on exit; ``-`` is stdin (left open).

    The format (JSON Lines or WARC) and gzip are recognised by their first bytes, not the
    file's name. Any readable file works, including streams that cannot seek (FIFOs,
    pipes, process substitution), read once. ``what`` names the input in error messages.
    """
    if path == "-":
        raw: BinaryIO = sys.stdin.buffer
        owned = False
    else:
        try:
            raw = open(path, "rb")
        except OSError as exc:
            raise DumpError(f"cannot open {what}: {exc.strerror or exc}") from None
        owned = True
    try:
        try:
            source = _sniffed(raw)
        except OSError as exc:
            raise DumpError(f"cannot read {what}: {exc.strerror or exc}") from None
        try:
            yield source
        finally:
            if source.stream is not raw:
                source.stream.close()  # a GzipFile or a _Prefixed reader; neither closes ``raw``
    finally:
        if owned:
            raw.close()


def input_items(source: Input, *, max_bytes: int) -> tuple[Iterator[tuple[int, Any]], str, Any]:
    """The ``(number, item)`` stream of ``source``, what its numbers count, and the WARC reader (None for JSON Lines).

    JSON Lines: ``(line number, raw line)``, parsed by :func:`parse_record` (in a worker).
    WARC: :func:`scrapy_dedup.audit.warc.audit_items`; the reader's ``counts`` once the stream is read.
    """
    if source.format == "warc":
        reader = WarcReader(source.stream, compressed=source.compressed, max_bytes=max_bytes)
        return audit_items(reader), "record", reader
    return read_lines(source.stream), "line", None


def read_lines(stream: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line_number, raw_line)`` for every non-blank line (1-based numbers).

    A truncated or corrupt gzip stream (a dump copied while being written) ends the
    iteration with a :class:`DumpError` carrying the last good line number, and so
    does a read error of the file itself.
    """
    number = 0
    try:
        for number, raw in enumerate(stream, 1):
            if raw and not raw.isspace():  # (raw.strip() of a page's line would copy it)
                yield number, raw
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise DumpError(f"dump is truncated or corrupt after line {number}: {exc}") from None
    except OSError as exc:
        raise DumpError(f"cannot read dump after line {number}: {exc.strerror or exc}") from None


def parse_record(number: int, raw: Union[bytes, str], fields: FieldNames) -> Union[PageRecord, tuple[BadLine, tuple]]:
    """Turn one dump line into a :class:`PageRecord`, or ``(BadLine, record_keys)`` saying why not."""
    record = decode_record(number, raw)
    return record if isinstance(record, tuple) else page_record(number, record, fields)


def decode_record(number: int, raw: Union[bytes, str]) -> Union[dict, tuple[BadLine, tuple]]:
    """One dump line's JSON object, or ``(BadLine, ())`` saying why it is none."""
    try:
        record = json.loads(raw)
    except UnicodeDecodeError:
        return BadLine(number, "not UTF-8"), ()
    except ValueError:
        return BadLine(number, "invalid JSON"), ()
    except RecursionError:  # e.g. 100,000 nested brackets: json's C decoder gives up
        return BadLine(number, "JSON nested too deeply"), ()
    if not isinstance(record, dict):
        return BadLine(number, "not a JSON object"), ()
    return record


def page_record(number: int, record: dict, fields: FieldNames) -> Union[PageRecord, tuple[BadLine, tuple]]:
    """The :class:`PageRecord` of one decoded dump line (:func:`decode_record`), or ``(BadLine, record_keys)``."""
    url = record.get(fields.url)
    if url is None:
        return BadLine(number, f"missing field {fields.url!r}"), tuple(record)
    if not isinstance(url, str) or not url.strip():
        return BadLine(number, f"field {fields.url!r} is not a non-empty string"), ()
    content = record.get(fields.html)
    is_html = True
    if content is None:
        content = record.get(fields.text)
        is_html = False
    if content is None:
        return BadLine(number, f"missing field {fields.html!r} or {fields.text!r}"), tuple(record)
    if not isinstance(content, str):
        name = fields.html if is_html else fields.text
        return BadLine(number, f"field {name!r} is not a string"), ()
    stamp = record.get(fields.timestamp) if fields.timestamp else None
    return PageRecord(number, url.strip(), content, is_html, None, stamp)
