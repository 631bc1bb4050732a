"""Mine DUST rules from a crawl log (after DustBuster, Bar-Yossef, Keidar, Schonfeld, WWW 2007).

Input: (URL, content) pairs: the crawl log ``DEDUP_LOG_FILE`` writes, any JSON
Lines with ``url`` and a content hash (:data:`HASH_FIELDS`, optional
``simhash``), or the page itself (``text`` or ``html``, fingerprinted with the
crawl's content engine); read from files (JSON Lines or WARC) by
:mod:`scrapy_dedup.audit.mine_dust` for ``scrapy-dedup mine-dust``. The online
learner is :mod:`scrapy_dedup.url.learner`.

How rules are found and kept (docs/dust.md's "How rules are mined and kept" says
it for users): typed **candidates** from pairs of URLs of one host with the same
content (:func:`_candidates`); **validation** of each on every URL of the host
it touches, grouped by rewritten form, into *support* (same content as the
group's reference) and *violations* (the rewrite would merge different pages:
this is what rejects ``page=`` and ``category=``); a rule is **kept** with
support from ``min_support`` distinct pages and a violation rate at most
``max_violation_rate``, where one page behind many URLs (a soft 404, an error
page) gives no support; kept rules rewrite the URL set and mining runs again
(``rounds``), so rules that only show once others apply are found too.

Memory: one dict entry per distinct URL (path and query, interned per host) and
one per distinct content; the JSON records are never kept.

This module imports nothing from Scrapy.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from types import SimpleNamespace
from typing import Any

from scrapy_dedup.content.boilerplate import PageWords
from scrapy_dedup.content.clusters import Clusters
from scrapy_dedup.content.engine import ContentDeduplicator
from scrapy_dedup.content.extract import Extraction, ExtractionPolicy, extract_text
from scrapy_dedup.content.index import SimhashIndex
# moved to content/judge.py (the one definition of "same page"); kept importable from here
from scrapy_dedup.content.judge import REDUCED_BASIS, PageJudge, normal_text_hash, same_page_evidence
from scrapy_dedup.content.params import ENGINE_PARAMS
from scrapy_dedup.url.canonical import Canonicalizer, safe_parts  # safe_parts: importable from here too
from scrapy_dedup.url.dust import (
    MAX_ALIASES,
    VALUE_SHAPES,
    DustRule,
    DustRulesError,
    HostRules,
    RuleSet,
    check_host,
    join_key,
    shape_of_segment,
    split_key,
)
from scrapy_dedup.url.policy import SWITCHES, UrlPolicy

__all__ = ["MiningConfig", "DustMiner", "MiningResult", "RuleValidation", "REDUCED_BASIS", "normal_text_hash",
           "same_page_evidence"]

HASH_FIELDS = ("exact_hash", "content_hash", "hash", "sha1", "md5", "fingerprint")
_VALUE_SHAPE_ORDER = ("digits", "alnum", "slug", "path")
#: redirects followed from a redirecting URL to the page it ends at, for the alias table
MAX_REDIRECT_HOPS = 20


@dataclass(frozen=True)
class MiningConfig:
    """Thresholds of the miner (the CLI flags of ``scrapy-dedup mine-dust``)."""

    #: distinct pages that must agree with a rule
    min_support: int = 3
    #: violations / (support + violations) above this rejects a rule
    max_violation_rate: float = 0.05
    #: a page reached by more URLs than this is boilerplate (soft 404, error page): no support. A
    #: page's many session, tracking and view forms reach dozens; one page many URLs return is also
    #: caught per rule (one page behind three or more rewritten URLs gives no support)
    max_cluster_urls: int = 200
    #: near duplicates: simhash fingerprints at most this many bits apart (0: exact only)
    hamming: int = 3
    #: pages with fewer words are degenerate and ignored (only when the log gives ``words``)
    min_words: int = 20
    #: the first (shortest) URLs of one page paired with each other for candidates (pairs grow quadratically);
    #: the page's other URLs are paired with its shortest only
    max_pair_members: int = 8
    #: candidates examined per host and round, the most frequent first
    max_candidates: int = 300
    #: examples stored with each rule
    examples: int = 3
    #: mining rounds (each one on the URLs rewritten by the rules kept so far)
    rounds: int = 3
    #: redirects no rule explains kept as aliases per host (``0``: no alias table)
    max_aliases: int = MAX_ALIASES
    #: a page the kept rules leave under exactly two keys gets an alias too (an opaque id served as a page)
    content_aliases: bool = True
    #: how a record's ``html`` becomes text: the crawl's extraction (its ``min_words`` is set to ``min_words``)
    extraction: ExtractionPolicy = ExtractionPolicy()

    def __post_init__(self) -> None:
        object.__setattr__(self, "extraction", replace(self.extraction, min_words=self.min_words))
        if self.min_support < 1:
            raise ValueError(f"min_support must be >= 1, got {self.min_support}")
        if not 0.0 <= self.max_violation_rate < 1.0:
            raise ValueError(f"max_violation_rate must be in [0, 1), got {self.max_violation_rate}")
        if self.max_cluster_urls < 2:
            raise ValueError(f"max_cluster_urls must be >= 2, got {self.max_cluster_urls}")
        if not 0 <= self.hamming < 32:
            raise ValueError(f"hamming must be in [0, 32), got {self.hamming}")
        if not 0 <= self.max_aliases <= MAX_ALIASES:
            raise ValueError(f"max_aliases must be in [0, {MAX_ALIASES}], got {self.max_aliases}")


@dataclass
class RuleValidation:
    """A candidate rule validated on a host's URLs: its figures and the decision (kept or not, and why)."""

    host: str
    rule: DustRule
    support: int
    support_pages: int
    violations: int
    kept: bool
    reason: str

    def line(self) -> str:
        return (f"{'KEEP' if self.kept else 'drop'} {self.host}: {self.rule.describe()}  support={self.support} "
                f"pages={self.support_pages} violations={self.violations}  {self.reason}")


@dataclass
class HostReport:
    """What the miner saw on one host, for ``mine-dust -v``: why a host got no rule is said, not left silent."""

    host: str
    urls: int = 0
    pages_with_aliases: int = 0  # same-page groups of two URLs or more
    candidates: int = 0  # typed candidates from those groups (all rounds)
    below_support: list[tuple[str, int]] = field(default_factory=list)  # (described candidate, pages) examples
    redirects: int = 0
    redirects_explained: int = 0  # a kept rule already maps the URL to its redirect target
    aliases: int = 0
    content_aliases: int = 0  # of the aliases: a page the rules leave under two keys

    def lines(self) -> list[str]:
        head = (f"{self.host}: {self.urls} URL(s), {self.pages_with_aliases} page(s) reached by two URLs or more, "
                f"{self.candidates} candidate(s)")
        if self.redirects:
            head += (f"; {self.redirects} redirect(s): {self.redirects_explained} explained by a rule, "
                     f"{self.aliases} alias(es) (new keys, or a fetchable URL for a key)")
        if self.content_aliases:
            head += f"; {self.content_aliases} alias(es) of pages the rules leave under two keys"
        out = [head]
        if not self.pages_with_aliases:
            out.append("  no candidate: no two URLs of this host served the same page")
        elif not self.candidates:
            out.append("  no candidate: the URLs of one page differ in ways no rule kind expresses")
        for described, pages in self.below_support:
            out.append(f"  skip {described}: seen on {pages} page(s) < min_support")
        return out


@dataclass
class MiningResult:
    rules: RuleSet
    validations: list[RuleValidation] = field(default_factory=list)
    stats: Counter = field(default_factory=Counter)
    hosts: dict[str, HostReport] = field(default_factory=dict)

    def kept(self) -> list[RuleValidation]:
        return [v for v in self.validations if v.kept]

    def rejected(self) -> list[RuleValidation]:
        return [v for v in self.validations if not v.kept]


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


class DustMiner:
    """Collects (URL, content) pairs and mines per-host DUST rules from them.

    Feed it with :meth:`add_record` (log lines: a crawl log or a WARC file is read into
    it by :func:`scrapy_dedup.audit.mine_dust.read_log`) or :meth:`add_page` (already
    fingerprinted pages, as the online learner does), then call :meth:`mine`. Adding
    after mining is allowed: mining again sees everything added so far.

    A content is named by the hash of its exact key; near-duplicate contents are joined in
    :class:`~scrapy_dedup.content.clusters.Clusters`, whose representative (the content seen
    first) is the content id every URL of the cluster is judged by.
    """

    def __init__(self, config: MiningConfig | None = None):
        self.config = config or MiningConfig()
        self.hosts: dict[str, dict[str, int]] = {}  # host -> {"path?query": content id}
        self.redirects: dict[str, dict[str, str]] = {}  # host -> {redirecting "path?query": its target's}
        self._contents: Clusters[int] = Clusters()  # content ids, near duplicates joined
        self._simhashes: SimhashIndex | None = None
        self._judge: PageJudge | None = None  # for records with text or html and no verdict
        self._normal_hashes: dict[str, str] = {}  # a kept page's cluster -> its normal_text_hash, when logged
        #: the content engine's parameters at their defaults: what a crawl with the default settings uses
        self._defaults: Any = SimpleNamespace(**{param.key: param.default for param in ENGINE_PARAMS})
        self._boilerplate = bool(self._defaults.boilerplate)
        self.stats: Counter = Counter()
        no_switch: dict[str, Any] = {name: False for name in SWITCHES}
        self._canonicalizer = Canonicalizer(UrlPolicy(**no_switch))

    # --- input ---

    def split_url(self, url: str) -> tuple[str, str, str] | None:
        """(host, path, query) of ``url`` after the canonicalizer's safe steps only (no switch)."""
        return safe_parts(self._canonicalizer, url)

    def add_page(self, url: str, exact_key: Any, simhash: int | None = None) -> bool:
        """Record that ``url`` served the content ``exact_key`` (any hashable; ``simhash`` for near matches)."""
        parts = self.split_url(url)
        if parts is None:
            self.stats["unparsable_urls"] += 1
            return False
        host, path, query = parts
        cid = self._content_id(exact_key, simhash)
        urls = self.hosts.get(host)
        if urls is None:
            urls = self.hosts[host] = {}
        key = join_key(path, query)
        if key in urls and self._contents.representative(urls[key]) != self._contents.representative(cid):
            self.stats["changed_content"] += 1  # fetched twice with different content: keep the first
            return True
        urls[key] = cid
        self.stats["urls"] += 1
        return True

    def _content_id(self, exact_key: Any, simhash: int | None) -> int:
        cid = hash(exact_key)
        if cid in self._contents:
            return cid
        self._contents.add(cid)
        if simhash is not None and self.config.hamming > 0:
            if self._simhashes is None:
                k = self.config.hamming
                self._simhashes = SimhashIndex(threshold=k, bands=k + 1, bits=64)
            match = self._simhashes.add_if_new(cid, simhash & 0xFFFFFFFFFFFFFFFF)
            if match is not None:
                self._contents.add_pair(match[0], cid)
                self.stats["near_duplicate_contents"] += 1
        return cid

    def page_judge(self) -> PageJudge:
        """The crawl's page judge with its default parameters (``content/params.py``, the miner's ``min_words``):
        records that bring their text or HTML but no verdict get the verdict a crawl would have given them, in
        order, and its URL-level sameness (the boilerplate rule in front when the defaults learn boilerplate)."""
        if self._judge is None:
            self._judge = PageJudge.from_params(self._defaults, min_words=self.config.min_words, url_sameness=True)
        return self._judge

    def engine(self) -> ContentDeduplicator:
        """The content engine of :meth:`page_judge`."""
        return self.page_judge().engine

    def add_record(self, record: Any, extraction: Extraction | None = None,
                   page_words: PageWords | None = None) -> bool:
        """One log line (a parsed JSON object); returns False (and counts why) when it is unusable.

        ``extraction``: its ``html`` extracted already by this miner's extraction policy (with blocks when the
        defaults learn boilerplate), ``page_words``: those blocks' :class:`PageWords` (the offline audit's, which
        read the page once): then neither is done again, the verdict is the same.

        Sameness, best evidence first: the content engine's ``cluster`` (a crawl log written by this
        version: exact or verified near duplicates share it); else a content hash with an optional
        simhash (older logs, other dumps); else the page's ``text`` or ``html``, judged here by the
        engine. A verdict that is no evidence that the URL serves its kept page (:func:`same_page_evidence`:
        ``"basis": "reduced"``, a match only once boilerplate is removed, of pages whose ``normal_hash``
        differ) makes the page one of its own, counted in ``reduced_verdicts``. ``redirect_urls`` (and a
        ``request_url`` other than ``url``) served the page too.
        """
        if not isinstance(record, dict):
            self.stats["bad_lines"] += 1
            return False
        if record.get("kind") == "redirect":  # {"request_url": from, "url": to}: no content of its own
            source, target = record.get("request_url"), record.get("url")
            if not (isinstance(source, str) and isinstance(target, str) and source and target):
                self.stats["lines_without_url"] += 1
                return False
            return self._add_redirect(source, target)
        if record.get("kind") == "degenerate":
            self.stats["degenerate_pages"] += 1
            return False
        words = record.get("words")
        url = record.get("url") or record.get("request_url")
        if not isinstance(url, str) or not url:
            self.stats["lines_without_url"] += 1
            return False
        exact: Any = None
        simhash: int | None = None
        cluster = record.get("cluster")
        if isinstance(cluster, str) and cluster:
            page = record.get("page")  # the crawl's page at the URL strictness, when not its cluster
            if isinstance(page, str) and page:
                self.stats["reduced_verdicts"] += page != cluster
            else:
                page = self._evidence(url, cluster, record.get("kind"), record.get("basis"), record.get("normal_hash"))
            exact = ("cluster", page)
        for name in HASH_FIELDS if exact is None else ():
            value = record.get(name)
            if isinstance(value, (str, int)) and value != "":
                exact = (name, value)
                break
        raw_simhash = record.get("simhash")
        if isinstance(raw_simhash, str):
            try:
                simhash = int(raw_simhash, 16)
            except ValueError:
                simhash = None
        elif isinstance(raw_simhash, int) and not isinstance(raw_simhash, bool):
            simhash = raw_simhash
        if exact is not None and exact[0] == "cluster":
            simhash = None  # the engine already decided which pages are one
        if exact is None:
            text = record.get("text")
            html = record.get("html")
            blocks: list[str] | None = None
            title: str | None = None
            if not isinstance(text, str) and extraction is not None:
                text, blocks, title = extraction.text, extraction.blocks, extraction.title
            elif not isinstance(text, str) and isinstance(html, str):
                try:
                    extraction = extract_text(html, self.config.extraction, blocks=self._boilerplate)
                except Exception:  # noqa: BLE001 - hostile markup: the line is skipped, counted
                    self.stats["bad_lines"] += 1
                    return False
                text, blocks, title = extraction.text, extraction.blocks, extraction.title
            if not isinstance(text, str):
                self.stats["lines_without_content"] += 1
                return False
            judge = self.page_judge()
            if judge.boilerplate is not None and blocks is not None:
                page = judge.judge_blocks(url, blocks, title=title, words=page_words)  # as the crawl judges it
            else:
                page = judge.judge_text(url, judge.engine.fingerprint(text))
            verdict = page.verdict
            if verdict.kind == "degenerate" or verdict.cluster is None:
                self.stats["degenerate_pages"] += 1
                return False
            if not page.url_same:
                self.stats["reduced_verdicts"] += 1
            exact, words = ("cluster", page.page("url")), None
        if isinstance(words, int) and not isinstance(words, bool) and words < self.config.min_words:
            self.stats["degenerate_pages"] += 1
            return False
        ok = self.add_page(url, exact, simhash)
        if not ok:
            return False
        sources = record.get("redirect_urls")
        sources = [u for u in sources if isinstance(u, str)] if isinstance(sources, list) else []
        request_url = record.get("request_url")
        if isinstance(request_url, str) and request_url and request_url != url and request_url not in sources:
            sources.append(request_url)
        for source in sources:
            if source != url:
                self._add_redirect(source, url)
        return ok

    def _evidence(self, url: str, cluster: str, kind: Any, basis: Any, normal_hash: Any) -> str:
        """The content a page's URL serves by its verdict: its ``cluster``, or the page itself (its URL) when
        the verdict is no evidence that the URL serves its kept page (:func:`same_page_evidence`)."""
        if kind == "unique" and isinstance(normal_hash, str):
            self._normal_hashes[cluster] = normal_hash
        if same_page_evidence(kind, basis, normal_hash, self._normal_hashes.get(cluster)):
            return cluster
        self.stats["reduced_verdicts"] += 1
        return url

    def _add_redirect(self, source: str, target: str) -> bool:
        """Evidence that ``source`` redirects to ``target`` (same host only: aliases are per host). At mining,
        a redirecting URL served the page its chain of redirects ends at."""
        a, b = self.split_url(source), self.split_url(target)
        if a is None or b is None or a[0] != b[0]:
            self.stats["redirects_across_hosts"] += 1
            return False
        key = join_key(a[1], a[2])
        if key not in self.redirects.setdefault(a[0], {}):
            self.redirects[a[0]][key] = join_key(b[1], b[2])
            self.stats["redirects"] += 1
        return True

    def _final(self, host: str, key: str) -> str | None:
        """Where the redirects from ``key`` end (``key`` itself when it does not redirect); None for a loop."""
        redirects = self.redirects.get(host, {})
        seen = {key}
        for _ in range(MAX_REDIRECT_HOPS):
            nxt = redirects.get(key)
            if nxt is None:
                return key
            if nxt in seen:
                return None
            seen.add(nxt)
            key = nxt
        return None

    def _resolve_redirects(self) -> None:
        """A redirecting URL serves the page at the end of its redirects (when that page was fetched)."""
        for host, redirects in self.redirects.items():
            urls = self.hosts.get(host)
            if urls is None:
                continue
            for source in redirects:
                end = self._final(host, source)
                if end is not None and end in urls and source not in urls:
                    urls[source] = urls[end]

    # --- mining ---

    def mine(self, existing: RuleSet | None = None, exclude: Iterable[tuple[str, tuple]] = ()) -> MiningResult:
        """Mine every host; ``existing`` rules are applied first and never proposed again; nor are the rules
        ``exclude`` names (``(host, rule.key)``: the online learner's deactivated rules, which would
        otherwise keep the place of the rule that explains the same pairs)."""
        excluded: dict[str, set[tuple]] = {}
        for host, key in exclude:
            excluded.setdefault(host, set()).add(key)
        thresholds = {key: value for key, value in asdict(self.config).items() if key != "extraction"}
        result = MiningResult(RuleSet(meta={"generated_by": "scrapy-dedup mine-dust", "thresholds": thresholds}))
        self._resolve_redirects()
        result.stats.update(self.stats)
        for host in sorted(self.hosts):
            base = list(existing.hosts.get(host, [])) if existing is not None else []
            report = result.hosts[host] = HostReport(host, urls=len(self.hosts[host]))
            miner = _HostMiner(host, self.hosts[host], self._contents, self.config, result, base, report)
            miner.known |= excluded.get(host, set())
            kept = miner.run()
            kept = _loadable(host, base, kept, result)
            for rule in kept:
                result.rules.add(host, rule)
            aliases = self._aliases(host, HostRules(host, base + kept), report)
            if aliases:
                result.rules.aliases[host] = aliases
        result.rules.recompile()
        result.stats["rules"] = len(result.rules)
        result.stats["aliases"] = result.rules.alias_count()
        return result

    def _content_aliases(self, urls: dict[str, int], redirects: dict[str, str], rewritten: Any,
                         aliases: dict[str, str], report: HostReport) -> None:
        """A page the rules leave under exactly two keys (an opaque id served as a page, ``/item.php?id=4711``
        beside ``/shoes/blue-runner``): the key fewer URLs reached becomes an alias of the other.

        Only two: a page behind three keys or more the rules do not fold is a soft 404, an error page or
        a form the vocabulary misses, and an alias table of it would hide a fault, not learn the site."""
        representative = self._contents.representative
        pages: dict[int, dict[str, list]] = {}  # page -> {key: [URLs reaching it, a fetched URL of it]}
        redirecting = []
        for raw in sorted(urls, key=_url_order):  # the URL to request: the shortest, whatever the log's order
            cid = urls[raw]
            if raw in redirects:
                redirecting.append((raw, cid))  # never the URL to request (the redirect evidence above)
                continue
            entry = pages.setdefault(representative(cid), {}).setdefault(rewritten(raw), [0, raw])
            entry[0] += 1
            if raw == rewritten(raw):
                entry[1] = raw  # the URL that is its own key: the one to request
        for raw, cid in redirecting:  # a redirect into a key says it is the page's main one (not an opaque id)
            into = pages.get(representative(cid), {}).get(rewritten(raw))
            if into is not None:
                into[0] += 1
        for keys in pages.values():
            if len(keys) != 2:
                continue
            # the main key: reached by more URLs, then one without a query, then the shorter
            (_main, (_, target)), (other, _) = sorted(
                keys.items(), key=lambda kv: (-kv[1][0], "?" in kv[0], len(kv[0]), kv[0]))
            if other not in aliases and len(aliases) < self.config.max_aliases:
                aliases[other] = target
                report.content_aliases += 1
                self.stats["content_aliases"] += 1

    def _aliases(self, host: str, rules: HostRules, report: HostReport) -> dict[str, str]:
        """The host's redirects as an alias table: rewritten source -> the page it ends at, as fetched.

        A redirect no rule explains gives a new key. One a rule explains (source and target have one key)
        is kept too: the key stays (the alias may be ``key -> key``), but a crawl then requests the target
        at once instead of a URL known to redirect (the hop is a fetch for nothing)."""
        redirects = self.redirects.get(host, {})
        report.redirects = len(redirects)
        urls = self.hosts[host]

        def rewritten(key: str) -> str:
            path, query = rules.apply(*split_key(key))
            return join_key(path, query)

        aliases: dict[str, str] = {}
        for source in sorted(redirects):
            end = self._final(host, source)
            if end is None or end == source or end not in urls:  # a loop, or no page known at its end
                continue
            key, target = rewritten(source), rewritten(end)
            if key == target:
                report.redirects_explained += 1
            if len(aliases) < self.config.max_aliases:
                aliases.setdefault(key, end)
            else:
                self.stats["aliases_over_limit"] += 1
        if self.config.content_aliases:
            self._content_aliases(urls, redirects, rewritten, aliases, report)
        # a target whose key is another alias (two redirects rewritten onto each other): not final, left out
        aliases = {k: t for k, t in aliases.items()
                   if (rt := rewritten(t)) == k or rt not in aliases or rewritten(aliases[rt]) == rt}
        report.aliases = len(aliases)
        return aliases


class _HostMiner:
    """Mining of one host's URL set."""

    def __init__(self, host: str, urls: dict[str, int], contents: Clusters[int], config: MiningConfig,
                 result: MiningResult, base_rules: list[DustRule], report: HostReport | None = None):
        self.host = host
        self.report = report or HostReport(host)
        self.config = config
        self.result = result
        self.rules: list[DustRule] = []
        self.known = {r.key for r in base_rules}
        # the rules in force (given and kept so far): a candidate's result is judged after them, as the
        # crawl would apply them together (``/w/index.php?title=Git`` -> ``/wiki/Git`` -> ``/wiki/git``)
        self.applied: list[DustRule] = list(base_rules)
        self.in_force = HostRules(host, self.applied)
        representative = contents.representative
        # content ids resolved to their near-duplicate cluster, once; in a fixed order (shortest URL first),
        # never the log's: every choice below that takes the first of equals (the URLs of one page paired,
        # candidates of equal counts, the page two rewritten URLs collide on) is then the same for any
        # crawl order
        resolved = {k: representative(urls[k]) for k in sorted(urls, key=_url_order)}
        if base_rules:
            resolved = self._rewrite(resolved, HostRules(host, base_rules))
        self.urls = resolved
        self.validations: dict[tuple, RuleValidation] = {}  # rule key -> its latest validation

    def run(self) -> list[DustRule]:
        for _ in range(self.config.rounds):
            new = self._round()  # the URL set is rewritten by the new rules as they are kept
            if not new:
                break
            self.rules.extend(new)
        self.result.validations.extend(self.validations.values())
        return self.rules

    @staticmethod
    def _rewrite(urls: dict[str, int], rules: HostRules) -> dict[str, int]:
        """The URL set under ``rules``, in the fixed order. Where URLs collide (a rule's rare violation), the
        page of the URL that is its own rewrite wins, else the first in the fixed order."""
        out: dict[str, int] = {}
        moved: list[tuple[str, int]] = []
        for key, cid in urls.items():
            path, query = split_key(key)
            new_path, new_query = rules.apply(path, query)
            if new_path == path and new_query == query:
                out[key] = cid
            else:
                moved.append((join_key(new_path, new_query), cid))
        for new_key, cid in moved:
            out.setdefault(new_key, cid)
        return {key: out[key] for key in sorted(out, key=_url_order)}

    # --- one round: candidates from same-content pairs, then validation kind by kind ---

    def _round(self) -> list[DustRule]:
        cfg = self.config
        sizes: Counter[int] = Counter(self.urls.values())
        self.boilerplate = {c for c, n in sizes.items() if n > cfg.max_cluster_urls}
        members: dict[int, list[str]] = {}
        for key, cid in self.urls.items():
            if sizes[cid] > 1 and cid not in self.boilerplate:
                members.setdefault(cid, []).append(key)
        counts: Counter[tuple] = Counter()
        for keys in members.values():
            # every pair of the first (shortest) URLs of the page, and the shortest with each of the others:
            # a form only the page's later URLs carry is still seen (pairs grow linearly past the first ones)
            found: set[tuple] = set()
            head = min(len(keys), cfg.max_pair_members)
            for i in range(head):
                for j in range(i + 1, head):
                    _candidates(keys[i], keys[j], found)
            for j in range(head, len(keys)):
                _candidates(keys[0], keys[j], found)
            counts.update(found)
        counts = _widen_values(counts)
        report = self.report
        report.pages_with_aliases = max(report.pages_with_aliases, len(members))
        report.candidates += len(counts)
        del members
        by_kind: dict[str, list[tuple]] = {}
        for cand, n in sorted(counts.items(), key=_count_order):  # most frequent first, ties by the candidate
            if n < cfg.min_support:
                if len(report.below_support) < 10:
                    report.below_support.append((_describe_candidate(cand), n))
                continue
            by_kind.setdefault(cand[0], []).append(cand)
        kept: list[DustRule] = []
        self._index()
        for kind in ("drop_pathparam", "drop_segment", "case_insensitive", "param", "query_to_path", "substitute"):
            cands = by_kind.get(kind, [])[: cfg.max_candidates]
            if kind == "drop_segment":  # a token with its literal segment first: dropped alone, '/s/' would stay
                cands.sort(key=lambda cand: not cand[2])
            new: list[DustRule] = []
            if kind == "param":
                new = self._param_rules(cands)
            elif kind == "query_to_path":
                new = self._q2p_rules(cands)
            elif kind == "substitute":
                new = self._substitutions(cands)
            else:
                for cand in cands:
                    rule = _rule_of(cand)
                    if rule is not None and rule.key not in self.known:
                        verdict = self._judge(rule)
                        if verdict.kept:
                            new.append(verdict.rule)
                            if kind == "drop_segment":  # in force at once: the token alone is judged after it
                                self._keep([verdict.rule])
            if new:  # later kinds are judged on the URLs these rules already rewrote (rules compose)
                kept.extend(new)
                self._keep([r for r in new if r.key not in self.known])
        return kept

    def _keep(self, rules: list[DustRule]) -> None:
        """Put ``rules`` in force: the URL set is rewritten by every rule kept so far."""
        if not rules:
            return
        self.known.update(r.key for r in rules)
        self.applied.extend(rules)
        self.in_force = HostRules(self.host, self.applied)
        self.urls = self._rewrite(self.urls, self.in_force)
        self._index()

    def _index(self) -> None:
        by_param: dict[str, list[str]] = {}
        by_path: dict[str, list[str]] = {}
        for key in self.urls:
            path, query = split_key(key)
            if query:
                by_path.setdefault(path, []).append(key)
                for name, _ in _params(query):
                    by_param.setdefault(name, []).append(key)
        self.by_param = by_param
        self.by_path = by_path

    def _pages_named_by(self, name: str, dropped: list[tuple[str, str]]) -> int:
        """Pages whose URLs all carry one value of ``name``, whatever other parameters ride along, on a path
        where another page is seen with another value or none: what a drop of ``name`` merges (``dropped``:
        the (path, query) it rewrites).

        The rewritten URLs may never collide: page 2 of a list seen only as ``?pagenum=2&sid=...`` variants
        and page 3 only as ``?pagenum=3&cmp=...``, while ``?pagenum=1`` is the list itself (the support).
        A value seen on a page beside another value or none (a tracking or session value) names nothing;
        a value on two pages of one path neither."""
        urls = self.urls
        boilerplate = self.boilerplate
        values_of: dict[tuple[str, int], set[str | None]] = {}  # (path, page) -> its values (None: without)
        fetched: Counter[tuple[str, int]] = Counter()  # (path, page) -> its URLs ``dropped`` rewrites
        pages_of: dict[tuple[str, str | None], set[int]] = {}  # (path, value) -> pages
        for path, query in dropped:
            cid = urls[join_key(path, query)]
            if cid in boilerplate:
                continue
            value = _value_of(query, name)
            values_of.setdefault((path, cid), set()).add(value)
            fetched[path, cid] += 1
            pages_of.setdefault((path, value), set()).add(cid)
        for path in {path for path, _ in values_of}:  # the same pages without the parameter
            for key in (*self.by_path.get(path, ()), *((path,) if path in urls else ())):
                values = values_of.get((path, urls[key]))
                if values is not None and _value_of(split_key(key)[1], name) is None:
                    values.add(None)
        free = {value for values in values_of.values() if len(values) > 1 for value in values}
        values_at: dict[str, list[set[str | None]]] = {}  # path -> the value sets of its pages
        for (path, _), values in values_of.items():
            values_at.setdefault(path, []).append(values)
        named = 0
        for (path, cid), values in values_of.items():
            if fetched[path, cid] < 2 or len(values) != 1:
                continue
            value = next(iter(values))
            if (value is not None and value not in free and len(pages_of[path, value]) == 1
                    and any(other != values for other in values_at[path])):
                named += 1
        return named

    def _param_rules(self, cands: list[tuple]) -> list[DustRule]:
        """Per parameter, the most general prefix first: ``drop_param`` there, else ``default_param`` there,
        then the next prefix. A default value before a narrower drop: where dropping ``lang`` merges
        ``?lang=de`` under ``/``, ``?lang=en`` is the default under ``/``, not a drop under the few prefixes
        where no translation happened to be fetched (nor a drop under a prefix a default was kept for: the
        default says the other values are other pages)."""
        kept: list[DustRule] = []
        # ("param", name, value or None, prefix) -> trials ordered by prefix length, the drop first
        trials = sorted({(cand[1], cand[3], cand[2]) for cand in cands},
                        key=lambda t: (t[0], len(t[1]), t[1], t[2] is not None, t[2] or ""))
        dropped: set[str] = set()
        defaults: set[tuple[str, str]] = set()
        defaulted: dict[str, list[str]] = {}  # name -> prefixes of its kept defaults
        for name, prefix, value in trials:
            if name in dropped or (value is not None and (name, value) in defaults):
                continue
            if value is None and any(prefix.startswith(p) for p in defaulted.get(name, ())):
                continue
            if value is None:
                rule = DustRule("drop_param", param=name, prefix=prefix)
            else:
                rule = DustRule("default_param", param=name, value=value, prefix=prefix)
            if rule.key in self.known:
                if value is None:
                    dropped.add(name)
                else:
                    defaults.add((name, value))
                continue
            verdict = self._judge(rule)
            if verdict.kept:
                kept.append(verdict.rule)
                if value is None:
                    dropped.add(name)
                else:
                    defaults.add((name, value))
                    defaulted.setdefault(name, []).append(prefix)
        return kept

    def _q2p_rules(self, cands: list[tuple]) -> list[DustRule]:
        """One ``query_to_path`` per (path, parameter), the best supported target first: at the widest value
        shape seen (:func:`_widen_values`), else narrower ones (a wider shape may merge more)."""
        kept: list[DustRule] = []
        done: set[tuple[str, str]] = set()
        for _, path, param, widest, to in cands:
            for shape in reversed(_VALUE_SHAPE_ORDER[: _VALUE_SHAPE_ORDER.index(widest) + 1]):
                if (path, param) in done:
                    break
                rule = _rule_of(("query_to_path", path, param, shape, to))
                if rule is None or rule.key in self.known:
                    continue
                verdict = self._judge(rule)
                if verdict.kept:
                    kept.append(verdict.rule)
                    done.add((path, param))
        return kept

    def _substitutions(self, cands: list[tuple]) -> list[DustRule]:
        """Each (anchor, a, b) pair is tried in both directions; the better one is kept, if any."""
        kept: list[DustRule] = []
        done: set[tuple] = set()
        for cand in cands:
            _, anchor, a, b = cand
            if (anchor, a, b) in done:
                continue
            done.add((anchor, a, b))
            best: RuleValidation | None = None
            verdicts = []
            if any(DustRule("substitute", anchor=anchor, from_=old, to=new).key in self.known
                   for old, new in ((a, b), (b, a))):
                continue  # one direction is kept (an earlier round): the other would undo it
            for old, new in ((a, b), (b, a)):
                try:
                    rule = DustRule("substitute", anchor=anchor, from_=old, to=new)
                    rule.check()
                except ValueError:
                    continue
                verdict = self._judge(rule, record=False)
                verdicts.append(verdict)
                if verdict.kept and (best is None or _preference(verdict) > _preference(best)):
                    best = verdict
            for verdict in verdicts:
                if verdict is not best and best is not None:
                    verdict.kept, verdict.reason = False, "the other direction is better supported"
                self.validations[verdict.rule.key] = verdict
            if best is not None:
                # kept one by one, the URL set rewritten at once: a later candidate (the same piece to
                # another target, '/en/' -> '/mobile/' after '/en/' -> '/'; a longer piece a kept one
                # explains, '/old/tools/' after '/old/') is judged on what is left and finds no support
                kept.append(best.rule)
                self._keep([best.rule])
        return kept

    def _affected(self, rule: DustRule) -> Iterable[str]:
        if rule.kind in ("drop_param", "default_param"):
            return self.by_param.get(rule.param, ())
        if rule.kind == "query_to_path":
            return self.by_path.get(rule.path, ())
        if rule.kind == "drop_pathparam":
            return (k for k in self.urls if f";{rule.param}=" in split_key(k)[0])
        if rule.kind == "substitute" and rule.anchor == "prefix":
            return (k for k in self.urls if k.startswith(rule.from_))
        if rule.kind == "substitute":
            return (k for k in self.urls if split_key(k)[0].endswith(rule.from_))
        return self.urls

    def _judge(self, rule: DustRule, record: bool = True) -> RuleValidation:
        cfg = self.config
        compiled = HostRules(self.host, [rule])
        in_force = self.in_force.apply
        urls = self.urls
        groups: dict[str, list[int]] = {}
        examples: list[tuple[str, str]] = []
        named: list[tuple[str, str]] | None = [] if rule.kind == "drop_param" else None
        for key in self._affected(rule):
            path, query = split_key(key)
            new_path, new_query = compiled.apply(path, query)
            if new_path == path and new_query == query:
                continue
            target = join_key(*in_force(new_path, new_query))
            if target == key:  # the rules in force undo it ('/recipes/' -> '/old/Recipes/' -> '/recipes/')
                continue
            groups.setdefault(target, []).append(urls[key])
            if len(examples) < cfg.examples and target in urls and urls[target] == urls[key]:
                examples.append((key, target))
            if named is not None:
                named.append((path, query))
        support = violations = 0
        agreeing: dict[int, int] = {}  # reference page -> agreeing URLs
        targets_of: Counter[int] = Counter()  # reference page -> distinct rewritten URLs it stands for
        boilerplate = self.boilerplate
        for target, cids in groups.items():
            ref = urls.get(target)
            if ref is None:
                if len(cids) < 2:
                    continue  # nothing to compare with: neither support nor violation
                ref, n = Counter(cids).most_common(1)[0]
                agree, disagree = n - 1, len(cids) - n
            else:
                agree = sum(1 for c in cids if c == ref)
                disagree = len(cids) - agree
            violations += disagree
            if agree:
                agreeing[ref] = agreeing.get(ref, 0) + agree
                targets_of[ref] += 1
        # One page that stays behind three or more different URLs after the rewrite is a page many URLs
        # return (a soft 404, an error or login page): it says nothing about the rule.
        # (Three or more: one page may still stand for two URLs when another, not yet mined, DUST
        # dimension separates them.)
        repeated = {c for c, n in targets_of.items() if n > 2} | (set(agreeing) & boilerplate)
        pages = set(agreeing) - repeated
        support = sum(agreeing[c] for c in pages)
        if named:
            violations += self._pages_named_by(rule.param, named)
        rate = violations / (support + violations) if support + violations else 0.0
        if len(pages) < cfg.min_support:
            reason = f"support from {len(pages)} distinct page(s) < {cfg.min_support}"
            if repeated:
                reason += (f" ({len(repeated)} page(s) returned for many different URLs ignored: "
                           "a soft 404 or error page)")
            kept = False
        elif rate > cfg.max_violation_rate:
            reason = f"violation rate {rate:.1%} > {cfg.max_violation_rate:.1%}: the rewrite merges different pages"
            kept = False
        else:
            reason = f"violation rate {rate:.1%}"
            kept = True
        evidenced = replace(rule, support=support, support_pages=len(pages), violations=violations,
                            examples=tuple(examples))
        verdict = RuleValidation(self.host, evidenced, support, len(pages), violations, kept, reason)
        if record:
            self.validations[rule.key] = verdict
        return verdict


def _value_of(query: str, name: str) -> str | None:
    return next((value for n, value in _params(query) if n == name), None)


def _loadable(host: str, base: list[DustRule], kept: list[DustRule], result: MiningResult) -> list[DustRule]:
    """``kept`` without the substitutions that would make the host's rules refused at load (they rewrite
    each other's results in a cycle): the latest kept goes first. The miner never writes a file the
    crawl cannot load."""
    kept = list(kept)
    while True:
        try:
            check_host(base + kept, host)
            return kept
        except DustRulesError:
            if not kept:
                return kept
            last = next((i for i in range(len(kept) - 1, -1, -1) if kept[i].kind == "substitute"), len(kept) - 1)
            dropped = kept.pop(last)
            result.stats["rules_dropped_cycle"] += 1
            for validation in result.validations:
                if validation.host == host and validation.rule.key == dropped.key:
                    validation.kept = False
                    validation.reason = "would rewrite the results of kept substitutions in a cycle"


def _widen_values(counts: Counter[tuple]) -> Counter[tuple]:
    """``query_to_path`` candidates that differ only in the value's shape become one, at the widest shape seen,
    counted on all their pages: ``Special:AllPages`` is a ``path``, ``Main_Page`` a ``slug``, ``Git`` an
    ``alnum`` (three candidates each short of support on a wiki, one rule of its titles)."""
    widest: dict[tuple, str] = {}
    total: Counter[tuple] = Counter()
    out: Counter[tuple] = Counter()
    for cand, n in counts.items():
        if cand[0] != "query_to_path":
            out[cand] = n
            continue
        _, path, param, shape, to = cand
        group = (path, param, to)
        total[group] += n
        if _VALUE_SHAPE_ORDER.index(shape) > _VALUE_SHAPE_ORDER.index(widest.get(group, "digits")):
            widest[group] = shape
    for (path, param, to), n in total.items():
        out["query_to_path", path, param, widest.get((path, param, to), "digits"), to] = n
    return out


def _url_order(key: str) -> tuple[int, str]:
    """The miner's fixed order of a host's URLs (shortest first, then the text): never the crawl's."""
    return len(key), key


def _count_order(item: tuple[tuple, int]) -> tuple[int, str]:
    """Candidates most frequent first, equal counts by the candidate's text (not by when it was found)."""
    return -item[1], repr(item[0])


def _preference(verdict: RuleValidation) -> tuple:
    """Between two directions of a substitution: more support, fewer violations, then the longer target
    (``.htm`` -> ``.html``, ``/~editors/`` -> ``/people/editors/``: the spelled-out form), then the text."""
    rule = verdict.rule
    return verdict.support, -verdict.violations, len(rule.to), rule.to


def _rule_of(cand: tuple) -> DustRule | None:
    kind = cand[0]
    try:
        if kind == "drop_pathparam":
            rule = DustRule("drop_pathparam", param=cand[1], prefix="/")
        elif kind == "drop_segment":
            rule = DustRule("drop_segment", shape=cand[1], lead=cand[2], prefix="/")
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
        s1, s2 = _PATHPARAM.sub("", p1), _PATHPARAM.sub("", p2)
        if names and (s1, q1) == (s2, q2):
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
            if only_one_side:
                out.add(("param", name, value, prefix))


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
                if "{" not in path_p and "}" not in path_p:
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
    if i > 1 and a != b and (a or b) and "/" not in a[1:-1] and "/" not in b[1:-1]:
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
    if a != b and a.startswith("/") and b.startswith("/") and b.endswith("/"):
        out.add(("substitute", "prefix", *sorted((a, b))))
