"""HTML -> the main text of a page, the input of the content fingerprints.

Fingerprints must change when the page's content changes and stay put when only
its chrome does (navigation, a rotated banner in ``<header>``, a ``<footer>``, a
CSRF token in a ``<form>``, inline scripts). :func:`page_text` therefore leaves
out a configurable set of elements (``DEFAULT_STRIP_TAGS``), any CSS selectors
given, comments and processing instructions, and collapses whitespace. Prices,
dates and numbers are kept: a changed price changes the exact hash, and the
near-duplicate layer then sees the two pages a few bits apart.

Word boundaries follow rendering: block-level elements (``p``, ``div``, ``td``,
``li``, ``br``, ...) separate words, inline ones (``b``, ``a``, ``span``, ...)
do not, so ``<p>foo</p><p>bar</p>`` gives ``"foo bar"`` and ``f<b>oo</b>`` gives
``"foo"``; reformatting the markup of the same text gives the same string.

Input can be ``str``, ``bytes`` or an already parsed lxml tree (Scrapy's
``response.selector.root``, or a parsel ``Selector``); a given tree is never
modified.

How (speed matters: this runs once per fetched page). The rules above are
compiled once per (strip tags, strip selectors) into a small XSLT stylesheet
(text output: block elements wrapped in spaces, stripped elements replaced by a
space or nothing, comments and PIs dropped) that libxslt runs over the tree in C,
read-only: no copy of the caller's tree, no Python call per element. This is
about twice as fast as the reference path it replaced, which is kept for the
cases the stylesheet cannot express and as the definition the fast path is
tested against: a private ``deepcopy`` of the tree, stripped elements cleared,
spaces put around block elements, then the text nodes joined. The reference path
runs when a CSS selector has no XSLT pattern form (sibling combinators,
positional predicates), for namespaced or XML-parsed trees, when libxslt fails
(e.g. a pathologically deep tree), and when the text holds control characters
(lxml refuses to set them, which the reference path handles in its own way).
"""
from __future__ import annotations

import copy
import re
import threading
from collections.abc import Iterable
from functools import lru_cache
from typing import Any, Union

from lxml import etree
from w3lib.encoding import html_to_unicode

from scrapy_dedup.settings import DEFAULT_STRIP_TAGS

__all__ = ["page_text", "DEFAULT_STRIP_TAGS", "BLOCK_TAGS", "HtmlInput"]

HtmlInput = Union[str, bytes, bytearray, memoryview, "etree._Element", "etree._ElementTree"]

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

    ``html`` may be ``str``, ``bytes`` (decoded by ``encoding`` if given, else by its BOM,
    its ``<meta>``/XML declared charset, then UTF-8 with replacement: never raises on bad
    bytes), an lxml element or element tree, or any object with an lxml ``.root`` (a
    parsel/Scrapy ``Selector``). A given tree is not modified. ``strip_tags`` are element
    names (case-insensitive, any namespace); ``strip_selectors`` are CSS selectors,
    validated on first use (``ValueError`` for a bad one).
    """
    if isinstance(strip_selectors, str):  # one selector given bare
        strip_selectors = (strip_selectors,)
    remover = _remover(_normalize_tags(strip_tags), tuple(strip_selectors))
    root, owned = _parse(html, encoding)
    if root is None:
        return ""
    text = _fast_text(root, remover, owned)
    if text is not None:
        return text
    if not owned:
        root = _private_copy(root)
    return _reference_text(root, remover)


def _reference_text(root: etree._Element, remover: _Remover) -> str:
    """The definition of the page text, by mutating ``root`` (a private tree)."""
    _isolate(root, remover)
    pieces = _TEXT_NODES(root)
    return " ".join("".join(pieces).split())  # str.split(): any Unicode whitespace, in C


def _fast_text(root: etree._Element, remover: _Remover, owned: bool) -> str | None:
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
    if _CONTROL.search(raw) is not None:
        return None
    return " ".join(raw.split())


def _normalize_tags(tags: Iterable[str]) -> tuple[str, ...]:
    if isinstance(tags, str):  # a single name given bare: strip_tags="nav"
        tags = (tags,)
    return tuple(sorted({t.strip().lower() for t in tags if t and t.strip()}))


def _parse(html: Any, encoding: str | None) -> tuple[etree._Element | None, bool]:
    """The tree of ``html`` and whether it is ours: freshly parsed (True) or the caller's (False)."""
    if isinstance(html, (bytes, bytearray, memoryview)):
        header = f"text/html; charset={encoding}" if encoding else None
        _, text = html_to_unicode(header, bytes(html))
        return _parse_text(text), True
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

    __slots__ = ("tags", "selectors", "stylesheet", "_local", "__weakref__")

    def __init__(self, tags: tuple[str, ...], selectors: tuple[etree.XPath, ...],
                 stylesheet: etree._Element | None = None):
        self.tags = tags
        self.selectors = selectors
        self.stylesheet = stylesheet
        self._local = threading.local()

    def transform(self) -> etree.XSLT | None:
        if self.stylesheet is None:
            return None
        transform = getattr(self._local, "xslt", None)
        if transform is None:
            transform = self._local.xslt = etree.XSLT(self.stylesheet)
        return transform


@lru_cache(maxsize=256)
def _remover(tags: tuple[str, ...], selectors: tuple[str, ...]) -> _Remover:
    from cssselect import HTMLTranslator, SelectorError

    translator = HTMLTranslator()
    compiled = []
    for selector in selectors:
        try:
            compiled.append(etree.XPath(translator.css_to_xpath(selector), smart_strings=False))
        except (SelectorError, etree.XPathError, SyntaxError) as exc:
            raise ValueError(f"invalid CSS selector in strip_selectors: {selector!r} ({exc})") from None
    return _Remover(tags, tuple(compiled), _stylesheet(tags, selectors, translator))


_XSL = "http://www.w3.org/1999/XSL/Transform"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*\Z")  # an element name an XSLT pattern takes as is
# XPath a CSS selector translates to that means something else as a match pattern (positions
# count along another axis) or is not a pattern at all (sibling axes): the reference path does those.
_NOT_A_PATTERN = re.compile(r"position\(|last\(|\[\s*\d|following")


def _stylesheet(tags: tuple[str, ...], selectors: tuple[str, ...], translator: Any) -> etree._Element | None:
    """The XSLT form of the stripping rules, or None when they have none (see the module doc).

    Templates: a block element is its content between two spaces; a stripped element
    is one space (block) or nothing (inline), its content left out; comments and
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
    blocks = [tag for tag in tags if tag in _BLOCK_SET]
    inline = [tag for tag in tags if tag not in _BLOCK_SET]
    space = "<xsl:text> </xsl:text>"
    templates = [f'<xsl:template match="{"|".join(BLOCK_TAGS)}">{space}<xsl:apply-templates/>{space}</xsl:template>']
    if blocks:
        templates.append(f'<xsl:template match="{"|".join(blocks)}" priority="10">{space}</xsl:template>')
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


def _xml_attr(value: str) -> str:
    return value.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")


def _local_tag(tag: Any) -> str | None:
    if not isinstance(tag, str):
        return None
    return tag.rsplit("}", 1)[-1].lower()


def _isolate(root: etree._Element, remover: _Remover) -> None:
    """Empty the stripped elements (keeping their tails) and put spaces around block elements."""
    doomed: list[etree._Element] = []
    if remover.tags:
        wanted = set(remover.tags)
        if _has_namespaces(root):
            doomed.extend(el for el in root.iter(etree.Element) if _local_tag(el.tag) in wanted)
        else:
            doomed.extend(root.iter(*remover.tags))
    for xpath in remover.selectors:
        doomed.extend(el for el in xpath(root) if isinstance(el, etree._Element))
    for el in doomed:
        el.clear(keep_tail=True)  # no text, no children; the text after it stays
    # Comments and PIs of a given tree (our own parser drops them already).
    etree.strip_elements(root, etree.Comment, etree.ProcessingInstruction, with_tail=False)
    blocks = root.iter(*BLOCK_TAGS) if not _has_namespaces(root) else (
        el for el in root.iter(etree.Element) if _local_tag(el.tag) in _BLOCK_SET
    )
    for el in blocks:
        text, tail = el.text, el.tail
        try:
            el.text = " " + text if text else " "
            el.tail = " " + tail if tail else " "
        except ValueError:  # lxml refuses control characters the parser let through
            el.text = " " + _CONTROL.sub("", text) if text else " "
            el.tail = " " + _CONTROL.sub("", tail) if tail else " "


_BLOCK_SET = frozenset(BLOCK_TAGS)
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _has_namespaces(root: etree._Element) -> bool:
    tag = root.tag
    return isinstance(tag, str) and tag.startswith("{")
