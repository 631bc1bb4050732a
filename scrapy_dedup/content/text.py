"""HTML -> the main text of a page, the input of the content fingerprints.

Fingerprints must change when the page's content changes and stay put when only
its chrome does (navigation, a rotated banner in ``<header>``, a ``<footer>``, a
search box or a login ``<form>``, inline scripts). :func:`page_text` therefore leaves
out a configurable set of elements (``DEFAULT_STRIP_TAGS``), any CSS selectors
given, comments and processing instructions, and collapses whitespace. ``form``
among the strip tags leaves out only the chrome forms (:func:`chrome_form_test`):
a form holding a text area's text, a list, a table or half of the body's text is
where the page's text is (a wiki's history list or source view, an ASP.NET
WebForms page) and is read like any block. Prices,
dates and numbers are kept: a changed price changes the exact hash, and the
near-duplicate layer then sees the two pages a few bits apart.

Word boundaries follow rendering: block-level elements (``p``, ``div``, ``td``,
``li``, ``br``, ...) separate words, inline ones (``b``, ``a``, ``span``, ...)
do not, so ``<p>foo</p><p>bar</p>`` gives ``"foo bar"`` and ``f<b>oo</b>`` gives
``"foo"``; reformatting the markup of the same text gives the same string.

Input can be ``str``, ``bytes`` or an already parsed lxml tree (Scrapy's
``response.selector.root``, or a parsel ``Selector``); a given tree is never
modified.

Bytes are decoded as Scrapy's ``response.text`` decodes them (w3lib: BOM, else the given
``encoding``, else the page's ``<meta>``/XML declaration, else UTF-8, bad bytes replaced),
except that a declaration that cannot give the page's text (no text encoding, no
character set, a codec that raises on the body, or one the page's own leading ASCII
contradicts) counts as absent, so the next source decides: where ``response.text``
raises or gives mojibake, :func:`page_text` reads the page as undeclared. docs/content-duplicates.md
("How a page is judged") lists the names.

How (speed matters: this runs once per fetched page): the rules are compiled once per
(strip tags, strip selectors) into a small XSLT stylesheet that libxslt runs over the
tree in C, read-only. The reference path it replaced (a private ``deepcopy``, stripped
elements cleared, spaces around block elements, text nodes joined) stays as the
definition the fast path is tested against, and runs where the stylesheet cannot: a
CSS selector without an XSLT pattern form (sibling combinators, positional
predicates), namespaced or XML-parsed trees, a libxslt failure (a pathologically deep
tree), control characters in the text (lxml refuses to set them). docs/benchmarks.md
has the measurements.
"""
from __future__ import annotations

import codecs
import copy
import re
import threading
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any, TypeVar, Union, cast

from lxml import etree
from w3lib.encoding import html_body_declared_encoding, read_bom, resolve_encoding, to_unicode

from scrapy_dedup.content.params import DEFAULT_STRIP_TAGS

__all__ = ["page_text", "page_blocks", "page_blocks_titled", "DEFAULT_STRIP_TAGS", "BLOCK_TAGS", "HtmlInput"]

HtmlInput = Union[str, bytes, bytearray, memoryview, "etree._Element", "etree._ElementTree"]
_T = TypeVar("_T")

#: Elements that separate words when rendered; every other element joins its text to its neighbours.
BLOCK_TAGS: tuple[str, ...] = (
    "address", "article", "aside", "blockquote", "body", "br", "button", "caption", "center", "dd",
    "details", "dialog", "dir", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form",
    "frame", "frameset", "h1", "h2", "h3", "h4", "h5", "h6", "head", "header", "hgroup", "hr", "html",
    "iframe", "img", "input", "legend", "li", "main", "menu", "nav", "noscript", "ol", "optgroup",
    "option", "p", "pre", "script", "section", "select", "style", "summary", "table", "tbody", "td",
    "template", "textarea", "tfoot", "th", "thead", "title", "tr", "ul",
)

# parsel (Scrapy's selectors) parses the same way: UTF-8 bytes into lxml's recovering HTML parser.
_LOCAL = threading.local()  # one parser per thread: an lxml parser must not be shared across threads


def _parser() -> etree.HTMLParser:
    parser = getattr(_LOCAL, "parser", None)
    if parser is None:
        # A plain etree parser: lxml.html's element classes cost a Python lookup per element.
        # huge_tree as parsel: without it libxml2 stops at 256 levels of nesting (parsel: about 2,048), so a page
        # would give different text in a crawl (Scrapy's tree) and from its bytes (truncated body, offline report).
        parser = _LOCAL.parser = etree.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True,
                                                  huge_tree=True)
    return parser

_TEXT_NODES = etree.XPath("descendant-or-self::text()", smart_strings=False)


def page_text(
    html: HtmlInput | Any,
    *,
    strip_tags: Iterable[str] = DEFAULT_STRIP_TAGS,
    strip_selectors: Iterable[str] = (),
    encoding: str | None = None,
) -> str:
    """Return the main text of ``html``: stripped elements, comments and markup left out, whitespace collapsed.

    ``html`` may be ``str``, ``bytes`` (decoded as the module doc says; never raises on any
    bytes or any declared name), an lxml element or element tree, or any object with an lxml ``.root`` (a
    parsel/Scrapy ``Selector``). A given tree is not modified. ``strip_tags`` are element
    names (case-insensitive, any namespace); ``strip_selectors`` are CSS selectors,
    validated on first use (``ValueError`` for a bad one).
    """
    return _text(*_parse(html, encoding), strip_tags, strip_selectors, " ", _collapse)


#: what separates blocks in the raw text of :func:`page_blocks`: a C1 control character, allowed in XML,
#: not whitespace, never in a real page (where a page holds one anyway, it ends a block there and is left
#: out); in the Latin-1 range, so that the text of an ASCII page stays a one-byte string (twice as fast)
BLOCK_SEPARATOR = "\x9e"


def page_blocks(
    html: HtmlInput | Any,
    *,
    strip_tags: Iterable[str] = DEFAULT_STRIP_TAGS,
    strip_selectors: Iterable[str] = (),
    encoding: str | None = None,
) -> list[str]:
    """The main text of ``html`` cut at block-level elements: ``" ".join(page_blocks(h)) == page_text(h)``.

    A block is the text between two block boundaries (:data:`BLOCK_TAGS`: a paragraph, a
    list item, a table cell, a heading, the text of a ``div`` up to its first child block),
    whitespace collapsed, empty blocks left out. Same arguments and same guarantees as
    :func:`page_text` (one pass of the same stylesheet, a block separator in place of the space).
    """
    return page_blocks_titled(html, strip_tags=strip_tags, strip_selectors=strip_selectors, encoding=encoding)[0]


def page_blocks_titled(
    html: HtmlInput | Any,
    *,
    strip_tags: Iterable[str] = DEFAULT_STRIP_TAGS,
    strip_selectors: Iterable[str] = (),
    encoding: str | None = None,
) -> tuple[list[str], str | None]:
    """:func:`page_blocks` and the page's name, from one parse (None without a title or a heading): what tells a
    page from a sibling that shares most of its text (``content/boilerplate.py``). The name is its ``<title>``,
    then one a line its headings (``h1`` to ``h6`` whose text is a block of the main text), then, after
    :data:`SUBTITLE_MARK`, one a line the short blocks right under its first heading (its subtitle: a wiki's
    "<- X" above the related changes of page X, a post's byline), whitespace collapsed. The next release's
    notes have their own title; a listing of another subject under the same title its own heading or subtitle."""
    root, owned = _parse(html, encoding)
    blocks = _text(root, owned, strip_tags, strip_selectors, BLOCK_SEPARATOR, _cut_blocks)
    title = _title(root)
    headings, subtitle = _headings(root, blocks, title)
    if title is None and not headings:
        return blocks, None
    name = "\n".join([title or "", *headings])[:MAX_NAME_CHARS]
    return blocks, name + SUBTITLE_MARK + "\n".join(subtitle) if subtitle else name


#: a page's title and headings are cut here: enough to tell siblings apart, bounded to remember
MAX_NAME_CHARS = 1000
#: in a page's name, what comes before its subtitle's lines (a control character: never in collapsed text)
SUBTITLE_MARK = "\x1d"
#: a subtitle is at most this many blocks right under the first heading, each of at most this many words
SUBTITLE_BLOCKS, SUBTITLE_WORDS = 2, 8
_HEADING_TAGS = ("h1", "h2", "h3", "h4", "h5", "h6")


def _headings(root: etree._Element | None, blocks: list[str], title: str | None) -> tuple[list[str], list[str]]:
    """The texts of the page's headings that are blocks of its main text (a heading in a stripped ``nav`` or
    ``header``, a site's logo, is not), in document order, whitespace collapsed; and the page's subtitle: the
    blocks right after the first of them, up to the next heading or the first block of more than
    :data:`SUBTITLE_WORDS` words, at most :data:`SUBTITLE_BLOCKS` (``title``: the ``<title>``, whose text may
    be the first block)."""
    if root is None or not blocks:
        return [], []
    kept = set(blocks)
    texts = (" ".join("".join(map(str, h.itertext())).split()) for h in root.iter(*_HEADING_TAGS))
    headings = [text for text in texts if text in kept]
    if not headings:
        return [], []
    first = 1 if blocks[0] == title and len(blocks) > 1 else 0
    at = blocks.index(headings[0], first) + 1 if headings[0] in blocks[first:] else len(blocks)
    subtitle: list[str] = []
    named = set(headings)
    for block in blocks[at:at + SUBTITLE_BLOCKS]:
        if block in named or block.count(" ") >= SUBTITLE_WORDS:
            break
        subtitle.append(block)
    return headings, subtitle


def _title(root: etree._Element | None) -> str | None:
    """The text of the page's ``<title>`` (an HTML tree's ``html/head/title``), whitespace collapsed."""
    if root is None or root.tag != "html":
        return None
    title = root.find("head/title")
    return None if title is None else " ".join("".join(map(str, title.itertext())).split())


def _text(root: etree._Element | None, owned: bool, strip_tags: Iterable[str], strip_selectors: Iterable[str],
          separator: str, collapse: Callable[[str], _T]) -> _T:
    """The text of the tree ``root`` (``owned``: see :func:`_parse`), blocks joined by ``separator``,
    given to ``collapse`` (:func:`_collapse`; :func:`_cut_blocks`: the blocks)."""
    if isinstance(strip_selectors, str):  # one selector given bare
        strip_selectors = (strip_selectors,)
    remover = _remover(_normalize_tags(strip_tags), tuple(strip_selectors), separator)
    if root is None:
        return collapse("")
    text = _fast_text(root, remover, owned, collapse)
    if text is not None:
        return text
    if not owned:
        root = _private_copy(root)
    return _reference_text(root, remover, collapse)


def _reference_text(root: etree._Element, remover: _Remover, collapse: Callable[[str], Any] | None = None) -> Any:
    """The definition of the page text, by mutating ``root`` (a private tree)."""
    _isolate(root, remover)
    # lxml-stubs type an XPath's result as any XPath value; a text() path yields strings only
    return (collapse or _collapse)("".join(cast("list[str]", _TEXT_NODES(root))))


def _collapse(raw: str) -> str:
    """Whitespace collapsed (any Unicode whitespace: ``str.split``, in C). A block separator is no
    whitespace: it survives, with at most a space on either side, and empty blocks between two."""
    return " ".join(raw.split())


def _cut_blocks(raw: str) -> list[str]:
    """The blocks of a raw text whose blocks are separated by :data:`BLOCK_SEPARATOR`, each collapsed, the empty
    ones left out: ``_collapse(raw).split(BLOCK_SEPARATOR)``, stripped, without collapsing the whole text first
    (a separator is no whitespace: it cuts where the collapsed text has it, with at most a space either side)."""
    return list(filter(None, map(" ".join, map(str.split, raw.split(BLOCK_SEPARATOR)))))  # (in C: most pieces empty)


def _fast_text(root: etree._Element, remover: _Remover, owned: bool,
               collapse: Callable[[str], Any] | None = None) -> Any:
    """The page text by the compiled stylesheet, read-only; None where only the reference path is exact."""
    transform = remover.transform()
    if transform is None or _has_namespaces(root):
        return None
    if not owned and not isinstance(root.getroottree().parser, etree.HTMLParser):
        return None  # an XML tree (entity references, CDATA, ...): the reference path defines it
    try:
        raw = str(transform(root))
    except etree.Error:  # e.g. libxslt's recursion limit on a hostile, deeply nested page
        return None
    if _has_control(raw):
        return None
    return (collapse or _collapse)(raw)


def _normalize_tags(tags: Iterable[str]) -> tuple[str, ...]:
    if isinstance(tags, str):  # a single name given bare: strip_tags="nav"
        tags = (tags,)
    return tuple(sorted({t.strip().lower() for t in tags if t and t.strip()}))


def _parse(html: Any, encoding: str | None) -> tuple[etree._Element | None, bool]:
    """The tree of ``html`` and whether it is ours: freshly parsed (True) or the caller's (False)."""
    if isinstance(html, (bytes, bytearray, memoryview)):
        return _parse_text(_decode(bytes(html), encoding)), True
    if isinstance(html, str):
        return _parse_text(html), True
    tree = getattr(html, "root", html)  # parsel.Selector -> its lxml root
    if isinstance(tree, etree._ElementTree):
        tree = tree.getroot()
    if isinstance(tree, etree._Element):
        if not isinstance(tree.tag, str):  # a comment or PI given as "the tree"
            return None, True
        return tree, False
    raise TypeError(f"page_text() takes str, bytes or an lxml tree, not {type(html).__name__}")


def _decode(body: bytes, encoding: str | None = None) -> str:
    """``body`` as text, by the first usable of: its BOM, ``encoding``, its own ``<meta>``/XML declaration, UTF-8.

    The order and the decoding (undecodable bytes become U+FFFD) are w3lib's ``html_to_unicode``
    (Scrapy's ``response.text``). A declaration is skipped, as if absent, when it cannot give the
    page's text: an unknown name; a codec that is no text encoding (``rot13``, ``base64``, ``zip``:
    ``bytes.decode`` refuses them) or no character set (``_NOT_CHARSETS``); a codec that raises on
    this body; and, for the page's own declaration only, one in which the page's leading ASCII,
    where it is written, does not read as itself (UTF-16, UTF-32 or EBCDIC declared in ASCII markup;
    browsers, too, take a UTF-16 ``<meta>`` for UTF-8). ``encoding`` (the HTTP header's, the
    caller's) is not held to that last test: a BOM-less UTF-16 body is read as UTF-16 when the
    header says so.
    """
    bom_encoding, bom = read_bom(body)
    if bom_encoding is not None and bom is not None:
        return to_unicode(body[len(bom):], bom_encoding)
    if encoding:
        text = _decode_as(body, _resolve(encoding))
        if text is not None:
            return text
    declared = _declared_in(body)
    if declared is not None and _is_charset(declared) and _reads_own_ascii(body, declared):
        text = _decode_as(body, declared)
        if text is not None:
            return text
    return to_unicode(body, "utf-8")


# Codec lookups and decoders run code registered by any installed package (codecs.register),
# which may raise anything; _decode must not, so these guards catch Exception.

def _resolve(label: str) -> str | None:
    """The codec name w3lib maps ``label`` to (``latin-1`` -> ``cp1252`` as browsers do), or None."""
    try:
        return resolve_encoding(label)
    except Exception:
        return None


def _declared_in(body: bytes) -> str | None:
    try:
        return html_body_declared_encoding(body)
    except Exception:
        return None


# Codecs Python marks as text encodings that no document is written in: Python's string-literal
# escapes (which would turn a backslash and an "n" in a page into a newline), host names, and the codec
# that refuses everything. A page declaring one is read as undeclared, as a browser reads it.
_NOT_CHARSETS = frozenset({"unicode-escape", "raw-unicode-escape", "idna", "punycode", "undefined"})


@lru_cache(maxsize=128)
def _is_charset(name: str) -> bool:
    """Whether ``name`` is a codec a page can be written in (``bytes.decode`` takes it, a document uses it)."""
    try:
        info = codecs.lookup(name)
    except Exception:  # LookupError, or whatever a registered search function raises
        return False
    return bool(getattr(info, "_is_text_encoding", True)) and info.name not in _NOT_CHARSETS


def _decode_as(body: bytes, name: str | None) -> str | None:
    """``body`` decoded by the codec ``name`` with replacement, or None when it cannot be."""
    if name is None or not _is_charset(name):
        return None
    if name in ("utf-16", "utf-32"):  # declared without a BOM: big-endian, as html_to_unicode reads it
        name += "-be"
    try:
        return to_unicode(body, name)
    except Exception:  # a codec of a package that fails on this body: read it as undeclared
        return None


_ASCII = bytes(range(128))
_ASCII_RUN = re.compile(rb"[\x00-\x7f]*")
_DECLARATION_SCAN = 4096  # how far w3lib looks for a <meta> or XML declaration


def _reads_own_ascii(body: bytes, name: str) -> bool:
    """Whether the leading ASCII of ``body`` (which holds its declaration) reads as itself in ``name``."""
    if _keeps_ascii(name):  # UTF-8, the ISO-8859 and Windows code pages, ...: every page passes
        return True
    head = body[:_DECLARATION_SCAN]
    ascii_head = head[: _ASCII_RUN.match(head).end()]  # type: ignore[union-attr]  # matches the empty string
    try:
        return ascii_head.decode(name) == ascii_head.decode("ascii")
    except Exception:
        return False


@lru_cache(maxsize=128)
def _keeps_ascii(name: str) -> bool:
    """Whether every ASCII byte reads as itself in ``name`` (not UTF-16, EBCDIC, HZ, Shift_JISX0213, ...)."""
    try:
        return _ASCII.decode(name) == _ASCII.decode("ascii")
    except Exception:
        return False


def _private_copy(tree: etree._Element) -> etree._Element:
    """A copy of the caller's tree to mutate (libxml2 copies in C); its tail is not part of it."""
    own = copy.deepcopy(tree)
    own.tail = None
    return own


def _parse_text(text: str) -> etree._Element | None:
    # lxml stops at NUL bytes; parsel removes them the same way.
    body = text.replace("\x00", "").encode("utf-8", "surrogatepass")
    if not body.strip():
        return None
    try:
        return etree.fromstring(body, _parser())
    except (etree.ParserError, etree.XMLSyntaxError, ValueError):
        # recover=True makes this rare (e.g. only a doctype); treat as an empty page.
        return None


class _Remover:
    """What to leave out: tag names and compiled selectors, plus the stylesheet doing it all in C.

    ``stylesheet`` is None when the rules have no XSLT form (then only the reference
    path applies). lxml's XSLT objects are used per thread, like the parsers.
    """

    __slots__ = ("tags", "selectors", "stylesheet", "separator", "_local", "__weakref__")

    def __init__(self, tags: tuple[str, ...], selectors: tuple[etree.XPath, ...],
                 stylesheet: etree._Element | None = None, separator: str = " "):
        self.tags = tags
        self.selectors = selectors
        self.stylesheet = stylesheet
        self.separator = separator  # what surrounds a block element in the raw text
        self._local = threading.local()

    def transform(self) -> etree.XSLT | None:
        if self.stylesheet is None:
            return None
        transform = getattr(self._local, "xslt", None)
        if transform is None:
            transform = self._local.xslt = etree.XSLT(self.stylesheet)
        return transform


@lru_cache(maxsize=256)
def _remover(tags: tuple[str, ...], selectors: tuple[str, ...], separator: str = " ") -> _Remover:
    from cssselect import HTMLTranslator, SelectorError

    translator = HTMLTranslator()
    compiled = []
    for selector in selectors:
        try:
            compiled.append(etree.XPath(translator.css_to_xpath(selector), smart_strings=False))
        except (SelectorError, etree.XPathError, SyntaxError) as exc:
            raise ValueError(f"invalid CSS selector in strip_selectors: {selector!r} ({exc})") from None
    return _Remover(tags, tuple(compiled), _stylesheet(tags, selectors, translator, separator), separator)


_XSL = "http://www.w3.org/1999/XSL/Transform"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*\Z")  # an element name an XSLT pattern takes as is
# XPath a CSS selector translates to that means something else as a match pattern (positions
# count along another axis) or is not a pattern at all (sibling axes): the reference path does those.
_NOT_A_PATTERN = re.compile(r"position\(|last\(|\[\s*\d|following")


def _stylesheet(tags: tuple[str, ...], selectors: tuple[str, ...], translator: Any,
                separator: str = " ") -> etree._Element | None:
    """The XSLT form of the stripping rules, or None when they have none (see the module doc).

    Templates: a block element is its content between two separators (spaces, for the page
    text); a stripped element is one separator (block) or nothing (inline), its content left out; comments and
    processing instructions are nothing. The built-in templates copy text and walk
    into every other element, so inline elements join their text to their neighbours.
    """
    if not all(_NAME.match(tag) for tag in tags):
        return None
    patterns = []
    for selector in selectors:
        pattern = translator.css_to_xpath(selector, prefix="")
        if _NOT_A_PATTERN.search(pattern):
            return None
        patterns.append(pattern.replace("/descendant-or-self::*/", "//").replace("/descendant::", "//"))
    blocks = [tag for tag in tags if tag in _BLOCK_SET and tag != "form"]
    inline = [tag for tag in tags if tag not in _BLOCK_SET]
    space = f"<xsl:text>{separator}</xsl:text>"
    templates = [f'<xsl:template match="{"|".join(BLOCK_TAGS)}">{space}<xsl:apply-templates/>{space}</xsl:template>']
    if blocks:
        templates.append(f'<xsl:template match="{"|".join(blocks)}" priority="10">{space}</xsl:template>')
    if "form" in tags:  # only a chrome form is left out: a form holding the page's text is read as a block
        templates.append(f'<xsl:variable name="page" select="{_xml_attr(_page_length())}"/>'
                         f'<xsl:template match="form" priority="10"><xsl:choose><xsl:when test="'
                         f'{_xml_attr(chrome_form_test())}">{space}</xsl:when><xsl:otherwise>{space}'
                         f"<xsl:apply-templates/>{space}</xsl:otherwise></xsl:choose></xsl:template>")
    if inline:
        templates.append(f'<xsl:template match="{"|".join(inline)}" priority="10"/>')
    if patterns:
        is_block = " or ".join(f"self::{tag}" for tag in BLOCK_TAGS)
        union = _xml_attr(" | ".join(patterns))
        templates.append(f'<xsl:template match="{union}" priority="20"><xsl:if test="{is_block}">{space}'
                         "</xsl:if></xsl:template>")
    templates.append('<xsl:template match="comment()|processing-instruction()"/>')
    source = (f'<xsl:stylesheet version="1.0" xmlns:xsl="{_XSL}"><xsl:output method="text" encoding="utf-8"/>'
              + "".join(templates) + "</xsl:stylesheet>")
    try:
        stylesheet = etree.XML(source)
        etree.XSLT(stylesheet)  # compiles, or the rules have no pattern form
    except (etree.XMLSyntaxError, etree.XSLTParseError):
        return None
    return stylesheet


#: What makes a form the place of the page's text rather than chrome around it (a search box, a login):
#: it holds a text area with text (a wiki's source view), a list, a table, a definition list or
#: preformatted text (a history list, recent changes, a media manager, a WebForms grid), or at least half
#: of the text of its page's body (ASP.NET WebForms wraps the whole body in one form). "form" in the
#: strip tags strips only the other forms (``strip_selectors=("form",)`` strips every one).
_TEXT_FORM_PARTS = ("textarea[normalize-space()]", "table", "ul", "ol", "dl", "pre")


def _name(tag: str, local_names: bool) -> str:
    head, _, predicate = tag.partition("[")
    return (f"*[local-name()='{head}']" + (f"[{predicate}" if predicate else "")) if local_names else tag


def _page_length(local_names: bool = False) -> str:
    """The XPath of the length of the page's body text (computed once a page: ``$page`` below)."""
    return f"string-length(normalize-space((//{_name('body', local_names)})[1]))"


def chrome_form_test(local_names: bool = False) -> str:
    """The XPath test, relative to a form, that it is chrome and stripped (see ``_TEXT_FORM_PARTS``), given
    ``$page`` (:func:`_page_length`): plain names for the stylesheet, ``local_names`` for any tree (XHTML
    namespaces included). Each form's text is read once; the body's once a page."""
    holds = " or ".join(f".//{_name(part, local_names)}" for part in _TEXT_FORM_PARTS)
    return f"not({holds} or 2 * string-length(normalize-space(.)) >= $page)"


_CHROME_FORMS = etree.XPath(f"//*[local-name()='form'][{chrome_form_test(local_names=True)}]", smart_strings=False)
_PAGE_LENGTH = etree.XPath(_page_length(local_names=True))


def _xml_attr(value: str) -> str:
    return value.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")


def _local_tag(tag: Any) -> str | None:
    return tag.rsplit("}", 1)[-1].lower() if isinstance(tag, str) else None


def _isolate(root: etree._Element, remover: _Remover) -> None:
    """Empty the stripped elements (keeping their tails) and put the separator around block elements."""
    doomed: list[etree._Element] = []
    if "form" in remover.tags:  # decided on the whole tree, before anything is cleared (as the stylesheet does)
        doomed.extend(cast("list[etree._Element]", _CHROME_FORMS(root, page=_PAGE_LENGTH(root))))
    if remover.tags:
        wanted = set(remover.tags) - {"form"}
        if _has_namespaces(root):
            doomed.extend(el for el in root.iter(etree.Element) if _local_tag(el.tag) in wanted)
        elif wanted:
            doomed.extend(root.iter(*wanted))
    for xpath in remover.selectors:
        # a compiled CSS selector yields a node list (lxml-stubs allow any XPath value)
        doomed.extend(el for el in cast("list[object]", xpath(root)) if isinstance(el, etree._Element))
    sep = remover.separator
    for el in doomed:
        # no text, no children; the text after it stays (lxml-stubs 0.5 lack keep_tail, lxml >= 4.4 has it)
        el.clear(keep_tail=True)  # type: ignore[call-arg]
    # Comments and PIs of a given tree (our own parser drops them already).
    etree.strip_elements(root, etree.Comment, etree.ProcessingInstruction, with_tail=False)
    blocks = root.iter(*BLOCK_TAGS) if not _has_namespaces(root) else (
        el for el in root.iter(etree.Element) if _local_tag(el.tag) in _BLOCK_SET
    )
    for el in blocks:
        text, tail = el.text, el.tail
        try:
            el.text = sep + text if text else sep
            el.tail = sep + tail if tail else sep
        except ValueError:  # lxml refuses control characters the parser let through
            el.text = sep + _CONTROL.sub("", text) if text else sep
            el.tail = sep + _CONTROL.sub("", tail) if tail else sep


_BLOCK_SET = frozenset(BLOCK_TAGS)
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
#: every byte but those of the control characters of _CONTROL (in UTF-8 no other character's bytes hold one)
_NOT_CONTROL_BYTES = bytes(c for c in range(256) if not (c < 32 and _CONTROL.match(chr(c))))


def _has_control(raw: str) -> bool:
    """Whether ``raw`` holds a character of :data:`_CONTROL` (lxml refuses them), in C: its UTF-8 less every
    other byte is not empty, or it has no UTF-8 (a surrogate), or it holds a noncharacter. (The regular
    expression's search tried its character class at every character of the page: 3 times as long.)"""
    try:
        data = raw.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return bool(data.translate(None, _NOT_CONTROL_BYTES)) or "\ufffe" in raw or "\uffff" in raw


def _has_namespaces(root: etree._Element) -> bool:
    tag = root.tag
    return isinstance(tag, str) and tag.startswith("{")
