"""page_text: main text of HTML given as str, bytes or an lxml tree."""
from __future__ import annotations

import codecs

import lxml.html
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree
from parsel import Selector

from scrapy_dedup.content.text import DEFAULT_STRIP_TAGS, SUBTITLE_MARK, page_blocks_titled, page_text
from scrapy_dedup.settings import DEFAULT_STRIP_TAGS as SETTINGS_STRIP_TAGS

PAGE = """<!DOCTYPE html><html><head><title>Blue kettle</title>
<script>var token = "abc123";</script><style>p { color: red }</style></head>
<body><header>Big SALE banner</header><nav><a href="/">Home</a> <a href="/x">Shop</a></nav>
<main><h1>Blue kettle</h1><p>Price: $19.99 on 2024-01-05</p><!-- cache node 7 -->
<p>Boils <b>fast</b>, pours   well.</p><div class="ad">Buy more kettles</div></main>
<aside>Related items</aside><form><input type="hidden" name="csrf" value="zz">Search</form>
<noscript>Enable JS</noscript><template><p>tpl</p></template>
<footer>Copyright 2024</footer></body></html>"""


def test_default_strip_tags_are_the_settings_ones():
    assert DEFAULT_STRIP_TAGS == SETTINGS_STRIP_TAGS


def test_main_text_leaves_out_chrome_scripts_and_comments():
    text = page_text(PAGE)
    assert text == "Blue kettle Blue kettle Price: $19.99 on 2024-01-05 Boils fast, pours well. Buy more kettles"
    for gone in ("SALE", "Home", "abc123", "color", "cache node", "Related", "csrf", "Search", "Enable JS",
                 "tpl", "Copyright"):
        assert gone not in text


def test_strip_selectors_and_custom_tags():
    assert "Buy more" not in page_text(PAGE, strip_selectors=["div.ad"])
    assert "Buy more" not in page_text(PAGE, strip_selectors=["main > .ad"])
    assert page_text(PAGE, strip_selectors=".ad") == page_text(PAGE, strip_selectors=[".ad"])  # bare string
    assert page_text(PAGE, strip_tags="nav") == page_text(PAGE, strip_tags=["NAV"])
    kept_nav = page_text(PAGE, strip_tags=("script", "style"))
    assert "Home Shop" in kept_nav and "Copyright 2024" in kept_nav
    assert "Blue kettle" not in page_text(PAGE, strip_tags=DEFAULT_STRIP_TAGS + ("main", "title"))


def test_invalid_selector_is_a_clear_value_error():
    with pytest.raises(ValueError, match="div\\[\\["):
        page_text(PAGE, strip_selectors=["div[["])


@pytest.mark.parametrize(
    "html, expected",
    [
        ("<p>foo</p><p>bar</p>", "foo bar"),
        ("<div>a<div>b</div>c</div>", "a b c"),
        ("<p>f<b>oo</b>d</p>", "food"),
        ("<ul><li><a>one</a></li><li><a>two</a></li></ul>", "one two"),
        ("<table><tr><td>1</td><td>2</td></tr></table>", "1 2"),
        ("line<br>break", "line break"),
        ("<p>a&nbsp;&nbsp;b\t\n c</p>", "a b c"),
    ],
)
def test_word_boundaries_follow_rendering(html, expected):
    assert page_text(html) == expected


def test_reformatted_markup_gives_the_same_text():
    compact = "<main><h1>Title</h1><p>One <em>two</em> three.</p><ul><li>four</li><li>five</li></ul></main>"
    airy = """<main>
      <h1>
        Title
      </h1>
      <p>One <em>two</em>
         three.</p>
      <ul>
        <li>four</li>
        <li>five</li>
      </ul>
    </main>"""
    assert page_text(compact) == page_text(airy) == "Title One two three. four five"


def test_bytes_use_the_declared_charset():
    html = '<html><head><meta charset="iso-8859-1"></head><body><p>Caf\xe9 cr\xe8me</p></body></html>'
    assert page_text(html.encode("iso-8859-1")) == "Café crème"


def test_explicit_encoding_wins_over_meta():
    html = '<html><head><meta charset="utf-8"></head><body><p>\u0416\u0443\u043a</p></body></html>'
    assert page_text(html.encode("cp1251"), encoding="cp1251") == "\u0416\u0443\u043a"


def test_xhtml_with_xml_declaration():
    body = (
        '<?xml version="1.0" encoding="iso-8859-1"?>\n'
        '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN" '
        '"http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd">\n'
        '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>T</title></head>'
        "<body><nav>menu</nav><p>na\xefve r\xe9sum\xe9</p></body></html>"
    )
    assert page_text(body.encode("iso-8859-1")) == "T naïve résumé"
    assert page_text(body) == "T naïve résumé"  # str with an encoding declaration: lxml alone refuses it


def test_utf16_with_bom():
    html = "<p>hello wörld</p>"
    assert page_text(codecs.BOM_UTF16_LE + html.encode("utf-16-le")) == "hello wörld"


def test_wrong_charset_and_nul_bytes_never_crash():
    wrong = '<meta charset="utf-8"><p>price \xa3 5</p>'.encode("latin-1")  # not valid UTF-8
    assert page_text(wrong) == "price \ufffd 5"
    assert page_text(b"<p>nul\x00byte</p>") == "nulbyte"
    assert page_text("<p>nul\x00char</p>") == "nulchar"
    assert page_text(b'<meta charset="no-such-charset"><p>ok</p>') == "ok"


@pytest.mark.parametrize("empty", ["", "   ", b"", "<!DOCTYPE html>", "<html></html>", "<!-- only -->"])
def test_empty_documents(empty):
    assert page_text(empty) == ""


def test_tree_input_is_not_modified_and_not_reparsed():
    tree = lxml.html.fromstring(PAGE)
    before = etree.tostring(tree)
    assert page_text(tree) == page_text(PAGE)
    assert page_text(tree, strip_selectors=[".ad"]) == page_text(PAGE, strip_selectors=[".ad"])
    assert etree.tostring(tree) == before


def test_scrapy_style_selector_and_element_tree_inputs():
    selector = Selector(text=PAGE)
    before = etree.tostring(selector.root)
    assert page_text(selector) == page_text(PAGE)
    assert page_text(selector.root) == page_text(PAGE)
    assert page_text(selector.root.getroottree()) == page_text(PAGE)
    assert etree.tostring(selector.root) == before


def test_subtree_input_ignores_its_tail():
    tree = lxml.html.fromstring("<div><p>inside <b>this</b></p>after the paragraph</div>")
    paragraph = tree.find("p")
    assert page_text(paragraph) == "inside this"
    assert paragraph.tail == "after the paragraph"


def test_namespaced_xml_tree():
    tree = etree.fromstring(
        b'<html xmlns="http://www.w3.org/1999/xhtml"><body><nav>menu</nav><p>a<b>b</b></p>'
        b"<!--c--><p>d</p><?pi x?><footer>f</footer>t</body></html>"
    )
    before = etree.tostring(tree)
    assert page_text(tree) == "ab d t"
    assert etree.tostring(tree) == before


def test_unsupported_type():
    with pytest.raises(TypeError):
        page_text(42)  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.text(), st.binary()))
def test_any_input_gives_collapsed_text(doc):
    text = page_text(doc)
    assert text == " ".join(text.split())


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["<p>", "</p>", "<b>", "</b>", "<nav>", "</nav>", "<!--", "-->", "word",
                                 "<script>", "</script>", "&amp;", "<br>", " ", "\x00", "é"]), max_size=40))
def test_markup_soup_never_crashes(parts):
    html = "".join(parts)
    assert page_text(html) == page_text(html.encode("utf-8"), encoding="utf-8")


@pytest.mark.parametrize("html, name", [
    # the title, then the headings of the main text (not the site's logo in its <header>), then the subtitle
    ("<html><head><title>Related changes - Wiki</title></head><body><header><h1>Wiki</h1></header><main>"
     "<h1>Related changes</h1><div>&larr; <a href='/Harbor'>Harbor</a></div><div>Jump to search</div>"
     "<p>Enter a page name to see changes on pages linked to or from that page.</p><h2>Changes</h2></main>"
     "</body></html>", "Related changes - Wiki\nRelated changes\nChanges\x1d\u2190 Harbor\nJump to search"),
    # a subtitle stops at a block of more than eight words, a heading, or after two blocks
    ("<html><head><title>T</title></head><body><h1>T</h1><p>one two three four five six seven eight nine</p>"
     "</body></html>", "T\nT"),
    ("<html><head><title>T</title></head><body><h1>A</h1><p>by Ann</p><h2>B</h2></body></html>", "T\nA\nB\x1dby Ann"),
    ("<html><head><title>T</title></head><body><h1>A</h1><p>x</p><p>y</p><p>z</p></body></html>", "T\nA\x1dx\ny"),
    ("<html><body><h2>Only a heading</h2><p>text</p></body></html>", "\nOnly a heading\x1dtext"),
    ("<html><head><title>Just a title</title></head><body><p>text</p></body></html>", "Just a title"),
    ("<html><body><p>nothing to name it by</p></body></html>", None),
])
def test_page_blocks_titled_names_a_page_by_its_title_headings_and_subtitle(html, name):
    assert SUBTITLE_MARK == "\x1d"
    assert page_blocks_titled(html)[1] == name
