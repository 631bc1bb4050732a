"""A local news site full of site-specific DUST, for the DUST crawl tests and the example.

Every URL the site answers is mapped to the page it shows (``page_of``): that
map is the ground truth the waste and lost-page figures are measured against.

DUST on this site: ``/story?id=N`` = ``/story/N``; ``print=1`` print views
(other chrome, same text); ``sid=00NNN`` session numbers in listing links; an
ASP.NET-style ``/(S(<24 alnum>))/`` session segment in the about pages; an alias
directory ``/~editors/`` = ``/people/editors/``; ``.htm`` = ``.html`` for docs;
``page=1`` is the default page. Traps: ``page=N`` and ``category=C`` change the
content, and some stories are reachable only through page 2+ of a listing.
"""
from __future__ import annotations

import random
from urllib.parse import parse_qsl, urlsplit

from tests.support.localsite import Page

HOST = "dust.test"
EDITORS = ("alice", "bob", "carol", "dave")
DOCS = ("intro", "setup", "faq", "api")
CATEGORIES = ("world", "science", "sports")
PER_PAGE = 3
LIST_PAGES = 4
LISTED = range(1, 13)  # stories 1..12: only in the paginated /list
CATEGORY_STORIES = {c: (13 + 2 * i, 14 + 2 * i) for i, c in enumerate(CATEGORIES)}  # page 1 / page 2
STORIES = 18


def configure(list_pages: int = 4) -> None:
    """Size of the site: ``list_pages`` pages of the /list listing, 3 stories each (default: 40 pages)."""
    global LIST_PAGES, LISTED, CATEGORY_STORIES, STORIES
    LIST_PAGES = list_pages
    listed = PER_PAGE * list_pages
    LISTED = range(1, listed + 1)
    CATEGORY_STORIES = {c: (listed + 1 + 2 * i, listed + 2 + 2 * i) for i, c in enumerate(CATEGORIES)}
    STORIES = listed + 2 * len(CATEGORIES)
ABOUT = ("team", "contact", "history")
TOKENS = ("a1b2c3d4e5f6g7h8i9j0k1l2", "zz99yy88xx77ww66vv55uu44")
_VOCABULARY = [f"{a}{b}" for a in ("ka", "lo", "mi", "ne", "po", "ru", "sa", "ti") for b in
               ("ber", "dal", "fin", "gor", "han", "jul", "kem", "lis", "mon", "nar", "pel", "quo")]


def text_of(page: str) -> str:
    rng = random.Random(page)
    return f"{page} " + " ".join(rng.choice(_VOCABULARY) for _ in range(120))


def _html(page: str, links: list[str], chrome: str = "Daily News") -> str:
    anchors = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    # links live in <aside>, chrome in <nav>/<footer>: the page's text is the same in a print view
    return (f"<html><head><title>{page}</title></head><body><nav>{chrome} menu</nav><main><h1>{page}</h1>"
            f"<p>{text_of(page)}</p></main><aside><ul>{anchors}</ul></aside><footer>{chrome} footer</footer>"
            "</body></html>")


def page_of(path_qs: str) -> str | None:
    """The page id a URL path (with query) shows, or None (404)."""
    parts = urlsplit(path_qs)
    path = parts.path
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    segments = path.split("/")
    if len(segments) > 2 and segments[1] in {f"(S({t}))" for t in TOKENS}:
        path = "/" + "/".join(segments[2:])
        segments = path.split("/")
    if path == "/" and not query:
        return "home"
    if path == "/list":
        n = query.get("page", "1")
        return f"list-{n}" if n.isdigit() and 1 <= int(n) <= LIST_PAGES else None
    if path == "/section" and query.get("category") in CATEGORIES:
        n = query.get("page", "1")
        return f"cat-{query['category']}-{n}" if n in ("1", "2") else None
    story = query.get("id") if path == "/story" else (segments[2] if len(segments) == 3 and segments[1] == "story"
                                                      else None)
    if story and story.isdigit() and 1 <= int(story) <= STORIES:
        return f"story-{int(story)}"
    if len(segments) == 3 and segments[1] == "~editors" and segments[2] in EDITORS:
        return f"editor-{segments[2]}"
    if len(segments) == 4 and path.startswith("/people/editors/") and segments[3] in EDITORS:
        return f"editor-{segments[3]}"
    if len(segments) == 3 and segments[1] == "docs":
        name, _, ext = segments[2].partition(".")
        if name in DOCS and ext in ("htm", "html"):
            return f"doc-{name}"
    if len(segments) == 3 and segments[1] == "about" and segments[2] in ABOUT:
        return f"about-{segments[2]}"
    return None


def _links(page: str) -> list[str]:
    kind, _, rest = page.partition("-")
    if kind == "home":
        return (["/list"] + [f"/section?category={c}" for c in CATEGORIES]
                + ["/~editors/alice", "/people/editors/bob", "/docs/intro.htm", "/about/team",
                   f"/(S({TOKENS[0]}))/about/team"])
    if kind == "list":
        n = int(rest)
        links = []
        for i in list(LISTED)[PER_PAGE * (n - 1): PER_PAGE * n]:
            links += [f"/story?id={i}&sid=00{540 + n}", f"/story/{i}"]
        if n > 1:
            links.append(f"/list?page={n - 1}")
        if n < LIST_PAGES:
            links.append(f"/list?page={n + 1}")
        return links
    if kind == "cat":
        category, _, n = rest.partition("-")
        story = CATEGORY_STORIES[category][int(n) - 1]
        links = [f"/story/{story}", f"/story?id={story}&print=1", "/docs/setup.html", "/~editors/carol"]
        links.append(f"/section?category={category}&page=2" if n == "1" else f"/section?category={category}&page=1")
        return links
    if kind == "story":
        i = int(rest)
        editor = EDITORS[i % len(EDITORS)]
        return [f"/story/{i}?print=1", f"/story?id={i}&print=1",
                f"/~editors/{editor}" if i % 2 else f"/people/editors/{editor}", "/docs/faq.htm"]
    if kind == "editor":
        others = [e for e in EDITORS if e != rest]
        return ([f"/people/editors/{e}" for e in others[:2]] + [f"/~editors/{e}" for e in others[2:]]
                + [f"/docs/{d}.html" for d in DOCS])
    if kind == "doc":
        return [f"/docs/{d}.htm" for d in DOCS if d != rest]
    if kind == "about":
        return [p for p in ABOUT if p != rest] + [f"/(S({TOKENS[1]}))/about/history"]
    return []


def router(host: str, path_qs: str) -> Page | None:
    if host != HOST:
        return None
    page = page_of(path_qs)
    if page is None:
        return None
    printing = "print=1" in path_qs
    links = [] if printing else _links(page)
    return Page(_html(page, links, chrome="Printer friendly" if printing else "Daily News"))


def distinct_pages() -> set[str]:
    pages = {"home"} | {f"list-{n}" for n in range(1, LIST_PAGES + 1)}
    pages |= {f"cat-{c}-{n}" for c in CATEGORIES for n in (1, 2)}
    pages |= {f"story-{i}" for i in range(1, STORIES + 1)}
    pages |= {f"editor-{e}" for e in EDITORS} | {f"doc-{d}" for d in DOCS} | {f"about-{p}" for p in ABOUT}
    return pages


def waste(fetched: list[tuple[str, str]]) -> tuple[float, set[str]]:
    """(1 - distinct pages fetched / pages fetched, the distinct pages fetched)."""
    pages = {page_of(path) for host, path in fetched if host == HOST} - {None}
    return (1 - len(pages) / len(fetched) if fetched else 0.0), pages
