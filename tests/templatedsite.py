"""A local site whose chrome no tag marks as chrome, for the crawl tests of boilerplate learning.

Every page is rendered through the same plain-``<div>`` chrome: a site header line, a
"Page generated at <time> by worker <id> in <n> ms" line drawn afresh on every fetch, and a
footer line. What the main blocks hold is known:

- ``/doc/<i>``: distinct short articles (unique);
- ``/again/<i>``: ``/doc/<i>`` fetched again under another URL: the same article, another
  generated line (a duplicate; on a page this short the line alone keeps the default
  engine from matching the two, which :func:`default_engine_misses_refetches` checks);
- ``/sib/<i>``: templated siblings: products sharing a category blurb and a spec table, each with
  its own name, description and two rows: 80-90% of their words shared (unique).

The crawl tests fetch every ``/doc`` and ``/sib`` page first, then the ``/again`` pages.
"""
from __future__ import annotations

import random

from tests.contentsite import words

DOCS = 14
SIBLINGS = 6

BLURB = [  # the shop's category blurb: paragraphs under 400 characters, on every product page
    " ".join(words(900 + n, 40)) for n in range(3)
]
SPEC_ROWS = [f"{name} {value}" for name, value in zip(
    "weight height width depth colour finish voltage power socket cable plug warranty housing lens "
    "mount sensor battery charger display panel screen frame".split(),
    " ".join(words(77, 22)).split())]


def doc_text(i: int) -> list[str]:
    return [f"Article {i}", " ".join(words(3000 + i, 45))]


def sibling_blocks(i: int) -> tuple[list[str], list[str]]:
    """(paragraphs, spec table cells) of product ``i``."""
    own = [f"Model {i} of the series", " ".join(w + "x" * (i + 1) for w in words(6000 + i, 30))]
    rows = SPEC_ROWS + [f"serial {' '.join(words(7000 + i, 2))}", f"variant {' '.join(words(8000 + i, 2))}"]
    return own + BLURB, rows


def render(paragraphs: list[str], cells: list[str] = (), *, rng: random.Random | None = None) -> str:
    rng = rng or random.Random()
    stamp = (f"Page generated at 2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} "
             f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d} "
             f"by worker app-{rng.randint(1, 99):02d} in {rng.randint(5, 900)} ms")
    body = "".join(f"<div>{p}</div>" for p in paragraphs)
    table = "<table>" + "".join(f"<tr><td>{c}</td></tr>" for c in cells) + "</table>" if cells else ""
    return (f"<!DOCTYPE html><html><head><title>Example docs</title></head><body>"
            f"<div class='top'>Example Docs: the reference of the example toolkit</div>"
            f"<div>{stamp}</div><div class='content'>{body}{table}</div>"
            f"<div>Copyright Example Corp &lt;b&gt;&amp; friends&lt;/b&gt;, all rights reserved, see our privacy "
            f"terms</div></body></html>")


class TemplatedSite:
    """Router for LocalSite (any host): what each path holds, rendered afresh on every fetch."""

    def __init__(self, docs: int = DOCS, siblings: int = SIBLINGS):
        self.docs, self.siblings = docs, siblings

    def first_paths(self) -> list[str]:
        return [f"/doc/{i}" for i in range(self.docs)] + [f"/sib/{i}" for i in range(self.siblings)]

    def refetch_paths(self) -> list[str]:
        return [f"/again/{i}" for i in range(self.docs)]

    def html(self, path: str, rng: random.Random | None = None) -> str | None:
        kind, _, number = path.partition("?")[0].strip("/").partition("/")
        if not number.isdigit():
            return None
        i = int(number)
        if kind in ("doc", "again") and i < self.docs:
            return render(doc_text(i), rng=rng)
        if kind == "sib" and i < self.siblings:
            return render(*sibling_blocks(i), rng=rng)
        return None

    def __call__(self, host: str, path: str):
        from tests.support.localsite import Page

        html = self.html(path)
        return None if html is None else Page(html)


def shared_share(a: str, b: str) -> float:
    """The share of the words of ``a`` that ``b`` shares (as multisets)."""
    from collections import Counter

    wa, wb = Counter(a.split()), Counter(b.split())
    return sum((wa & wb).values()) / sum(wa.values())
