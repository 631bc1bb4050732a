"""A small local site with known content duplicates, for the crawl tests of the content layer.

Every page has the same template (header with a rotating banner, nav, a form
with a fresh CSRF token, a footer with a "generated at" timestamp) around a
main block. What the main blocks hold is known, so the tests can count exactly:

- ``/p/<i>``: distinct products (unique);
- ``/copy/<i>``: the same main text as ``/p/<i>``, other chrome (exact duplicates);
- ``/edit/<i>``: ``/p/<i>`` with one word changed (near duplicates);
- ``/sib/<i>``: templated siblings: a long shared description, a dozen+ words of their own (unique);
- ``/denied/<i>``: "Access denied" (degenerate).

The crawl tests start from every page's URL, so no index page blurs the counts.
"""
from __future__ import annotations

import itertools
import random

from tests.support.localsite import Page

VOCAB = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
    "quebec romeo sierra tango uniform victor whiskey xray yankee zulu amber basalt cobalt dune ember "
    "fjord granite harbor indigo jasper kelp lagoon marble nectar onyx pebble quartz russet saffron "
    "timber umber velvet willow yarrow zephyr anchor beacon canyon dawn estuary fern glacier heath"
).split()

_counter = itertools.count()


def words(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(VOCAB) for _ in range(n)]


def product_text(i: int) -> str:
    return " ".join(words(1000 + i, 800))


def edited_text(i: int) -> str:
    """A one-word edit: with 800 words a near duplicate at the default threshold (checked by the tests)."""
    w = product_text(i).split()
    w[400] = "changedword"
    return " ".join(w)


SHARED_DESCRIPTION = " ".join(words(7, 200))


def sibling_text(i: int) -> str:
    own = " ".join(words(5000 + i, 16))
    return f"Sibling model {i}. {own}. {SHARED_DESCRIPTION}"


def template(main: str, *, title: str = "Shop") -> str:
    n = next(_counter)
    token = random.getrandbits(128)
    return f"""<!DOCTYPE html><html><head><title>{title}</title>
<script>var token = "{token:x}";</script><style>body {{ color: #{n % 999:03d}; }}</style></head>
<body><header><div class="banner">Banner {n}: sale on {random.choice(VOCAB)}</div></header>
<nav><a href="/">Home</a> <a href="/cart">Cart</a></nav>
<main><h1>{title}</h1><p>{main}</p></main>
<aside>Recently viewed: {random.choice(VOCAB)}</aside>
<form><input type="hidden" name="csrf" value="{token:x}"><button>Buy</button></form>
<footer>Generated at 2026-11-29 12:{n % 60:02d}:{random.randint(0, 59):02d}</footer></body></html>"""


class ContentSite:
    """Router for LocalSite (any host), with the truth of what each path holds."""

    def __init__(self, products: int = 6, copies: int = 3, edits: int = 2, siblings: int = 4, denied: int = 3):
        self.paths: dict[str, tuple[str, str, str]] = {}  # path -> (kind, title, main text)
        for i in range(products):
            self.paths[f"/p/{i}"] = ("unique", f"Product {i}", product_text(i))
        for i in range(copies):
            self.paths[f"/copy/{i}"] = ("exact", f"Product {i}", product_text(i))
        for i in range(copies, copies + edits):
            self.paths[f"/edit/{i}"] = ("near", f"Product {i}", edited_text(i))
        for i in range(siblings):
            self.paths[f"/sib/{i}"] = ("unique", f"Sibling {i}", sibling_text(i))
        for i in range(denied):
            self.paths[f"/denied/{i}"] = ("degenerate", "Error", "Access denied")
        assert copies + edits <= products

    def urls(self, site, host: str) -> list[str]:
        return [site.url(host, path) for path in self.paths]

    def __call__(self, host: str, path: str) -> Page | None:
        entry = self.paths.get(path.split("?")[0])
        if entry is None:
            return None
        kind, title, text = entry
        return Page(template(text, title=title))

    def count(self, kind: str) -> int:
        return sum(1 for k, _, _ in self.paths.values() if k == kind)
