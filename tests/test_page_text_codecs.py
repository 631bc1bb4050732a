"""page_text(bytes) never raises, whatever codec a page (or its caller) declares.

Every codec name Python knows is declared in every place a declaration can be: a
``<meta charset>``, a ``<meta http-equiv="Content-Type">``, the XML declaration and the
``encoding=`` argument, on a UTF-8 page holding an ASCII paragraph and a non-ASCII one.
A declaration that cannot give the page's text (``rot13``, ``base64``, ``zip``, an
encoding in which the page's own ASCII markup is something else) counts as undeclared,
so the page reads as UTF-8 and its ASCII text is found.
"""
from __future__ import annotations

import codecs
import encodings
import encodings.aliases
import pkgutil
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_dedup.content.text import page_text

ASCII_WORDS = "Plain ASCII words come first"
OTHER_WORDS = "Café naïve résumé, Жук, 東京"
PAGE_TEXT = f"{ASCII_WORDS} {OTHER_WORDS}"  # the page read as the UTF-8 it is
BODY = f"<p>{ASCII_WORDS}</p><p>{OTHER_WORDS}</p>"


def codec_names() -> Iterator[str]:
    """Every codec name Python knows: the alias table's names and targets, and the encodings package's modules.

    The modules include the codecs that are not text encodings (``rot_13``, ``base64_codec``,
    ``zlib_codec``, ...), platform ones that do not exist here (``mbcs``, ``oem``) and the
    package's own helper module (``aliases``): names a page may declare all the same.
    """
    names = set(encodings.aliases.aliases) | set(encodings.aliases.aliases.values())
    names |= {module.name for module in pkgutil.iter_modules(encodings.__path__)}
    yield from sorted(names)


# Where a name is declared: name -> (body, encoding argument).
PLACES: dict[str, Callable[[str], tuple[bytes, str | None]]] = {
    "meta charset": lambda name: (
        f'<html><head><meta charset="{name}"></head><body>{BODY}</body></html>'.encode(), None),
    "meta http-equiv": lambda name: (
        f'<html><head><meta http-equiv="Content-Type" content="text/html; charset={name}"></head>'
        f"<body>{BODY}</body></html>".encode(), None),
    "xml declaration": lambda name: (
        f'<?xml version="1.0" encoding="{name}"?>\n<html><body>{BODY}</body></html>'.encode(), None),
    "encoding argument": lambda name: (f"<html><body>{BODY}</body></html>".encode(), name),
}
IN_PAGE = ("meta charset", "meta http-equiv", "xml declaration")


def test_the_generator_covers_the_codecs_of_the_issue():
    names = set(codec_names())
    assert {"rot13", "base64", "zip", "hex", "idna", "uu", "bz2", "undefined", "punycode", "unicode_escape",
            "raw_unicode_escape", "utf_16", "cp037", "utf_8", "latin_1"} <= names
    assert len(names) > 300


def _honoured_reading(body: bytes, name: str) -> str | None:
    """What codec ``name`` makes of ``body`` with replacement, None when it cannot decode it at all."""
    try:
        return body.decode(name, "replace")
    except Exception:
        return None


@pytest.mark.parametrize("place", IN_PAGE)
def test_any_codec_declared_in_the_page_never_raises_and_its_ascii_text_is_found(place):
    """A declaration in the page is used only when the page's own ASCII reads as itself in it."""
    failures = {}
    for name in codec_names():
        body, encoding = PLACES[place](name)
        try:
            text = page_text(body, encoding=encoding)
        except Exception as exc:  # noqa: BLE001 - the point of the test
            failures[name] = f"{type(exc).__name__}: {exc}"
            continue
        if ASCII_WORDS not in text:
            failures[name] = text
    assert not failures, failures


def test_any_codec_given_as_the_encoding_argument_never_raises():
    """The caller's declaration (the HTTP header's) is used whenever it can decode the page at all.

    So the ASCII words are found exactly when the codec reads ASCII as ASCII, or cannot decode
    (then the page reads as undeclared); a UTF-16 or EBCDIC declaration is honoured, not dropped.
    """
    failures = {}
    honoured_elsewhere = []
    for name in codec_names():
        body, encoding = PLACES["encoding argument"](name)
        try:
            text = page_text(body, encoding=encoding)
        except Exception as exc:  # noqa: BLE001 - the point of the test
            failures[name] = f"{type(exc).__name__}: {exc}"
            continue
        reading = _honoured_reading(body, name)
        if reading is None or ASCII_WORDS in reading:
            if ASCII_WORDS not in text:
                failures[name] = text
        else:
            honoured_elsewhere.append(name)
            if ASCII_WORDS in text:
                failures[name] = f"declaration dropped: {text}"
    assert not failures, failures
    assert {"utf_16", "utf_32", "cp037"} <= set(honoured_elsewhere)  # the test checks both branches


# (where, declared name, expected text): each declaration that cannot give the page's text
# reads as undeclared, i.e. as UTF-8, which this page is.
FALLBACK_TABLE = [
    ("meta charset", "rot13", PAGE_TEXT),
    ("meta charset", "base64", PAGE_TEXT),
    ("meta http-equiv", "zip", PAGE_TEXT),
    ("meta http-equiv", "hex", PAGE_TEXT),
    ("xml declaration", "uu", PAGE_TEXT),
    ("xml declaration", "bz2", PAGE_TEXT),
    ("meta charset", "idna", PAGE_TEXT),
    ("meta charset", "punycode", PAGE_TEXT),
    ("meta charset", "undefined", PAGE_TEXT),
    ("meta charset", "unicode_escape", PAGE_TEXT),
    ("xml declaration", "raw_unicode_escape", PAGE_TEXT),
    ("xml declaration", "UTF-16", PAGE_TEXT),  # a classic: XHTML saved as UTF-8 under a UTF-16 declaration
    ("meta charset", "utf-32", PAGE_TEXT),
    ("meta charset", "cp037", PAGE_TEXT),  # EBCDIC
    ("meta charset", "no-such-codec", PAGE_TEXT),
    ("encoding argument", "rot13", PAGE_TEXT),
    ("encoding argument", "base64", PAGE_TEXT),
    ("encoding argument", "undefined", PAGE_TEXT),
    ("encoding argument", "idna", PAGE_TEXT),
    ("encoding argument", "unicode_escape", PAGE_TEXT),
    ("encoding argument", "no such codec", PAGE_TEXT),
    ("encoding argument", "", PAGE_TEXT),
]


@pytest.mark.parametrize("place, name, expected", FALLBACK_TABLE)
def test_unusable_declarations_read_as_undeclared(place, name, expected):
    body, encoding = PLACES[place](name)
    assert page_text(body, encoding=encoding) == expected


# (body, encoding argument, expected text): an unusable declaration gives way to the next source.
NEXT_SOURCE_TABLE = [
    # the argument is unusable: the page's own (usable) declaration decides
    ('<meta charset="iso-8859-1"><p>caf\xe9</p>'.encode("latin-1"), "rot13", "café"),
    ('<meta charset="koi8-r"><p>\u0416\u0443\u043a</p>'.encode("koi8-r"), "base64", "\u0416\u0443\u043a"),
    # the page's declaration is unusable: the argument (the HTTP header's) decides as before
    ('<meta charset="rot13"><p>caf\xe9</p>'.encode("cp1252"), "cp1252", "café"),
    # a BOM decides before any declaration
    (codecs.BOM_UTF8 + '<meta charset="hex"><p>café</p>'.encode(), "zip", "café"),
    (codecs.BOM_UTF16_LE + '<meta charset="rot13"><p>café</p>'.encode("utf-16-le"), None, "café"),
]


@pytest.mark.parametrize("body, encoding, expected", NEXT_SOURCE_TABLE)
def test_an_unusable_declaration_gives_way_to_the_next_source(body, encoding, expected):
    assert page_text(body, encoding=encoding) == expected


# (body, encoding argument, expected text): usable declarations are used, as before.
USED_TABLE = [
    ('<meta charset="iso-8859-1"><p>caf\xe9</p>'.encode("latin-1"), None, "café"),
    ('<meta http-equiv="content-type" content="text/html; charset=shift_jis"><p>\u6771\u4eac</p>'
     .encode("shift_jis"), None, "\u6771\u4eac"),
    ('<?xml version="1.0" encoding="euc-kr"?><p>\ud55c\uad6d</p>'.encode("euc-kr"), None, "\ud55c\uad6d"),
    ("<p>caf\xe9</p>".encode("utf-16-le"), "utf-16-le", "café"),  # BOM-less UTF-16 by the header: honoured
]


@pytest.mark.parametrize("body, encoding, expected", USED_TABLE)
def test_usable_declarations_are_used(body, encoding, expected):
    assert page_text(body, encoding=encoding) == expected


_NAMES = st.one_of(st.sampled_from(sorted(codec_names())), st.text(max_size=30))
# Names that cannot break the markup they are written into (no quote, no "<", no "-->").
_SAFE_NAMES = st.one_of(st.sampled_from(sorted(codec_names())),
                        st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCXYZ0123456789-_. ", max_size=30))


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=2000), name=_NAMES, place=st.sampled_from(sorted(PLACES)))
def test_fuzz_any_bytes_any_declared_name_never_raises(body, name, place):
    declared, encoding = PLACES[place](name)
    for doc in (body, declared + body, body + declared):
        text = page_text(doc, encoding=encoding)
        assert text == " ".join(text.split())
        assert page_text(doc, encoding=name) == page_text(doc, encoding=name)  # deterministic


@settings(max_examples=300, deadline=None)
@given(name=_SAFE_NAMES, place=st.sampled_from(IN_PAGE), other=st.text(max_size=40))
def test_fuzz_an_ascii_page_is_found_under_any_declared_name(name, place, other):
    """Whatever the page declares and whatever non-ASCII text follows, its leading ASCII text is read."""
    body = PLACES[place](name)[0].replace(OTHER_WORDS.encode(), other.encode("utf-8", "surrogatepass"))
    assert ASCII_WORDS in page_text(body)
