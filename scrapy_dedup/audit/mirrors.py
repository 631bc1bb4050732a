"""What makes a dump's mirrors: the URL differences behind its duplicates, and what would remove them.

A *mirror pair* is a duplicate the audit found (a flagged page and the kept page it
matched) whose two URLs differ. Each pair is explained, in this order, by the first of:

1. the add-on's **default canonicalization** (``DEDUP_URL_POLICY`` left as it is): the
   crawl that wrote the dump did not use it;
2. a **canonicalizer setting** off by default (a switch of
   :data:`~scrapy_dedup.url.policy.SWITCHES` such as ``strip_www``, or a tracking parameter
   not in the built-in list), tried per host with the canonicalizer itself and suggested
   only when it merges no two distinct pages of the dump (a page is "distinct" by the
   audit's own verdict: another cluster);
3. the **DUST rules** the miner (:class:`~scrapy_dedup.url.mining.DustMiner`, its public
   API only) learns from the dump's URLs with the audit's clusters as the sameness of
   pages, validated as ``scrapy-dedup mine-dust`` validates them (support, violations);
4. the miner's **alias table** (exact URL to URL: opaque aliases such as
   ``/item.php?id=4711`` beside ``/shoes/blue-runner``, which no rule kind expresses);
5. nothing: **unexplained**, counted (pairs across two hosts among them: rules are per host).

Every test is the canonicalizer's own answer (:class:`~scrapy_dedup.url.canonical.Canonicalizer`
with the suggested ``DEDUP_URL_POLICIES`` and the mined rules), so what the report says
folds is what a crawl with those settings folds. The command that writes the rules file
for the next crawl is ``scrapy-dedup mine-dust`` on the dump itself; it judges sameness
with the crawl's default content engine, which the audit's default config matches.

Cost: the pages of mirror pairs keep their split and canonical URLs; every other page is
canonicalized again for each candidate setting of its host (at most four switches and
:data:`MAX_PARAM_CANDIDATES` parameters) and kept by nothing but the miner, which holds one
entry per distinct URL (:mod:`scrapy_dedup.url.mining`).
"""
from __future__ import annotations

import shlex
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol

from scrapy_dedup.audit.mine_dust import mine_logs
from scrapy_dedup.audit.pairs import site_of
from scrapy_dedup.audit.records import DumpError
from scrapy_dedup.url.canonical import Canonicalizer, looks_like_session_token
from scrapy_dedup.url.dust import RuleSet
from scrapy_dedup.url.mining import DustMiner, MiningConfig, MiningResult, redact_url
from scrapy_dedup.url.policy import SWITCHES, PolicyMap, UrlPolicy

__all__ = ["MirrorReport", "explain_mirrors", "RULES_FILE"]

#: the rules file the printed command writes and ``DEDUP_DUST_RULES`` loads
RULES_FILE = "dust-rules.json"
#: the switches a setting can turn on (those on by default already ran in step 1)
OFF_SWITCHES = tuple(name for name, on in SWITCHES.items() if not on)
#: tracking-parameter candidates tried per host, the most frequent first
MAX_PARAM_CANDIDATES = 20
#: unexplained pairs listed as examples
EXAMPLES = 5
#: rules listed per report (the most pairs first)
MAX_RULES_SHOWN = 30

_DEFAULT_POLICY = UrlPolicy()


class _Urls(Protocol):
    """The pages' URLs by index: a list, or the audit's compact ``StringList``."""

    def __getitem__(self, index: int) -> str: ...

    def __len__(self) -> int: ...


@dataclass
class SettingCause:
    """A canonicalizer setting off in the defaults that folds ``pairs`` mirror pairs of ``domain``."""

    domain: str  # the DEDUP_URL_POLICIES key (a host: it applies to its subdomains too)
    key: str  # a switch name, "tracking_params" or "session_params"
    value: Any  # True for a switch, else the parameter name
    pairs: int

    def describe(self) -> str:
        if self.key in ("tracking_params", "session_params"):
            return f"{self.key[:-7]} parameter ?{self.value}= on {self.domain}"
        return f"{self.key} on {self.domain}"


@dataclass
class RuleCause:
    """A mined DUST rule and the mirror pairs (not folded by settings) in which it fires on a URL."""

    host: str
    kind: str
    description: str
    pairs: int
    support_pages: int
    violations: int

    @property
    def form(self) -> str:
        """``parameter`` (what it removes is a query or path parameter) or ``path`` (a path form)."""
        return "parameter" if self.kind in ("drop_param", "default_param", "drop_pathparam") else "path"


@dataclass
class MirrorReport:
    """The causes of a dump's mirrors, for the text, JSON and HTML outputs."""

    pairs: int = 0  # mirror pairs: duplicates at another URL than the page they matched
    same_url: int = 0  # duplicates at the very URL of the page they matched (fetched twice)
    hosts: list[str] = field(default_factory=list)  # hosts of the mirror pairs
    unusable_urls: int = 0  # pages of duplicate pairs whose URL the canonicalizer cannot parse (or none)
    by_default: int = 0
    settings: list[SettingCause] = field(default_factory=list)
    by_settings: int = 0
    url_policies: dict[str, dict[str, Any]] = field(default_factory=dict)  # DEDUP_URL_POLICIES to add
    rules: list[RuleCause] = field(default_factory=list)
    by_rules: int = 0
    by_aliases: int = 0
    unexplained: int = 0
    across_hosts: int = 0  # of the unexplained: the two URLs are on different hosts
    examples: list[tuple[str, str]] = field(default_factory=list)  # unexplained pairs
    #: URLs of distinct pages (other clusters) the settings and mined rules give the key of another page:
    #: a crawl with them would not fetch these; the rules that fire on them, with counts; examples
    merged: int = 0
    merged_rules: list[tuple[str, int]] = field(default_factory=list)
    merged_examples: list[tuple[str, str]] = field(default_factory=list)
    command: Optional[str] = None  # the mine-dust command for this dump, when it can read it
    command_note: str = ""  # why there is none, or what differs
    note: str = ""  # what the method leaves out (lshbloom: near duplicates are not named)
    #: records of the dump read again to mine its rules (0: the miner was fed by the audit's one reading)
    records_read: int = 0

    def policy_line(self) -> str:
        return f"DEDUP_URL_POLICIES = {self.url_policies!r}" if self.url_policies else ""

    def rules_line(self) -> str:
        return f"DEDUP_DUST_RULES = {RULES_FILE!r}" if self.by_rules or self.by_aliases else ""

    def lines(self) -> list[str]:
        """The text report's block."""
        if not self.pairs:
            why = (f"; {self.same_url} duplicate(s) at the URL of the page they matched (fetched twice)"
                   if self.same_url else "")
            out = [f"Mirrors: none (no duplicate at another URL){why}"]
            if self.unusable_urls:
                out.append(f"  {self.unusable_urls} duplicate page(s) without a usable URL: not explained")
            return out + ([f"  {self.note}"] if self.note else [])
        hosts = ", ".join(self.hosts[:5]) + (f", ... ({len(self.hosts)} hosts)" if len(self.hosts) > 5 else "")
        out = [f"Mirrors: {self.pairs} duplicate pair(s) at different URLs, on {len(self.hosts)} host(s): {hosts}"]
        if self.same_url:
            out.append(f"  {self.same_url} more duplicate(s) at the URL of the page they matched (fetched twice)")
        if self.unusable_urls:
            out.append(f"  {self.unusable_urls} duplicate page(s) without a usable URL: not explained")
        out.append(f"  {self.by_default:>6}  folded by the add-on's default canonicalization "
                   "(the crawl that wrote the dump did not use it)")
        if self.settings:
            out.append(f"  {self.by_settings:>6}  folded by settings off by default (each merges no two "
                       "distinct pages of the dump):")
            out.extend(f"          {s.pairs:>6}  {s.describe()}" for s in self.settings)
            out.append(f"          in settings.py: {self.policy_line()}")
        out.append(f"  {self.by_rules:>6}  folded by DUST rules the miner learns from the dump"
                   + (" (pairs each rule fires in):" if self.rules else ""))
        for form, title in (("parameter", "parameters"), ("path", "path forms")):
            causes = [r for r in self.rules if r.form == form]
            if causes:
                out.append(f"          {title}:")
                out.extend(f"          {r.pairs:>6}  {r.host}: {r.description}  (pages={r.support_pages} "
                           f"violations={r.violations})" for r in causes[:MAX_RULES_SHOWN])
        out.append(f"  {self.by_aliases:>6}  opaque aliases no rule kind expresses, in the mined alias table")
        across = f" ({self.across_hosts} across two hosts: rules are per host)" if self.across_hosts else ""
        out.append(f"  {self.unexplained:>6}  unexplained{across}")
        out.extend(f"          {a}  ~  {b}" for a, b in self.examples)
        if self.merged:
            rules = "; ".join(f"{rule} ({n})" for rule, n in self.merged_rules) or "none (the settings)"
            out.append(f"  warning: {self.merged} URL(s) of distinct pages get the URL of another page with these "
                       f"settings and rules (a crawl would not fetch them); review the rules file, rules firing on "
                       f"them: {rules}")
            out.extend(f"          {a}  ~  {b}" for a, b in self.merged_examples)
        if self.command and self.rules_line():  # the rules file folds pairs the settings leave
            out.append(f"  to remove them: {self.command}")
            out.append(f"  then in settings.py: {self.rules_line()}")
        if self.command_note:
            out.append(f"  {self.command_note}")
        if self.note:
            out.append(f"  {self.note}")
        return out

    def to_dict(self) -> dict:
        return {
            "pairs": self.pairs,
            "same_url": self.same_url,
            "hosts": self.hosts,
            "unusable_urls": self.unusable_urls,
            "default_canonicalization": self.by_default,
            "settings": {"pairs": self.by_settings,
                         "causes": [{"domain": s.domain, "setting": s.key, "value": s.value, "pairs": s.pairs}
                                    for s in self.settings],
                         "DEDUP_URL_POLICIES": self.url_policies},
            "dust_rules": {"pairs": self.by_rules,
                           "rules": [{"host": r.host, "kind": r.kind, "form": r.form, "rule": r.description,
                                      "pairs": r.pairs, "support_pages": r.support_pages,
                                      "violations": r.violations} for r in self.rules]},
            "aliases": self.by_aliases,
            "unexplained": {"pairs": self.unexplained, "across_hosts": self.across_hosts,
                            "examples": [list(pair) for pair in self.examples]},
            "merged_distinct": {"urls": self.merged, "rules": [{"rule": r, "urls": n} for r, n in self.merged_rules],
                                "examples": [list(pair) for pair in self.merged_examples]},
            "command": self.command,
            "command_note": self.command_note,
            "settings_lines": [line for line in (self.policy_line(), self.rules_line()) if line],
            "note": self.note,
        }


def mine_dust_command(dump: str, *, input_format: str, url_field: str, html_field: str, text_field: str,
                      min_words: int, other_engine: Sequence[str] = ()) -> tuple[Optional[str], str]:
    """The ``scrapy-dedup mine-dust`` command that mines this dump, or None and what it needs instead.

    ``mine-dust`` reads a WARC file or JSON Lines with the fields ``url`` and ``html`` or ``text``
    (a crawl log of ``DEDUP_LOG_FILE`` too); it cannot be told other field names, nor read
    standard input a second time. It judges sameness with the crawl's default content engine
    (only ``--min-words`` can be set): ``other_engine`` names what this audit set otherwise."""
    out = f"-o {RULES_FILE}"
    extra = f" --min-words {min_words}" if min_words != MiningConfig().min_words else ""
    if dump == "-":
        return None, (f"the dump came on standard input: save it to a file, then run "
                      f"scrapy-dedup mine-dust FILE{extra} {out}")
    if input_format == "jsonl" and (url_field, html_field, text_field) != ("url", "html", "text"):
        return None, (f"mine-dust reads the record fields url and html or text (or a crawl log written with "
                      f"DEDUP_LOG_FILE); this dump's are {url_field!r}, {html_field!r}, {text_field!r}: rename "
                      f"them, then run scrapy-dedup mine-dust FILE{extra} {out}")
    note = (f"mine-dust judges sameness with the crawl's default content engine, this audit with "
            f"{', '.join(other_engine)}: the rules it writes may differ from those above" if other_engine else "")
    return f"scrapy-dedup mine-dust {shlex.quote(dump)}{extra} {out}", note


class _Evaluator:
    """Canonical keys of the dump's URLs under one URL policy map and rule set (one canonicalizer, cached)."""

    def __init__(self, policies: PolicyMap, rules: Optional[RuleSet] = None):
        self.canonicalizer = Canonicalizer(policies, dust_rules=rules)
        self._cache: dict[int, str] = {}

    def key(self, urls: _Urls, index: int, keep: bool = True) -> str:
        """The canonical URL of page ``index``; kept for the pages of mirror pairs only (``keep``), so that
        a pass over every page of a host costs no memory per page."""
        key = self._cache.get(index)
        if key is None:
            key = self.canonicalizer.canonicalize(urls[index])
            if keep:
                self._cache[index] = key
        return key

    def folds(self, urls: _Urls, a: int, b: int) -> bool:
        return self.key(urls, a) == self.key(urls, b)


def _host(parts: Callable, index: int) -> str:
    return str(parts(index)[0])


def _strip_www(host: str) -> str:
    return host[4:] if host.startswith("www.") else host


def _query_values(query: str) -> dict[str, str]:
    """Parameter name (lowercased, as the canonicalizer's lists match it) -> its first value."""
    out: dict[str, str] = {}
    for part in query.split("&") if query else ():
        name, _, value = part.partition("=")
        if name:
            out.setdefault(name.lower(), value)
    return out


def explain_mirrors(urls: _Urls, roots: Sequence[int], pairs: Iterable[tuple[int, int]],
                    usable: Callable[[int], bool], *, command: tuple[Optional[str], str] = (None, ""),
                    note: str = "", mining: Optional[MiningConfig] = None,
                    mine_from: Optional[str] = None, fed_miner: Optional[DustMiner] = None) -> MirrorReport:
    """Explain the mirror pairs among ``pairs`` (kept index, flagged index) of pages ``urls``.

    ``roots[i]``: the audit's cluster of page ``i`` (distinct clusters are distinct pages);
    ``usable(i)``: whether page ``i`` is evidence (degenerate pages are not). ``mine_from``: the file the
    printed ``mine-dust`` command reads: the rules are then mined from it exactly as that command mines
    them (its own judgement of sameness, which may differ from the audit's), so that what the report says
    the rules remove is what the command's rules remove; ``fed_miner``: the same, a miner the audit fed with
    the dump's records as the command reads them (the dump is not read again); without either, from the
    audit's clusters.
    """
    report = MirrorReport(note=note)
    report.command, report.command_note = command
    miner = DustMiner(mining)
    split: dict[int, Optional[tuple[str, str, str]]] = {}

    def parts(i: int) -> Optional[tuple[str, str, str]]:
        if i not in split:
            split[i] = miner.split_url(urls[i]) if urls[i] else None
        return split[i]

    mirrors: list[tuple[int, int]] = []
    hosts: Counter[str] = Counter()
    for a, b in pairs:
        if urls[a] == urls[b]:
            report.same_url += 1
            continue
        pa, pb = parts(a), parts(b)
        if pa is None or pb is None:
            report.unusable_urls += 1
            continue
        mirrors.append((a, b))
        site_a, site_b = site_of(urls[a]), site_of(urls[b])  # another port is another host, as the pairs say
        hosts[site_a] += 1
        if site_b != site_a:
            hosts[site_b] += 1
    report.pairs = len(mirrors)
    report.hosts = [h for h, _ in hosts.most_common()]
    if not mirrors:
        return report
    default = _Evaluator(PolicyMap(_DEFAULT_POLICY))
    left = [(a, b) for a, b in mirrors if not default.folds(urls, a, b)]
    report.by_default = len(mirrors) - len(left)

    # --- 2. settings off by default, per host, refused when they merge two distinct pages
    family: dict[str, array] = {}  # host without "www." -> pages on it (the settings' reach)
    for i in range(len(urls)):
        if usable(i) and urls[i]:
            p = split[i] if i in split else miner.split_url(urls[i])  # cached for pair members only
            if p is not None:
                family.setdefault(_strip_www(p[0]), array("q")).append(i)
    report.settings, report.url_policies = _settings(urls, roots, left, parts, family, default)
    if report.url_policies:
        chosen = _Evaluator(PolicyMap.from_settings_values({}, report.url_policies))
        rest = [(a, b) for a, b in left if not chosen.folds(urls, a, b)]
    else:
        rest = left
    report.by_settings = len(left) - len(rest)

    # --- 3. and 4. the miner on the dump's evidence: URLs, and the audit's clusters as pages
    if rest:
        # a fed miner mines as ``mining`` says only when it was made with it
        fed = fed_miner is not None and fed_miner.config == (mining or MiningConfig())
        mined = fed_miner.mine() if fed and fed_miner is not None else None
        if mined is None and mine_from is not None:  # a regular file: read a second time, as the command will
            try:
                mined = mine_logs([mine_from], mining)  # the command's own path, not a copy of it
                report.records_read = mined.stats["lines"]
            except (OSError, DumpError):  # changed or gone since the audit read it: the audit's clusters
                mined = None
        if mined is None:
            for i in range(len(urls)):
                if usable(i) and urls[i]:
                    miner.add_page(urls[i], ("audit", roots[i]))  # counts what it cannot parse
            mined = miner.mine()
        policies = PolicyMap.from_settings_values({}, report.url_policies)
        rules_only = RuleSet({h: list(r) for h, r in mined.rules.hosts.items()})
        by_rules = _Evaluator(policies, rules_only)
        with_aliases = _Evaluator(policies, mined.rules)
        folded, aliased, unexplained = [], 0, []
        for a, b in rest:
            if by_rules.folds(urls, a, b):
                folded.append((a, b))
            elif with_aliases.folds(urls, a, b):
                aliased += 1
            else:
                unexplained.append((a, b))
        report.by_rules, report.by_aliases = len(folded), aliased
        report.rules = _rule_causes(mined, folded, parts)
        report.unexplained = len(unexplained)
        report.across_hosts = sum(1 for a, b in unexplained if _host(parts, a) != _host(parts, b))
        report.examples = [(redact_url(urls[a]), redact_url(urls[b])) for a, b in unexplained[:EXAMPLES]]
        # what the crawl would lose: the dump's own distinct pages under one key
        evidence = (i for i in range(len(urls)) if usable(i) and urls[i])
        merged = _distinct_merges(urls, roots, evidence, with_aliases, default)
        report.merged = len(merged)
        report.merged_examples = [(redact_url(urls[a]), redact_url(urls[b])) for a, b in merged[:EXAMPLES]]
        firing = _rule_causes(mined, merged, lambda i: parts(i) or ("", "", ""))
        report.merged_rules = [(f"{r.host}: {r.description}", r.pairs) for r in firing]
    return report


def _settings(urls: _Urls, roots: Sequence[int], pairs: list[tuple[int, int]], parts: Callable,
              family: dict[str, array], default: _Evaluator) -> tuple[list[SettingCause], dict]:
    """Candidate settings from what differs in each pair, tried per domain (the host without ``www.``: a
    ``DEDUP_URL_POLICIES`` key covers its subdomains), the most pairs first, each on top of those kept.

    A candidate is kept when it folds pairs the kept ones leave and merges no two distinct pages of the
    domain; its count is those new pairs, so the counts add up. Candidates are tried again while one is
    kept, so a pair that needs two settings (``www.`` and a trailing slash) folds when either folds
    another pair alone."""
    every_switch = Canonicalizer(UrlPolicy.from_mapping(dict.fromkeys(OFF_SWITCHES, True)))
    candidates: Counter[tuple[str, str, Any]] = Counter()  # (domain, key, value) -> pairs it touches
    open_pairs: dict[str, list[tuple[int, int]]] = {}  # domain -> its pairs no kept setting folds
    for a, b in pairs:
        ha, pa, qa = parts(a)
        hb, pb, qb = parts(b)
        domain = _strip_www(ha)
        if domain != _strip_www(hb):
            continue  # two sites: no setting of the canonicalizer folds them
        open_pairs.setdefault(domain, []).append((a, b))
        # the switches that change either URL (the canonicalizer says which fired)
        fired = set(every_switch.canonicalize_with_info(urls[a]).fired)
        fired.update(every_switch.canonicalize_with_info(urls[b]).fired)
        for switch in OFF_SWITCHES:
            if switch in fired:
                candidates[(domain, switch, True)] += 1
        if ha == hb and pa == pb:
            values_a, values_b = _query_values(qa), _query_values(qb)
            for name in sorted(set(values_a) ^ set(values_b)):
                value = values_a.get(name, values_b.get(name, ""))
                # a value like a session token: a session parameter (dropped only with such values)
                kind = "session_params" if looks_like_session_token(value) else "tracking_params"
                candidates[(domain, kind, name)] += 1
    ordered: list[tuple[str, str, Any]] = []
    params: Counter[str] = Counter()
    for candidate, _ in sorted(candidates.items(), key=lambda kv: (-kv[1], kv[0])):
        if candidate[1] in OFF_SWITCHES or params[candidate[0]] < MAX_PARAM_CANDIDATES:
            ordered.append(candidate)
            params[candidate[0]] += candidate[1] not in OFF_SWITCHES
    causes: list[SettingCause] = []
    policies: dict[str, dict[str, Any]] = {}
    kept = True
    while kept and ordered:
        kept = False
        for candidate in list(ordered):
            domain, key, value = candidate
            change = {k: list(v) if isinstance(v, list) else v for k, v in policies.get(domain, {}).items()}
            if key in OFF_SWITCHES:
                change[key] = True
            else:
                change.setdefault(key, []).append(value)
            trial = _Evaluator(PolicyMap(_DEFAULT_POLICY, {domain: UrlPolicy.from_mapping(change)}))
            newly = [(a, b) for a, b in open_pairs[domain] if trial.folds(urls, a, b)]
            if not newly:
                continue
            ordered.remove(candidate)  # folds pairs: kept or refused, it is not tried again
            pages = (i for host, indexes in family.items() if host == domain or host.endswith("." + domain)
                     for i in indexes)
            if _distinct_merges(urls, roots, pages, trial, default, limit=1):
                continue
            kept = True
            policies[domain] = change
            causes.append(SettingCause(domain, key, value, len(newly)))
            folded = set(newly)
            open_pairs[domain] = [pair for pair in open_pairs[domain] if pair not in folded]
    return causes, policies


def _distinct_merges(urls: _Urls, roots: Sequence[int], pages: Iterable[int], trial: _Evaluator,
                     default: _Evaluator, limit: Optional[int] = None) -> list[tuple[int, int]]:
    """Pages (first page with the key, this page) of different clusters to which ``trial`` gives one key and the
    defaults do not: pages a crawl with ``trial`` would not fetch. At most ``limit``."""
    seen: dict[str, tuple[str, int, int]] = {}  # trial key -> (default key, cluster, index) of its first page
    out: list[tuple[int, int]] = []
    for i in pages:
        key = trial.key(urls, i, keep=False)
        plain = default.key(urls, i, keep=False)
        first = seen.setdefault(key, (plain, roots[i], i))
        if first[1] != roots[i] and first[0] != plain:
            out.append((first[2], i))
            if limit is not None and len(out) >= limit:
                break
    return out


def _rule_causes(mined: MiningResult, folded: list[tuple[int, int]], parts: Callable) -> list[RuleCause]:
    """Per kept rule, the folded pairs in which it rewrites one of the two URLs (a pair may need several)."""
    rules_of: dict[str, list] = {}
    for host, rules in mined.rules.hosts.items():
        rules_of[host] = [(i, RuleSet({host: [rule]}).for_host(host)) for i, rule in enumerate(rules)]
    # a pair counts once per rule, even when the rule rewrites both of its URLs
    pair_counts: Counter[tuple[str, int]] = Counter()
    for a, b in folded:
        fired = set()
        for index in (a, b):
            host, path, query = parts(index)
            for i, compiled in rules_of.get(host, ()):
                if compiled is not None and compiled.fired(path, query):
                    fired.add((host, i))
        pair_counts.update(fired)
    out = []
    for (host, i), n in pair_counts.items():
        rule = mined.rules.hosts[host][i]
        out.append(RuleCause(host, rule.kind, rule.describe(), n, rule.support_pages, rule.violations))
    out.sort(key=lambda r: (-r.pairs, r.host, r.description))
    return out

