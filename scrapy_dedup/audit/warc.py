"""Reading WARC files (ISO 28500, WARC/1.0 and 1.1; plain or gzip per record) for the audit and the DUST miner.

warcio parses the records (WARC and HTTP headers, de-chunking, ``Content-Encoding``);
this module frames them itself, so that a damaged record or gzip member costs that
record only, never the rest of the file, and decides what each record is for the
audit: a page (a 2xx response the crawl would fingerprint, by the crawl's own rules in
its order), a skipped response, a redirect (DUST evidence), a revisit resolved to the
record it repeats, a bad record with its reason, or a record only counted. The rules,
what is counted how and every kind of damage are in docs/audit.md ("WARC input").

Memory: one record's payload at a time (at most ``max_bytes`` of it), and per record a
few dozen bytes of digests to resolve revisits.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import mimetypes
import zlib
from array import array
from collections import Counter
from collections.abc import Iterator
from typing import Any, BinaryIO, NamedTuple, Optional, Union
from urllib.parse import urljoin

from scrapy_dedup.audit.records import BadLine, DumpError, Input, PageRecord
from scrapy_dedup.content.compact import DigestTable
from scrapy_dedup.content.engine import ContentFingerprinter
from scrapy_dedup.content.extract import ExtractionPolicy, extract_text
from scrapy_dedup.content.params import BY_KEY
from scrapy_dedup.content.structured import SNIFF_BYTES, looks_binary, structured_kind

__all__ = ["WarcReader", "WarcPage", "WarcRevisit", "WarcSkip", "WarcRedirect", "WarcBad", "audit_items",
           "crawl_log_records", "starts_like_warc", "warc_prefix_possible", "VERSIONS"]

#: The first line of a WARC record (and so of a WARC file).
VERSIONS = (b"WARC/1.0", b"WARC/1.1")
REDIRECT_STATUSES = frozenset((301, 302, 303, 307, 308))
#: Redirects followed from one URL to the page it leads to (Scrapy's REDIRECT_MAX_TIMES is 20; chains are short).
MAX_REDIRECT_HOPS = 20
#: Events of one gzip member held back until its checksum is read (a member is one record, unless the
#: whole file is one member: then they flow, checked as far as they can be).
_HELD_EVENTS = 256

# warcio logs a warning for each URI with a space (and fixes it): not this command's output.
logging.getLogger("warcio").addHandler(logging.NullHandler())
_BROTLI_CHECKED = False


def _brotli_for_warcio() -> None:
    """Make warcio decode ``Content-Encoding: br`` with the ``brotli`` package (the one Scrapy installs).

    warcio's own br decompressor is written for brotlipy's API (``decompress``, a settable
    ``unused_data``) and fails on every payload with Google's ``brotli`` (warcio issue 73):
    an adapter takes its place. Without any brotli package a br payload stays compressed:
    binary, so skipped as non-text, as a crawl without brotli would skip it.
    """
    global _BROTLI_CHECKED
    if _BROTLI_CHECKED:
        return
    _BROTLI_CHECKED = True
    from warcio.bufferedreaders import BufferedReader

    try:
        BufferedReader.DECOMPRESSORS["br"]()
        return  # warcio's own works (brotlipy)
    except Exception:  # noqa: BLE001 - KeyError (no brotli found) or the API mismatch
        pass
    try:
        import brotli
    except ImportError:
        return
    if not hasattr(brotli.Decompressor(), "process"):
        return

    class _BrotliDecompressor:
        unused_data = b""  # warcio looks for the next gzip member there; a br stream has none

        def __init__(self) -> None:
            self._decompressor = brotli.Decompressor()

        def decompress(self, data: bytes) -> bytes:
            return self._decompressor.process(data)

        def flush(self) -> bytes:
            return b""

    BufferedReader.DECOMPRESSORS["br"] = _BrotliDecompressor


def starts_like_warc(head: bytes) -> bool:
    """Whether ``head`` (the first bytes of a file, or of its first gzip member, decompressed) is a WARC record."""
    return head.startswith(VERSIONS) and head[8:9] in (b"\r", b"\n")


def warc_prefix_possible(head: bytes) -> bool:
    """Whether more bytes could still make ``head`` the start of a WARC file (for reading no more than needed)."""
    return len(head) < 9 and any(v.startswith(head[:8]) for v in VERSIONS) and head[8:9] in (b"", b"\r", b"\n")


# --- events ---------------------------------------------------------------------------------------

class WarcPage(NamedTuple):
    """A page to fingerprint: a 2xx text response's payload (at most ``max_bytes`` of it)."""

    number: int
    url: str
    body: bytes
    encoding: Optional[str]  # the HTTP header's charset
    date: Optional[str] = None  # WARC-Date: when it was fetched


class WarcRevisit(NamedTuple):
    """A revisit of the page of record ``target``, at ``url``."""

    number: int
    url: str
    target: int
    date: Optional[str] = None  # WARC-Date: when it was fetched again


class WarcSkip(NamedTuple):
    """A 2xx response that is not a page: ``kind`` is ``"non_html"`` (structured text) or ``"non_text"``."""

    number: int
    url: str
    kind: str


class WarcRedirect(NamedTuple):
    """A redirect from ``url`` to ``location`` (absolute)."""

    number: int
    url: str
    location: str
    status: int


class WarcBad(NamedTuple):
    """A record (or a stretch of the input) that could not be used, and why."""

    number: int
    reason: str


WarcEvent = Union[WarcPage, WarcRevisit, WarcSkip, WarcRedirect, WarcBad]

# What a record was, for the revisits that point at it.
_PAGE, _NON_HTML, _NON_TEXT, _REDIRECT, _OTHER, _BAD = range(6)
_SKIP_KINDS = {_NON_HTML: "non_html", _NON_TEXT: "non_text"}


class _KeyIndex:
    """Keys (record IDs, URIs, digests) -> (record number, what it was), in 8-byte digests; the first one stays."""

    def __init__(self) -> None:
        self.table = DigestTable(8)
        self.numbers = array("q")
        self.kinds = array("b")

    @staticmethod
    def _digest(key: str) -> bytes:
        return hashlib.blake2b(key.encode("utf-8", "surrogateescape"), digest_size=8).digest()

    def add(self, key: Optional[str], number: int, kind: int) -> None:
        if key:
            self.table.append(self._digest(key))
            self.numbers.append(number)
            self.kinds.append(kind)

    def get(self, key: Optional[str]) -> Optional[tuple[int, int]]:
        if not key:
            return None
        position = self.table.position_of(self._digest(key))
        if position is None:
            return None
        return self.numbers[position], self.kinds[position]


# --- gzip members ---------------------------------------------------------------------------------

class _Member(io.RawIOBase):
    """The decompressed bytes of one gzip member of ``source``; ends at the member's end (or its damage)."""

    def __init__(self, source: "_GzipMembers"):
        self.source = source
        self.decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self.ended = False
        self.damage: Optional[str] = None  # why the member could not be read to its end

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        wanted = len(buffer)
        while not self.ended:
            data = self.source.pending
            if not data:
                data = self.source.read_raw()
                if not data:
                    self.ended = True
                    self.damage = "the input ends inside a gzip member"
                    break
            try:
                out = self.decompressor.decompress(data, wanted)
            except zlib.error as exc:
                self.ended = True
                self.damage = f"damaged gzip data ({exc})"
                self.source.resync(data)
                break
            if self.decompressor.eof:
                self.ended = True
                self.source.pending = self.decompressor.unused_data
            else:
                self.source.pending = self.decompressor.unconsumed_tail
            if out:
                buffer[: len(out)] = out
                return len(out)
        return 0


class _GzipMembers:
    """The gzip members of a stream, one after the other; after a damaged one, the next gzip header found."""

    def __init__(self, raw: BinaryIO):
        self.raw = raw
        self._read = getattr(raw, "read1", raw.read)
        self.pending = b""

    def read_raw(self) -> bytes:
        return self._read(1 << 16)

    def resync(self, data: bytes) -> None:
        """Skip to the next gzip member header after the start of ``data`` (where the damage was found)."""
        buffer = data[1:]
        while True:
            found = buffer.find(b"\x1f\x8b\x08")
            if found >= 0:
                self.pending = buffer[found:]
                return
            keep = buffer[-2:]  # a header split across two reads
            more = self.read_raw()
            if not more:
                self.pending = b""
                return
            buffer = keep + more

    def __iter__(self) -> Iterator[_Member]:
        while True:
            self.pending = self.pending.lstrip(b"\x00")  # zero padding after a member, as gzip(1) allows
            if not self.pending:
                self.pending = self.read_raw()
                if not self.pending:
                    return
                continue
            member = _Member(self)
            yield member
            while not member.ended:  # the reader left the member before its end: read it out
                if not member.read(1 << 16):
                    break


# --- the reader -----------------------------------------------------------------------------------

# Scrapy's scrapy.responsetypes: the types it makes a TextResponse of (besides text/*), and its binary_is_text.
_SCRAPY_TEXT_TYPES = frozenset((
    "application/atom+xml", "application/rdf+xml", "application/rss+xml", "application/xhtml+xml",
    "application/vnd.wap.xhtml+xml", "application/xml", "application/json", "application/x-json",
    "application/json-amazonui-streaming", "application/javascript", "application/x-javascript",
))
_SCRAPY_BINARY_BYTES = bytes(b for b in range(1, 32) if b not in (9, 10, 13))
_MIME_TYPES = mimetypes.MimeTypes()  # Python's built-in table only: the same on every machine


def _is_text_type(essence: str) -> bool:
    return essence.startswith("text/") or essence in _SCRAPY_TEXT_TYPES


def _scrapy_makes_text(content_type: Optional[str], url: str, body: bytes) -> bool:
    """Would Scrapy make a ``TextResponse`` of this response? By the Content-Type, the URL's extension, the body."""
    essence = (content_type or "").split(";", 1)[0].strip().lower()
    if _is_text_type(essence):
        return True
    try:
        guessed, encoding = _MIME_TYPES.guess_type(url) if url else (None, None)
    except ValueError:  # a URL urllib cannot split
        guessed, encoding = None, None
    if guessed and not encoding and _is_text_type(guessed):
        return True
    head = body[:5000]
    return len(head.translate(None, _SCRAPY_BINARY_BYTES)) == len(head)


def _page_kind(content_type: Optional[str], url: str, body: bytes) -> int:
    """The crawl's decision for a 2xx response (the crawl's DedupExtension: structured first, then binary or
    not text)."""
    kind = structured_kind(content_type, body[:SNIFF_BYTES])
    if looks_binary(body) or (kind is None and not _scrapy_makes_text(content_type, url, body)):
        return _NON_TEXT
    if kind is not None:
        return _NON_HTML
    return _PAGE


def _charset(content_type: Optional[str]) -> Optional[str]:
    from w3lib.encoding import http_content_type_encoding

    return http_content_type_encoding(content_type) if content_type else None


def _status(http_headers: Any) -> Optional[int]:
    try:
        code = int(http_headers.get_statuscode())
    except (AttributeError, TypeError, ValueError):
        return None
    return code if 100 <= code <= 999 else None


class _Outcome(NamedTuple):
    """What one record gave: its event (None: only counted), what it was for later revisits, its count's name."""

    event: Optional[WarcEvent]
    kind: int
    counter: Optional[str]  # the count it adds to (a field named count would hide tuple.count)
    location: Optional[str] = None  # a redirect's target
    target: Optional[int] = None  # a revisit's record: later revisits of this one resolve to it


class WarcReader:
    """The events of a WARC stream (:class:`WarcPage`, :class:`WarcRevisit`, ...), in record order.

    ``compressed``: the stream is gzip members (a ``.warc.gz``). ``max_bytes``: payload
    bytes kept of a page (the rest is read past). ``counts`` holds, once read, the
    records by type (``type/response``, ...) and the responses by what they were
    (``pages``, ``skipped_non_html``, ``redirects``, ``status/4xx``, ...).
    A read error of the input itself ends the iteration with a ``DumpError``.
    """

    def __init__(self, stream: BinaryIO, *, compressed: bool, max_bytes: int):
        from warcio.recordloader import ArcWarcRecordLoader

        _brotli_for_warcio()
        self.stream = stream
        self.compressed = compressed
        self.max_bytes = max_bytes
        self.counts: Counter = Counter()
        self.number = 0  # records read so far
        self._loader = ArcWarcRecordLoader(verify_http=False, arc2warc=False)
        self._ids = _KeyIndex()  # WARC-Record-ID
        self._captures = _KeyIndex()  # WARC-Target-URI + WARC-Date
        self._uris = _KeyIndex()  # WARC-Target-URI (first capture)
        self._digests = _KeyIndex()  # WARC-Payload-Digest (first record with it)
        self._locations: dict[int, str] = {}  # number of a redirect record -> its Location

    # -- framing --

    def __iter__(self) -> Iterator[WarcEvent]:
        try:
            if self.compressed:
                yield from self._members()
            else:
                yield from self._records(self.stream)
        except OSError as exc:
            raise DumpError(f"cannot read the WARC input after record {self.number}: {exc.strerror or exc}") from None

    def _members(self) -> Iterator[WarcEvent]:
        for member in _GzipMembers(self.stream):
            before = self.number
            held: list[WarcEvent] = []
            for event in self._records(io.BufferedReader(member, buffer_size=1 << 16)):
                held.append(event)
                if len(held) >= _HELD_EVENTS:
                    yield from held
                    held = []
            if member.damage is not None:
                # A CRC error shows at the member's end: none of its records can be trusted.
                self.counts["damaged_gzip_members"] += 1
                if held:
                    yield from [WarcBad(e.number, f"in a damaged gzip member: {member.damage}") for e in held]
                elif self.number > before:  # its records were only counted (a request, ...): one line for them
                    yield WarcBad(self.number, f"in a damaged gzip member: {member.damage}")
                else:  # not even a header could be read: the member was a record (one per member, as written)
                    self.number += 1
                    self.counts["records"] += 1
                    yield WarcBad(self.number, f"{member.damage}; skipped to the next gzip member")
            else:
                yield from held

    def _records(self, segment: BinaryIO) -> Iterator[WarcEvent]:
        """The records of one stretch of WARC bytes (a whole plain file, or one gzip member)."""
        line = b""
        while True:
            if not line:
                line = segment.readline()
                while line and not line.strip():
                    line = segment.readline()
                if not line:
                    return
                if line.rstrip(b"\r\n") not in VERSIONS:
                    yield WarcBad(self.number + 1, "not a WARC record header (a wrong Content-Length before it?); "
                                                   "skipped to the next record")
                    line = self._next_header_line(segment)
                    if not line:
                        return
            event, line = self._record(segment, line)
            if event is not None:
                yield event

    @staticmethod
    def _next_header_line(segment: BinaryIO) -> bytes:
        """Lines skipped up to the next ``WARC/1.x`` line (returned), or b"" at the end."""
        while True:
            line = segment.readline()
            if not line or line.rstrip(b"\r\n") in VERSIONS:
                return line

    def _record(self, segment: BinaryIO, first_line: bytes) -> tuple[Optional[WarcEvent], bytes]:
        """Read one record; its event (or None), and the next record's first line if it had to be searched for."""
        self.number += 1
        number = self.number
        self.counts["records"] += 1
        try:
            record = self._loader.parse_record_stream(segment, first_line, known_format="warc", no_record_parse=True)
        except OSError:
            raise
        except Exception as exc:  # noqa: BLE001 - any parser error on hostile bytes is one bad record
            return (WarcBad(number, f"unreadable WARC headers ({_short(exc)}); skipped to the next record"),
                    self._next_header_line(segment))
        headers = record.rec_headers
        rec_type = (record.rec_type or "").strip().lower() or "(none)"
        self.counts[f"type/{rec_type}"] += 1
        length = (headers.get_header("Content-Length") or "").strip()
        if not length.isdigit():  # without a length the record's end is unknown
            return (WarcBad(number, "no valid Content-Length; skipped to the next record"),
                    self._next_header_line(segment))
        outcome: Optional[_Outcome] = None
        try:
            if rec_type in ("response", "resource"):
                outcome = self._response(number, record, rec_type)
            elif rec_type == "revisit":
                outcome = self._revisit(number, record)
        finally:
            while record.raw_stream.read(1 << 16):  # read past the rest of the record
                pass
        if record.raw_stream.limit > 0 and (outcome is None or not isinstance(outcome.event, WarcBad)):
            outcome = _Outcome(WarcBad(number, "cut short: the input ends inside the record"), _BAD, None)
        if outcome is None:
            return None, b""
        self._index(number, record, rec_type, outcome)
        if outcome.counter:
            self.counts[outcome.counter] += 1
        return outcome.event, b""

    def _index(self, number: int, record: Any, rec_type: str, outcome: _Outcome) -> None:
        """Remember what the record was, under each key a revisit may name it by."""
        headers = record.rec_headers
        url = (headers.get_header("WARC-Target-URI") or "").strip()
        capture = _capture_key(url, headers.get_header("WARC-Date"))
        record_id = (headers.get_header("WARC-Record-ID") or "").strip()
        if rec_type == "revisit":  # it stands for its target: a revisit of this revisit resolves to the same record
            if outcome.target is not None:
                self._ids.add(record_id, outcome.target, outcome.kind)
                self._captures.add(capture, outcome.target, outcome.kind)
            return
        self._ids.add(record_id, number, outcome.kind)
        self._captures.add(capture, number, outcome.kind)
        self._uris.add(url, number, outcome.kind)
        self._digests.add(_digest_key(headers.get_header("WARC-Payload-Digest")), number, outcome.kind)
        if outcome.location is not None:
            self._locations[number] = outcome.location

    # -- record kinds --

    def _http_headers(self, record: Any) -> tuple[Any, Optional[int], Optional[str]]:
        """The record's HTTP headers and status (None without a readable status line), or why they are unreadable."""
        uri = record.rec_headers.get_header("WARC-Target-URI") or ""
        try:
            http = self._loader.load_http_headers(record.rec_type, uri, record.raw_stream, record.length)
        except OSError:
            raise
        except Exception as exc:  # noqa: BLE001 - any parser error on hostile bytes is one bad record
            return None, None, f"unreadable HTTP headers ({_short(exc)})"
        return http, _status(http), None

    def _response(self, number: int, record: Any, rec_type: str) -> _Outcome:
        headers = record.rec_headers
        url = (headers.get_header("WARC-Target-URI") or "").strip()
        if not url.lower().startswith(("http:", "https:")):
            # dns:, whois:, and a crawler's own files as resources (wget: metadata://...arguments.txt): no page
            return _Outcome(None, _OTHER, "not_http")
        truncated = headers.get_header("WARC-Truncated")
        if truncated is not None:
            reason = f"truncated by the crawler (WARC-Truncated: {truncated.strip() or 'unspecified'})"
            return _Outcome(WarcBad(number, reason), _BAD, None)
        if rec_type == "resource":  # a document captured without HTTP: the record's type is the document's
            content_type = headers.get_header("Content-Type")
        else:
            http, status, problem = self._http_headers(record)
            if problem is not None or status is None:
                return _Outcome(WarcBad(number, problem or "no readable HTTP status line"), _BAD, None)
            record.http_headers = http
            content_type = http.get_header("Content-Type")
            redirect = _redirect(number, url, http, status)
            if redirect is not None:
                return redirect
            if not 200 <= status < 300:
                return _Outcome(None, _OTHER, f"status/{status // 100}xx")
        body, problem = self._payload(record)
        if problem is not None:
            return _Outcome(WarcBad(number, problem), _BAD, None)
        kind = _page_kind(content_type, url, body)
        if kind != _PAGE:
            name = _SKIP_KINDS[kind]
            return _Outcome(WarcSkip(number, url, name), kind, f"skipped_{name}")
        if len(body) > self.max_bytes:
            self.counts["longer_than_max_bytes"] += 1
        return _Outcome(WarcPage(number, url, body[: self.max_bytes], _charset(content_type),
                                 headers.get_header("WARC-Date")), _PAGE, "pages")

    def _payload(self, record: Any) -> tuple[bytes, Optional[str]]:
        """The payload's first ``max_bytes + 1`` bytes, de-chunked and decoded; or the reason it cannot be read."""
        captured = io.StringIO()
        try:
            with contextlib.redirect_stderr(captured):  # warcio reports a failed decompression there
                body = record.content_stream().read(self.max_bytes + 1)
        except OSError:
            raise
        except Exception as exc:  # noqa: BLE001 - any decoder's error: the record is bad, the run goes on
            return b"", f"unreadable payload ({_short(exc)})"
        if captured.getvalue().strip():
            encoding = record.http_headers.get_header("Content-Encoding") if record.http_headers else None
            return b"", f"payload could not be decoded (Content-Encoding: {(encoding or '?').strip()})"
        return body, None

    def _revisit(self, number: int, record: Any) -> _Outcome:
        headers = record.rec_headers
        url = (headers.get_header("WARC-Target-URI") or "").strip()
        self.counts["revisits"] += 1
        http, status, _ = self._http_headers(record)  # unreadable ones do no harm: they only matter for a redirect
        redirect = _redirect(number, url, http, status)
        if redirect is not None:
            return redirect
        refers_uri = (headers.get_header("WARC-Refers-To-Target-URI") or "").strip().strip("<>")  # wget's brackets
        found = (self._ids.get((headers.get_header("WARC-Refers-To") or "").strip())
                 or self._captures.get(_capture_key(refers_uri, headers.get_header("WARC-Refers-To-Date")))
                 or self._digests.get(_digest_key(headers.get_header("WARC-Payload-Digest")))
                 or self._uris.get(refers_uri))
        if found is None:
            return _Outcome(WarcBad(number, "revisit of a record not in this input"), _BAD, None)
        target, kind = found
        if kind == _PAGE:
            return _Outcome(WarcRevisit(number, url, target, headers.get_header("WARC-Date")), kind,
                            "revisits_of_pages", target=target)
        if kind in _SKIP_KINDS:
            name = _SKIP_KINDS[kind]
            return _Outcome(WarcSkip(number, url, name), kind, f"skipped_{name}", target=target)
        if kind == _REDIRECT and target in self._locations:
            location = self._locations[target]
            return _Outcome(WarcRedirect(number, url, location, 0), kind, "redirects", location, target)
        if kind == _BAD:
            return _Outcome(WarcBad(number, f"revisit of a damaged record (record {target})"), kind, None,
                            target=target)
        return _Outcome(None, kind, "revisits_of_other", target=target)


def _redirect(number: int, url: str, http: Any, status: Optional[int]) -> Optional[_Outcome]:
    """The outcome of a redirect record (a status of ``REDIRECT_STATUSES`` with a ``Location``), else None."""
    if status is None or status not in REDIRECT_STATUSES:
        return None
    location = (http.get_header("Location") or "").strip()
    if not location:
        return None
    location = _absolute(url, location)
    return _Outcome(WarcRedirect(number, url, location, status), _REDIRECT, "redirects", location)


def _absolute(base: str, location: str) -> str:
    """``location`` resolved against ``base``; as it is when either is no parsable URL (``http://[::1``)."""
    try:
        return urljoin(base, location)
    except ValueError:
        return location


def _capture_key(uri: Optional[str], date: Optional[str]) -> Optional[str]:
    return f"{uri.strip()} {date.strip()}" if uri and date else None


def _digest_key(digest: Optional[str]) -> Optional[str]:
    """``sha1:ABC...`` with the algorithm's name in lower case (tools differ), the value as written."""
    if not digest or ":" not in digest:
        return None
    algorithm, _, value = digest.strip().partition(":")
    return f"{algorithm.lower()}:{value.strip()}"


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = text if len(text) <= 80 else text[:77] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --- the audit's items ----------------------------------------------------------------------------

def audit_items(reader: WarcReader) -> Iterator[tuple[int, Any]]:
    """The audit runner's ``(number, item)`` stream of a WARC reader.

    ``item`` is a :class:`PageRecord` (its payload to extract and fingerprint, in a
    worker), or a decision already taken: ``("skip", number, kind)``, ``("revisit",
    number, url, target_number, date)``, ``("bad", BadLine, ())``. Redirects and the records
    the audit ignores are only counted (``reader.counts``).
    """
    for event in reader:
        if isinstance(event, WarcPage):
            yield event.number, PageRecord(event.number, event.url, event.body, True, event.encoding, event.date)
        elif isinstance(event, WarcRevisit):
            yield event.number, ("revisit", event.number, event.url, event.target, event.date)
        elif isinstance(event, WarcSkip):
            yield event.number, ("skip", event.number, event.kind)
        elif isinstance(event, WarcBad):
            yield event.number, ("bad", BadLine(event.number, event.reason), ())


# --- the DUST miner's records ---------------------------------------------------------------------

def crawl_log_records(source: Input, stats: Counter, policy: ExtractionPolicy) -> Iterator[dict]:
    """Crawl-log records (as ``DEDUP_LOG_FILE`` writes them) of the pages of a WARC input, for the DUST miner.

    Each page extracted by ``policy`` and fingerprinted as the crawl does by default: ``{"url",
    "exact_hash", "simhash", "words"}``; a revisit gives its page's fingerprint at its own URL, a
    redirect its target page's (through chains), once the input is read (docs/dust.md: "From a WARC").
    Bad records are counted in ``stats["bad_lines"]``, the reader's counts as ``warc/<name>``.
    """
    fingerprinter = ContentFingerprinter(shingle_size=BY_KEY["shingle_size"].default, bits=64,
                                         min_words=policy.min_words, sketch_size=0)
    reader = WarcReader(source.stream, compressed=source.compressed, max_bytes=policy.max_bytes)
    prints: dict[int, tuple[str, str, int]] = {}  # page record number -> (exact hash, simhash, words)
    page_of_url: dict[str, int] = {}  # URL -> number of its first page record
    redirects: dict[str, str] = {}  # URL -> where it redirects (its first redirect)
    for event in reader:
        if isinstance(event, WarcPage):
            try:
                text = extract_text(event.body, policy, encoding=event.encoding).text
            except Exception:  # noqa: BLE001 - hostile markup: the record is skipped, counted
                stats["bad_lines"] += 1
                continue
            fp = fingerprinter.fingerprint(text)
            prints[event.number] = (fp.exact.hex(), format(fp.simhash, "016x"), fp.words)
            page_of_url.setdefault(event.url, event.number)
            yield _log_record(event.url, prints[event.number])
        elif isinstance(event, WarcRevisit):
            found = prints.get(event.target)
            if found is None:  # its page could not be fingerprinted
                stats["bad_lines"] += 1
                continue
            page_of_url.setdefault(event.url, event.target)
            yield _log_record(event.url, found)
        elif isinstance(event, WarcRedirect):
            redirects.setdefault(event.url, event.location)
        elif isinstance(event, WarcBad):
            stats["bad_lines"] += 1
    for name, count in reader.counts.items():
        stats[f"warc/{name}"] += count
    for start in redirects:
        if start in page_of_url:
            continue  # fetched itself too: its own page is its evidence
        url, hops = start, 0
        while url in redirects and hops < MAX_REDIRECT_HOPS:
            url, hops = redirects[url], hops + 1
        number = page_of_url.get(url)
        if number is None:
            stats["warc/redirects_to_no_page"] += 1  # the page it leads to is not in the input (or not a page)
            continue
        stats["warc/redirects_as_evidence"] += 1
        yield _log_record(start, prints[number])


def _log_record(url: str, fingerprint: tuple[str, str, int]) -> dict:
    exact, simhash, words = fingerprint
    return {"url": url, "exact_hash": exact, "simhash": simhash, "words": words}


# --- the report's lines ---------------------------------------------------------------------------

_RESPONSE_COUNTS = (("pages", "pages"), ("skipped_non_html", "non-HTML (skipped)"),
                    ("skipped_non_text", "non-text (skipped)"), ("redirects", "redirects"),
                    ("status/1xx", "status 1xx"), ("status/3xx", "other 3xx"), ("status/4xx", "status 4xx"),
                    ("status/5xx", "status 5xx"), ("not_http", "not HTTP (dns:, a crawler's own files)"),
                    ("longer_than_max_bytes", "pages longer than max_bytes (their first max_bytes used)"))
_REVISIT_COUNTS = (("revisits_of_pages", "of pages, counted as copies of them"),
                   ("revisits_of_other", "of other records, ignored"))


def describe_counts(counts: dict) -> list[str]:
    """The text report's WARC block: records by type, what the responses were, what the revisits were."""
    types = sorted(((k[5:], v) for k, v in counts.items() if k.startswith("type/")), key=lambda kv: (-kv[1], kv[0]))
    lines = [f"WARC records:        {counts.get('records', 0)}"
             + (f" ({', '.join(f'{name} {n}' for name, n in types)})" if types else "")]
    responses = [f"{label} {counts[key]}" for key, label in _RESPONSE_COUNTS if counts.get(key)]
    if responses:
        lines.append(f"  responses:         {', '.join(responses)}")
    if counts.get("revisits"):
        revisits = [f"{counts[key]} {label}" for key, label in _REVISIT_COUNTS if counts.get(key)]
        lines.append(f"  revisits:          {counts['revisits']}" + (f" ({', '.join(revisits)})" if revisits else ""))
    if counts.get("damaged_gzip_members"):
        lines.append(f"  damaged gzip members: {counts['damaged_gzip_members']} (their records are bad records)")
    return lines
