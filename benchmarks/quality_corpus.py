"""A labelled near-duplicate corpus built from real HTML documentation pages that Debian ships.

Why real pages: a near-duplicate detector is only as good as its behaviour on real
templates (navigation, sidebars, tables of contents, code listings). Debian's
``*-doc`` packages give thousands of real HTML pages with distinct templates,
installed by apt with no other network access.

Every page carries a ground-truth ``group``: an original page and its generated
duplicates share one; every other page (templated siblings, degenerate pages)
has a group of its own. Duplicate kinds (issue 4):

``tracking``   the same bytes under a URL with tracking parameters
``csrf``       a re-fetch with a new CSRF token (meta + hidden form field) and cache-buster
``generated``  a visible "generated at <time>" line
``banner``     a rotated banner in ``<header>``
``footer``     a different ``<footer>`` (one of the site's footers)
``divfooter``  a different footer in a plain ``<div>`` (one of the site's footers)
``edit``       one or two words changed in the main text
``number``     one number changed in the main text
``reformat``   the markup re-serialized and re-indented, same text

Live hosts (``live_per_source`` > 0; their own seeded generator, so the plain hosts' pages
above stay byte for byte what they were): other originals of the same sources, every fetch
of every page rendered through the host's per-fetch chrome in plain ``<div>``/``<span>``/``<p>``
elements (per-fetch lines: timestamps in several formats, worker/host ids, request ids,
view counters, at varied positions; a rotating "related articles" list drawn from a site-wide
pool; a cookie banner on some fetches; A/B variants of a hero block; class names telling,
random or absent, drawn per host). Their duplicate kinds re-draw one part:

``stamp``      the per-fetch lines
``related``    the related-articles list
``consent``    the cookie banner (shown, hidden or another variant)
``hero``       another A/B variant of the hero block
``refetch``    everything (a plain re-fetch of a live page)

Hard negatives: the real pages themselves, ``sibling`` pages (a page's main block
replaced by paragraphs of another page of the same site, template kept; on live hosts
with the chrome too), ``templated`` pages (a shop host: products sharing their category's
blurb and a long spec table, each with its own name, description and two spec rows:
80-90% of the words shared; each product also has a ``refetch`` duplicate) and
``degenerate`` pages (empty, "Access denied", "Coming soon", several copies each,
each its own group: ten identical 403 pages at ten URLs are not duplicates of
each other in any useful sense).

Release-notes hosts (``releases_per_project`` > 0; their own seeded generator): real NEWS files
that Debian packages ship (GNU coreutils, GnuTLS, GLib), cut at successive releases and rendered
through one site template: the page of release *k* is the notes of *k* and of the releases just
before it (:data:`RELEASE_WINDOW` sections), so each page shares most of its paragraphs with the
next release's page, as per-version release-notes pages do. Each is a distinct page (``release``,
a hard negative) with one generated duplicate (``edit``, ``number``, ``generated``, ``tracking`` or
``reformat``: the same page, edited).

Originals that are themselves near-identical (5-word-shingle Jaccard >= 0.5 on the
plain text, computed exactly here, independently of every algorithm measured) are
left out, so that the ground truth "these real pages are distinct" holds.
"""
from __future__ import annotations

import glob
import os
import random
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Optional

import lxml.html
from lxml import etree

#: the duplicate kinds of the plain hosts (one per original; the seeds of these pages are unchanged)
BASE_KINDS = ("tracking", "csrf", "generated", "banner", "footer", "divfooter", "edit", "number", "reformat")
#: the duplicate kinds of the live hosts (per-fetch chrome outside semantic tags, see "live hosts" below)
LIVE_KINDS = ("stamp", "related", "consent", "hero", "refetch")
DUP_KINDS = BASE_KINDS + LIVE_KINDS
#: ground-truth kinds that are distinct pages: any drop of one is a loss
HARD_NEGATIVES = ("original", "sibling", "templated", "degenerate", "release")
#: the kinds that head a group (an original page: its duplicates' recall is measured against it)
ORIGINAL_KINDS = ("original", "release")


@dataclass(frozen=True)
class Source:
    name: str
    package: str
    pattern: str  # glob, recursive


SOURCES = (
    Source("sqlite", "sqlite3-doc", "/usr/share/doc/sqlite3/*.html"),
    Source("git", "git-doc", "/usr/share/doc/git-doc/*.html"),
    Source("python", "python3-doc", "/usr/share/doc/python3-doc/html/**/*.html"),
    Source("postgres", "postgresql-doc", "/usr/share/doc/postgresql-doc-*/html/*.html"),
)

MAX_PAGE_BYTES = 400_000  # a few sqlite pages embed megabytes of SVG syntax diagrams


@dataclass
class Page:
    url: str
    html: bytes
    group: int
    kind: str  # one of HARD_NEGATIVES or of DUP_KINDS
    source: str


def source_files(source: Source, max_bytes: int = MAX_PAGE_BYTES) -> list[str]:
    return sorted(p for p in glob.glob(source.pattern, recursive=True)
                  if os.path.getsize(p) <= max_bytes)


def ensure_sources(install: bool = True, sources: tuple[Source, ...] = SOURCES) -> list[Source]:
    """Return the sources whose pages are installed; install missing ones with apt-get if allowed."""
    missing = [s for s in sources if not source_files(s)]
    if missing and install and shutil.which("apt-get") and os.geteuid() == 0:
        pkgs = [s.package for s in missing]
        print(f"installing Debian documentation packages: {' '.join(pkgs)}", file=sys.stderr)
        subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", *pkgs],
                       check=False, stdout=subprocess.DEVNULL,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    present = [s for s in sources if source_files(s)]
    absent = [s.package for s in sources if s not in present]
    if absent:
        print(f"note: documentation packages not installed: {' '.join(absent)} "
              f"(apt-get install -y {' '.join(absent)})", file=sys.stderr)
    return present


# -- plain text used only to clean the ground truth -------------------------------------------
_WORD = re.compile(r"\w+", re.UNICODE)


def plain_words(html: bytes) -> list[str]:
    try:
        doc = lxml.html.fromstring(html)
    except (etree.ParserError, ValueError):
        return []
    for bad in doc.xpath("//script|//style"):
        bad.drop_tree()
    return _WORD.findall(doc.text_content().lower())


def shingles(words: list[str], k: int = 5) -> set[str]:
    return {" ".join(words[i:i + k]) for i in range(max(1, len(words) - k + 1))}


def distinct_originals(paths: list[str], want: int, rng: random.Random, max_jaccard: float = 0.5,
                       min_words: int = 80, taken: tuple[bytes, ...] = ()) -> list[tuple[str, bytes]]:
    """Pick up to ``want`` pages, skipping any whose shingles overlap an already picked one (or one of
    ``taken``, pages picked elsewhere) too much."""
    order = paths[:]
    rng.shuffle(order)
    picked: list[tuple[str, bytes]] = []
    sets: list[set] = []
    postings: dict[str, list[int]] = {}
    for html in taken:
        sets.append(shingles(plain_words(html)))
        for s in sets[-1]:
            postings.setdefault(s, []).append(len(sets) - 1)
    for path in order:
        if len(picked) >= want:
            break
        with open(path, "rb") as fh:
            html = fh.read()
        words = plain_words(html)
        if len(words) < min_words:
            continue
        sh = shingles(words)
        overlap: dict[int, int] = {}
        for s in sh:
            for j in postings.get(s, ()):
                overlap[j] = overlap.get(j, 0) + 1
        if any(n / (len(sh) + len(sets[j]) - n) >= max_jaccard for j, n in overlap.items()):
            continue
        idx = len(sets)
        sets.append(sh)
        for s in sh:
            postings.setdefault(s, []).append(idx)
        picked.append((path, html))
    return picked


# -- the duplicate generators ----------------------------------------------------------------
_BODY_OPEN = re.compile(rb"<body[^>]*>", re.I)
_BODY_CLOSE = re.compile(rb"</body\s*>", re.I)
_HEAD_OPEN = re.compile(rb"<head[^>]*>", re.I)
_ASSET = re.compile(rb"""(\.(?:css|js))(["'])""", re.I)

BANNERS = [
    "Spring sale: 30% off every annual plan until Friday",
    "New: our conference tickets are now on sale, book early",
    "We are hiring engineers in Berlin, Lisbon and Toronto",
    "Scheduled maintenance on Sunday from 02:00 to 04:00 UTC",
    "Try the new dark theme from the settings menu today",
    "Join 40,000 readers: subscribe to the monthly newsletter",
]


def site_footers(source: str) -> list[str]:
    rng = random.Random(f"footer-{source}")
    words = ("privacy policy terms of use contact us about careers press security status "
             "accessibility cookies sitemap community forum support licence trademarks donate").split()
    out = []
    for year in (2023, 2024, 2025):
        links = " | ".join(" ".join(rng.sample(words, 2)).title() for _ in range(7))
        out.append(f"Copyright {year} The {source.title()} Documentation Project and contributors. "
                   f"All rights reserved. {links}. Hosted by Example Networks.")
    return out


def _insert_after_body(html: bytes, snippet: bytes) -> bytes:
    m = _BODY_OPEN.search(html)
    return html[:m.end()] + snippet + html[m.end():] if m else snippet + html


def _insert_before_body_end(html: bytes, snippet: bytes) -> bytes:
    matches = list(_BODY_CLOSE.finditer(html))
    if not matches:
        return html + snippet
    pos = matches[-1].start()
    return html[:pos] + snippet + html[pos:]


def _token(rng: random.Random, n: int = 32) -> str:
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") for _ in range(n))


def _main_text_nodes(doc) -> list:
    """Text-bearing elements of the body that a reader sees as content (not script/style/pre)."""
    out = []
    for el in doc.iter("p", "li", "dd", "td"):
        if el.text and len(_WORD.findall(el.text)) >= 6:
            out.append(el)
    return out


def _serialize(doc) -> bytes:
    return lxml.html.tostring(doc, encoding="utf-8", doctype="<!DOCTYPE html>")


def edit_words(html: bytes, rng: random.Random, n_words: int) -> Optional[bytes]:
    doc = lxml.html.fromstring(html)
    nodes = _main_text_nodes(doc)
    if not nodes:
        return None
    vocab = ["quickly", "however", "carefully", "usually", "basic", "simple", "later", "green"]
    for _ in range(n_words):
        el = rng.choice(nodes)
        words = [m for m in re.finditer(r"[A-Za-z]{4,}", el.text)]
        if not words:
            return None
        m = rng.choice(words)
        repl = rng.choice([v for v in vocab if v != m.group(0).lower()])
        el.text = el.text[:m.start()] + repl + el.text[m.end():]
    return _serialize(doc)


def change_number(html: bytes, rng: random.Random) -> Optional[bytes]:
    doc = lxml.html.fromstring(html)
    cands = []
    for el in doc.find("body").iter() if doc.find("body") is not None else ():
        if el.tag in ("script", "style") or not isinstance(el.tag, str):
            continue
        for attr in ("text", "tail"):
            value = getattr(el, attr)
            if value and re.search(r"\d+", value):
                cands.append((el, attr))
    if not cands:
        return None
    el, attr = rng.choice(cands)
    value = getattr(el, attr)
    nums = list(re.finditer(r"\d+", value))
    m = rng.choice(nums)
    new = str(int(m.group(0)) + rng.randint(1, 9))
    setattr(el, attr, value[:m.start()] + new + value[m.end():])
    return _serialize(doc)


def reformat(html: bytes, rng: random.Random) -> bytes:
    """Same text, different markup: lxml re-serialization, re-indentation, added attributes."""
    doc = lxml.html.fromstring(html)
    for el in doc.iter("div", "p", "span", "a", "li", "table"):
        if rng.random() < 0.5:
            el.set("data-v", str(rng.randint(1, 99)))
    out = _serialize(doc)
    # whitespace between tags that already had whitespace: renders the same
    out = re.sub(rb">[ \t]*\n\s*<", b">\r\n      <", out)
    return out


def add_csrf(html: bytes, rng: random.Random) -> bytes:
    token = _token(rng)
    m = _HEAD_OPEN.search(html)
    meta = f'<meta name="csrf-token" content="{token}">'.encode()
    html = html[:m.end()] + meta + html[m.end():] if m else meta + html
    form = (f'<form action="/search" method="post"><input type="hidden" name="csrfmiddlewaretoken" '
            f'value="{_token(rng)}"><input type="text" name="q"></form>').encode()
    html = _insert_after_body(html, form)
    return _ASSET.sub(lambda mm: mm.group(1) + f"?v={rng.randint(10**6, 10**7)}".encode() + mm.group(2), html, count=3)


def add_generated(html: bytes, rng: random.Random) -> bytes:
    line = (f'<p class="generated">Page generated on 2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} '
            f'at {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d} UTC '
            f'in {rng.random():.4f} seconds</p>')
    return _insert_before_body_end(html, line.encode())


def add_banner(html: bytes, rng: random.Random) -> bytes:
    snippet = f'<header><div class="promo"><a href="/promo">{rng.choice(BANNERS)}</a></div></header>'
    return _insert_after_body(html, snippet.encode())


def add_footer(html: bytes, rng: random.Random, source: str, tag: str) -> bytes:
    text = rng.choice(site_footers(source))
    snippet = f"<footer><p>{text}</p></footer>" if tag == "footer" else \
        f'<div class="site-footer"><p>{text}</p></div>'
    return _insert_before_body_end(html, snippet.encode())


def make_duplicate(kind: str, html: bytes, rng: random.Random, source: str) -> Optional[bytes]:
    if kind == "tracking":
        return html
    if kind == "csrf":
        return add_csrf(html, rng)
    if kind == "generated":
        return add_generated(html, rng)
    if kind == "banner":
        return add_banner(html, rng)
    if kind in ("footer", "divfooter"):
        return add_footer(html, rng, source, "footer" if kind == "footer" else "div")
    if kind == "edit":
        return edit_words(html, rng, rng.choice((1, 2)))
    if kind == "number":
        return change_number(html, rng)
    if kind == "reformat":
        return reformat(html, rng)
    raise ValueError(kind)


# -- hard negatives ----------------------------------------------------------------------------
def _main_block(doc):
    body = doc.find("body")
    if body is None:
        return None
    total = len(body.text_content()) or 1
    el = body
    while True:
        kids = [c for c in el if isinstance(c.tag, str) and c.tag not in ("script", "style")]
        best = max(kids, key=lambda c: len(c.text_content()), default=None)
        if best is None or len(best.text_content()) < 0.8 * total:
            return el
        el = best


def donor_paragraphs(html: bytes, rng: random.Random, min_words: int = 60, max_words: int = 160) -> list[str]:
    doc = lxml.html.fromstring(html)
    main = _main_block(doc)
    if main is None:
        return []
    paras = [" ".join(p.text_content().split()) for p in main.iter("p")]
    paras = [p for p in paras if len(p.split()) >= 8]
    if not paras:
        return []
    start = rng.randrange(len(paras))
    out, n = [], 0
    for p in paras[start:] + paras[:start]:
        out.append(p)
        n += len(p.split())
        if n >= min_words:
            break
    if n < min_words // 2:
        return []
    words = " ".join(out).split()[:max_words]
    return [" ".join(words)]


#: elements that hold a page's text (a heading, a paragraph, a quotation, a list, a table, a listing)
_CONTENT_TAGS = ("h1", "h2", "h3", "h4", "h5", "h6", "p", "section", "article", "blockquote", "ul", "ol", "dl",
                 "table", "pre")


def _first_content(kids: list, tags: tuple[str, ...]) -> int:
    """The index of the first of ``kids`` whose tag is one of ``tags`` (1 when none is)."""
    return next((i for i, c in enumerate(kids) if c.tag in tags), 1)


def make_sibling(html: bytes, donor: list[str]) -> Optional[bytes]:
    """The template of ``html`` with its main block replaced by ``donor`` paragraphs."""
    doc = lxml.html.fromstring(html)
    main = _main_block(doc)
    if main is None or not donor:
        return None
    if main.tag == "body":
        kids = [c for c in main if isinstance(c.tag, str)]
        first = _first_content(kids, ("h1", "h2", "p", "section", "article"))
        # A body whose text is in other tags (sqlite's oldnews.html: h3 and blockquote; lang_keywords.html: one
        # <div>; then a closing "last modified" <p>): cutting from the first of those tags would keep the page's
        # whole text and give a "sibling" that is the page with one paragraph added. Cut then from the first
        # content tag of any kind, or from the child holding the most text if it comes first.
        text = [0 if c.tag in ("script", "style") else len(c.text_content()) for c in kids]
        if sum(text[first:]) < 0.5 * sum(text):
            first = min(_first_content(kids, _CONTENT_TAGS), text.index(max(text)))
        for c in kids[first:]:
            main.remove(c)
    else:
        for c in list(main):
            main.remove(c)
        main.text = None
    for text in donor:
        p = etree.SubElement(main, "p")
        p.text = text
    return _serialize(doc)


DEGENERATE = [
    b"",
    b"<html><head><title></title></head><body></body></html>",
    b"<!DOCTYPE html><html><head><title>403 Forbidden</title></head><body><h1>Access denied</h1>"
    b"<p>You don't have permission to access this resource.</p></body></html>",
    b"<!DOCTYPE html><html><head><title>Coming soon</title></head><body><div class=\"c\"><h1>Coming soon"
    b"</h1><p>This page is under construction. Check back later!</p></div></body></html>",
    b"<html><body><h1>Not Found</h1><p>The requested URL was not found on this server.</p><hr>"
    b"<address>Apache Server at example.test Port 80</address></body></html>",
]


# -- live hosts: per-fetch chrome in plain elements ---------------------------------------------
# Real sites put per-fetch noise where no tag says "chrome": a "generated at ... by worker ..." line
# in a plain <div>, a rotating "related articles" list, a cookie banner shown on some fetches, an
# A/B-tested hero block. On a live host every page is rendered through the host's chrome and every
# fetch (the original's too) draws its own values, so the chrome is on every page, as on a real site.
# What a host's chrome looks like (formats, tags, positions, pools) is drawn once per host and seed:
# many variants, no fixed example. The duplicate kinds re-draw one part (``stamp``, ``related``,
# ``consent``, ``hero``) or all of it (``refetch``); the hard negatives are ``sibling`` pages (the
# template of one page, the paragraphs of another) and ``templated`` pages (a shop: different products
# sharing a category blurb and a long spec table, 80-90% of their words shared).
_MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()
_DAYS = "Mon Tue Wed Thu Fri Sat Sun".split()


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def _stamp_formats() -> list:
    """Makers of one per-fetch line each (timestamps in several formats, worker/host ids, request ids, counters)."""
    return [
        lambda r: (f"Page generated on 2026-{r.randint(1, 12):02d}-{r.randint(1, 28):02d} at "
                   f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d} UTC "
                   f"by worker {r.randint(1, 64)}"),
        lambda r: f"Rendered in {r.random():.4f} s by app-{r.randint(1, 40):02d} for request {_hex(r, 8)}-{_hex(r, 4)}",
        lambda r: f"This page has been viewed {r.randint(100, 999_999):,} times",
        lambda r: (f"Last updated: {r.choice(_DAYS)}, {r.randint(1, 28):02d} {r.choice(_MONTHS)} 2026 "
                   f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d} GMT"),
        lambda r: (f"Served by web-{r.randint(1, 9)}.{r.choice(('eu-west', 'us-east', 'ap-south'))} "
                   f"in {r.randint(3, 900)} ms"),
        lambda r: f"Request ID: {_hex(r, 8)}-{_hex(r, 4)}-{_hex(r, 4)}-{_hex(r, 4)}-{_hex(r, 12)}",
        lambda r: f"{r.randint(2, 400)} people are reading this page right now",
    ]


_POSITIONS = ("top", "main-start", "main-end", "bottom")
_CONSENTS = [
    "We use cookies to improve your experience and to measure traffic. By continuing to browse this site "
    "you agree to our use of cookies. Accept all Reject all Manage preferences",
    "This website stores cookies on your computer. These cookies are used to collect information about how "
    "you interact with our website. Accept Decline Cookie settings",
    "Your privacy matters to us. We and our partners use cookies and similar technologies to personalise "
    "content and analyse our traffic. OK Learn more",
]
_HEROES = [
    ("Build faster with the docs you trust", "Everything you need to ship, in one place", "Get started"),
    ("The reference, rewritten for humans", "Clear examples for every feature and option", "Read the guide"),
    ("Learn it once, use it everywhere", "Tutorials and how-to guides for every level", "Start learning"),
    ("New release: faster, smaller, safer", "See what changed and how to upgrade today", "What's new"),
    ("Join thousands of developers", "Ask questions and share answers in our community", "Join now"),
]


@dataclass
class LiveChrome:
    """One host's per-fetch chrome: what it draws from on every fetch, and where it puts it."""

    stamps: list  # (maker, tag, positions) per stamp line
    related_pool: list[str]
    related_count: int
    related_position: str
    consent_variants: list[str]
    consent_rate: float
    consent_position: str
    heroes: list[tuple[str, str, str]]
    classes: dict[str, str]  # the class attribute of each part: telling names, random ones, or none


_PARTS = ("meta", "related", "rel-item", "cc-window", "hero")


def live_chrome(host: str, seed: int, titles: list[str]) -> LiveChrome:
    """The chrome of ``host`` for ``seed``; ``titles`` (the host's page titles) feed its related-articles pool."""
    rng = random.Random(f"chrome-{host}-{seed}")
    formats = _stamp_formats()
    stamps = [(f, rng.choice(("div", "span", "p")), tuple(rng.sample(_POSITIONS, 2)))
              for f in rng.sample(formats, rng.randint(1, 3))]
    pool = [t for t in dict.fromkeys(titles) if 2 <= len(t.split()) <= 12]
    rng.shuffle(pool)
    return LiveChrome(stamps, pool[:rng.randint(20, 40)] or ["Getting started", "Frequently asked questions"],
                      rng.randint(3, 7), rng.choice(_POSITIONS),
                      rng.sample(_CONSENTS, rng.randint(1, 2)), rng.uniform(0.4, 0.9), rng.choice(("top", "bottom")),
                      rng.sample(_HEROES, rng.randint(2, 3)), _classes(rng))


def _classes(rng: random.Random) -> dict[str, str]:
    """Class attributes of a host's chrome: a main-text extractor must not be told what is chrome."""
    style = rng.choice(("telling", "random", "none"))
    if style == "telling":
        return {part: f' class="{part}"' for part in _PARTS}
    if style == "random":
        return {part: f' class="{_token(rng, 6).lower()}"' for part in _PARTS}
    return dict.fromkeys(_PARTS, "")


def draw_fetch(chrome: LiveChrome, rng: random.Random) -> dict:
    """The per-fetch values of ``chrome``: one fetch of one page."""
    return {
        "stamp": [(maker(rng), tag, rng.choice(positions)) for maker, tag, positions in chrome.stamps],
        "related": rng.sample(chrome.related_pool, min(chrome.related_count, len(chrome.related_pool))),
        "consent": rng.choice(chrome.consent_variants) if rng.random() < chrome.consent_rate else None,
        "hero": rng.randrange(len(chrome.heroes)),
    }


def redraw(chrome: LiveChrome, fetch: dict, part: str, rng: random.Random) -> dict:
    """``fetch`` with ``part`` drawn again, made to differ (a re-fetch that changed only that part)."""
    if part == "refetch":
        return draw_fetch(chrome, rng)
    new = dict(fetch)
    for _ in range(20):
        new[part] = draw_fetch(chrome, rng)[part]
        if part == "consent" and new[part] == fetch[part]:
            new[part] = None if fetch[part] is not None else chrome.consent_variants[0]
        if new[part] != fetch[part]:
            break
    return new


def _fragment(markup: str) -> list:
    return list(lxml.html.fragments_fromstring(markup))


def render_live(html: bytes, chrome: LiveChrome, fetch: dict) -> bytes:
    """``html`` as served on a live host for one fetch: the chrome's parts in plain elements."""
    doc = lxml.html.fromstring(html)
    body = doc.find("body")
    if body is None:
        return html
    main = _main_block(doc)
    main = body if main is None else main
    places: dict[str, list[str]] = {p: [] for p in _POSITIONS}
    c = chrome.classes
    for text, tag, position in fetch["stamp"]:
        places[position].append(f'<{tag}{c["meta"]}>{text}</{tag}>')
    if fetch["related"]:
        items = "".join(f'<div{c["rel-item"]}><a href="/r/{i}">{t}</a></div>' for i, t in enumerate(fetch["related"]))
        places[chrome.related_position].append(f'<div{c["related"]}><div>Related articles</div>{items}</div>')
    if fetch["consent"]:
        places[chrome.consent_position].append(f'<div{c["cc-window"]}><div>{fetch["consent"]}</div></div>')
    head, tag, cta = chrome.heroes[fetch["hero"]]
    places["top"].insert(0, f'<div{c["hero"]}><div>{head}</div><div>{tag}</div>'
                            f'<div><a href="/start">{cta}</a></div></div>')
    for position, parent, at_start in (("top", body, True), ("bottom", body, False),
                                       ("main-start", main, True), ("main-end", main, False)):
        if not places[position]:
            continue
        elements = _fragment("".join(places[position]))
        if at_start:
            for k, el in enumerate(elements):
                parent.insert(k, el)
        else:
            for el in elements:
                parent.append(el)
    return _serialize(doc)


def page_title(html: bytes) -> str:
    m = re.search(rb"<title[^>]*>(.*?)</title>", html, re.I | re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", m.group(1).decode("utf-8", "replace")).split()) if m else ""


_SPEC_KEYS = ("Operating voltage", "Rated power", "Weight without packaging", "Dimensions (W x H x D)",
              "Housing material", "Operating temperature", "Storage temperature", "Ingress protection",
              "Warranty period", "Certifications", "Noise level at full load", "Power supply",
              "Connectivity", "Mounting options", "Cable length", "Colour options", "Country of origin",
              "Maintenance interval", "Spare parts available for", "Included in the box",
              "Maximum load", "Display", "Control interface", "Standby consumption", "Energy class")
_SPEC_WORDS = ("aluminium steel polycarbonate brushed matte glossy wall desk ceiling rail optional standard "
               "included universal adapter remote manual digital analogue bluetooth wired wireless grey black "
               "white silver years months hours class compliant tested certified").split()


def _spec_value(rng: random.Random) -> str:
    return " ".join([str(rng.randint(2, 900))] + rng.sample(_SPEC_WORDS, rng.randint(2, 4)))


def shop_pages(host: str, paragraphs: list[str], n_products: int, rng: random.Random) -> list[tuple[str, bytes]]:
    """``n_products`` product pages of a few categories: each its own name, description (one of
    ``paragraphs``) and two spec rows; the category's blurb and its other spec rows shared."""
    categories = []
    for c in range(3):
        blurb = [p for p in rng.sample(paragraphs, 2)]
        rows = [(k, _spec_value(rng)) for k in rng.sample(_SPEC_KEYS, 22)]
        categories.append((f"Category {c + 1}", blurb, rows))
    out = []
    own_texts = rng.sample(paragraphs, min(n_products, len(paragraphs)))
    for i, own in enumerate(own_texts):
        name, blurb, rows = categories[i % len(categories)]
        rows = list(rows)
        for j in rng.sample(range(len(rows)), 2):
            rows[j] = (rows[j][0], _spec_value(rng))
        product = f"Model {rng.choice('ABCDEFGHKLMNPRSTVXZ')}{rng.randint(100, 9999)} {rng.choice(_SPEC_WORDS)} unit"
        table = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
        html = (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{product} - {name} - Example Shop</title>'
                f'</head><body><div class="topbar"><a href="/">Shop</a> <a href="/c">Categories</a></div>'
                f'<div id="content"><h1>{product}</h1><p>{own}</p><div class="blurb"><p>{blurb[0]}</p>'
                f'<p>{blurb[1]}</p></div><table class="spec">{table}</table></div></body></html>')
        out.append((f"https://{host}/p/{i}", html.encode()))
    return out


def live_pages(sources: list[Source], per_source: int, seed: int, exclude: dict[str, dict[str, bytes]],
               start_group: int, max_bytes: int = MAX_PAGE_BYTES) -> list[Page]:
    """The live hosts of ``seed``: per source ``per_source`` originals (none of ``exclude``, the plain
    hosts' originals by source, path -> HTML, nor near-identical to one) with the
    LIVE_KINDS duplicates and a sibling each; one shop host of templated product pages with a re-fetch each."""
    rng = random.Random(f"live-{seed}")
    pages: list[Page] = []
    group = start_group
    paragraphs: list[str] = []
    for src in sources:
        host = f"{src.name}-live.example.test"
        # distinct from the plain host's originals too (git-doc's index.html is its git.html)
        plain = exclude.get(src.name, {})
        originals = distinct_originals([p for p in source_files(src, max_bytes) if p not in plain], per_source, rng,
                                       taken=tuple(plain.values()))
        chrome = live_chrome(host, seed, [page_title(h) for _, h in originals])
        for i, (path, html) in enumerate(originals):
            group += 1
            rel = os.path.relpath(path, src.pattern.split("*")[0])
            fetch = draw_fetch(chrome, rng)
            pages.append(Page(f"https://{host}/{rel}", render_live(html, chrome, fetch), group, "original", host))
            for kind in LIVE_KINDS:
                again = render_live(html, chrome, redraw(chrome, fetch, kind, rng))
                pages.append(Page(f"https://{host}/{rel}?utm_campaign={kind}&session={i}", again, group, kind, host))
            donor = donor_paragraphs(originals[(i + 1) % len(originals)][1], rng) if len(originals) > 1 else []
            paragraphs.extend(donor_paragraphs(html, rng, min_words=30, max_words=45))
            sib = make_sibling(html, donor)
            if sib is not None:
                group += 1
                pages.append(Page(f"https://{host}/sibling/{rel}", render_live(sib, chrome, draw_fetch(chrome, rng)),
                                  group, "sibling", host))
    paragraphs = list(dict.fromkeys(p for p in paragraphs if len(p.split()) >= 25))
    if len(paragraphs) >= 8:
        host = "shop-live.example.test"
        products = shop_pages(host, paragraphs, max(6, per_source), rng)
        chrome = live_chrome(host, seed, [page_title(h) for _, h in products])
        for url, html in products:
            group += 1
            fetch = draw_fetch(chrome, rng)
            pages.append(Page(url, render_live(html, chrome, fetch), group, "templated", host))
            again = render_live(html, chrome, redraw(chrome, fetch, "refetch", rng))
            pages.append(Page(url + "?utm_campaign=refetch", again, group, "refetch", host))
    return pages


# -- release notes: near-identical distinct pages ----------------------------------------------------
@dataclass(frozen=True)
class NewsSource:
    name: str
    package: str
    path: str  # a NEWS file (gzip), newest release first
    heading: str  # a regular expression (multiline) matching a release's heading; group 1: the version


NEWS_SOURCES = (
    NewsSource("coreutils", "coreutils", "/usr/share/doc/coreutils/NEWS.gz",
               r"^\* Noteworthy changes in release (\S+).*$"),
    NewsSource("gnutls", "libgnutls30", "/usr/share/doc/libgnutls30/NEWS.gz", r"^\* Version (\S+).*$"),
    NewsSource("glib", "libglib2.0-0", "/usr/share/doc/libglib2.0-0/NEWS.gz",
               r"^Overview of changes in GLib (\S+)\s*\n=+$"),
)
#: release sections on one release's page: its own and those of the releases just before it
RELEASE_WINDOW = 4


def news_releases(source: NewsSource) -> list[tuple[str, str]]:
    """(version, text of its section) of a NEWS file, newest first; [] when the file is absent."""
    import gzip

    try:
        with gzip.open(source.path, "rt", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return []
    heads = list(re.finditer(source.heading, text, re.MULTILINE))
    return [(m.group(1), text[m.end():heads[k + 1].start() if k + 1 < len(heads) else len(text)])
            for k, m in enumerate(heads)]


def _news_html(version: str, section: str) -> str:
    """One release's section as HTML: its heading, sub-headings (``**`` lines), paragraphs (blank-line
    separated), list items (``-`` lines)."""
    out = [f"<h2>Changes in release {html_escape(version)}</h2>"]
    for para in re.split(r"\n\s*\n", section):
        lines = [line.strip() for line in para.strip().splitlines()
                 if line.strip() and not set(line.strip()) <= set("=-")]
        if not lines:
            continue
        if lines[0].startswith("**"):
            out.append(f"<h3>{html_escape(lines.pop(0).lstrip('* '))}</h3>")
        items: list[str] = []
        for line in lines:
            if line.startswith(("- ", "* ")) or not items:
                items.append(line.lstrip("-* "))
            else:
                items[-1] += " " + line
        tag = "li" if len(items) > 1 else "p"
        body = "".join(f"<{tag}>{html_escape(item)}</{tag}>" for item in items)
        out.append(f"<ul>{body}</ul>" if tag == "li" else body)
    return "\n".join(out)


def release_pages(per_project: int, seed: int, start_group: int) -> list[Page]:
    """Per NEWS source, ``per_project`` consecutive releases (a seeded run) rendered as one site's
    release-notes pages, each with one duplicate (see the module doc)."""
    rng = random.Random(f"releases-{seed}")
    pages: list[Page] = []
    group = start_group
    for src in NEWS_SOURCES:
        releases = [r for r in news_releases(src) if len(r[1].split()) >= 30]
        if len(releases) < per_project + RELEASE_WINDOW:
            continue
        host = f"{src.name}-releases.example.test"
        first = rng.randrange(len(releases) - per_project - RELEASE_WINDOW + 1)
        others = "".join(f'<li><a href="/release/{v}.html">{html_escape(v)}</a></li>'
                         for v, _ in releases[first:first + per_project])
        for k in range(first, first + per_project):
            version = releases[k][0]
            sections = "\n".join(_news_html(v, t) for v, t in releases[k:k + RELEASE_WINDOW])
            html = (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{src.name} {version} release notes'
                    f'</title><link rel="stylesheet" href="/site.css"></head><body><header><a href="/">{src.name}'
                    f'</a></header><nav><a href="/">Home</a> <a href="/download.html">Download</a> '
                    f'<a href="/release/">Releases</a></nav><div class="layout"><div class="sidebar"><p>Other '
                    f'releases</p><ul>{others}</ul></div><div class="content"><h1>{src.name} {version} release '
                    f'notes</h1><p>This page lists the user-visible changes in {src.name} {version} and in the '
                    f'releases just before it, newest first. Report problems with this release to the '
                    f'project\'s bug tracker.</p>{sections}</div></div><footer>Copyright the {src.name} '
                    f'project. Release notes are published with each release.</footer></body></html>').encode()
            group += 1
            url = f"https://{host}/release/{version}.html"
            pages.append(Page(url, html, group, "release", host))
            for kind in rng.sample(("edit", "number", "generated", "tracking", "reformat"), 5):
                dup = make_duplicate(kind, html, rng, src.name)
                if dup is not None:
                    pages.append(Page(f"{url}?utm_source=news&utm_medium={kind}", dup, group, kind, host))
                    break
    return pages


def html_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# -- the corpus ----------------------------------------------------------------------------------
def build_corpus(per_source: int, seed: int = 7, degenerate_copies: int = 4, install: bool = True,
                 sources: Optional[tuple[Source, ...]] = None, max_bytes: int = MAX_PAGE_BYTES,
                 live_per_source: int = 0, releases_per_project: int = 0) -> list[Page]:
    """Pages in crawl order (shuffled, seeded), each with its ground-truth group.

    ``releases_per_project`` > 0 adds the release-notes hosts (:func:`release_pages`, their own
    seeded generator; the other pages stay byte for byte the same, the crawl order changes).

    ``live_per_source`` > 0 adds the live hosts (:func:`live_pages`, their own seeded generator):
    the plain hosts' pages stay byte for byte those of ``live_per_source=0``, the crawl order changes.
    """
    rng = random.Random(seed)
    pages: list[Page] = []
    group = 0
    used: dict[str, dict[str, bytes]] = {}  # the plain hosts' originals: the live hosts take others
    available = ensure_sources(install, sources or SOURCES)
    for src in available:
        originals = distinct_originals(source_files(src, max_bytes), per_source, rng)
        used[src.name] = dict(originals)
        host = f"{src.name}.example.test"
        used_donors: set[tuple[str, ...]] = set()
        for i, (path, html) in enumerate(originals):
            group += 1
            rel = os.path.relpath(path, src.pattern.split("*")[0])
            pages.append(Page(f"https://{host}/{rel}", html, group, "original", src.name))
            for kind in BASE_KINDS:
                dup = make_duplicate(kind, html, rng, src.name)
                if dup is None:
                    continue
                url = f"https://{host}/{rel}?utm_source=news&utm_medium={kind}&ref={i}"
                pages.append(Page(url, dup, group, kind, src.name))
            # A sibling must differ from every other sibling too: two siblings given the same
            # donor text would be one page twice (a near duplicate, not a hard negative).
            sib = None
            for _ in range(5 if len(originals) > 1 else 0):
                donor_path, donor_html = originals[(i + 1 + rng.randrange(len(originals) - 1)) % len(originals)]
                donor = donor_paragraphs(donor_html, rng)
                if donor and tuple(donor) not in used_donors:
                    used_donors.add(tuple(donor))
                    sib = make_sibling(html, donor)
                    break
            if sib is not None:
                group += 1
                pages.append(Page(f"https://{host}/sibling/{rel}", sib, group, "sibling", src.name))
    pages.extend(degenerate_pages(degenerate_copies, start_group=group + 1))
    if live_per_source:
        pages.extend(live_pages(available, live_per_source, seed, used, start_group=pages[-1].group + 1,
                                max_bytes=max_bytes))
    if releases_per_project:
        pages.extend(release_pages(releases_per_project, seed, start_group=pages[-1].group + 1))
    rng.shuffle(pages)
    return pages


def degenerate_pages(copies: int, start_group: int) -> list[Page]:
    out = []
    group = start_group
    for j, html in enumerate(DEGENERATE):
        for c in range(copies):
            out.append(Page(f"https://errors.example.test/p{j}/{c}", html, group, "degenerate", "errors"))
            group += 1
    return out


def tiny_corpus(seed: int = 7) -> list[Page]:
    """A generated corpus (no Debian packages needed) for the smoke test: few pages, all kinds."""
    rng = random.Random(seed)
    vocab = ("alpha beta gamma delta index table query page value column row select insert update "
             "delete commit branch merge module function class method return result error server "
             "client network request response cache token header footer layout design record").split()

    def article(n_paras: int) -> str:
        return "".join("<p>" + " ".join(rng.choice(vocab) for _ in range(rng.randint(25, 45)))
                       + f" in {rng.randint(1990, 2030)}.</p>\n" for _ in range(n_paras))

    template = ('<!DOCTYPE html><html><head><meta charset="utf-8"><title>{t}</title>'
                '<link rel="stylesheet" href="/s.css"></head><body><nav><a href="/">Home</a> '
                '<a href="/docs">Docs</a></nav><div class="sidebar">Contents: intro usage reference '
                'faq</div><div id="content"><h1>{t}</h1>\n{a}</div></body></html>')
    pages: list[Page] = []
    group = 0
    arts = [article(5) for _ in range(6)]
    for i, art in enumerate(arts):
        group += 1
        html = template.format(t=f"Page {i}", a=art).encode()
        pages.append(Page(f"https://tiny.example.test/{i}", html, group, "original", "tiny"))
        for kind in BASE_KINDS:
            dup = make_duplicate(kind, html, rng, "tiny")
            if dup is not None:
                pages.append(Page(f"https://tiny.example.test/{i}?k={kind}", dup, group, kind, "tiny"))
        group += 1
        donor = arts[(i + 1) % len(arts)]
        sib = make_sibling(html, donor_paragraphs(template.format(t="d", a=donor).encode(), rng))
        if sib is not None:
            pages.append(Page(f"https://tiny.example.test/sib/{i}", sib, group, "sibling", "tiny"))
    pages.extend(degenerate_pages(2, start_group=group + 1))
    rng.shuffle(pages)
    return pages
