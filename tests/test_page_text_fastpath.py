"""page_text's fast path (a compiled XSLT stylesheet, read-only) against its reference path.

The reference path (private copy of the tree, stripped elements cleared, spaces
around blocks, text nodes joined) defines the page text and is what
tests/test_page_text.py pinned first; the stylesheet must give the same string
wherever it runs, and hand over to the reference path where it cannot be exact.
"""
from __future__ import annotations

import sys
from pathlib import Path

import lxml.html
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree
from parsel import Selector

from scrapy_dedup.content import text as T
from scrapy_dedup.content.text import DEFAULT_STRIP_TAGS, page_text

EXAMPLE = Path(__file__).resolve().parent.parent / "example_project"

PAGE = """<!DOCTYPE html><html><head><title>Blue kettle</title>
<script>var token = "abc123";</script><style>p { color: red }</style></head>
<body><header>Big SALE banner</header><nav><a href="/">Home</a> <a href="/x">Shop</a></nav>
<main id="m"><h1>Blue kettle</h1><p class="lead">Price: $19.99 on 2024-01-05</p><!-- cache node 7 -->
<p>Boils <b>fast</b>, pours   well.<span class="badge">NEW</span>now</p><div class="ad">Buy <i>more</i> kettles</div>
<ul><li>one</li><li class="x">two</li><li>three</li></ul><?php echo 1 ?>
<table><tr><td>1</td><td class="price">2</td></tr></table>line<br>break<my-widget>wid</my-widget>get</main>
<aside>Related items</aside><form><input type="hidden" name="csrf" value="zz">Search</form>
<noscript>Enable JS</noscript><template><p>tpl</p></template>
<footer>Copyright 2024</footer></body></html>"""

FAST_CASES = [
    ((), DEFAULT_STRIP_TAGS),
    ((".ad",), DEFAULT_STRIP_TAGS),
    (("main > .ad", "#m .badge"), DEFAULT_STRIP_TAGS),
    (("main .ad", "span.badge"), DEFAULT_STRIP_TAGS),  # an inline element stripped: its neighbours join
    (("div:not(.ad)", "li:first-child", "li:nth-child(2n+1)"), DEFAULT_STRIP_TAGS),
    ((":root",), DEFAULT_STRIP_TAGS),
    (('[class="price"]', "p:contains('fast')"), DEFAULT_STRIP_TAGS),
    ((), ("script", "style")),
    ((), ("b", "my-widget", "li")),  # inline and custom tags
    ((".lead",), ()),
    (("ul, table",), ("main",)),
]


def reference(tree: etree._Element, selectors=(), tags=DEFAULT_STRIP_TAGS) -> str:
    remover = T._remover(T._normalize_tags(tags), tuple(selectors))
    return T._reference_text(T._private_copy(tree), remover)


def fast(tree: etree._Element, selectors=(), tags=DEFAULT_STRIP_TAGS) -> str | None:
    remover = T._remover(T._normalize_tags(tags), tuple(selectors))
    return T._fast_text(tree, remover, owned=False)


@pytest.mark.parametrize("selectors, tags", FAST_CASES)
def test_stylesheet_gives_the_reference_text(selectors, tags):
    tree = lxml.html.fromstring(PAGE)
    before = etree.tostring(tree)
    expected = reference(tree, selectors, tags)
    assert fast(tree, selectors, tags) == expected  # not None: the fast path ran
    assert page_text(tree, strip_selectors=selectors, strip_tags=tags) == expected
    assert page_text(PAGE, strip_selectors=selectors, strip_tags=tags) == expected
    assert etree.tostring(tree) == before


def test_stylesheet_on_a_subtree_ignores_the_tail_and_the_rest():
    tree = lxml.html.fromstring("<div><nav>n</nav><p>inside <b>this</b><nav>x</nav></p>after the paragraph</div>")
    paragraph = tree.find("p")
    assert fast(paragraph) == reference(paragraph) == "inside this"
    assert fast(paragraph, [":root"]) == reference(paragraph, [":root"]) == ""


@pytest.mark.parametrize("selectors, tags", [
    (("h1 + p",), DEFAULT_STRIP_TAGS),  # sibling combinators have no pattern form
    (("h1 ~ p",), DEFAULT_STRIP_TAGS),
    ((), ("fb:like",)),  # not a plain element name
])
def test_rules_without_a_pattern_form_use_the_reference_path(selectors, tags):
    remover = T._remover(T._normalize_tags(tags), tuple(selectors))
    assert remover.stylesheet is None
    html = "<main><h1>T</h1><p>first</p><p>second</p><fb:like>like</fb:like></main>"
    expected = {"h1 + p": "T second like", "h1 ~ p": "T like"}.get(selectors[0] if selectors else "", "T first second")
    assert page_text(html, strip_selectors=selectors, strip_tags=tags) == expected
    assert page_text(Selector(text=html), strip_selectors=selectors, strip_tags=tags) == expected


def test_control_characters_go_to_the_reference_path():
    tree = lxml.html.fromstring("<div><p>a\x01b</p>c\x0bd<b>e\x1ff</b></div>")
    assert fast(tree) is None  # the reference path removes them from blocks, as lxml makes it
    assert page_text(tree) == reference(tree) == "ab cde f"


def test_xml_trees_use_the_reference_path():
    tree = etree.fromstring(b"<html><body><nav>menu</nav><p>a<b>b</b></p><p>d</p></body></html>")
    assert fast(tree) is None
    assert page_text(tree) == "ab d"


def test_tree_deeper_than_libxslt_allows_uses_the_reference_path():
    # libxml2's parser stops nesting at 256 levels; a tree built in code can go deeper
    root = lxml.html.fromstring("<html><body><div>x</div></body></html>")
    element = root.find(".//div")
    for level in range(5000):  # beyond libxslt's template recursion limit (3000)
        element = etree.SubElement(element, "span" if level % 2 else "div")
    element.text = "deep"
    assert fast(root) is None
    assert page_text(root) == "x deep"


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(["<p>", "</p>", "<b>", "</b>", "<nav>", "</nav>", "<!--", "-->", "word", "<li>",
                              "<span class='ad'>", "</span>", "<div class=ad>", "</div>", "<script>", "</script>",
                              "&amp;", "<br>", " ", "\x00", "é", "\x01", "<?x y?>", "<table>", "<td>", "two"]),
             max_size=40),
    st.sampled_from([(), (".ad",), ("div.ad > b", "p span")]),
)
def test_markup_soup_same_text_both_paths(parts, selectors):
    html = "".join(parts)
    tree = Selector(text=html).root if html.strip() else None
    if tree is None or not isinstance(tree.tag, str):
        return
    expected = reference(tree, selectors)
    got = fast(tree, selectors)
    assert got is None or got == expected
    assert page_text(tree, strip_selectors=selectors) == expected


def test_example_site_pages_same_text_both_paths():
    sys.path.insert(0, str(EXAMPLE))
    try:
        from demosite import DemoSite, load
    finally:
        sys.path.remove(str(EXAMPLE))
    site = DemoSite(port=8000)
    pages = load()["pages"][::7]
    assert len(pages) > 50
    for selectors in ((), (".generated-at",), (".generated-at", ".vat-notice")):
        for page in pages:
            body = site.handle(page["host"], page["target"]).body
            tree = Selector(body=body, type="html", encoding="utf-8").root  # how Scrapy parses a response
            expected = reference(tree, selectors)
            assert fast(tree, selectors) == expected, page["url"]


@pytest.mark.parametrize("raw, held", [
    ("", False),
    ("plain text, tabs\tnewlines\nreturns\r and spaces", False),
    ("caf\u00e9 \u2014 \u6771\u4eac \U0001f600 \x9e block separators \x7f \x85", False),  # none of them is one
    ("nul\x00", True), ("bell\x07", True), ("vertical tab\x0b", True), ("form feed\x0c", True), ("esc\x1b", True),
    ("unit separator\x1f", True), ("lone \ud800 surrogate", True), ("\udfff", True),
    ("noncharacter \ufffe", True), ("\uffff", True), ("\u00e9\x01", True),
])
def test_control_characters_are_told_as_the_expression_tells_them(raw, held):
    # what sends a page to the reference path: lxml refuses these characters
    assert T._has_control(raw) == held == (T._CONTROL.search(raw) is not None)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x10FFFF), max_size=40))
def test_control_characters_are_told_as_the_expression_tells_them_on_any_text(raw):
    assert T._has_control(raw) == (T._CONTROL.search(raw) is not None)
