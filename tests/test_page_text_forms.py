"""Forms in the default strip tags: only a chrome form is left out (a search box, a login), never the
form that holds the page's text (a wiki's history list or source view, an ASP.NET WebForms page)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from parsel import Selector

from scrapy_dedup.content import text as T
from scrapy_dedup.content.text import DEFAULT_STRIP_TAGS, page_blocks, page_text

ARTICLE = "<h1>Kettle</h1><p>The blue kettle boils water fast and pours it well without any spill at all.</p>"
SEARCH = '<form action="/search"><label>Search</label><input name="q"><button>Go</button></form>'

# (name, body, the page text at the default strip tags)
FORM_TABLE = [
    ("search box beside the text", SEARCH + ARTICLE,
     "Kettle The blue kettle boils water fast and pours it well without any spill at all."),
    ("login form after the text", ARTICLE + '<form><p>User</p><input name="u"><p>Password</p>'
     '<input type="password"><button>Log in</button></form>',
     "Kettle The blue kettle boils water fast and pours it well without any spill at all."),
    ("csrf token and a button", ARTICLE + '<form><input type="hidden" name="csrf" value="zz">Search</form>',
     "Kettle The blue kettle boils water fast and pours it well without any spill at all."),
    ("webforms: the whole body in one form", f'<form id="aspnetForm" method="post">{SEARCH}<div>{ARTICLE}</div>'
     '<input type="hidden" name="__VIEWSTATE" value="dDwtMTA"></form>',
     "Kettle The blue kettle boils water fast and pours it well without any spill at all."),
    ("history list in a form", ARTICLE[:15] + '<form id="mw-history-compare"><button>Compare</button>'
     "<ul><li>12:01 Alice (fix typo)</li><li>11:40 Bob (new section)</li></ul></form>",
     "Kettle Compare 12:01 Alice (fix typo) 11:40 Bob (new section)"),
    ("source view: a text area", "<h1>Edit Kettle</h1><form><textarea>== Kettle == blue, boils fast</textarea>"
     "<button>Save</button></form>", "Edit Kettle == Kettle == blue, boils fast Save"),
    ("an empty text area is no text", ARTICLE + "<form><textarea> </textarea><button>Post comment</button></form>",
     "Kettle The blue kettle boils water fast and pours it well without any spill at all."),
    ("a table in a form (a media manager)", "<h1>Media</h1><form><table><tr><td>kettle.png</td><td>12 KB</td>"
     "</tr><tr><td>pot.jpg</td><td>40 KB</td></tr></table></form>", "Media kettle.png 12 KB pot.jpg 40 KB"),
    ("a form nested in a stripped element", f"<nav>{SEARCH.replace('<label>', '<ul><li>')}</nav>{ARTICLE}",
     "Kettle The blue kettle boils water fast and pours it well without any spill at all."),
]


def _page(body: str) -> str:
    return f"<html><head><script>var x = 1;</script></head><body>{body}</body></html>"


@pytest.mark.parametrize("name, body, expected", FORM_TABLE, ids=[row[0] for row in FORM_TABLE])
def test_form_rule(name, body, expected):
    html = _page(body)
    assert page_text(html) == expected
    tree = Selector(text=html).root
    remover = T._remover(T._normalize_tags(DEFAULT_STRIP_TAGS), ())
    assert T._fast_text(tree, remover, owned=False) == expected  # the stylesheet ran, and agrees
    assert T._reference_text(T._private_copy(tree), remover) == expected
    assert " ".join(page_blocks(html)) == expected


def test_every_form_stripped_by_a_selector():
    html = _page(ARTICLE[:15] + "<form><ul><li>12:01 Alice</li></ul></form>")
    assert page_text(html, strip_selectors=("form",)) == "Kettle"
    assert page_text(html, strip_tags=("script",)) == "Kettle 12:01 Alice"  # form not stripped at all


def test_xhtml_namespaced_tree_same_rule():
    xhtml = (b'<html xmlns="http://www.w3.org/1999/xhtml"><body><form><input name="q"/>Search</form>'
             b"<p>Some text of the page here, longer than the form.</p>"
             b"<form><ul><li>rev 1 by Alice</li></ul></form></body></html>")
    from lxml import etree
    tree = etree.fromstring(xhtml)
    assert page_text(tree) == "Some text of the page here, longer than the form. rev 1 by Alice"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["<form>", "</form>", "<p>", "</p>", "<ul>", "<li>", "</ul>", "<textarea>",
                                 "</textarea>", "<nav>", "</nav>", "<table><td>", "word", "two words", " ",
                                 "<input name=q>", "<body>", "<pre>"]), max_size=40))
def test_forms_same_text_both_paths(parts):
    html = "".join(parts)
    tree = Selector(text=html).root if html.strip() else None
    if tree is None or not isinstance(tree.tag, str):
        return
    remover = T._remover(T._normalize_tags(DEFAULT_STRIP_TAGS), ())
    expected = T._reference_text(T._private_copy(tree), remover)
    got = T._fast_text(tree, remover, owned=False)
    assert got is None or got == expected
    assert page_text(html) == expected


@given(st.text(alphabet=st.sampled_from(["a", "b", " ", "\t", "\n", "\u00a0", "\u2003", "\x85", "\x1c",
                                         T.BLOCK_SEPARATOR, "é", "."]), max_size=60))
@settings(max_examples=400, deadline=None)
def test_blocks_are_cut_from_the_raw_text_as_from_the_collapsed_text(raw):
    """The blocks cut from the stylesheet's raw text are those of its collapsed text (the definition)."""
    definition = [block.strip() for block in T._collapse(raw).split(T.BLOCK_SEPARATOR)]
    assert T._cut_blocks(raw) == [block for block in definition if block]
