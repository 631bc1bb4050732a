"""Writing the report's outputs: any code point of a record, any file name, and one error line per failure.

A dump's strings can carry a lone surrogate (a JSON ``"\\ud800"``), and a file name that is
not UTF-8 arrives as surrogate escapes; neither can be encoded as UTF-8, so every output
goes through one of three doors here: :func:`json_text` (JSON: the surrogate as its JSON
escape), :class:`OutputFile` and :func:`write_line` (text and HTML: ``backslashreplace``),
:func:`display_path` (file names in messages and in the HTML page: non-UTF-8 bytes as
``\\xff``). docs/audit.md ("Any code point, any file name") shows what each output gets.

A file that cannot be written raises :class:`OutputError` naming the file and the
reason; the command turns it into one line on stderr and exit status 2. Output files
are replaced only by a complete new version (:class:`OutputFile`).
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import sys
import tempfile
from typing import Any, Optional, TextIO

__all__ = ["OutputError", "OutputFile", "display_path", "dump_name", "json_text", "write_line", "stream_is_utf8",
           "silence_stdout"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def dump_name(path: str) -> str:
    """The dump as messages and the HTML page name it: ``-`` is standard input."""
    return "standard input" if path == "-" else display_path(path)


def display_path(path: Any) -> str:
    """``path`` for a human: undecodable bytes of a file name as ``\\xNN``, never an unencodable ``str``."""
    if isinstance(path, bytes):
        raw = path
    else:
        try:
            raw = os.fsencode(path)
        except UnicodeEncodeError:  # a lone surrogate that is no file-system escape (e.g. from a JSON config)
            return str(path).encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode(sys.getfilesystemencoding(), "backslashreplace")


def _json_escape(match: "re.Match[str]") -> str:
    return f"\\u{ord(match.group()):04x}"


def json_text(value: Any, *, ensure_ascii: bool = False, **kwargs: Any) -> str:
    """``json.dumps`` whose text is always encodable: a lone surrogate becomes its ``\\uXXXX`` escape.

    Surrogates only occur inside JSON strings (keys or values), where the escape is
    the standard spelling of the same code point.
    """
    return _SURROGATE.sub(_json_escape, json.dumps(value, ensure_ascii=ensure_ascii, **kwargs))


class OutputError(Exception):
    """An output file that cannot be created or written; the message names the file and the reason."""

    def __init__(self, path: Any, what: str, exc: OSError):
        self.path = path
        super().__init__(f"{display_path(path)}: cannot write the {what}: {exc.strerror or exc}")


class OutputFile:
    """A UTF-8 text file written by the report; ``what`` (e.g. ``"--html file"``) names it in errors.

    Created when the run starts, so a path that cannot be written fails before the dump
    is read. A regular file (or a new one) is written to a temporary file next to it and
    renamed over it by :meth:`close`: a run that fails leaves the previous file as it
    was, never an empty or half-written one. Anything else that exists (``/dev/stdout``,
    a FIFO, a shell's ``>(gzip > pairs.gz)``) is written directly.

    ``backslashreplace``: the only code points UTF-8 cannot encode are surrogates, so
    this shows them as ``\\udXXX`` instead of failing; JSON writers escape them first
    (:func:`json_text`), which gives the same six characters.
    """

    def __init__(self, path: Any, what: str):
        self.path, self.what = path, what
        self._target: Optional[str] = None  # the file the temporary one replaces on success
        self._tmp: Optional[str] = None
        try:
            self._f: TextIO = self._open()
        except OSError as exc:
            raise OutputError(path, what, exc) from None

    def _open(self) -> TextIO:
        target = os.path.realpath(self.path)  # through a symlink: replace the file, keep the link
        try:
            mode: Optional[int] = os.stat(target).st_mode
        except FileNotFoundError:
            mode = None
        if mode is not None and not stat.S_ISREG(mode):
            return open(self.path, "w", encoding="utf-8", errors="backslashreplace")
        if mode is None:
            umask = os.umask(0)  # what an ordinary open() would give a new file
            os.umask(umask)
            mode = 0o666 & ~umask
        fd, self._tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp",
                                         dir=os.path.dirname(target))
        try:
            os.fchmod(fd, stat.S_IMODE(mode))
            f = os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace")
        except BaseException:
            os.close(fd)
            self._discard()
            raise
        self._target = target
        return f

    def write(self, text: str) -> None:
        try:
            self._f.write(text)
        except OSError as exc:
            raise OutputError(self.path, self.what, exc) from None

    def close(self) -> None:
        """Flush and close, then put the file in place; a full disk shows up here for the last part."""
        if self._f.closed:
            return
        try:
            self._f.close()
            if self._tmp is not None:
                os.replace(self._tmp, self._target)  # type: ignore[arg-type]
                self._tmp = None
        except OSError as exc:
            self._discard()
            raise OutputError(self.path, self.what, exc) from None

    def abort(self) -> None:
        """Close without putting anything in place (the run failed)."""
        with contextlib.suppress(OSError):
            self._f.close()
        self._discard()

    def _discard(self) -> None:
        if self._tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._tmp)
            self._tmp = None

    def __enter__(self) -> "OutputFile":
        return self

    def __exit__(self, exc_type: Any, *exc_info: Any) -> None:
        if exc_type is None:
            self.close()
        else:  # already failing: the first error is the one to report
            self.abort()


def stream_is_utf8(stream: Optional[TextIO] = None) -> bool:
    encoding = getattr(stream if stream is not None else sys.stdout, "encoding", None) or "utf-8"
    return encoding.lower().replace("-", "").replace("_", "") in ("utf8", "utf8sig")


def write_line(text: str, stream: Optional[TextIO] = None) -> None:
    """Write ``text`` and a newline to ``stream`` (stdout): what its encoding cannot hold as backslash escapes.

    Whatever the stream's own error handler (``strict`` under most UTF-8 locales,
    ``surrogateescape`` under ``C.UTF-8``, which would emit raw invalid bytes).
    """
    stream = stream if stream is not None else sys.stdout
    encoding = getattr(stream, "encoding", None) or "utf-8"
    stream.write(text.encode(encoding, "backslashreplace").decode(encoding) + "\n")
    stream.flush()


def silence_stdout() -> None:
    """After a broken pipe on stdout (``| head``): point it at /dev/null, so the interpreter's last flush
    at exit does not fail again with a message on stderr."""
    with contextlib.suppress(OSError, ValueError, AttributeError):  # no file descriptor (an in-process caller's stdout)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
