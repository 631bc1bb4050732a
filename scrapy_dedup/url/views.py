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
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

__all__ = ["ViewParameter", "VIEW_PARAMETERS", "is_view", "names_other_resource"]


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
