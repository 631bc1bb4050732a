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
``response.selector.root``, or a parsel ``Selector``): the tree is read from a
private copy (a C-level ``deepcopy``, much cheaper than parsing again) and never
modified.
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
        parser = _LOCAL.parser = etree.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True)
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
    root = _parse(html, encoding)
    if root is None:
        return ""
    _isolate(root, remover)
    pieces = _TEXT_NODES(root)
    return " ".join("".join(pieces).split())  # str.split(): any Unicode whitespace, in C


def _normalize_tags(tags: Iterable[str]) -> tuple[str, ...]:
    if isinstance(tags, str):  # a single name given bare: strip_tags="nav"
        tags = (tags,)
    return tuple(sorted({t.strip().lower() for t in tags if t and t.strip()}))


def _parse(html: Any, encoding: str | None) -> etree._Element | None:
    """Our own tree for ``html``: freshly parsed, or a private copy of a given tree."""
    if isinstance(html, (bytes, bytearray, memoryview)):
        header = f"text/html; charset={encoding}" if encoding else None
        _, text = html_to_unicode(header, bytes(html))
        return _parse_text(text)
    if isinstance(html, str):
        return _parse_text(html)
    tree = getattr(html, "root", html)  # parsel.Selector -> its lxml root
    if isinstance(tree, etree._ElementTree):
        tree = tree.getroot()
    if isinstance(tree, etree._Element):
        if not isinstance(tree.tag, str):  # a comment or PI given as "the tree"
            return None
        own = copy.deepcopy(tree)  # libxml2 copies in C; the caller's tree stays intact
        own.tail = None
        return own
    raise TypeError(f"page_text() takes str, bytes or an lxml tree, not {type(html).__name__}")


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
    """Clears the stripped elements and marks block boundaries in a private tree."""

    __slots__ = ("tags", "selectors")

    def __init__(self, tags: tuple[str, ...], selectors: tuple[etree.XPath, ...]):
        self.tags = tags
        self.selectors = selectors


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
    return _Remover(tags, tuple(compiled))


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
