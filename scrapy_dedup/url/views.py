"""Views of a page: query parameters with which common web software renders a page that is another's.

A MediaWiki diff renders the whole article below the diff, an old revision renders the
article as it was, a printable version the article without its chrome: to the content
engine each is the article's near duplicate, and when it is fetched first it would be the
page whose item a cluster keeps. :func:`is_view` tells such URLs, so the item keeper
(``content/keeper.py``) holds their items back until the page they are a view of arrives.
The table is literal and reviewable: a parameter (and, where its other values are pages of
their own, the values that make a view), the software, and what it shows. A wrong entry
costs little: it only decides which member of a cluster the content engine already judged
to be one page keeps the item, and how long a view's item waits.

The other values of such a parameter name resources of their own: MediaWiki's
``action=edit`` (the page's source in a text area) or ``action=history``, DokuWiki's
``do=edit`` or ``do=revisions``. Their text may be near the article's (a source view holds
the article's words as markup) and their title may only add a word to the article's
("Editing X"), yet a user wants them as records of their own. :func:`names_other_resource`
tells two URLs apart so: the keeper does not drop one's item as the other's duplicate.

:func:`page_key` names the page a URL shows or is a view of: the URL less its view parameters, so
that a view fetched before its page can be told apart from a sibling when the page arrives (the
item keeper joins a view to its page only when the view's text contains the page's, and only for
the page this key names).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from scrapy_dedup.url.canonical import Canonicalizer
from scrapy_dedup.url.policy import UrlPolicy

__all__ = ["ViewParameter", "VIEW_PARAMETERS", "PAGE_NAME_PARAMETERS", "is_view", "names_other_resource",
           "names_other_selection", "page_key"]


@dataclass(frozen=True)
class ViewParameter:
    """A query parameter that makes a URL a view of another page: any value, one of ``values``, or a value
    that matches ``pattern`` whole."""

    name: str
    software: str
    shows: str
    values: frozenset[str] | None = None
    pattern: re.Pattern[str] | None = None

    def makes_view(self, value: str) -> bool:
        if self.pattern is not None:
            return self.pattern.fullmatch(value) is not None
        return self.values is None or value.lower() in self.values


def _values(*names: str) -> frozenset[str]:
    return frozenset(names)


#: a full commit id (SHA-1 or SHA-256): a URL pinned to a commit shows the file as it was then
_COMMIT_ID = re.compile(r"[0-9a-fA-F]{40}|[0-9a-fA-F]{64}")


VIEW_PARAMETERS: tuple[ViewParameter, ...] = (
    ViewParameter("diff", "MediaWiki", "a diff between revisions, the article rendered below it"),
    ViewParameter("oldid", "MediaWiki", "an earlier revision of the article"),
    ViewParameter("direction", "MediaWiki", "the revision before or after oldid's (with oldid)",
                  _values("prev", "next")),
    ViewParameter("printable", "MediaWiki", "the printable version"),
    ViewParameter("curid", "MediaWiki", "the article named by its page id"),
    ViewParameter("action", "MediaWiki", "the article rendered again (render, purge's page, view)",
                  _values("view", "render", "purge", "print")),
    ViewParameter("rev", "DokuWiki", "an earlier revision of the page"),
    ViewParameter("do", "DokuWiki", "a diff, or the page exported as HTML",
                  _values("diff", "show", "export_xhtml", "export_xhtmlbody")),
    ViewParameter("preview", "WordPress", "a post previewed"),
    ViewParameter("replytocom", "WordPress", "a post with a comment's reply form open"),
    ViewParameter("print", "many CMSs", "the printable version"),
    ViewParameter("version", "Trac, many wikis", "an earlier version of the page"),
    ViewParameter("section", "MediaWiki", "no view: one section of the page (its source, with action=edit)",
                  _values()),
    ViewParameter("id", "cgit", "the file, tree or diff at the commit named by its full id", pattern=_COMMIT_ID),
    ViewParameter("hb", "gitweb", "the file at the commit named by its full id", pattern=_COMMIT_ID),
)

_BY_NAME: dict[str, ViewParameter] = {p.name: p for p in VIEW_PARAMETERS}

#: query parameters that name the page, with the path form the software also serves it under: MediaWiki's
#: ``index.php?title=X`` is ``index.php/X`` (the article's links use the second, its views the first)
PAGE_NAME_PARAMETERS: dict[str, str] = {"title": "MediaWiki: script.php?title=X is script.php/X"}

#: the default canonicalization: what it leaves out of a query (tracking and session parameters) changes nothing
_CANONICAL = Canonicalizer(UrlPolicy())


def is_view(url: str) -> bool:
    """Whether ``url``'s query names a view parameter of :data:`VIEW_PARAMETERS` (names and values compared
    case-insensitively; a pattern matches a commit id in either case). Never raises: an unparsable URL is no
    view."""
    try:
        query = urlsplit(url).query
    except ValueError:
        return False
    if not query:
        return False
    for name, value in parse_qsl(query, keep_blank_values=True):
        parameter = _BY_NAME.get(name.lower())
        if parameter is not None and parameter.makes_view(value):
            return True
    return False


def _resource_actions(url: str) -> frozenset[tuple[str, str]]:
    """The (name, value) pairs of ``url``'s query that name a resource of its own: a parameter of the table
    with listed view values (``action``, ``do``) whose value is none of them and not empty."""
    try:
        query = urlsplit(url).query
    except ValueError:
        return frozenset()
    pairs = set()
    for name, value in parse_qsl(query, keep_blank_values=True):
        parameter = _BY_NAME.get(name.lower())
        if parameter is not None and parameter.values is not None and value and not parameter.makes_view(value):
            pairs.add((parameter.name, value.lower()))
    return frozenset(pairs)


def names_other_resource(url: str, other: str) -> bool:
    """Whether ``url`` and ``other`` name different resources of a page by a parameter of the table whose
    value is no view (``?title=X&action=edit`` and ``?title=X``, or ``?title=X&action=history``); False when
    neither names one, or both the same (``action=edit`` of a page and of its section). Never raises."""
    return _resource_actions(url) != _resource_actions(other)


def _path_and_query(url: str) -> tuple[tuple[str, str], frozenset[tuple[str, str]]] | None:
    """``url`` canonicalized with the default policy (tracking and session parameters left out: they are known
    to change nothing), as (host, path) and its query's pairs, a lone page-name parameter of a ``.php`` script
    moved into the path as in :func:`page_key`; None when unparsable."""
    try:
        parts = urlsplit(_CANONICAL.canonicalize(url))
        pairs = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return None
    path = parts.path
    named = [value for name, value in pairs if name in PAGE_NAME_PARAMETERS]
    if len(named) == 1 and named[0] and path.endswith(".php"):
        path = f"{path}/{quote(named[0].replace(' ', '_'), safe='/:')}"
        pairs = [(name, value) for name, value in pairs if name not in PAGE_NAME_PARAMETERS]
    return (parts.netloc.lower(), path), frozenset(pairs)


def names_other_selection(url: str, other: str) -> bool:
    """Whether ``url`` and ``other`` are one script or page (host and path, a page-name parameter read as in
    :func:`page_key`) asked with the same query parameters, of which one has another value in each, and none of
    the parameters that differ is a view parameter of :data:`VIEW_PARAMETERS` (a view has its own rules) nor a
    tracking or session parameter (known to change nothing; left out as the default canonicalization does):
    ``?title=Special:RecentChanges&limit=100`` and ``...&limit=250``, ``?page=2`` and ``?page=3``. Such a
    parameter selects what the page shows (a window of a listing, a filter, another record), so two such
    pages may be distinct resources though their texts are near. False for the page under another name
    (another path, a parameter added or left out). Never raises."""
    ours, theirs = _path_and_query(url), _path_and_query(other)
    if ours is None or theirs is None or ours[0] != theirs[0] or ours[1] == theirs[1]:
        return False
    if {name for name, _ in ours[1]} != {name for name, _ in theirs[1]}:
        return False
    differing = ours[1] ^ theirs[1]
    return not any((parameter := _BY_NAME.get(name.lower())) is not None and parameter.makes_view(value)
                   for name, value in differing)


def page_key(url: str) -> str:
    """The page ``url`` shows, or is a view of, named by a URL: ``url`` less its fragment and the parameters
    of :data:`VIEW_PARAMETERS` that make it a view, a lone page-name parameter (:data:`PAGE_NAME_PARAMETERS`)
    on a ``.php`` script moved into the path. A view and its page have the same key
    (``index.php?title=X&oldid=7`` and ``index.php/X``; ``doku.php?id=p&rev=9`` and ``doku.php?id=p``); a
    URL that is no view is its own key, in the same form. Never raises: an unparsable URL is its own key."""
    try:
        parts = urlsplit(url)
        pairs = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return url
    kept = [(name, value) for name, value in pairs
            if (parameter := _BY_NAME.get(name.lower())) is None or not parameter.makes_view(value)]
    path = parts.path
    if len(kept) == 1 and kept[0][0] in PAGE_NAME_PARAMETERS and path.endswith(".php") and kept[0][1]:
        path, kept = f"{path}/{quote(kept[0][1].replace(' ', '_'), safe='/:')}", []
    return urlunsplit((parts.scheme, parts.netloc.lower(), path, urlencode(kept), ""))
