"""DUST rules: per-host URL rewrites learned from a crawl ("Different URLs with Similar Text").

Bar-Yossef, Keidar and Schonfeld ("Do Not Crawl in the DUST", WWW 2007) showed
that many sites serve one page under many URLs for site-specific reasons no
generic normalization can know (``/story?id=7`` is ``/story/7``, ``print=1`` is
chrome only, ``sid=00544`` is a session number). :mod:`scrapy_dedup.url.mining`
learns such rules from a crawl log; this module holds them, loads and saves the
human-editable rules file, validates it, and applies the rules fast.

Rules are *typed and literal*: each is one of :data:`RULE_KINDS` (applied in
that order; docs/dust.md's "Rule kinds" table says what each rewrites) with
literal strings and fixed token shapes; a rules file never carries a regular
expression (a regex learned from a log is impossible to review and easy to make
catastrophic). Beside the rules, a host may carry an **alias table**: exact URLs
(after the rules) that stand for another URL of the host, learned from redirects
no rule explains; looked up once, after the rules, and refused at load where a
target's key is another alias's (the result stays idempotent). At most
:data:`MAX_ALIASES` per host.

Rules work on the URL after the canonicalizer's safe RFC 3986 steps and before
its optional switches, so a rule mined on raw log URLs fires however the switches
are set. A rule set is applied to a fixed point (at most :data:`MAX_PASSES`
passes), so rules compose (``/story?id=7&print=1`` -> ``/story/7``) and the
result is idempotent; a file whose rules undo each other is refused at load.

This module imports nothing from Scrapy.
"""
from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union
from urllib.parse import urlsplit, urlunsplit

from scrapy_dedup._util.files import atomic_write

__all__ = [
    "DustRule", "HostRules", "RuleSet", "DustRulesError", "RULE_KINDS", "VALUE_SHAPES",
    "shape_of_segment", "compile_shape", "load_rules", "FORMAT", "MAX_ALIASES", "split_key", "join_key",
]

FORMAT = "scrapy-dedup-dust/1"
MAX_PASSES = 4
#: aliases per host a rules file may carry (the table is a dict in memory: bounded, so a file stays reviewable)
MAX_ALIASES = 10_000
#: the largest rules file loaded (16 MiB: 64,000 rules as mine-dust writes them are 4-8 MB and load in about
#: 1.4 s, ``benchmarks/bench_rules_load.py``; loading is linear, so the limit bounds the start-up at several seconds)
MAX_FILE_BYTES = 16 * 2**20

RULE_KINDS: tuple[str, ...] = (
    "drop_pathparam", "drop_segment", "case_insensitive", "drop_param", "default_param", "drop_param_when",
    "query_to_path", "substitute",
)

#: value shapes a ``query_to_path`` rule may capture; none can contain ``?``, ``#``, ``%`` or ``..``;
#: only ``path`` holds ``/`` (whole segments, never a leading ``/`` or a dot segment: ``doc=guide/intro.html``)
VALUE_SHAPES: dict[str, str] = {
    "digits": r"[0-9]{1,20}",
    "alnum": r"[A-Za-z0-9]{1,64}",
    "slug": r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}",
    "path": (r"(?!(?:[^/]*/)*\.\.?(?:/|\Z))[A-Za-z0-9_~:\-][A-Za-z0-9_.~:\-]{0,127}"
             r"(?:/[A-Za-z0-9_.~:\-]{1,128}){0,15}/?"),
}

#: token classes of segment shapes: ``<digits:5>`` (exactly 5) or ``<hex>`` (1 or more)
_TOKEN_CLASSES: dict[str, str] = {
    "digits": "0-9",
    "hex": "0-9a-fA-F",
    "alpha": "A-Za-z",
    "alnum": "A-Za-z0-9",
}
_TOKEN = re.compile(r"<(digits|hex|alpha|alnum)(?::([0-9]{1,3}))?>")


class DustRulesError(ValueError):
    """A rules file or rule that cannot be used; the message names the file and the rule."""


def compile_shape(shape: str) -> re.Pattern[str]:
    """The matcher of a segment shape: literal characters and ``<class[:length]>`` tokens.

    A token matches what :func:`shape_of_segment` gives that shape: ``<alnum:N>`` and ``<hex:N>`` of fewer
    than 16 characters only a run with a digit and a letter in it (``v1``, never the word ``de`` nor the
    month ``01``, whose shape is ``<digits:2>``).

    The regex is built by us from the typed tokens, never taken from input:
    every literal is escaped. Raises ``ValueError`` on an unknown token.
    """
    parts: list[str] = []
    pos = 0
    for match in _TOKEN.finditer(shape):
        parts.append(re.escape(shape[pos:match.start()]))
        klass, chars = match.group(1), _TOKEN_CLASSES[match.group(1)]
        length = int(match.group(2)) if match.group(2) else 0
        if klass in ("alnum", "hex") and 0 < length < _WORD_LENGTH:
            # a run shorter than a word's limit is a token only with a digit in it, and an all-digit run is
            # <digits:N> (shape_of_segment): the shape of the version segment v1 must match neither the word
            # de (a translation, another page) nor the month 01 of a dated permalink (another page)
            parts.append(f"(?=[{chars}]{{0,{length - 1}}}[0-9])(?=[{chars}]{{0,{length - 1}}}[A-Za-z])")
        parts.append(f"[{chars}]{{{length}}}" if length else f"[{chars}]+")
        pos = match.end()
    rest = shape[pos:]
    if "<" in rest or ">" in rest:
        raise ValueError(f"unknown token in shape {shape!r} (known: <digits>, <hex>, <alpha>, <alnum>, with :length)")
    parts.append(re.escape(rest))
    if "/" in shape or not shape:
        raise ValueError(f"a segment shape cannot be empty or contain '/': {shape!r}")
    return re.compile("".join(parts) + r"\Z")


_RUN = re.compile(r"[A-Za-z0-9]+")
#: a run of letters this long or longer is a token without a digit (shorter: a word, kept literal)
_WORD_LENGTH = 16


def shape_of_segment(segment: str) -> str | None:
    """The token shape of a path segment that looks like a generated token, else None.

    Runs of letters and digits become typed tokens with their exact length when
    they contain a digit or are 16 characters or longer (``(S(a1b2...))`` ->
    ``(S(<alnum:24>))``, ``00544`` -> ``<digits:5>``); short words stay literal,
    so ``story`` or ``en`` never become a shape.
    """
    out: list[str] = []
    pos = 0
    tokens = 0
    for match in _RUN.finditer(segment):
        run = match.group()
        out.append(segment[pos:match.start()])
        if run.isdigit():
            out.append(f"<digits:{len(run)}>")
            tokens += 1
        elif any(c.isdigit() for c in run) or len(run) >= _WORD_LENGTH:
            klass = "hex" if all(c in "0123456789abcdef" for c in run) or all(
                c in "0123456789ABCDEF" for c in run) else "alnum"
            out.append(f"<{klass}:{len(run)}>")
            tokens += 1
        else:
            out.append(run)
        pos = match.end()
    out.append(segment[pos:])
    if not tokens or "<" in segment or ">" in segment:
        return None
    return "".join(out)


def _lower_path(path: str) -> str:
    """Lowercase a path but keep percent-escapes' hex uppercase (the safe steps' form)."""
    if "%" not in path:
        return path.lower()
    return re.sub(r"%[0-9a-fA-F]{2}", lambda m: m.group().upper(), path.lower())


def _params(query: str) -> list[str]:
    return query.split("&") if query else []


def _under(path: str, prefix: str) -> bool:
    return prefix == "/" or path.startswith(prefix)


@dataclass(frozen=True)
class DustRule:
    """One typed, literal rewrite rule with the evidence it was kept on.

    ``support`` counts URL pairs that agree with the rule (distinct pages in
    ``support_pages``), ``violations`` pairs where the rewrite would have merged
    different content; ``examples`` are (from, to) pairs. Evidence fields are
    informational: applying a rule never reads them.
    """

    kind: str
    param: str = ""
    value: str = ""
    prefix: str = "/"
    path: str = ""
    to: str = ""
    from_: str = ""
    anchor: str = ""
    shape: str = ""
    #: ``drop_segment`` only: a literal segment before the token, dropped with it (``/s/<token>/``)
    lead: str = ""
    #: ``drop_param_when`` only: the context, another parameter with its value (``do=recent``), literal
    when: str = ""
    support: int = 0
    support_pages: int = 0
    violations: int = 0
    examples: tuple[tuple[str, str], ...] = ()
    note: str = ""

    # --- file form ---

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind}
        for name in _FIELDS[self.kind]:
            if name in _OPTIONAL and not getattr(self, name):
                continue
            data["from" if name == "from_" else name] = getattr(self, name)
        data["support"] = self.support
        data["support_pages"] = self.support_pages
        data["violations"] = self.violations
        if self.examples:
            data["examples"] = [list(e) for e in self.examples]
        if self.note:
            data["note"] = self.note
        return data

    @classmethod
    def from_json(cls, data: Any, where: str) -> DustRule:
        """Build and validate a rule from its JSON object; ``where`` names the file and the rule."""
        if not isinstance(data, Mapping):
            raise DustRulesError(f"{where}: a rule must be a JSON object, got {type(data).__name__}")
        kind = data.get("kind")
        if kind not in _FIELDS:
            raise DustRulesError(f"{where}: unknown rule kind {kind!r}; known kinds: {', '.join(RULE_KINDS)}")
        allowed = set(_FIELDS[kind]) | {"kind", "support", "support_pages", "violations", "examples", "note"}
        allowed = {"from" if a == "from_" else a for a in allowed}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise DustRulesError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))} for a {kind} rule; "
                                 f"allowed: {', '.join(sorted(allowed))}")
        values: dict[str, Any] = {"kind": kind}
        for name in _FIELDS[kind]:
            key = "from" if name == "from_" else name
            if key not in data:
                if name == "prefix" or name in _OPTIONAL:
                    continue
                raise DustRulesError(f"{where}: a {kind} rule needs {key!r}")
            if not isinstance(data[key], str):
                raise DustRulesError(f"{where}: {key!r} must be a string, got {data[key]!r}")
            values[name] = data[key]
        for name in ("support", "support_pages", "violations"):
            value = data.get(name, 0)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise DustRulesError(f"{where}: {name!r} must be a non-negative integer, got {value!r}")
            values[name] = value
        examples = data.get("examples", [])
        if not isinstance(examples, list) or not all(
                isinstance(e, (list, tuple)) and len(e) == 2 and all(isinstance(x, str) for x in e) for e in examples):
            raise DustRulesError(f"{where}: 'examples' must be a list of [from, to] URL pairs")
        values["examples"] = tuple(tuple(e) for e in examples)
        if not isinstance(data.get("note", ""), str):
            raise DustRulesError(f"{where}: 'note' must be a string")
        values["note"] = data.get("note", "")
        rule = cls(**values)
        try:
            rule.check()
        except ValueError as exc:
            raise DustRulesError(f"{where}: {exc}") from None
        return rule

    def check(self) -> None:
        """Raise ``ValueError`` if the rule cannot be applied safely (would not terminate, or is void)."""
        if self.kind in ("drop_param", "default_param", "drop_segment", "drop_pathparam", "drop_param_when") \
                or self.prefix != "/":
            if not self.prefix.startswith("/"):
                raise ValueError(f"prefix must start with '/', got {self.prefix!r}")
        if self.kind in ("drop_param", "default_param", "query_to_path", "drop_param_when"):
            if not self.param or any(c in self.param for c in "&=#?"):
                raise ValueError(f"param must be a query parameter name, got {self.param!r}")
        if self.kind == "drop_param_when":
            name, eq, value = self.when.partition("=")
            if not eq or not name or any(c in self.when for c in "&#?") or name == self.param:
                raise ValueError(f"when must be another query parameter with its value ('do=recent'), "
                                 f"got {self.when!r}")
        if self.kind == "drop_pathparam" and (not self.param or any(c in self.param for c in ";=/?#&%")):
            raise ValueError(f"param must be a path parameter name, got {self.param!r}")
        if self.kind == "query_to_path":
            if not self.path.startswith("/"):
                raise ValueError(f"path must start with '/', got {self.path!r}")
            if self.value not in VALUE_SHAPES:
                raise ValueError(f"value must be one of {', '.join(VALUE_SHAPES)}, got {self.value!r}")
            if self.to.count("{value}") != 1 or not self.to.startswith("/"):
                raise ValueError(f"to must be a path starting with '/' holding '{{value}}' once, got {self.to!r}")
            if any(c in self.to for c in "?#") or "{" in self.to.replace("{value}", ""):
                raise ValueError(f"to must be a plain path, got {self.to!r}")
        elif self.kind == "substitute":
            if self.anchor not in ("prefix", "suffix"):
                raise ValueError(f"anchor must be 'prefix' or 'suffix', got {self.anchor!r}")
            if self.from_ == self.to or not self.from_:
                raise ValueError("from must be non-empty and differ from to")
            if any(c in self.from_ + self.to for c in "?#"):
                raise ValueError("from and to are path pieces: no '?' or '#'")
            if self.anchor == "prefix":
                if not (self.from_.startswith("/") and self.to.startswith("/")):
                    raise ValueError("a prefix substitution maps a path start to a path start ('/...')")
                if self.to.startswith(self.from_):
                    raise ValueError(f"{self.from_!r} -> {self.to!r} would fire again on its own result")
            elif self.to.endswith(self.from_):
                raise ValueError(f"{self.from_!r} -> {self.to!r} would fire again on its own result")
        elif self.kind == "drop_segment":
            compile_shape(self.shape)
            if self.lead and not _LEAD.fullmatch(self.lead):
                raise ValueError(f"lead must be one literal path segment (letters, digits, '_.~-'), got {self.lead!r}")

    def describe(self) -> str:
        """One line for logs and reports."""
        if self.kind == "query_to_path":
            return f"{self.path}?{self.param}=<{self.value}> -> {self.to.replace('{value}', '<' + self.value + '>')}"
        if self.kind == "drop_segment" and self.lead:
            return f"drop path segments {self.lead}/{self.shape} under {self.prefix}"
        return _DESCRIPTIONS[self.kind].format(rule=self)

    @property
    def key(self) -> tuple:
        """Identity of the rule regardless of its evidence."""
        return (self.kind, self.param, self.value, self.prefix, self.path, self.to, self.from_, self.anchor,
                self.shape, self.lead, self.when)


_DESCRIPTIONS = {
    "drop_param": "drop ?{rule.param}= under {rule.prefix}",
    "default_param": "?{rule.param}={rule.value} is the default under {rule.prefix}",
    "drop_param_when": "drop ?{rule.param}= when ?{rule.when} under {rule.prefix}",
    "substitute": "path {rule.anchor} {rule.from_!r} -> {rule.to!r}",
    "drop_segment": "drop path segment {rule.shape} under {rule.prefix}",
    "drop_pathparam": "drop path parameter ;{rule.param}= under {rule.prefix}",
    "case_insensitive": "paths are case-insensitive",
}

#: fields a rules file may leave out (and that are written only when set)
_OPTIONAL = frozenset({"lead"})
_LEAD = re.compile(r"[A-Za-z0-9_.~\-]{1,32}")

_FIELDS: dict[str, tuple[str, ...]] = {
    "drop_pathparam": ("param", "prefix"),
    "drop_segment": ("shape", "lead", "prefix"),
    "case_insensitive": (),
    "drop_param": ("param", "prefix"),
    "default_param": ("param", "value", "prefix"),
    "drop_param_when": ("param", "when", "prefix"),
    "query_to_path": ("path", "param", "value", "to"),
    "substitute": ("anchor", "from_", "to"),
}


class HostRules:
    """The rules of one host, compiled for the hot path: ``apply(path, query) -> (path, query)``.

    ``apply`` rewrites to a fixed point (rules compose); ``query`` is without ``?`` ('' when none).
    """

    __slots__ = ("host", "rules", "_segments", "_segment_match", "_segment_search", "_segment_prefixes",
                 "_lowercase", "_params", "_q2p", "_heads", "_tails", "_param_search",
                 "_head_match", "_tail_match", "_root_sub", "_root_alternatives", "_narrow", "apply", "changes",
                 "_once", "aliases", "_pathparams", "alias_of", "_lead_drops", "_contexts")

    def __init__(self, host: str, rules: Sequence[DustRule], aliases: Mapping[str, str] | None = None):
        self.host = host
        self.rules = tuple(rules)
        #: "path?query" -> "path?query" (after the rules), looked up once the rules reached their fixed point
        self.aliases: dict[str, str] = dict(aliases or {})
        segments = [r for r in rules if r.kind == "drop_segment" and not r.lead]
        # a token after a literal segment (``/s/<token>/``): both go, by one regex per rule (literal escaped)
        self._lead_drops = [(r.prefix, re.compile(f"/{re.escape(r.lead)}/{compile_shape(r.shape).pattern[:-2]}(?=/)"))
                            for r in rules if r.kind == "drop_segment" and r.lead]
        self._segments = [(r.prefix, compile_shape(r.shape).match) for r in segments]
        # one matcher for every shape (each compiled from its typed tokens, literals escaped): one
        # regex call per segment however many shapes; prefixes are checked only on a match
        shapes = "|".join(f"(?:{compile_shape(r.shape).pattern[:-2]})" for r in segments)  # without \Z
        self._segment_match = re.compile(f"(?:{shapes})\\Z").match if segments else None
        # a segment (not the last one) of any shape: one C-level search of the path before any splitting
        self._segment_search = re.compile(f"/(?:{shapes})/").search if segments else None
        self._segment_prefixes = any(r.prefix != "/" for r in segments)
        self._lowercase = any(r.kind == "case_insensitive" for r in rules)
        # ";name=value" path parameters: name -> prefixes; one regex finds every named parameter
        self._pathparams: dict[str, list[str]] = {}
        for r in rules:
            if r.kind == "drop_pathparam":
                self._pathparams.setdefault(r.param, []).append(r.prefix)
        # param name -> [(prefix, default value or None)]
        self._params: dict[str, list[tuple[str, str | None]]] = {}
        for r in rules:
            if r.kind == "drop_param":
                self._params.setdefault(r.param, []).append((r.prefix, None))
            elif r.kind == "default_param":
                self._params.setdefault(r.param, []).append((r.prefix, r.value))
        # context rules: parameter -> [(prefix, "name=value" of the context)]
        self._contexts: dict[str, list[tuple[str, str]]] = {}
        for r in rules:
            if r.kind == "drop_param_when":
                self._contexts.setdefault(r.param, []).append((r.prefix, r.when))
        # path -> [(param, compiled value shape, template head, template tail)]
        self._q2p: dict[str, list[tuple[str, Any, str, str]]] = {}
        for r in rules:
            if r.kind == "query_to_path":
                head, tail = r.to.split("{value}")
                self._q2p.setdefault(r.path, []).append(
                    (r.param, re.compile(VALUE_SHAPES[r.value] + r"\Z").match, head, tail))
        # substitutions: literal -> replacement, found by one C-level match of a trie of the literals
        # (the longest literal wins); suffixes are matched on the reversed path
        self._heads = {r.from_: r.to for r in rules if r.kind == "substitute" and r.anchor == "prefix"}
        self._tails = {r.from_[::-1]: r.to for r in rules if r.kind == "substitute" and r.anchor == "suffix"}
        self._head_match = re.compile(_trie_pattern(self._heads)).match if self._heads else None
        self._tail_match = re.compile(_trie_pattern(self._tails)).match if self._tails else None
        # does the query hold a parameter a param rule names? one C-level search (names are escaped literals)
        # rules under "/" (the common case) remove their parameters with one C-level regex substitution;
        # rules under a narrower prefix go through the loop, entered only when their names occur
        root_drop, root_default, narrow = _param_families(self._params)
        alternatives = []
        if root_drop:
            alternatives.append(f"(?:{_trie_pattern(root_drop)})(?:=[^&]*)?")
        if root_default:
            alternatives.append(_trie_pattern(root_default))
        self._root_sub = (re.compile(f"(?:^|&)(?:{'|'.join(alternatives)})(?=&|$)").sub if alternatives else None)
        self._root_alternatives = tuple(alternatives)
        names = _trie_pattern(narrow)
        self._param_search = re.compile(f"(?:^|&)(?:{names})(?:=|&|$)").search if narrow else None
        self._narrow = frozenset(narrow)

        #: apply(path, query) -> (path, query): the rules to a fixed point; query without "?" ('' when none)
        #: changes(path, query) -> (path, query) or None: the same, None when no rule fires (the hot path's form)
        self.apply, self.changes, self.alias_of = self._compile()

    def _compile(self) -> tuple[Any, Any, Any]:
        """The rules as two closures over local names (no attribute lookups on the hot path).

        ``changes`` opens with a gate: for each rule family one cheap test that is true whenever a
        rule of that family fires (a set lookup of the path's first or last characters, a substring
        test, one regex search of the query for the parameter rules that can apply under this path).
        Most URLs of a host with rules pass none and cost only the gate. ``once`` is one pass of every
        rule, each family behind the same test.
        """
        segment_search, drops_segment = self._segment_search, self._drops_segment
        segment_literal = _required_literal([r.shape for r in self.rules if r.kind == "drop_segment" and not r.lead])
        lead_drops = self._lead_drops
        lead_search = (re.compile("|".join(f"(?:{sub.pattern})" for _, sub in lead_drops)).search
                       if lead_drops else None)
        lowercase = self._lowercase
        pathparams = self._pathparams
        pathparam_search = (re.compile(f";({_trie_pattern(pathparams)})=[^;/]*").search if pathparams else None)
        root_sub, param_search, params = self._root_sub, self._param_search, self._params
        alternatives, narrow = list(self._root_alternatives), self._narrow
        # the query's parameter rules. Under "/" they are exact in ``root_gate`` (a default of "" also lets
        # a bare ``name`` through: the loop of ``once`` drops it when it runs). A parameter with a rule
        # under a narrower prefix is found by name, and only on paths that start like one of those
        # prefixes, unless one of its rules is under "/" or a bare ``name`` may be dropped: then everywhere.
        bare = sorted({n for n, rs in params.items() for p, d in rs if p == "/" and d == ""})
        if bare:
            alternatives.append(_trie_pattern(bare))
        root_alternatives = "|".join(f"(?:{a})" for a in alternatives)
        root_gate = re.compile(f"&(?:{root_alternatives})(?=&|$)").search if alternatives else None
        narrow_prefixes = {p for n in narrow for p, _ in params[n]}
        narrow_everywhere = "/" in narrow_prefixes
        narrow_loop_everywhere = narrow_everywhere or bool(bare)
        narrow_len = min(map(len, narrow_prefixes)) if narrow_prefixes and not narrow_everywhere else 0
        narrow_starts = frozenset(p[:narrow_len] for p in narrow_prefixes)
        narrow_alternative = f"(?:{_trie_pattern(narrow)})(?=[=&]|$)" if narrow else ""
        param_gate = (re.compile(f"&(?:(?:{root_alternatives})(?=&|$)|{narrow_alternative})").search
                      if alternatives and narrow else
                      re.compile(f"&{narrow_alternative}").search if narrow else None)
        # context rules: the gate looks for a context ("&do=recent") in "&" + query; rare, so cheap
        contexts = self._contexts
        context_gate = (re.compile(f"&(?:{_trie_pattern({w for rs in contexts.values() for _, w in rs})})(?=&|$)")
                        .search if contexts else None)
        # query_to_path: path -> [(param, "param=", value matcher, template head, template tail)]; a rule
        # needs its parameter with a value, so the gate looks for "&param=" in "&" + query
        q2p = {path: [(c[0], c[0] + "=", *c[1:]) for c in cands] for path, cands in self._q2p.items()} or None
        q2p_keys = {path: tuple(f"&{c[0]}=" for c in cands) for path, cands in self._q2p.items()} or None
        # substitutions: the first (last) characters of the path, as many as the shortest literal has
        heads, tails = self._heads, self._tails
        head_match, tail_match = self._head_match, self._tail_match
        head_len = min(map(len, heads)) if heads else 0
        head_starts = frozenset(h[:head_len] for h in heads)
        tail_len = min(map(len, tails)) if tails else 0
        tail_ends = frozenset(t[::-1][-tail_len:] for t in tails)

        def once(path: str, query: str) -> tuple[str, str]:
            if lead_search is not None and lead_search(path) is not None:
                for prefix, drop in lead_drops:
                    if _under(path, prefix):
                        path = drop.sub("", path)
            if pathparam_search is not None and ";" in path:
                found = pathparam_search(path)
                while found is not None:
                    if any(_under(path, p) for p in pathparams[found.group(1)]):
                        path = path[:found.start()] + path[found.end():]
                        found = pathparam_search(path, found.start())
                    else:
                        found = pathparam_search(path, found.end())
            if segment_search is not None and (segment_literal is None or segment_literal in path) \
                    and segment_search(path) is not None:
                segs = path.split("/")
                kept = [s for s in segs[1:-1] if not drops_segment(path, s)]
                if len(kept) != len(segs) - 2:
                    path = "/" + "/".join(kept + [segs[-1]]) if kept else "/" + segs[-1]
            if lowercase:
                path = _lower_path(path)
            if query:
                if root_sub is not None:
                    stripped = root_sub("", query)
                    if stripped != query:
                        query = stripped[1:] if stripped[:1] == "&" and query[:1] != "&" else stripped
                if query and param_search is not None and (
                        narrow_loop_everywhere or path[:narrow_len] in narrow_starts) \
                        and param_search(query) is not None:
                    kept_parts = []
                    for part in query.split("&"):
                        name, _, value = part.partition("=")
                        rules = params.get(name)
                        if rules and any(_under(path, p) and (d is None or d == value) for p, d in rules):
                            continue
                        kept_parts.append(part)
                    query = "&".join(kept_parts)
                if context_gate is not None and query and context_gate("&" + query) is not None:
                    parts = query.split("&")
                    present = set(parts)
                    kept_parts = [part for part in parts if not any(
                        when in present and _under(path, prefix)
                        for prefix, when in contexts.get(part.partition("=")[0], ()))]
                    query = "&".join(kept_parts)
                if q2p is not None and query:
                    candidates = q2p.get(path)
                    if candidates:
                        parts = query.split("&")
                        for param, key, match, head, tail in candidates:
                            hits = [i for i, part in enumerate(parts) if part == param or part.startswith(key)]
                            if len(hits) == 1:
                                value = parts[hits[0]].partition("=")[2]
                                if match(value):
                                    path = head + value + tail
                                    del parts[hits[0]]
                                    query = "&".join(parts)
                                    break
            if head_len and path[:head_len] in head_starts:
                found = head_match(path)  # type: ignore[misc]
                if found is not None:
                    old = found.group()
                    path = heads[old] + path[len(old):]
            if tail_len and path[-tail_len:] in tail_ends:
                found = tail_match(path[::-1])  # type: ignore[misc]
                # never the whole path, unless what replaces it is a path (".html" alone is none)
                if found is not None and (found.end() < len(path) or tails[found.group()][:1] == "/"):
                    old = found.group()
                    path = path[: len(path) - len(old)] + tails[old]
            return path, query

        def rule_changes(path: str, query: str, passes: int = MAX_PASSES) -> tuple[str, str] | None:
            """The rules to a fixed point (at most ``passes`` passes); None when the URL comes out unchanged."""
            # --- the gate
            if not ((segment_search is not None and (segment_literal is None or segment_literal in path)
                     and segment_search(path) is not None)
                    or (lead_search is not None and lead_search(path) is not None)
                    or (pathparam_search is not None and ";" in path and pathparam_search(path) is not None)
                    or (lowercase and (path != path.lower() or "%" in path))
                    or (head_len and path[:head_len] in head_starts)
                    or (tail_len and path[-tail_len:] in tail_ends)):
                if not query:
                    return None
                amp_query = "&" + query
                if narrow_everywhere or (narrow_len and path[:narrow_len] in narrow_starts):
                    hit = param_gate(amp_query) is not None  # type: ignore[misc]
                else:
                    hit = root_gate is not None and root_gate(amp_query) is not None
                if not hit and context_gate is not None:
                    hit = context_gate(amp_query) is not None
                if not hit:
                    keys = q2p_keys.get(path) if q2p_keys is not None else None
                    if keys is None:
                        return None
                    for key in keys:
                        if key in amp_query:
                            break
                    else:
                        return None
            # --- a rule may fire: one pass, then again on its result while passes are left
            new_path, new_query = once(path, query)
            if passes > 1 and (new_path != path or new_query != query):
                # the rules alone (never the alias table below: it is looked up once, on the fixed point)
                again = rule_changes(new_path, new_query, passes - 1)  # None: the result is a fixed point
                if again is not None:
                    new_path, new_query = again
            if new_path == path and new_query == query:
                return None
            return new_path, new_query

        targets = {key: split_key(target) for key, target in self.aliases.items()}
        changes = rule_changes
        # the canonical key of each alias: its target through the rules
        keys = {key: (rule_changes(*target) or target) for key, target in targets.items()}

        def alias_of(path: str, query: str) -> tuple[str, str] | None:
            """The alias target of the URL (the URL to request in its place), None when it is no alias."""
            if not targets:
                return None
            new_path, new_query = rule_changes(path, query) or (path, query)
            return targets.get(join_key(new_path, new_query))

        if targets:
            def aliased_changes(path: str, query: str, passes: int = MAX_PASSES) -> tuple[str, str] | None:
                """The rules, then one lookup of the result in the alias table."""
                changed = rule_changes(path, query, passes)
                new_path, new_query = changed or (path, query)
                return keys.get(join_key(new_path, new_query), changed)

            changes = aliased_changes

        def apply(path: str, query: str) -> tuple[str, str]:
            return changes(path, query) or (path, query)

        self._once = once
        return apply, changes, alias_of

    def _drops_segment(self, path: str, segment: str) -> bool:
        if not self._segment_prefixes:
            return self._segment_match(segment) is not None  # type: ignore[misc]
        return any(_under(path, p) and m(segment) for p, m in self._segments)

    def fired(self, path: str, query: str) -> bool:
        return self.apply(path, query) != (path, query)


def _param_families(params: Mapping[str, list[tuple[str, str | None]]]
                    ) -> tuple[frozenset[str], list[str], frozenset[str]]:
    """The parameter rules by how they are applied: names dropped under "/", ``name=default`` pairs
    dropped under "/", names with a rule under a narrower prefix.

    One pass each, membership in sets (a list here made loading quadratic: 64,000 rules took 39 s).
    """
    root_drop = frozenset(n for n, rs in params.items() if any(p == "/" and d is None for p, d in rs))
    root_default = sorted({f"{n}={d}" for n, rs in params.items() for p, d in rs
                           if p == "/" and d is not None and n not in root_drop})
    narrow = frozenset(n for n, rs in params.items() if n not in root_drop and any(p != "/" for p, _ in rs))
    return root_drop, root_default, narrow


def split_key(key: str) -> tuple[str, str]:
    """``"path?query"`` (the form of the alias table and of the miner's URLs) -> ``(path, query)``."""
    path, _, query = key.partition("?")
    return path, query


def join_key(path: str, query: str) -> str:
    """``(path, query)`` -> ``"path?query"`` (``"path"`` without a query)."""
    return f"{path}?{query}" if query else path


def _required_literal(shapes: Sequence[str]) -> str | None:
    """A literal every path holding a segment of one of ``shapes`` contains (``(S(`` for ``(S(<alnum:24>))``).

    None when there are several shapes or the shape has no literal of two characters or more: the
    segment regex is then searched on every path.
    """
    if len(shapes) != 1:
        return None
    literals = [piece for piece in _TOKEN.split(shapes[0])[::3] if len(piece) >= 2]
    return max(literals, key=len) if literals else None


def _trie_pattern(words: Iterable[str]) -> str:
    """A regex alternation of literal ``words`` factored as a trie (``id|idx|junk1`` -> ``id(?:x)?|junk1``).

    Python's regex engine tries alternatives one by one; factored by common prefixes a
    non-matching position is rejected at its first character. Every piece is escaped.
    """
    trie: dict = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def build(node: dict) -> str:
        end = "" in node
        branches = [re.escape(char) + build(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if end:
            return f"(?:{body})?"
        return body

    return build(trie)


PathOrRules = Union[str, "os.PathLike[str]", "RuleSet", Sequence[Union[str, "os.PathLike[str]"]], None]


@dataclass
class RuleSet:
    """Per-host DUST rules: load/save the rules file, apply them per host.

    ``apply(host, path, query)`` is the canonicalizer's hook; ``rewrite(url)``
    the stand-alone form for URLs that already went through the safe steps.
    Hosts match exactly (host name without port, lowercase, as the safe steps
    write it): rules learned on ``www.example.com`` say nothing about ``example.com``.
    """

    hosts: dict[str, list[DustRule]] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    source: str = "<memory>"
    #: host -> {"path?query": "path?query"}: the alias table (see the module docstring)
    aliases: dict[str, dict[str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        #: host -> compiled rules; the canonicalizer's hot path reads this dict directly (one lookup)
        self.by_host: dict[str, HostRules] = {}
        self._compiled = self.by_host
        self.recompile()

    def recompile(self) -> None:
        """Rebuild the compiled per-host form (after editing ``hosts``); the dict is updated in place."""
        self._compiled.clear()
        for host in set(self.hosts) | set(self.aliases):
            self._compile_host(host)

    def _compile_host(self, host: str) -> None:
        rules, aliases = self.hosts.get(host, []), self.aliases.get(host, {})
        if rules or aliases:
            self._compiled[host.lower()] = HostRules(host.lower(), rules, aliases)
        else:
            self._compiled.pop(host.lower(), None)

    def alias_count(self) -> int:
        return sum(len(a) for a in self.aliases.values())

    # --- hot path ---

    def for_host(self, host: str) -> HostRules | None:
        """The compiled rules of ``host`` or None (one dict lookup: hosts without rules cost nothing)."""
        return self._compiled.get(host)

    def apply(self, host: str, path: str, query: str) -> tuple[str, str]:
        rules = self._compiled.get(host)
        if rules is None:
            return path, query
        return rules.apply(path, query)

    def rewrite(self, url: str) -> str:
        """Apply the rules of the URL's host to ``url`` (a URL after the safe steps); never raises."""
        try:
            parts = urlsplit(url)
            host = (parts.hostname or "").lower()
        except ValueError:
            return url
        rules = self._compiled.get(host)
        if rules is None:
            return url
        path, query = rules.apply(parts.path or "/", parts.query)
        return urlunsplit((parts.scheme, parts.netloc, path, query, parts.fragment))

    def __len__(self) -> int:
        return sum(len(r) for r in self.hosts.values())

    def __bool__(self) -> bool:
        return bool(self._compiled)

    # --- composition ---

    def add(self, host: str, rule: DustRule) -> bool:
        """Add ``rule`` to ``host`` unless an equal rule is there; recompiles that host. True if added."""
        host = host.lower()
        rules = self.hosts.setdefault(host, [])
        if any(r.key == rule.key for r in rules):
            return False
        rules.append(rule)
        self._compile_host(host)
        return True

    def remove(self, host: str, rule: DustRule) -> bool:
        host = host.lower()
        rules = self.hosts.get(host, [])
        kept = [r for r in rules if r.key != rule.key]
        if len(kept) == len(rules):
            return False
        self.hosts[host] = kept
        self._compile_host(host)
        return True

    def merged(self, other: RuleSet) -> RuleSet:
        hosts = {h: list(r) for h, r in self.hosts.items()}
        for host, rules in other.hosts.items():
            have = {r.key for r in hosts.get(host, [])}
            hosts.setdefault(host, []).extend(r for r in rules if r.key not in have)
        aliases = {h: dict(a) for h, a in self.aliases.items()}
        for host, table in other.aliases.items():
            for key, target in table.items():
                aliases.setdefault(host, {}).setdefault(key, target)  # the first file's alias wins
        return RuleSet(hosts, {**self.meta, **other.meta}, f"{self.source} + {other.source}", aliases)

    # --- file ---

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            **({"meta": self.meta} if self.meta else {}),
            "hosts": {host: [r.to_json() for r in rules] for host, rules in sorted(self.hosts.items()) if rules},
            **({"aliases": {host: dict(sorted(table.items())) for host, table in sorted(self.aliases.items())
                            if table}} if any(self.aliases.values()) else {}),
        }

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the rules file (JSON, one rule per object, sorted hosts) atomically."""
        text = self.dumps()
        atomic_write(path, lambda f: f.write((text + "\n").encode("utf-8")))

    def dumps(self) -> str:
        """The rules file's text: one rule per line, so a rule is reviewed, edited or deleted as a line."""
        data = self.to_json()
        lines = ["{", f'  "format": {json.dumps(data["format"])},']
        if "meta" in data:
            lines.append(f'  "meta": {json.dumps(data["meta"], ensure_ascii=False)},')
        lines.append('  "hosts": {')
        hosts = list(data["hosts"].items())
        for h, (host, rules) in enumerate(hosts):
            lines.append(f"    {json.dumps(host)}: [")
            for i, rule in enumerate(rules):
                comma = "," if i < len(rules) - 1 else ""
                lines.append(f"      {json.dumps(rule, ensure_ascii=False)}{comma}")
            lines.append("    ]" + ("," if h < len(hosts) - 1 else ""))
        lines.append("  }")
        if "aliases" in data:  # one alias per line, as the rules
            lines[-1] = "  },"
            lines.append('  "aliases": {')
            tables = list(data["aliases"].items())
            for h, (host, table) in enumerate(tables):
                lines.append(f"    {json.dumps(host)}: {{")
                items = list(table.items())
                for i, (key, target) in enumerate(items):
                    comma = "," if i < len(items) - 1 else ""
                    pair = f"{json.dumps(key, ensure_ascii=False)}: {json.dumps(target, ensure_ascii=False)}"
                    lines.append(f"      {pair}{comma}")
                lines.append("    }" + ("," if h < len(tables) - 1 else ""))
            lines.append("  }")
        lines.append("}")
        return "\n".join(lines)

    @classmethod
    def from_json(cls, data: Any, source: str = "<memory>") -> RuleSet:
        if not isinstance(data, Mapping):
            raise DustRulesError(f"{source}: a rules file is a JSON object with 'format' and 'hosts'")
        if "format" not in data:
            raise DustRulesError(f"{source}: no 'format' key: a rules file says what it is "
                                 f"(\"format\": {json.dumps(FORMAT)})")
        if data["format"] != FORMAT:
            raise DustRulesError(f"{source}: unknown format {data.get('format')!r}, expected {FORMAT!r}")
        unknown = sorted(set(data) - {"format", "meta", "hosts", "aliases"})
        if unknown:
            raise DustRulesError(f"{source}: unknown top-level key(s) {', '.join(map(repr, unknown))}")
        hosts_data = data.get("hosts", {})
        if not isinstance(hosts_data, Mapping):
            raise DustRulesError(f"{source}: 'hosts' must map host names to lists of rules")
        meta = data.get("meta", {})
        if not isinstance(meta, Mapping):
            raise DustRulesError(f"{source}: 'meta' must be an object")
        hosts: dict[str, list[DustRule]] = {}
        compiled: dict[str, HostRules] = {}
        for host, rules_data in hosts_data.items():
            if not _is_host(host):
                raise DustRulesError(f"{source}: {host!r} is not a host name (lowercase, no port, no scheme)")
            if not isinstance(rules_data, list):
                raise DustRulesError(f"{source}: hosts[{host!r}] must be a list of rules")
            rules = [DustRule.from_json(item, f"{source}: hosts[{host!r}] rule {i + 1}")
                     for i, item in enumerate(rules_data)]
            compiled[host] = check_host(rules, f"{source}: hosts[{host!r}]", host)
            hosts[host] = rules
        aliases = _aliases_from_json(data.get("aliases", {}), compiled, source)
        # each host compiled once (checked above), again only where it has aliases
        ruleset = cls({}, dict(meta), source, {})
        ruleset.hosts, ruleset.aliases = hosts, aliases
        for host in set(hosts) | set(aliases):
            if aliases.get(host) or not hosts.get(host):
                ruleset._compile_host(host)
            else:
                ruleset.by_host[host] = compiled[host]
        return ruleset

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> RuleSet:
        """Load and validate a rules file; :class:`DustRulesError` names the file and the rule.

        Only a regular file of at most :data:`MAX_FILE_BYTES` is read: a FIFO, a
        device (``/dev/zero``) or a directory is refused from its ``fstat``
        before a byte is read (opened non-blocking: a FIFO without a writer
        does not hang the start), a larger file from its size.
        """
        source = os.fspath(path)
        try:
            fd = os.open(source, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            raise DustRulesError(f"{source}: cannot read DUST rules file: {exc.strerror or exc}") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise DustRulesError(f"{source}: not a regular file ({_file_kind(info.st_mode)}): a rules file "
                                     "is a JSON file written by mine-dust or by hand")
            if info.st_size > MAX_FILE_BYTES:
                raise DustRulesError(f"{source}: {info.st_size:,} bytes, more than the {MAX_FILE_BYTES:,} a rules "
                                     "file may have: split the hosts over several files, or drop rules")
            with os.fdopen(fd, "rb", closefd=False) as raw:
                text = raw.read(MAX_FILE_BYTES + 1)
            if len(text) > MAX_FILE_BYTES:
                raise DustRulesError(f"{source}: grew past {MAX_FILE_BYTES:,} bytes while read")
            data = json.loads(text.decode("utf-8"))
        except DustRulesError:
            raise
        except OSError as exc:
            raise DustRulesError(f"{source}: cannot read DUST rules file: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise DustRulesError(f"{source}: not valid JSON: {exc}") from None
        except RecursionError:
            raise DustRulesError(f"{source}: not valid JSON: nested too deeply") from None
        finally:
            os.close(fd)
        return cls.from_json(data, source)

    @classmethod
    def coerce(cls, value: PathOrRules) -> RuleSet | None:
        """A RuleSet from a RuleSet, a path, or a list of paths (merged in order); None for none."""
        if value is None or isinstance(value, RuleSet):
            return value
        if isinstance(value, (str, os.PathLike)):
            return cls.load(value)
        if isinstance(value, Iterable):
            result: RuleSet | None = None
            for item in value:
                loaded = cls.load(item)
                result = loaded if result is None else result.merged(loaded)
            return result
        raise TypeError(f"dust_rules must be a path, a list of paths or a RuleSet, got {type(value).__name__}")


def check_host(rules: Sequence[DustRule], where: str, host: str = "") -> HostRules:
    """Refuse rule sets whose substitutions undo each other (they would never reach a fixed point).

    Returns the rules compiled (for ``host``), which the caller may keep: compiling is most of a load.
    """
    subs = {(r.anchor, r.from_, r.to) for r in rules if r.kind == "substitute"}
    for anchor, old, new in subs:
        if (anchor, new, old) in subs:
            raise DustRulesError(f"{where}: substitutions {old!r} -> {new!r} and {new!r} -> {old!r} undo each "
                                 "other; keep one direction")
    compiled = HostRules(host, rules)
    for r in rules:
        if r.kind == "substitute":
            probe = r.to if r.anchor == "prefix" else "/x" + r.to
            once = compiled.apply(probe, "")
            if compiled.apply(*once) != once:
                raise DustRulesError(f"{where}: the substitutions starting from {r.from_!r} -> {r.to!r} never "
                                     "reach a fixed point (they rewrite each other's results in a cycle)")
    return compiled


def _file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _is_host(host: Any) -> bool:
    return isinstance(host, str) and bool(host) and not any(c in host for c in "/?#:@ ") and host == host.lower()


def _aliases_from_json(data: Any, hosts: Mapping[str, HostRules], source: str) -> dict[str, dict[str, str]]:
    """Validate the alias table: literal "path?query" strings, bounded, targets that are final."""
    if not isinstance(data, Mapping):
        raise DustRulesError(f"{source}: 'aliases' must map host names to {{URL: URL}} objects")
    out: dict[str, dict[str, str]] = {}
    for host, table in data.items():
        where = f"{source}: aliases[{host!r}]"
        if not _is_host(host):
            raise DustRulesError(f"{source}: aliases: {host!r} is not a host name (lowercase, no port, no scheme)")
        if not isinstance(table, Mapping):
            raise DustRulesError(f"{where} must be an object of \"path?query\": \"path?query\"")
        if len(table) > MAX_ALIASES:
            raise DustRulesError(f"{where}: {len(table)} aliases, at most {MAX_ALIASES} per host")
        apply = hosts[host].apply if host in hosts else HostRules(host, ()).apply

        def key_of(url: str, apply: Any = apply) -> str:
            return join_key(*apply(*split_key(url)))

        for value in (*table.keys(), *table.values()):
            if not isinstance(value, str) or not value.startswith("/") or "#" in value:
                raise DustRulesError(f"{where}: {value!r} is not a path with an optional query ('/a?b=c')")
        for key, target in table.items():
            final = key_of(target)
            # the key of the alias is ``final``: another alias's key that leads elsewhere would make a chain
            if final != key and final in table and key_of(table[final]) != final:
                raise DustRulesError(f"{where}: {key!r} -> {target!r}: the target (and what the host's rules "
                                     f"make of it, {final!r}) must not be an alias itself")
        out[host] = dict(table)
    return out


def load_rules(value: PathOrRules) -> RuleSet | None:
    """``RuleSet.coerce``: what ``canonicalize(dust_rules=...)`` and ``DEDUP_DUST_RULES`` accept."""
    return RuleSet.coerce(value)
