"""The types every input reader of the audit shares: an opened input, a page record, a bad line, the error.

Below both readers (:mod:`.dump` for JSON Lines, :mod:`.warc` for WARC), so that
either can build them and neither imports the other to do so.
"""
from __future__ import annotations

from typing import BinaryIO, NamedTuple, Optional, Union

__all__ = ["DumpError", "Input", "PageRecord", "BadLine"]


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
    """

    line: int
    url: str
    content: Union[str, bytes]
    is_html: bool
    encoding: Optional[str] = None


class BadLine(NamedTuple):
    line: int
    reason: str
