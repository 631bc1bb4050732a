"""A seeded generator of DUST sites ("Different URLs with Similar Text") for tests and benchmarks.

``generate(seed)`` returns a :class:`DustSite`: a routing function for
:class:`tests.support.localsite.LocalSite` and, for every URL the site serves,
its ground truth (:meth:`DustSite.truth`): the id of the distinct page it shows
(or redirects to), or ``error``, which DUST forms the URL carries and which
traps the page belongs to. :func:`score` turns a crawl's fetches (in order)
into the figures a DUST benchmark reports: fetches, wasted fetches, distinct
pages, page recall, duplicate items, per URL form and per trap.

Why here (``tests/``) and not under ``benchmarks/``: the generator is test
support first (``tests/test_dustgen.py`` checks it, crawl tests use it) and
builds on ``tests/support/localsite.py``; ``benchmarks/bench_dust.py`` already
imports from the repository root, so ``from tests import dustgen`` works there.

Content: real HTML documentation that Debian ships (``git-doc`` for English
pages, ``maint-guide`` and ``maint-guide-de`` for pages with a real German
translation), loaded with ``benchmarks/quality_corpus.py``'s loader and its
near-duplicate filter (pages whose 5-word shingles overlap another's by 30% or
more are left out). Each page's main block is wrapped in a per-site template
(header, nav, aside, footer: chrome the content engine strips) with per-fetch
noise (a timestamp and a token in the chrome, and on some sites a "rendered
for visitor N" line inside the main text, so exact hashes differ per fetch).

URL forms come from a randomized grammar; each site draws a scheme for its
canonical URLs (``static`` ``/sec/slug.html``, ``pretty`` ``/sec/slug/``,
``wiki`` ``/wiki/Slug``, ``cms`` ``/2024/05/slug/``) and a random subset of
DUST families with random parameter names and values (``FAMILIES``): session
and tracking parameters, session path segments, ``;jsessionid=``, the path in a
query value, MediaWiki ``/w/index.php?title=``, directory/index/extension
aliases, default-locale and print/AMP/mobile prefixes, suffixes and
parameters, default parameters, case-insensitive paths, CMS permalinks
(``/?p=123``), opaque ids (``/item.php?id=4711``, ``/node/17``), old URL forms
that redirect (301/302), ``rel="canonical"`` in ``<link>`` and in a ``Link``
header. Traps that must NOT be merged (``TRAPS``): pagination, multi-part
pages, sort and category facets, real translations under another locale, and
misconfigured canonicals (every listing page declaring page 1, every page
declaring the home page, canonicals to 404s). Links between pages use a random
mix of forms, deterministic per (seed, page, view), so the set of URLs a
crawler can meet is finite and :meth:`DustSite.universe` enumerates it.

Determinism: the same seed gives the same site, the same URLs and the same
pages; only the per-fetch noise depends on the order of fetches.
"""
from __future__ import annotations

import functools
import html as html_lib
import random
import re
import sys
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlsplit

import lxml.html
from lxml import etree

from tests.support.localsite import Page

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import quality_corpus as qc  # noqa: E402

__all__ = ["generate", "DustSite", "Truth", "CrawlScore", "score", "FAMILIES", "TRAPS", "PACKAGES",
           "content_available", "MissingContent"]

# --------------------------------------------------------------------------------------- content

GIT_DOC = qc.Source("git", "git-doc", "/usr/share/doc/git-doc/*.html")
MAINT_EN = qc.Source("maint-guide", "maint-guide", "/usr/share/doc/maint-guide/html/*.en.html")
MAINT_DE = qc.Source("maint-guide-de", "maint-guide-de", "/usr/share/doc/maint-guide-de/html/*.de.html")
SOURCES = (GIT_DOC, MAINT_EN, MAINT_DE)
#: the Debian packages the pages come from (scripts/test.sh installs them)
PACKAGES = tuple(s.package for s in SOURCES)
MAX_SOURCE_BYTES = 80_000  # git-config.html and user-manual.html would make every crawl slow
MAX_WORDS = 2_000  # main text kept per page (the first top-level blocks)
MIN_WORDS = 150
MAX_JACCARD = 0.3  # stricter than the quality corpus: a site's distinct pages must be clearly distinct


class MissingContent(RuntimeError):
    """The Debian documentation packages are not installed."""


@dataclass(frozen=True)
class Doc:
    """One source page: its title and main block, with local links turned into placeholders."""

    name: str  # file stem without language: "git-add", "first"
    lang: str
    title: str
    blocks: tuple[str, ...]  # serialized top-level elements of the main block; href="@@k@@" placeholders
    targets: tuple[str, ...]  # doc name of placeholder k
    words: int
    excerpt: str


_LOCAL_HREF = re.compile(r"^([A-Za-z0-9_.\-]+?)(?:\.(?:en|de))?\.html(?:#.*)?$")
_PLACEHOLDER = re.compile(r'href="@@(\d+)@@"')


def _load_doc(path: str, lang: str) -> Doc | None:
    with open(path, "rb") as fh:
        raw = fh.read()
    try:
        tree = lxml.html.fromstring(raw)
    except (etree.ParserError, ValueError):
        return None
    main = qc._main_block(tree)
    if main is None:
        return None
    for bad in main.xpath(".//script|.//style|.//img"):
        bad.drop_tree()
    targets: list[str] = []
    for a in main.iter("a"):
        href = a.get("href")
        if href is None:
            continue
        m = _LOCAL_HREF.match(href)
        if m:
            a.set("href", f"@@{len(targets)}@@")
            targets.append(m.group(1))
        else:  # external or in-page: no href (a site's crawl must stay on its host)
            del a.attrib["href"]
    for el in main.iter():
        if isinstance(el.tag, str):
            el.attrib.pop("id", None)
    blocks: list[str] = []
    if main.text and main.text.strip():
        blocks.append(f"<p>{html_lib.escape(main.text.strip())}</p>")
    words = 0
    for child in main:
        if not isinstance(child.tag, str):
            continue
        text_words = len(child.text_content().split())
        if not text_words:
            continue
        child.tail = None
        blocks.append(lxml.html.tostring(child, encoding="unicode"))
        words += text_words
        if words >= MAX_WORDS:
            break
    title = " ".join((tree.findtext(".//title") or "").split()) or Path(path).stem
    plain = " ".join(main.text_content().split())
    name = _LOCAL_HREF.match(Path(path).name)
    return Doc(name.group(1) if name else Path(path).stem, lang, title, tuple(blocks), tuple(targets), words,
               " ".join(plain.split()[:32]))


def content_available() -> bool:
    return all(qc.source_files(s) for s in SOURCES)


@functools.lru_cache(maxsize=1)
def corpus() -> tuple[tuple[Doc, ...], dict[str, Doc]]:
    """(English pages, mutually distinct; German translations by doc name). Loaded once per process."""
    if not content_available():
        missing = [s.package for s in SOURCES if not qc.source_files(s)]
        raise MissingContent(f"Debian documentation packages not installed: {' '.join(missing)} "
                             f"(apt-get install -y {' '.join(missing)}; scripts/test.sh installs them)")
    english = [p for p in qc.source_files(GIT_DOC, MAX_SOURCE_BYTES) + qc.source_files(MAINT_EN, MAX_SOURCE_BYTES)
               if not p.endswith(("/index.en.html", "/index.html"))]
    picked = qc.distinct_originals(sorted(english), len(english), random.Random(0), max_jaccard=MAX_JACCARD,
                                   min_words=MIN_WORDS)
    docs = [d for d in (_load_doc(path, "en") for path, _ in sorted(picked)) if d and d.words >= MIN_WORDS]
    german = {}
    for path in qc.source_files(MAINT_DE, 400_000):
        d = _load_doc(path, "de")
        if d and d.words >= MIN_WORDS:
            german[d.name] = d
    return tuple(docs), german


# --------------------------------------------------------------------------------------- grammar

SCHEMES = ("static", "pretty", "wiki", "cms")

#: DUST families: each is a way to write a page's URL that shows the same page
FAMILIES: dict[str, str] = {
    # path aliases (one per URL at most)
    "ext": "another extension (.htm, .php, .shtml, none) for .html",
    "dirslash": "/sec/slug/ for /sec/slug.html",
    "index": "/sec/ = /sec/index.html (and / = /index.html)",
    "noslash": "/sec/slug for /sec/slug/ (often a redirect)",
    "indexfile": "/sec/slug/index.html for /sec/slug/",
    "querypath": "the path in a query value: /view.php?doc=sec/slug.html",
    "wikiquery": "MediaWiki /w/index.php?title=Slug for /wiki/Slug",
    "wikipath": "/index.php/Slug for /wiki/Slug",
    "indexphp": "WordPress PATHINFO /index.php/2024/05/slug/",
    "permalink": "CMS permalink /?p=123 for /2024/05/slug/",
    "opaque": "an opaque id: /item.php?id=4711, /node/17, /w/index.php?curid=17",
    "old": "an old URL scheme under a legacy prefix, redirected to the canonical one",
    "case": "case-insensitive paths (/Guide/Intro.html)",
    # outer layers (combine)
    "view-prefix": "print/AMP/mobile view under a prefix (/print/..., /amp/..., /m/...): other chrome",
    "view-query": "print/AMP view by a parameter (?print=1, ?output=amp): other chrome",
    "view-suffix": "AMP view under a suffix (/2024/05/slug/amp/)",
    "locale-prefix": "the default locale as a prefix: /en/... = ...",
    "locale-query": "the default locale as a parameter: ?lang=en = no parameter",
    "session-path": "a session token as a path segment: /s/<token>/..., /(S(<token>))/...",
    "session-pathparam": "a session token as a path parameter: ;jsessionid=<token>",
    "session-param": "a session token as a query parameter: ?sid=<token>",
    "tracking": "tracking parameters with random names and values (?ref=sidebar)",
    "default-param": "a parameter at its default value (?v=latest, ?format=html)",
    "default-trap-param": "a trap parameter at its default value (?page=1, ?part=1, ?sort=<default>)",
    "query-order": "the same query parameters in another order",
    "root": "the start URL / redirects to the main page (wiki sites; not drawn, always there)",
}
ALIASES = ("ext", "dirslash", "index", "noslash", "indexfile", "querypath", "wikiquery", "wikipath", "indexphp",
           "permalink", "opaque", "old")
_SCHEME_ALIASES = {
    "static": ("ext", "dirslash", "index", "querypath", "opaque", "old", "case"),
    "pretty": ("noslash", "indexfile", "ext", "querypath", "opaque", "old", "case"),
    "wiki": ("wikiquery", "wikipath", "opaque", "old", "case"),
    "cms": ("permalink", "indexphp", "noslash", "opaque", "old"),
}
_OUTER = ("view-prefix", "view-query", "locale-prefix", "locale-query", "session-path", "session-pathparam",
          "session-param", "tracking", "default-param", "default-trap-param", "query-order")

#: traps: distinct pages whose URLs look like DUST
TRAPS: dict[str, str] = {
    "pagination": "page N > 1 of a listing (?page=2, ?start=10)",
    "parts": "part N > 1 of a multi-part page (?part=2)",
    "facet-sort": "a listing in another order (?sort=title): other items on each page",
    "facet-category": "a listing of one category (?category=guide): other items",
    "language": "a real translation under another locale (/de/..., ?lang=de)",
    "canonical-listing": "misconfigured canonical: every listing page declares page 1",
    "canonical-home": "misconfigured canonical: every page declares the home page",
    "canonical-404": "misconfigured canonical: canonicals point to URLs that answer 404",
}

_HOST_WORDS = ("docs", "manual", "kb", "help", "wiki", "handbook", "guide", "support", "learn", "dev")
_SECTIONS = ("guide", "reference", "howto", "tools", "internals", "manual", "topics", "commands", "concepts",
             "tutorials", "admin", "recipes")
_SITE_NAMES = ("Acme Docs", "Northwind Help", "Orbit Handbook", "Lumen Knowledge Base", "Atlas Manual",
               "Vertex Guides", "Cobalt Wiki", "Juniper Reference", "Meridian Support", "Quartz Learning")
_SESSION_PARAM_NAMES = ("sid", "sessid", "session", "s", "sess", "visit", "_sid", "PHPSESSID", "jsessionid", "token")
_PATHPARAM_NAMES = ("jsessionid", "JSESSIONID", "phpsessid", "sid", "sessionid")
_TRACKING_NAMES = ("ref", "from", "src", "source", "trk", "via", "origin", "campaign", "cmp", "utm_source",
                   "utm_medium", "clickid", "_hsenc")
_TRACKING_VALUES = ("nav", "sidebar", "footer", "home", "rss", "newsletter", "search", "related", "top", "share")
_DEFAULT_PARAMS = (("v", "latest"), ("format", "html"), ("theme", "default"), ("version", "current"),
                   ("mode", "full"), ("display", "all"))
_LOCALE_PARAM_NAMES = ("lang", "hl", "locale", "language")
_VIEW_PREFIX = (("print", "print"), ("amp", "amp"), ("m", "mobile"), ("mobile", "mobile"), ("printable", "print"))
_VIEW_QUERY = (("print", "1", "print"), ("output", "amp", "amp"), ("printable", "yes", "print"),
               ("view", "mobile", "mobile"), ("amp", "1", "amp"), ("format", "print", "print"))
_QUERYPATH = (("/view.php", "doc"), ("/show.php", "file"), ("/doc.cgi", "path"), ("/page.asp", "f"),
              ("/display", "doc"), ("/render.php", "src"))
_OPAQUE = (("/item.php", "id"), ("/page.php", "id"), ("/content.asp", "cid"), ("/node/", None),
           ("/article", "aid"), ("/d/", None))
_OLD_PREFIX = ("/old", "/legacy", "/v1", "/docs-old", "/archive-2019")
_EXTS = (".htm", ".php", ".shtml", "", ".aspx")
_PAGE_PARAMS = (("page", "pages"), ("pg", "pages"), ("start", "offset"), ("offset", "offset"),
                ("pagenum", "pages"))
_PART_PARAMS = ("part", "pt", "chunk", "section")
_SORT_PARAMS = (("sort", ("date", "title")), ("order", ("newest", "az")), ("orderby", ("modified", "name")))
_CATEGORY_PARAMS = ("category", "cat", "topic", "tag")
_LISTING_BASES = ("/list", "/all/", "/pages/", "/contents", "/browse", "/archive/")


#: the per-fetch greetings of ``greeting_in_main`` (one word each: the whole texts stay near duplicates)
_GREETINGS = ("Hello", "Welcome", "Greetings", "Hi", "Howdy", "Salutations")


def _token(rng: random.Random, n: int) -> str:
    while True:
        t = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(n))
        if any(c.isdigit() for c in t) and any(c.isalpha() for c in t):
            return t


# --------------------------------------------------------------------------------------- the site

@dataclass(frozen=True)
class Truth:
    """What a URL of the site shows.

    ``kind``: ``page`` (200, shows ``page``), ``redirect`` (301/302 to a URL of ``page``) or
    ``error`` (404). ``forms``: the DUST families the URL carries (``()`` for the page's canonical
    URL itself). ``traps``: the trap families of the page (a trap page is a distinct page of its
    own; the tag says why a rule must not merge it).
    """

    kind: str
    page: str | None
    forms: tuple[str, ...] = ()
    traps: tuple[str, ...] = ()
    view: str = "default"
    status: int = 200
    location: str | None = None

    @property
    def label(self) -> str:
        """The page id, or ``error``."""
        return self.page if self.kind != "error" and self.page else "error"


@dataclass
class SitePage:
    id: str
    kind: str  # home, index, doc, listing
    resource: str  # the resource it belongs to (a doc name, "home", "index:<sec>", "listing")
    title: str
    traps: tuple[str, ...] = ()
    params: dict[str, str] = field(default_factory=dict)  # trap parameters (page, part, sort, category, lang)


@dataclass
class _Resource:
    key: str
    kind: str  # home, index, doc, listing
    section: str | None = None
    doc: Doc | None = None
    number: int = 0  # opaque id / permalink id
    date: tuple[int, int] = (2024, 1)
    parts: list[tuple[str, ...]] = field(default_factory=list)  # multi-part docs: blocks of each part
    translated: Doc | None = None
    core: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = field(default_factory=dict)  # alias -> (path, query)


@dataclass
class _Url:
    """A URL under construction: the layers around a resource's core path and query."""

    resource: _Resource
    alias: str = "canonical"
    params: dict[str, str] = field(default_factory=dict)  # trap parameters, canonical values
    lang: str = "en"
    view: str = "default"
    session_path: str | None = None
    session_pathparam: str | None = None
    session_param: str | None = None
    locale_default: bool = False
    tracking: tuple[tuple[str, str], ...] = ()
    default_param: bool = False
    default_trap: str | None = None  # the trap parameter written at its default value
    case: int = 0  # 0: as is; else a seed for the case variant
    shuffle: int = 0  # 0: canonical order; else a seed for the query order


class DustSite:
    """One generated site: ``router`` for LocalSite, ``truth`` for any URL, ``universe`` of linked URLs."""

    def __init__(self, seed: int, *, docs: int = 30, max_families: int = 8, greeting_in_main: bool = False):
        self.seed = seed
        rng = random.Random(f"dustgen-site-{seed}")
        english, german = corpus()
        self.host = f"{rng.choice(_HOST_WORDS)}{seed}.test"
        self.name = rng.choice(_SITE_NAMES)
        self.scheme = rng.choice(SCHEMES)
        # ---- traps
        traps = ["pagination"]
        if rng.random() < 0.5:
            traps.append("parts")
        if rng.random() < 0.5:
            traps.append("facet-sort")
        if rng.random() < 0.5:
            traps.append("facet-category")
        translatable = sorted(n for n in german if any(d.name == n for d in english))
        if translatable and rng.random() < 0.5:
            traps.append("language")
        if rng.random() < 0.4:
            traps.append(rng.choice(("canonical-listing", "canonical-home", "canonical-404")))
        self.traps = tuple(traps)
        # ---- DUST families
        aliases = list(_SCHEME_ALIASES[self.scheme])
        outer = list(_OUTER)
        if self.scheme in ("pretty", "cms"):
            outer.append("view-suffix")
        if "language" in traps:  # one locale style per site: the trap and the default share it
            self.locale_style = rng.choice(("prefix", "query"))
        else:
            self.locale_style = None
        candidates = aliases + outer
        rng.shuffle(candidates)
        chosen = candidates[:rng.randint(4, max(4, min(max_families, len(candidates))))]
        if self.locale_style:  # the default-locale form of a site with translations is its own style
            chosen = [f for f in chosen if f not in ("locale-prefix", "locale-query")]
            if rng.random() < 0.7:
                chosen.append(f"locale-{self.locale_style}")
        elif "locale-prefix" in chosen and "locale-query" in chosen:
            chosen.remove("locale-query")
        if "locale-prefix" in chosen:
            self.locale_style = self.locale_style or "prefix"
        if "locale-query" in chosen:
            self.locale_style = self.locale_style or "query"
        if sum(f in chosen for f in ("view-prefix", "view-query", "view-suffix")) > 2:
            chosen.remove("view-suffix")
        if "default-trap-param" in chosen and not ({"pagination", "parts", "facet-sort"} & set(traps)):
            chosen.remove("default-trap-param")
        self.families = tuple(sorted(chosen))
        self.redirects = {a: (a == "old" or (a == "noslash" and rng.random() < 0.7) or rng.random() < 0.25)
                          for a in ALIASES if a in self.families}
        self.redirects["root"] = True
        self.redirect_status = rng.choice((301, 302, 301))
        # ---- parameter names and values of this site
        self.session_tokens = tuple(_token(rng, rng.choice((16, 24, 32))) for _ in range(rng.randint(2, 4)))
        used: set[str] = {"p", "title", "q"}

        def pick(options, name_of=lambda o: o):
            choice = rng.choice([o for o in options if name_of(o) not in used])
            used.add(name_of(choice))
            return choice

        self.page_param, self.page_style = pick([p for p in _PAGE_PARAMS if p[0] != "p"], lambda o: o[0])
        self.session_param_name = pick(_SESSION_PARAM_NAMES)
        self.pathparam_name = rng.choice(_PATHPARAM_NAMES)
        self.session_path_style = rng.choice(("s", "asp", "sid"))
        self.tracking_names = tuple(pick(_TRACKING_NAMES) for _ in range(rng.randint(1, 3)))
        self.tracking_values = tuple(rng.sample(_TRACKING_VALUES, rng.randint(2, 5)))
        self.default_param_pair = pick(_DEFAULT_PARAMS, lambda o: o[0])
        self.locale_param = pick(_LOCALE_PARAM_NAMES)
        self.view_prefixes = tuple(rng.sample(_VIEW_PREFIX, rng.randint(1, 2)))
        self.view_queries = tuple(pick(_VIEW_QUERY, lambda o: o[0]) for _ in range(rng.randint(1, 2)))
        self.querypath = pick(_QUERYPATH, lambda o: o[1])
        self.opaque = (("/w/index.php", "curid") if self.scheme == "wiki" else
                       pick(_OPAQUE, lambda o: o[1] or "-"))
        self.old_prefix = rng.choice(_OLD_PREFIX)
        self.exts = tuple(rng.sample(_EXTS, rng.randint(1, 2)))
        self.part_param = pick(_PART_PARAMS)
        self.sort_param, self.sort_values = pick(_SORT_PARAMS, lambda o: o[0])
        self.category_param = pick(_CATEGORY_PARAMS)
        self.listing_base = rng.choice(_LISTING_BASES)
        self.index_canonical = rng.choice(("slash", "file"))
        self.p_canonical = rng.uniform(0.15, 0.5)  # share of links in the canonical form
        self.canonical_mode = rng.choice(("none", "link", "header", "both", "link"))
        if any(t.startswith("canonical-") for t in traps) and self.canonical_mode == "none":
            self.canonical_mode = "link"
        self.noise_in_main = rng.random() < 0.3
        #: a per-fetch greeting in the main text (words, which no normal form maps to one placeholder)
        self.greeting_in_main = greeting_in_main
        self.per_page = rng.randint(4, 6)
        self.theme = rng.choice(("classic", "modern", "minimal", "dark"))
        self._lock = threading.Lock()
        self._fetch_counter = 0
        self.log: list[str] = []  # every path served, in order
        self._build(rng, english, german, docs)
        self._render_cache: dict[tuple[str, str], tuple[str, list[str]]] = {}
        self._universe: dict[str, Truth] | None = None

    # ------------------------------------------------------------------ structure
    def _build(self, rng: random.Random, english: tuple[Doc, ...], german: dict[str, Doc], n_docs: int) -> None:
        pool = list(english)
        rng.shuffle(pool)
        translated_names: list[str] = []
        if "language" in self.traps:
            names = sorted(n for n in german if any(d.name == n for d in english))
            translated_names = rng.sample(names, min(len(names), rng.randint(3, 6)))
            chosen_translated = [d for d in english if d.name in translated_names]
            pool = chosen_translated + [d for d in pool if d.name not in translated_names]
        sections = rng.sample(_SECTIONS, rng.randint(2, 4))
        self.sections = tuple(sections)
        home_doc, index_docs = pool[-1], pool[-1 - len(sections):-1]
        docs = pool[:n_docs]
        self.resources: dict[str, _Resource] = {}
        numbers = rng.sample(range(100, 9999), n_docs + len(sections) + 2)
        self.resources["home"] = _Resource("home", "home", doc=home_doc, number=numbers.pop())
        for sec, d in zip(sections, index_docs):
            self.resources[f"index:{sec}"] = _Resource(f"index:{sec}", "index", section=sec, doc=d,
                                                       number=numbers.pop())
        multipart = set()
        if "parts" in self.traps:
            long_docs = [d.name for d in docs if d.words >= 900 and len(d.blocks) >= 4]
            multipart = set(rng.sample(long_docs, min(len(long_docs), rng.randint(2, 4))))
            if not multipart:  # no long page on this site: the trap cannot exist
                self.traps = tuple(t for t in self.traps if t != "parts")
        for i, d in enumerate(docs):
            r = _Resource(d.name, "doc", section=sections[i % len(sections)] if i < len(sections)
                          else rng.choice(sections), doc=d, number=numbers.pop(),
                          date=(rng.randint(2015, 2025), rng.randint(1, 12)))
            if d.name in multipart:
                wanted = rng.randint(2, 3)
                while wanted > 1 and len(r.parts) < 2:
                    r.parts = _split(d.blocks, wanted)
                    wanted -= 1
                if len(r.parts) < 2:
                    r.parts = []
            if d.name in translated_names:
                r.translated = german[d.name]
            self.resources[d.name] = r
        self.resources["listing"] = _Resource("listing", "listing", number=numbers.pop())
        self.doc_names = [d.name for d in docs]
        # listing orders: "date" (default) is a random permutation, the other sort value alphabetical
        order = self.doc_names[:]
        rng.shuffle(order)
        self.order = {self.sort_values[0]: order,
                      self.sort_values[1]: sorted(self.doc_names, key=lambda n: self.resources[n].doc.title.lower())}
        for r in self.resources.values():
            r.core = self._cores(r)
        self.pages: dict[str, SitePage] = {}
        self._page_of_params: dict[tuple, str] = {}
        self._add_page("home", "home", "home", self.name)
        for sec in sections:
            self._add_page(f"index-{sec}", "index", f"index:{sec}", sec.title())
        for name in self.doc_names:
            r = self.resources[name]
            self._add_page(f"doc-{name}", "doc", name, r.doc.title)
            for k in range(2, len(r.parts) + 1):
                self._add_page(f"doc-{name}-p{k}", "doc", name, r.doc.title, ("parts",), {"part": str(k)})
            if r.translated is not None:
                self._add_page(f"doc-{name}-de", "doc", name, r.translated.title, ("language",), {"lang": "de"})
        sorts = self.sort_values if "facet-sort" in self.traps else self.sort_values[:1]
        cats = [None] + (sections if "facet-category" in self.traps else [])
        for s in sorts:
            for cat in cats:
                for n in range(1, self._listing_pages(cat) + 1):
                    traps = tuple(t for t, on in (("pagination", n > 1), ("facet-sort", s != self.sort_values[0]),
                                                  ("facet-category", cat is not None)) if on)
                    params = {"page": str(n)} if n > 1 else {}
                    if s != self.sort_values[0]:
                        params["sort"] = s
                    if cat:
                        params["category"] = cat
                    self._add_page(f"list-{s}-{cat or 'all'}-{n}", "listing", "listing", self._listing_title(cat),
                                   traps, params)
        canonical_trap = next((t for t in self.traps if t.startswith("canonical-")), None)
        if canonical_trap:
            for p in self.pages.values():
                if canonical_trap == "canonical-home" and p.id != "home" \
                        or canonical_trap == "canonical-404" \
                        or (canonical_trap == "canonical-listing" and p.kind == "listing"
                            and p.id != self.first_listing()):
                    p.traps = p.traps + (canonical_trap,)

    def first_listing(self) -> str:
        """The id of page 1 of the listing of all pages, in the default order."""
        return f"list-{self.sort_values[0]}-all-1"

    def trap_base(self, pid: str, trap: str) -> str | None:
        """The page a rule that wrongly merges ``trap`` would take page ``pid`` for (None: no such page)."""
        page = self.pages[pid]
        if trap == "canonical-home":
            return "home"
        if trap == "canonical-listing":
            return self.first_listing()
        param = {"pagination": "page", "parts": "part", "facet-sort": "sort", "facet-category": "category",
                 "language": "lang"}.get(trap)
        if param is None or param not in page.params:
            return None
        params = {k: v for k, v in page.params.items() if k != param}
        return self._page_of_params.get((page.resource, tuple(sorted(params.items()))))

    def _add_page(self, pid: str, kind: str, resource: str, title: str, traps: tuple[str, ...] = (),
                  params: dict[str, str] | None = None) -> None:
        page = SitePage(pid, kind, resource, title, traps, dict(params or {}))
        self.pages[pid] = page
        self._page_of_params[(resource, tuple(sorted(page.params.items())))] = pid

    def _listing_items(self, sort: str, cat: str | None) -> list[str]:
        return [n for n in self.order[sort] if cat is None or self.resources[n].section == cat]

    def _listing_pages(self, cat: str | None) -> int:
        return max(1, -(-len(self._listing_items(self.sort_values[0], cat)) // self.per_page))

    def _listing_title(self, cat: str | None) -> str:
        return f"All pages of {self.name}" if cat is None else f"{cat.title()}: all pages"

    def _cores(self, r: _Resource) -> dict[str, tuple[str, tuple[tuple[str, str], ...]]]:
        """Every path alias of resource ``r`` this site serves: alias -> (path, alias query)."""
        s = self.scheme
        slug = r.key if r.kind == "doc" else None
        cores: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {}
        if r.kind == "home":
            canonical = "/wiki/Main_Page" if s == "wiki" else "/"
        elif r.kind == "listing":
            canonical = self.listing_base if s != "wiki" else "/wiki/Special:AllPages"
        elif r.kind == "index":
            if s == "wiki":
                canonical = f"/wiki/Category:{r.section.title()}"
            elif s == "cms":
                canonical = f"/category/{r.section}/"
            else:
                canonical = f"/{r.section}/" if (self.index_canonical == "slash" or s == "pretty") \
                    else f"/{r.section}/index.html"
        elif s == "static":
            canonical = f"/{r.section}/{slug}.html"
        elif s == "pretty":
            canonical = f"/{r.section}/{slug}/"
        elif s == "wiki":
            canonical = f"/wiki/{slug[:1].upper()}{slug[1:]}"
        else:
            canonical = f"/{r.date[0]}/{r.date[1]:02d}/{slug}/"
        cores["canonical"] = (canonical, ())
        if r.kind == "home" and canonical != "/":
            cores["root"] = ("/", ())  # the start URL redirects to the main page
        fam = set(self.families)
        if "ext" in fam and r.kind == "doc" and s == "static":
            cores["ext"] = (canonical[:-len(".html")] + self.exts[0], ())
        if "ext" in fam and r.kind == "doc" and s == "pretty":
            cores["ext"] = (canonical.rstrip("/") + ".html", ())
        if "dirslash" in fam and r.kind == "doc":
            cores["dirslash"] = (canonical[:-len(".html")] + "/", ())
        if "index" in fam and r.kind in ("index", "home") and s == "static":
            if r.kind == "home":
                cores["index"] = ("/index.html", ())
            elif canonical.endswith("/"):
                cores["index"] = (canonical + "index.html", ())
            else:
                cores["index"] = (canonical[:-len("index.html")], ())
        if "noslash" in fam and r.kind in ("doc", "index") and canonical.endswith("/") and canonical != "/":
            cores["noslash"] = (canonical.rstrip("/"), ())
        if "indexfile" in fam and r.kind in ("doc", "index") and canonical.endswith("/"):
            cores["indexfile"] = (canonical + "index.html", ())
        if "querypath" in fam and r.kind in ("doc", "index"):
            endpoint, param = self.querypath
            cores["querypath"] = (endpoint, ((param, canonical.lstrip("/")),))
        if "wikiquery" in fam and canonical.startswith("/wiki/"):
            cores["wikiquery"] = ("/w/index.php", (("title", canonical[len("/wiki/"):]),))
        if "wikipath" in fam and canonical.startswith("/wiki/"):
            cores["wikipath"] = ("/index.php/" + canonical[len("/wiki/"):], ())
        if "indexphp" in fam and r.kind in ("doc", "index"):
            cores["indexphp"] = ("/index.php" + canonical, ())
        if "permalink" in fam and r.kind == "doc":
            cores["permalink"] = ("/", (("p", str(r.number)),))
        if "opaque" in fam and r.kind in ("doc", "index"):
            endpoint, param = self.opaque
            cores["opaque"] = ((endpoint, ((param, str(r.number)),)) if param else (f"{endpoint}{r.number}", ()))
        if "old" in fam and r.kind in ("doc", "index"):
            cores["old"] = (self.old_prefix + canonical, ())
        return cores

    # ------------------------------------------------------------------ URLs
    def _encode(self, u: _Url) -> str:
        path, alias_query = u.resource.core[u.alias]
        if u.case:
            path = _case_variant(path, random.Random(u.case))
        prefix = ""
        if u.session_path:
            prefix += {"s": f"/s/{u.session_path}", "asp": f"/(S({u.session_path}))",
                       "sid": f"/sid-{u.session_path}"}[self.session_path_style]
        lang_query: list[tuple[str, str]] = []
        lang = u.params.get("lang", "en") if u.resource.translated is not None else "en"
        if self.locale_style == "prefix" and (lang != "en" or u.locale_default):
            prefix += f"/{lang}"
        elif self.locale_style == "query" and (lang != "en" or u.locale_default):
            lang_query.append((self.locale_param, lang))
        suffix = ""
        view_query: list[tuple[str, str]] = []
        if u.view != "default":
            kind, name, value = u.view.split(":")
            if kind == "prefix":
                prefix += f"/{name}"
            elif kind == "suffix":
                suffix = "amp/"
            else:
                view_query.append((name, value))
        if u.session_pathparam:
            suffix += f";{self.pathparam_name}={u.session_pathparam}"
        query = list(alias_query) + self._trap_query(u) + lang_query + view_query
        if u.default_param:
            query.append(self.default_param_pair)
        if u.session_param:
            query.append((self.session_param_name, u.session_param))
        query += list(u.tracking)
        if u.shuffle and len(query) > 1:
            shuffled = query[:]
            random.Random(u.shuffle).shuffle(shuffled)
            if shuffled == query:
                shuffled = query[1:] + query[:1]
            query = shuffled
        qs = "&".join(f"{k}={quote(v, safe='/:')}" for k, v in query)
        return prefix + path + suffix + ("?" + qs if qs else "")

    def _trap_query(self, u: _Url) -> list[tuple[str, str]]:
        out = []
        p = u.params
        if "category" in p:
            out.append((self.category_param, p["category"]))
        if "sort" in p:
            out.append((self.sort_param, p["sort"]))
        elif u.default_trap == "sort":
            out.append((self.sort_param, self.sort_values[0]))
        page = int(p.get("page", "1"))
        if page > 1 or u.default_trap == "page":
            out.append((self.page_param, str(page if self.page_style == "pages" else (page - 1) * self.per_page)))
        if "part" in p:
            out.append((self.part_param, p["part"]))
        elif u.default_trap == "part":
            out.append((self.part_param, "1"))
        return out

    def canonical_url(self, pid: str) -> str:
        page = self.pages[pid]
        return self._encode(_Url(self.resources[page.resource], params=dict(page.params)))

    def _link(self, rng: random.Random, pid: str, view: str = "default", propagate_view: bool = False,
              force: tuple[str, ...] = ()) -> str:
        """A link to page ``pid`` in a random mix of this site's forms (plus the drawn ones of ``force``)."""
        page = self.pages[pid]
        r = self.resources[page.resource]
        u = _Url(r, params=dict(page.params))
        if propagate_view and view != "default" and rng.random() < 0.6 and \
                (not view.startswith("suffix") or self._applies("view-suffix", u)):
            u.view = view  # an AMP or mobile page links to the AMP or mobile views of other pages
        forced = [f for f in force if f in self.families and self._applies(f, u)]
        if rng.random() < self.p_canonical and not forced:
            return self._encode(u)
        applicable = [f for f in self.families if self._applies(f, u) and f not in forced]
        n = min(len(applicable), 0 if forced else 1 if (x := rng.random()) < 0.65 else 2 if x < 0.9 else 3)
        for f in forced + rng.sample(applicable, n):
            if f in ALIASES:
                if u.alias == "canonical":
                    u.alias = f
            elif f == "case":
                u.case = rng.randrange(1, 1 << 30)
            elif f in ("view-prefix", "view-query", "view-suffix"):
                if u.view == "default":
                    if f == "view-prefix":
                        name, _ = rng.choice(self.view_prefixes)
                        u.view = f"prefix:{name}:"
                    elif f == "view-query":
                        name, value, _ = rng.choice(self.view_queries)
                        u.view = f"query:{name}:{value}"
                    else:
                        u.view = "suffix:amp:"
            elif f in ("locale-prefix", "locale-query"):
                u.locale_default = True
            elif f == "session-path":
                u.session_path = rng.choice(self.session_tokens)
            elif f == "session-pathparam":
                u.session_pathparam = rng.choice(self.session_tokens)
            elif f == "session-param":
                u.session_param = rng.choice(self.session_tokens)
            elif f == "tracking":
                names = rng.sample(self.tracking_names, rng.randint(1, len(self.tracking_names)))
                u.tracking = tuple((name, rng.choice(self.tracking_values)) for name in names)
            elif f == "default-param":
                u.default_param = True
            elif f == "default-trap-param":
                u.default_trap = self._default_trap_of(u)
            elif f == "query-order":
                u.shuffle = rng.randrange(1, 1 << 30)
        if u.view.startswith("suffix") and (not u.resource.core[u.alias][0].endswith("/")
                                            or u.resource.core[u.alias][0] == "/"):
            u.alias = "canonical"  # an AMP suffix needs a directory-style path
        return self._encode(u)

    def _default_trap_of(self, u: _Url) -> str | None:
        r = u.resource
        if r.kind == "listing":
            options = []
            if "page" not in u.params:
                options.append("page")
            if "sort" not in u.params and "facet-sort" in self.traps:
                options.append("sort")
            return options[0] if options else None
        if r.parts and "part" not in u.params:
            return "part"
        return None

    def _applies(self, family: str, u: _Url) -> bool:
        r = u.resource
        if family in ALIASES:
            return family in r.core
        if family == "case":
            return self.scheme != "cms" and any(c.isalpha() for c in r.core["canonical"][0])
        if family == "view-suffix":
            return r.core["canonical"][0].endswith("/") and r.kind in ("doc", "index")
        if family in ("locale-prefix", "locale-query"):
            return u.params.get("lang", "en") == "en"
        if family == "default-trap-param":
            return self._default_trap_of(u) is not None
        if family == "query-order":
            return True  # only changes something when the URL has two parameters or more
        return True

    # ------------------------------------------------------------------ parsing (the server)
    def truth(self, path_qs: str) -> Truth:
        """The ground truth of one URL (path with query) of this site."""
        return self._parse(path_qs)[0]

    def _parse(self, path_qs: str) -> tuple[Truth, _Url | None]:
        """Undo the layers of a URL in the reverse order of :meth:`_encode`; (truth, the URL's layers)."""
        error = Truth("error", None, status=404)
        parts = urlsplit(path_qs)
        path = parts.path or "/"
        forms: set[str] = set()
        query = parse_qsl(parts.query, keep_blank_values=True)
        if len({k for k, _ in query}) != len(query):
            return error, None
        fam = set(self.families)
        u = _Url(self.resources["home"])
        # ;jsessionid= (the last thing of the path)
        if ";" in path:
            path, _, pp = path.partition(";")
            name, _, value = pp.partition("=")
            if "session-pathparam" not in fam or name != self.pathparam_name or value not in self.session_tokens:
                return error, None
            u.session_pathparam = value
            forms.add("session-pathparam")
        # session path segment
        if "session-path" in fam:
            pattern = {"s": r"^/s/([a-z0-9]+)(/.*)$", "asp": r"^/\(S\(([a-z0-9]+)\)\)(/.*)$",
                       "sid": r"^/sid-([a-z0-9]+)(/.*)$"}[self.session_path_style]
            m = re.match(pattern, path)
            if m and m.group(1) in self.session_tokens:
                u.session_path, path = m.group(1), m.group(2)
                forms.add("session-path")
        # locale prefix
        if self.locale_style == "prefix":
            m = re.match(r"^/(en|de)(/.*)$", path)
            if m:
                u.lang, path = m.group(1), m.group(2)
                if u.lang == "en":
                    if "locale-prefix" not in fam:
                        return error, None
                    u.locale_default = True
                    forms.add("locale-prefix")
        # view prefix / suffix
        if "view-prefix" in fam:
            for name, _ in self.view_prefixes:
                if path.startswith(f"/{name}/"):
                    u.view, path = f"prefix:{name}:", path[len(name) + 1:]
                    forms.add("view-prefix")
                    break
        if "view-suffix" in fam and u.view == "default" and path.endswith("/amp/") and path != "/amp/":
            u.view, path = "suffix:amp:", path[:-len("amp/")]
            forms.add("view-suffix")
        # query layers
        rest: list[tuple[str, str]] = []
        tracking = []
        for k, v in query:
            if "view-query" in fam and u.view == "default" and any((k, v) == (n, val) for n, val, _ in
                                                                   self.view_queries):
                u.view = f"query:{k}:{v}"
                forms.add("view-query")
            elif self.locale_style == "query" and k == self.locale_param and v in ("en", "de"):
                u.lang = v
                if v == "en":
                    if "locale-query" not in fam:
                        return error, None
                    u.locale_default = True
                    forms.add("locale-query")
            elif "session-param" in fam and k == self.session_param_name and v in self.session_tokens:
                u.session_param = v
                forms.add("session-param")
            elif "tracking" in fam and k in self.tracking_names and v in self.tracking_values:
                tracking.append((k, v))
                forms.add("tracking")
            elif "default-param" in fam and (k, v) == self.default_param_pair:
                u.default_param = True
                forms.add("default-param")
            else:
                rest.append((k, v))
        u.tracking = tuple(tracking)
        # the resource: a path alias (maybe with its own query parameter)
        found = self._lookup(path, rest)
        if found is None:
            return error, None
        u.resource, u.alias, trap_query, case = found
        if u.alias != "canonical":
            forms.add(u.alias)
        if case:
            forms.add("case")
        # trap parameters -> the page
        resource = u.resource
        params: dict[str, str] = {}
        for k, v in trap_query:
            if resource.kind == "listing" and k == self.page_param and v.isdigit() and v == str(int(v)):
                if self.page_style == "offset":
                    if int(v) % self.per_page:
                        return error, None
                    n = int(v) // self.per_page + 1
                else:
                    n = int(v)
                if n < 1:
                    return error, None
                if n == 1:
                    u.default_trap = "page"
                else:
                    params["page"] = str(n)
            elif resource.kind == "listing" and k == self.sort_param and "facet-sort" in self.traps \
                    and v in self.sort_values:
                if v == self.sort_values[0]:
                    u.default_trap = "sort"
                else:
                    params["sort"] = v
            elif resource.kind == "listing" and k == self.category_param and "facet-category" in self.traps \
                    and v in self.sections:
                params["category"] = v
            elif resource.parts and k == self.part_param and v.isdigit() and v == str(int(v)):
                if v == "1":
                    u.default_trap = "part"
                else:
                    params["part"] = v
            else:
                return error, None
        if u.default_trap:
            forms.add("default-trap-param")
        if u.lang == "de":
            if resource.translated is None or "part" in params:
                return error, None
            params["lang"] = "de"
        u.params = params
        pid = self._page_of_params.get((resource.key, tuple(sorted(params.items()))))
        if pid is None:
            return error, None
        if not self._in_site_order(query):
            forms.add("query-order")
        page = self.pages[pid]
        if self.redirects.get(u.alias):
            target = replace(u, alias="canonical")
            return Truth("redirect", pid, tuple(sorted(forms)), page.traps, self._view_name(u.view),
                         self.redirect_status, self._encode(target)), u
        return Truth("page", pid, tuple(sorted(forms)), page.traps, self._view_name(u.view)), u

    def _view_name(self, view: str) -> str:
        """``default``, ``print``, ``amp`` or ``mobile``."""
        kind, _, rest = view.partition(":")
        name, _, value = rest.partition(":")
        if kind == "prefix":
            return dict(self.view_prefixes)[name]
        if kind == "query":
            return next(v for n, val, v in self.view_queries if (n, val) == (name, value))
        return "amp" if kind == "suffix" else "default"

    def _in_site_order(self, query: list[tuple[str, str]]) -> bool:
        """Whether the query's parameters come in the order :meth:`_encode` writes them."""
        rank = self._query_rank()
        ranks = [rank.get(k, 99) for k, _ in query]
        return ranks == sorted(ranks)

    @functools.lru_cache(maxsize=None)  # noqa: B019 - a test session builds a few sites, kept to its end anyway
    def _query_rank(self) -> dict[str, int]:
        names = [self.querypath[1], "title", "p", self.opaque[1], self.category_param, self.sort_param,
                 self.page_param, self.part_param, self.locale_param]
        names += [n for n, _, _ in self.view_queries] + [self.default_param_pair[0], self.session_param_name]
        rank: dict[str, int] = {}
        for i, n in enumerate(names):
            if n and n not in rank:
                rank[n] = i
        for n in self.tracking_names:  # tracking pairs keep their own (link) order: one rank
            rank.setdefault(n, 40)
        return rank

    def _lookup(self, path: str, query: list[tuple[str, str]]):
        """(resource, alias, remaining query, case variant?) for a path (+ alias query parameter), or None."""
        table, lower = self._alias_tables()
        tables = [(table, path, False)]
        if "case" in self.families:
            tables.append((lower, path.lower(), True))
        for tab, key_path, case in tables:  # an alias parameter first: /?p=12 is not the home page
            for i, (k, v) in enumerate(query):
                hit = tab.get((key_path, (k, v)))
                if hit is not None:
                    return hit[0], hit[1], query[:i] + query[i + 1:], case and path != hit[2]
            hit = tab.get((key_path, None))
            if hit is not None:
                return hit[0], hit[1], query, case and path != hit[2]
        return None

    @functools.lru_cache(maxsize=None)  # noqa: B019 - as above
    def _alias_tables(self):
        table: dict = {}
        lower: dict = {}
        for r in self.resources.values():
            for alias, (path, q) in r.core.items():
                key = (path, q[0] if q else None)
                table[key] = (r, alias, path)
                lower.setdefault((path.lower(), key[1]), (r, alias, path))
        return table, lower

    def reset_log(self) -> None:
        """Forget the fetches served so far (before each crawl of the site)."""
        with self._lock:
            self.log = []
            self._fetch_counter = 0

    # ------------------------------------------------------------------ rendering
    def router(self, host: str, path_qs: str) -> Page | None:
        """LocalSite's routing function: records the fetch, answers the page (or a redirect, or 404)."""
        if host != self.host:
            return None
        with self._lock:
            self.log.append(path_qs)
            self._fetch_counter += 1
            n = self._fetch_counter
        truth, u = self._parse(path_qs)
        if truth.kind == "error":
            return None
        if truth.kind == "redirect":
            return Page(f'<html><body><p>Moved to <a href="{html_lib.escape(truth.location)}">here</a></p>'
                        "</body></html>", status=truth.status, headers={"Location": truth.location})
        body, _ = self._rendered(truth.page, u.view)
        headers = {}
        canonical = self._declared_canonical(truth.page)
        if canonical and self.canonical_mode in ("header", "both"):
            headers["Link"] = f'<{canonical}>; rel="canonical"'
        return Page(self._noise(body, n, path_qs), headers=headers)

    def _noise(self, body: str, n: int, path_qs: str) -> str:
        rng = random.Random(f"{self.seed}:{n}:{path_qs}")
        stamp = f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:" \
                f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
        return (body.replace("@@STAMP@@", stamp).replace("@@TOKEN@@", _token(rng, 32))
                .replace("@@VISITOR@@", str(rng.randint(10_000, 99_999)))
                .replace("@@GREETING@@", rng.choice(_GREETINGS)))

    def _declared_canonical(self, pid: str) -> str | None:
        if self.canonical_mode == "none":
            return None
        page = self.pages[pid]
        if "canonical-home" in page.traps:
            return self.canonical_url("home")
        if "canonical-listing" in page.traps:
            return self.canonical_url(self.first_listing())
        if "canonical-404" in page.traps:
            return "/en-us" + self.canonical_url(pid)
        return self.canonical_url(pid)

    def _rendered(self, pid: str, view: str) -> tuple[str, list[str]]:
        key = (pid, view)
        with self._lock:
            cached = self._render_cache.get(key)
        if cached is None:
            cached = self._render(pid, view)
            with self._lock:
                self._render_cache[key] = cached
        return cached

    def _render(self, pid: str, view: str) -> tuple[str, list[str]]:
        """(HTML with noise placeholders, every link in it) of page ``pid`` in ``view``."""
        page = self.pages[pid]
        r = self.resources[page.resource]
        vname = self._view_name(view)
        rng = random.Random(f"dustgen-render-{self.seed}-{pid}-{view}")
        links: list[str] = []
        propagate = vname == "amp" or vname == "mobile"

        def link(target: str, force: tuple[str, ...] = ()) -> str:
            href = self._link(rng, target, view, propagate, force)
            links.append(href)
            return html_lib.escape(href, quote=True)

        lang = page.params.get("lang", "en")
        main = self._main(page, r, link, lang)
        if self.noise_in_main:
            main += '<p class="rendered">Rendered for visitor @@VISITOR@@ at @@STAMP@@.</p>'
        if self.greeting_in_main:
            main += '<p class="greeting">@@GREETING@@, visitor! Thanks for reading our documentation.</p>'
        title = f"{page.title} | {self.name}"
        canonical = self._declared_canonical(pid)
        head = f'<meta charset="utf-8"><title>{html_lib.escape(title)}</title>'
        if canonical and self.canonical_mode in ("link", "both"):
            head += f'<link rel="canonical" href="{html_lib.escape(canonical)}">'
        head += '<meta name="csrf-token" content="@@TOKEN@@">'
        head += f'<link rel="stylesheet" href="/static/{self.theme}-{vname}.css">'
        if vname == "print":
            body = (f'<header><p>{html_lib.escape(self.name)}: printer-friendly version</p></header>'
                    f'<main class="print">{main}</main>'
                    f'<footer><p>Printed @@STAMP@@ from {html_lib.escape(self.name)}.</p></footer>')
        else:
            # the navigation is the template's: the same links, in the same forms, on every page of a view
            nav_rng = random.Random(f"dustgen-nav-{self.seed}-{view}")
            nav_links = [self._link(nav_rng, target, view, propagate) for target in
                         ["home", self.first_listing()] + [f"index-{s}" for s in self.sections]]
            links.extend(nav_links)
            nav_links = [html_lib.escape(h, quote=True) for h in nav_links]
            nav = "".join(f'<li><a href="{h}">{t}</a></li>' for h, t in
                          zip(nav_links, ["Home", "All pages"] + [s.title() for s in self.sections]))
            if r.translated is not None and page.kind == "doc" and "part" not in page.params:
                other = f"doc-{r.key}" if lang == "de" else f"doc-{r.key}-de"
                nav += f'<li><a href="{link(other)}">{"English" if lang == "de" else "Deutsch"}</a></li>'
            related = [p for p in self.pages if p != pid and self.pages[p].kind in ("doc", "index")]
            aside = "".join(f'<li><a href="{link(t)}">{html_lib.escape(self.pages[t].title)}</a></li>'
                            for t in rng.sample(related, min(len(related), rng.randint(3, 6))))
            views = ""
            for _ in range(rng.randint(0, 2)):
                views += f'<a href="{link(pid)}">Other view</a> '
            header = (f'<header><div class="brand">{html_lib.escape(self.name)}</div>'
                      f'<div class="banner">{"AMP" if vname == "amp" else "Mobile" if vname == "mobile" else "Docs"}'
                      f" edition</div></header>")
            form = ('<form action="/search" method="post"><input type="hidden" name="csrf" value="@@TOKEN@@">'
                    '<input type="text" name="q"></form>')
            body = (f'{header}<nav class="{self.theme}"><ul>{nav}</ul>{form}</nav>'
                    f'<main class="{vname}">{main}</main>'
                    f'<aside><h2>Related</h2><ul>{aside}</ul></aside>'
                    f'<footer><p>{views}Generated @@STAMP@@ (request @@TOKEN@@). '
                    f'Copyright {html_lib.escape(self.name)}.</p></footer>')
        html = f'<!DOCTYPE html><html lang="{lang}"><head>{head}</head><body class="{self.theme}">{body}</body></html>'
        return html, links

    def _main(self, page: SitePage, r: _Resource, link, lang: str) -> str:
        esc = html_lib.escape
        if page.kind == "listing":
            sort = page.params.get("sort", self.sort_values[0])
            cat = page.params.get("category")
            n = int(page.params.get("page", "1"))
            items = self._listing_items(sort, cat)
            total = max(1, -(-len(items) // self.per_page))
            shown = items[(n - 1) * self.per_page: n * self.per_page]
            out = [f"<h1>{esc(page.title)}</h1><p>Page {n} of {total}, sorted by {esc(sort)}.</p><ul>"]
            for name in shown:
                d = self.resources[name].doc
                out.append(f'<li><h2><a href="{link("doc-" + name)}">{esc(d.title)}</a></h2>'
                           f"<p>{esc(d.excerpt)}</p></li>")
            out.append('</ul><p class="pager">')
            if n > 2:  # pagers write page 1 with its parameter: ?page=1 (a classic DUST form)
                first = f"list-{sort}-{cat or 'all'}-1"
                out.append(f'<a href="{link(first, ("default-trap-param",))}">First</a> ')
            for k in (n - 1, n + 1):
                pid = f"list-{sort}-{cat or 'all'}-{k}"
                if pid in self.pages:
                    out.append(f'<a href="{link(pid, ("default-trap-param",) if k == 1 else ())}">'
                               f'{"Previous" if k < n else "Next"}</a> ')
            out.append("</p>")
            facets = []
            forced_default = ("default-trap-param",)  # "sort by date" links write the default order
            if "facet-sort" in self.traps:
                facets += [f"list-{s}-{cat or 'all'}-1" for s in self.sort_values if s != sort]
            if "facet-category" in self.traps:
                facets += [f"list-{sort}-{c}-1" for c in self.sections if c != cat]
            if facets:
                out.append("<p>" + " ".join(
                    f'<a href="{link(f, forced_default if "facet-sort" in self.traps else ())}">'
                    f'{esc(f.split("-")[1])} {esc(f.split("-")[2])}</a>' for f in facets) + "</p>")
            return "".join(out)
        doc = r.translated if lang == "de" else r.doc
        blocks = doc.blocks
        head = f"<h1>{esc(page.title)}</h1>"
        tail = ""
        if r.parts and lang != "de":
            k = int(page.params.get("part", "1"))
            blocks = r.parts[k - 1]
            head = f"<h1>{esc(page.title)} (part {k} of {len(r.parts)})</h1>"
            for j in (k - 1, k + 1):
                if 1 <= j <= len(r.parts):
                    target = f"doc-{r.key}" if j == 1 else f"doc-{r.key}-p{j}"
                    tail += f'<p><a href="{link(target, ("default-trap-param",) if j == 1 else ())}">Part {j}</a></p>'
        if page.kind == "index":
            members = [n for n in self.doc_names if self.resources[n].section == r.section]
            tail += "<ul>" + "".join(f'<li><a href="{link("doc-" + m)}">{esc(self.resources[m].doc.title)}</a></li>'
                                     for m in members) + "</ul>"
        if page.kind == "home":
            head = f"<h1>Welcome to {esc(self.name)}</h1>"
        text = "".join(blocks)
        by_name = {n: n for n in self.doc_names}

        def repl(m: re.Match) -> str:
            target = doc.targets[int(m.group(1))]
            if target in by_name and target != r.key:
                pid = f"doc-{target}-de" if lang == "de" and self.resources[target].translated is not None \
                    else f"doc-{target}"
                return f'href="{link(pid)}"'
            return ""

        return head + _PLACEHOLDER.sub(repl, text) + tail

    # ------------------------------------------------------------------ the ground truth as a whole
    def universe(self) -> dict[str, Truth]:
        """Every URL a crawler that follows every link (and redirect) from ``/`` can meet, with its truth."""
        if self._universe is not None:
            return self._universe
        seen: dict[str, Truth] = {}
        todo = ["/"]
        while todo:
            url = todo.pop()
            if url in seen:
                continue
            truth, u = self._parse(url)
            seen[url] = truth
            if truth.kind == "redirect":
                todo.append(truth.location)
            elif truth.kind == "page":
                todo.extend(self._rendered(truth.page, u.view)[1])
        self._universe = seen
        return seen

    def distinct_pages(self) -> set[str]:
        """The distinct pages reachable from ``/`` (the denominator of recall)."""
        return {t.page for t in self.universe().values() if t.kind == "page"}

    def page_html(self, pid: str, view: str = "default", fetch: int = 0) -> str:
        """Page ``pid`` as the site serves it in ``view`` (noise of fetch number ``fetch``)."""
        return self._noise(self._rendered(pid, view)[0], fetch, pid)

    def views(self) -> list[str]:
        out = ["default"]
        if "view-prefix" in self.families:
            out += [f"prefix:{n}:" for n, _ in self.view_prefixes]
        if "view-query" in self.families:
            out += [f"query:{n}:{v}" for n, v, _ in self.view_queries]
        if "view-suffix" in self.families:
            out.append("suffix:amp:")
        return out

    def describe(self) -> str:
        redirected = [a for a, on in self.redirects.items() if on and a != "root"]
        return (f"{self.host}: scheme {self.scheme}, {len(self.pages)} pages; DUST: {', '.join(self.families)}; "
                f"traps: {', '.join(self.traps)}; redirects: {', '.join(redirected) or 'none'}")


def _split(blocks: Sequence[str], parts: int) -> list[tuple[str, ...]]:
    """Cut ``blocks`` into ``parts`` runs of about equal word counts, or [] when a run would be short."""
    sizes = [len(re.sub(r"<[^>]+>", " ", b).split()) for b in blocks]
    total = sum(sizes)
    cuts = [0]
    acc = 0
    for i, size in enumerate(sizes):
        acc += size
        if len(cuts) < parts and acc >= total * len(cuts) / parts and i + 1 < len(blocks):
            cuts.append(i + 1)
    cuts.append(len(blocks))
    runs = [(tuple(blocks[a:b]), sum(sizes[a:b])) for a, b in zip(cuts, cuts[1:])]
    # every part must be a page of its own (the content engine ignores pages of few words)
    if len(runs) != parts or min(words for _, words in runs) < MIN_WORDS:
        return []
    return [run for run, _ in runs]


def _case_variant(path: str, rng: random.Random) -> str:
    """The path with the case of some letters changed (a case-insensitive server serves it too)."""
    segments = path.split("/")
    candidates = [i for i, s in enumerate(segments) if any(c.isalpha() for c in s)]
    if not candidates:
        return path
    i = rng.choice(candidates)
    seg = segments[i]
    style = rng.randrange(3)
    variant = seg.upper() if style == 0 else seg[:1].swapcase() + seg[1:] if style == 1 else seg.title()
    if variant == seg:
        variant = seg.swapcase()
    segments[i] = variant
    return "/".join(segments)


@functools.lru_cache(maxsize=64)
def generate(seed: int, *, docs: int = 30, greeting_in_main: bool = False) -> DustSite:
    """The DUST site of ``seed`` (``docs`` pages of content besides home, indexes and listings; with
    ``greeting_in_main``, a per-fetch greeting in every page's main text)."""
    return DustSite(seed, docs=docs, greeting_in_main=greeting_in_main)


# --------------------------------------------------------------------------------------- scoring

@dataclass
class CrawlScore:
    """Figures of one crawl of one site (from the site's log of fetches, in order)."""

    fetches: int
    distinct: int  # distinct pages fetched
    reachable: int  # distinct pages reachable from "/"
    page_fetches: int
    redirects: int
    errors: int
    items: int
    duplicate_items: int  # items of a page that already gave an item
    per_form: dict[str, list[int]]  # form -> [fetches, wasted]
    per_trap: dict[str, list[int]]  # trap -> [pages reachable, pages fetched]

    @property
    def wasted(self) -> int:
        """Fetches that brought no page not fetched before (repeats under other URLs, redirect hops, errors)."""
        return self.fetches - self.distinct

    @property
    def waste(self) -> float:
        return self.wasted / self.fetches if self.fetches else 0.0

    @property
    def recall(self) -> float:
        return self.distinct / self.reachable if self.reachable else 1.0

    @property
    def requests_per_page(self) -> float:
        return self.fetches / self.distinct if self.distinct else float("inf")


def score(site: DustSite, fetched: Sequence[str], items: Iterable[str] = ()) -> CrawlScore:
    """Score one crawl: ``fetched`` the paths the site served in order (``site.log``), ``items`` item URLs."""
    seen: set[str] = set()
    per_form: dict[str, list[int]] = {}
    redirects = errors = page_fetches = 0
    for path_qs in fetched:
        t = site.truth(path_qs)
        new = t.kind == "page" and t.page not in seen
        if t.kind == "page":
            page_fetches += 1
            seen.add(t.page)
        elif t.kind == "redirect":
            redirects += 1
        else:
            errors += 1
        for form in t.forms or (("canonical",) if t.kind != "error" else ("error",)):
            entry = per_form.setdefault(form, [0, 0])
            entry[0] += 1
            entry[1] += not new
    reachable = site.distinct_pages()
    per_trap: dict[str, list[int]] = {}
    for pid in reachable:
        for trap in site.pages[pid].traps:
            entry = per_trap.setdefault(trap, [0, 0])
            entry[0] += 1
            entry[1] += pid in seen
    item_pages: Counter[str] = Counter()
    n_items = 0
    for url in items:
        parts = urlsplit(url)
        t = site.truth(parts.path + ("?" + parts.query if parts.query else ""))
        n_items += 1
        item_pages[t.label] += 1
    duplicate_items = sum(n - 1 for n in item_pages.values())
    return CrawlScore(len(fetched), len(seen), len(reachable), page_fetches, redirects, errors, n_items,
                      duplicate_items, per_form, per_trap)


def require_content() -> None:
    """Fail (CI) or skip (elsewhere) a pytest test when the documentation packages are missing."""
    from tests.support import require

    require(content_available(), f"Debian documentation packages missing: apt-get install -y {' '.join(PACKAGES)} "
            "(scripts/test.sh installs them)")
