"""Typed rule candidates from two URLs of one page (what could explain why they differ), and the rule each
candidate stands for. This module imports nothing from Scrapy."""
from __future__ import annotations

import re

from scrapy_dedup.url.dust import (
    VALUE_SHAPES,
    DustRule,
    shape_of_segment,
    split_key,
)
from scrapy_dedup.url.canonical import SESSION_PARAMS, TRACKING_PARAMS
from scrapy_dedup.url.mining.config import _VALUE_SHAPE_ORDER


def _dirs(path: str) -> list[str]:
    """Directory prefixes of ``path``, most general first: ``/a/b/c`` -> ``/``, ``/a/``, ``/a/b/``."""
    out = ["/"]
    pos = path.find("/", 1)
    while pos != -1:
        out.append(path[: pos + 1])
        pos = path.find("/", pos + 1)
    return out


def _value_shape(value: str) -> str | None:
    for name in _VALUE_SHAPE_ORDER:
        if re.fullmatch(VALUE_SHAPES[name], value):
            return name
    return None


def _params(query: str) -> list[tuple[str, str]]:
    out = []
    for part in query.split("&") if query else ():
        name, _, value = part.partition("=")
        out.append((name, value))
    return out


def _rule_of(cand: tuple) -> DustRule | None:
    kind = cand[0]
    try:
        if kind == "drop_pathparam":
            rule = DustRule("drop_pathparam", param=cand[1], prefix="/")
        elif kind == "drop_segment":
            rule = DustRule("drop_segment", shape=cand[1], lead=cand[2], prefix="/")
        elif kind == "context":
            rule = DustRule("drop_param_when", param=cand[1], when=cand[2], prefix=cand[3])
        elif kind == "case_insensitive":
            rule = DustRule("case_insensitive")
        elif kind == "query_to_path":
            _, path, param, shape, to = cand
            rule = DustRule("query_to_path", path=path, param=param, value=shape, to=to)
        else:
            return None
        rule.check()
    except ValueError:
        return None
    return rule


def _describe_candidate(cand: tuple) -> str:
    """A candidate in words, for ``mine-dust -v``."""
    if cand[0] == "param":
        _, name, value, prefix = cand
        return f"?{name}{'' if value is None else '=' + value} under {prefix}"
    rule = _rule_of(cand)
    if rule is not None:
        return rule.describe()
    if cand[0] == "substitute":
        return f"path {cand[1]} {cand[2]!r} <-> {cand[3]!r}"
    return " ".join(map(str, cand))


_LEAD_SEGMENT = re.compile(r"[A-Za-z_\-]{1,16}")
_PATHPARAM = re.compile(r";([A-Za-z_][A-Za-z0-9_.\-]{0,63})=[^;/]*")


def _candidates(k1: str, k2: str, out: set[tuple]) -> None:
    """Typed rule candidates that would explain why two URLs of one page differ."""
    p1, q1 = split_key(k1)
    p2, q2 = split_key(k2)
    if ";" in p1 or ";" in p2:  # a session in a path parameter: dropped by name, whatever its value
        names = {m.group(1) for p in (p1, p2) for m in _PATHPARAM.finditer(p)}
        for name in names:
            out.add(("drop_pathparam", name))
        # the other candidates come from the paths without them: a path parameter's value (a session id, one
        # per visitor) is never a rule's literal (``.html`` -> ``/;jsessionid=<one visitor's token>``)
        p1, p2 = _PATHPARAM.sub("", p1), _PATHPARAM.sub("", p2)
        if (p1, q1) == (p2, q2):
            return
    if p1 == p2:
        if q1 != q2:
            _param_candidates(p1, q1, q2, out)
        return
    if q1 == q2 and p1.lower() == p2.lower():
        out.add(("case_insensitive",))
        return
    _segment_candidates(p1, p2, out)
    if q1 and not q2 or q2 and not q1 or (q1 and q2):
        _q2p_candidates(p1, q1, p2, q2, out)
        _q2p_candidates(p2, q2, p1, q1, out)
    if q1 == q2:
        _substitute_candidates(p1, p2, out)


def _param_candidates(path: str, q1: str, q2: str, out: set[tuple]) -> None:
    a, b = _params(q1), _params(q2)
    sa, sb = set(a), set(b)
    if len(sa ^ sb) > 6:
        return
    names_a = {n for n, _ in a}
    names_b = {n for n, _ in b}
    dirs = _dirs(path)
    for name, value in sa ^ sb:
        for prefix in dirs:
            out.add(("param", name, None, prefix))
            only_one_side = (name in names_a) != (name in names_b)
            if only_one_side and not _is_token(value):
                out.add(("param", name, value, prefix))
        # the parameter may matter only outside a context: another parameter both URLs carry with one value
        # (``doku.php?id=X&do=recent`` ~ ``doku.php?id=Y&do=recent``: under ``do=recent``, ``id`` is irrelevant)
        for other, other_value in sa & sb:
            if other != name and not _is_token(other_value):  # one visitor's ``sid=<token>`` is no context
                out.add(("context", name, f"{other}={other_value}", "/"))


def _segment_candidates(p1: str, p2: str, out: set[tuple]) -> None:
    # ("drop_segment", shape, lead): a token segment, with the literal segment before it when that one goes
    # too (``/s/<token>/guide/`` ~ ``/guide/``), or may (two tokens after the same ``/s/``)
    s1, s2 = p1.split("/"), p2.split("/")
    if len(s1) == len(s2):
        diff = [i for i in range(len(s1)) if s1[i] != s2[i]]
        if len(diff) == 1 and diff[0] < len(s1) - 1:
            i = diff[0]
            shape = shape_of_segment(s1[i])
            if shape is not None and shape == shape_of_segment(s2[i]):
                out.add(("drop_segment", shape, ""))
                if i > 1 and _is_lead(s1[i - 1]):
                    out.add(("drop_segment", shape, s1[i - 1]))
        return
    if abs(len(s1) - len(s2)) not in (1, 2):
        return
    longer, shorter = (s1, s2) if len(s1) > len(s2) else (s2, s1)
    width = len(longer) - len(shorter)
    for i in range(1, len(longer) - width):
        if longer[:i] + longer[i + width:] == shorter:
            shape = shape_of_segment(longer[i + width - 1])
            if shape is not None and (width == 1 or _is_lead(longer[i])):
                out.add(("drop_segment", shape, longer[i] if width == 2 else ""))
            return


def _is_lead(segment: str) -> bool:
    """A literal segment a session token may follow (``s``, ``sid``, ``session``): a short word, no token."""
    return bool(_LEAD_SEGMENT.fullmatch(segment)) and shape_of_segment(segment) is None


def _q2p_candidates(path_q: str, query: str, path_p: str, other_query: str, out: set[tuple]) -> None:
    """``path_q?name=value&rest`` ~ ``path_p?rest`` where ``value`` is a token of ``path_p``."""
    if not query:
        return
    raw = query.split("&")
    if len(raw) > 8:
        return
    for i, part in enumerate(raw):
        name, _, value = part.partition("=")
        if not value:
            continue
        if "&".join(raw[:i] + raw[i + 1:]) != other_query:
            continue
        shape = _value_shape(value)
        if shape is None:
            continue
        start = path_p.find(value)
        while start != -1:
            end = start + len(value)
            before_ok = start > 0 and not path_p[start - 1].isalnum()
            after_ok = end == len(path_p) or not path_p[end].isalnum()
            if before_ok and after_ok:
                to = path_p[:start] + "{value}" + path_p[end:]
                if "{" not in path_p and "}" not in path_p and not _has_token(path_q, to):
                    out.add(("query_to_path", path_q, name, shape, to))
                break
            start = path_p.find(value, start + 1)


def _substitute_candidates(p1: str, p2: str, out: set[tuple]) -> None:
    # a differing end of the path. Cut inside a word, it is cut back to the token boundary, which is
    # kept: ".htm" ~ ".html", "/" ~ "/index.html". Cut at a boundary it stays: "/" ~ ".html" (the
    # directory and the file of one page), "/" ~ "" (a trailing slash). A "/" only at the ends of the
    # pieces: "/intro/" ~ "/intro.html" would be one page's name, not a rule of the site.
    n = min(len(p1), len(p2))
    i = 0
    while i < n and p1[i] == p2[i]:
        i += 1
    if p1[i:i + 1].isalnum() or p2[i:i + 1].isalnum():
        while i > 0 and p1[i - 1].isalnum():
            i -= 1
        i -= 1
    a, b = p1[i:], p2[i:]
    if i > 1 and a != b and (a or b) and "/" not in a[1:-1] and "/" not in b[1:-1] and not _has_token(a, b):
        out.add(("substitute", "suffix", *sorted((a, b))))
    # a differing start of the path, cut after a "/": "/~editors/" ~ "/people/editors/"
    j = 0
    while j < n and p1[len(p1) - 1 - j] == p2[len(p2) - 1 - j]:
        j += 1
    if j == 0:
        return
    shift = len(p2) - len(p1)
    end1 = max(len(p1) - j, 1, 1 - shift)
    while end1 < len(p1) and not (p1[end1 - 1] == "/" and p2[end1 + shift - 1] == "/"):
        end1 += 1  # cut where both paths have a "/" (the common rest is whole segments)
    if end1 >= len(p1) or end1 + shift < 1 or p1[end1 - 1] != "/" or p2[end1 + shift - 1] != "/":
        return
    a, b = p1[:end1], p2[: end1 + shift]
    if a != b and a.startswith("/") and b.startswith("/") and b.endswith("/") and not _has_token(a, b):
        out.add(("substitute", "prefix", *sorted((a, b))))


def _is_token(value: str) -> bool:
    """A generated token (8 characters or more with a digit, or a long run: a session id, a commit hash) is never
    a parameter's default value: what is the default today (cgit's ``id=`` of the newest commit) is not tomorrow,
    and a session id merely seen on the page's other URL is no default at all."""
    return len(value) >= 8 and shape_of_segment(value) is not None


_ALNUM_RUN = re.compile(r"[A-Za-z0-9]{8,}")
_SWITCH = re.compile(r"(?<=[A-Za-z])(?=[0-9])|(?<=[0-9])(?=[A-Za-z])")


def _has_token(*literals: str) -> bool:
    """A literal of a rule holds a generated token (one visitor's session id in ``/s/<token>/``, a path
    parameter's value): the rule would hold for that visitor's URLs only. A token is a run of 8 letters and
    digits or more that switches between the two at least 3 times (``3jrupffvm9qy...``; not ``sha256sums``,
    ``maint-guide2``, a date): what varies per visitor is dropped by shape (``drop_segment``), never named."""
    return any(len(_SWITCH.findall(run)) >= 3 for literal in literals for run in _ALNUM_RUN.findall(literal))


REDACTED = "<token>"
_SECRET_NAMES = [name.lower() for name in (*SESSION_PARAMS, *TRACKING_PARAMS)]
_SECRET_EXACT = frozenset(name for name in _SECRET_NAMES if not name.endswith("*"))
_SECRET_PREFIXES = tuple(name[:-1] for name in _SECRET_NAMES if name.endswith("*"))
_PATHPARAM_VALUE = re.compile(r"(;[^;/?#=]*=)[^;/?#]*")
_ORIGIN = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://)(?:[^/?#@]*@)?([^/?#]*)")  # user information left out


def redact_url(url: str) -> str:
    """``url`` (a URL or a key) as the miner shows it in a rules file's ``examples`` and in reports: a crawl's
    URLs carry its visitor's session (on an authenticated crawl, a live credential). Path parameter values,
    the values of the session and tracking parameters the canonicalizer knows and every token (``_has_token``,
    in a query value or the path) become ``<token>``; user information goes. The rules keep their own
    literals, which never hold a token (``_has_token`` refuses such a candidate)."""
    origin = _ORIGIN.match(url)
    head, question, query = url[origin.end() if origin else 0:].partition("?")
    head = _ALNUM_RUN.sub(_redact_run, _PATHPARAM_VALUE.sub(r"\1" + REDACTED, head))
    query, hash_, fragment = query.partition("#")
    parts = []
    for part in query.split("&") if query else ():
        name, equals, value = part.partition("=")
        lowered = name.lower()
        secret = lowered in _SECRET_EXACT or lowered.startswith(_SECRET_PREFIXES) or _has_token(value)
        parts.append(f"{name}={REDACTED}" if equals and value and secret else part)
    return (origin.group(1) + origin.group(2) if origin else "") + head + question + "&".join(parts) + hash_ + fragment


def _redact_run(run: re.Match) -> str:
    return REDACTED if _has_token(run.group()) else run.group()
