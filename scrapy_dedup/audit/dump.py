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
from typing import BinaryIO, NamedTuple, Union

__all__ = ["FieldNames", "PageRecord", "BadLine", "BadLines", "DumpError", "read_lines", "parse_record",
           "open_dump"]

#: Reasons are kept at most this many per kind with their line numbers (the count is always exact).
MAX_EXAMPLES = 20


class DumpError(ValueError):
    """A dump that cannot be read at all, or a bad line under ``--strict``."""


@dataclass(frozen=True)
class FieldNames:
    """Names of the record fields: the URL, and the content (HTML preferred, else plain text)."""

    url: str = "url"
    html: str = "html"
    text: str = "text"


class PageRecord(NamedTuple):
    line: int
    url: str
    content: str
    is_html: bool


class BadLine(NamedTuple):
    line: int
    reason: str


@dataclass
class BadLines:
    """Count of bad lines by reason, with the first line numbers of each (for the report)."""

    count: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[int]] = field(default_factory=dict)
    seen_keys: dict[str, int] = field(default_factory=dict)  # keys of records missing a field: the hint

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
            out.append(f"  {n:>8}  {reason} (line {lines}{more})")
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

    def readinto(self, buffer) -> int:  # type: ignore[override]
        data = self._prefix[: len(buffer)] if self._prefix else self._read(len(buffer))
        self._prefix = self._prefix[len(data):]
        buffer[: len(data)] = data
        return len(data)


def _sniffed(raw: BinaryIO) -> BinaryIO:
    """``raw`` unchanged but decompressed if it starts with gzip's magic bytes; never seeks a stream that cannot.

    A FIFO, a pipe as ``/dev/stdin`` or a shell's ``<(zcat dump.gz)`` cannot seek back
    over the two bytes read: those are handed back in front of the rest instead.
    """
    if raw.seekable():
        start = raw.tell()
        magic = raw.read(2)
        raw.seek(start)
        stream = raw
    else:
        magic = raw.read(2)  # a buffered read returns 2 bytes unless the stream ends first
        stream = io.BufferedReader(_Prefixed(magic, raw), buffer_size=1 << 16)  # type: ignore[assignment]
    if magic == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=stream)  # type: ignore[return-value]
    return stream


@contextmanager
def open_dump(path: str) -> Iterator[BinaryIO]:
    """Open ``path`` for binary reading, closing what it opened on exit; ``-`` is stdin (left open).

    gzip is recognised by its magic bytes, not its name. Any readable file works,
    including streams that cannot seek (FIFOs, pipes, process substitution), read once.
    """
    if path == "-":
        raw: BinaryIO = sys.stdin.buffer
        owned = False
    else:
        try:
            raw = open(path, "rb")
        except OSError as exc:
            raise DumpError(f"cannot open dump: {exc.strerror or exc}") from None
        owned = True
    try:
        try:
            stream = _sniffed(raw)
        except OSError as exc:
            raise DumpError(f"cannot read dump: {exc.strerror or exc}") from None
        try:
            yield stream
        finally:
            if stream is not raw:
                stream.close()  # a GzipFile or a _Prefixed reader; neither closes ``raw``
    finally:
        if owned:
            raw.close()


def read_lines(stream: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line_number, raw_line)`` for every non-blank line (1-based numbers).

    A truncated or corrupt gzip stream (a dump copied while being written) ends the
    iteration with a :class:`DumpError` carrying the last good line number, and so
    does a read error of the file itself.
    """
    number = 0
    try:
        for number, raw in enumerate(stream, 1):
            if raw.strip():
                yield number, raw
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise DumpError(f"dump is truncated or corrupt after line {number}: {exc}") from None
    except OSError as exc:
        raise DumpError(f"cannot read dump after line {number}: {exc.strerror or exc}") from None


def parse_record(number: int, raw: Union[bytes, str], fields: FieldNames) -> Union[PageRecord, tuple[BadLine, tuple]]:
    """Turn one dump line into a :class:`PageRecord`, or ``(BadLine, record_keys)`` saying why not."""
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
    return PageRecord(number, url.strip(), content, is_html)
