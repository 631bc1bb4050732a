"""Online DUST learning: rules mined during a crawl from the pages fetched so far, checked as it goes.

The miner is :class:`~scrapy_dedup.url.mining.DustMiner`, run again as same-page
evidence arrives (at the latest every ``every`` pages); the Scrapy side is
:mod:`scrapy_dedup.dust_learning`. This module imports nothing from Scrapy.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

from scrapy_dedup.content.simhash import hamming as hamming_distance
from scrapy_dedup.url.dust import DustRule, HostRules, RuleSet, join_key, split_key
from scrapy_dedup.url.mining import DustMiner, MiningConfig, RuleValidation

__all__ = ["DeclaredCanonicals", "OnlineDustLearner"]


class OnlineDustLearner:
    """Learns DUST rules during a crawl and keeps a live :class:`RuleSet` up to date (no Scrapy here).

    ``record(url, content)`` after each fetched page (``content``: the content engine's
    cluster, so sameness is the crawl's verdict). When pages met again under another
    URL since the last run reach ``config.min_support`` (and the pages since then are
    a tenth of all, which keeps the re-mining's cost linear-logarithmic), and at the
    latest every ``every`` pages, the pages so far are mined (with the rules in force
    applied first, so only new rules come out); the rules that pass validation are
    added to ``rules`` (the very object the canonicalizer reads, so later requests of
    that host use them) and the mined alias table replaces the learned one.

    An active rule hides its own violations (the URLs it collapses are no longer
    fetched), so :meth:`should_explore` lets some of the distinct URLs each learned
    rule collapses through, each URL at most once; :meth:`check_explored` compares the page fetched with the page its
    canonical key stands for, and a rule that meets a violation there is removed
    and never activated again; the requests it made the crawl drop (:meth:`hold`)
    are handed back in :attr:`resend`, so a wrong rule delays pages, never loses them.

    ``key_of(url)`` is the canonical key with the rules in force (the fingerprinter's
    canonicalizer). Cost: mining is re-run over everything recorded, so it grows
    with the crawl; ``every`` trades activation delay against that cost.
    """

    #: requests kept per learned rule to send again if it is deactivated (see :meth:`hold`)
    MAX_HELD = 10_000

    def __init__(self, rules: RuleSet, key_of: Any, *, every: int = 25, explore: float = 0.05,
                 config: MiningConfig | None = None):
        self.rules = rules
        self.key_of = key_of
        self.every = max(1, every)
        self.explore = explore
        self.config = config or MiningConfig()
        self.miner = DustMiner(self.config)
        self.pages = 0
        self._since_mining = 0
        self._new_evidence = 0  # pages met again under another URL since the last mining
        self.pagess: set[Any] = set()  # the contents (clusters) recorded
        self.banned: set[tuple[str, tuple]] = set()
        self.learned: dict[tuple[str, tuple], RuleValidation] = {}
        self.fetched: dict[str, tuple[Any, int | None]] = {}  # fetched URL -> (exact, simhash)
        self.content_of: dict[str, tuple[Any, int | None]] = {}  # canonical key -> content of its first page
        self.first_url: dict[str, str] = {}  # canonical key -> the URL that page was fetched at
        self.exploring: dict[str, str] = {}  # URL let through for exploration -> the key it collapses onto
        self._decided: set[str] = set()  # URLs an exploration decision was taken for (once per URL)
        self._budget: dict[tuple[str, tuple], _Budget] = {}  # learned rule -> its exploration so far
        self._single: dict[tuple[str, tuple], HostRules] = {}  # learned rule -> itself, compiled alone
        self._held: dict[tuple[str, tuple], dict[str, Any]] = {}  # learned rule -> {URL: request it dropped}
        #: requests of deactivated rules to send again (the caller takes them)
        self.resend: list[Any] = []
        self.events: Counter = Counter()
        #: rel="canonical" declarations, trusted per host once fetched pairs confirm them
        self.canonicals = DeclaredCanonicals(self.miner, self.config, self.events)
        self._loaded_aliases = {host: dict(table) for host, table in rules.aliases.items()}
        self._aliased_hosts: set[str] = set()

    # --- feeding ---

    def record(self, url: str, content: str | int, simhash: int | None = None, *, request_url: str | None = None,
               redirect_urls: Iterable[str] = ()) -> list[RuleValidation]:
        """A page was fetched: remember it, mine every ``every`` pages; returns the rules activated now.

        ``content`` names the page: the content engine's cluster (exact and verified near duplicates share
        it, so sameness is the crawl's own verdict) with ``simhash`` None; or, where the crawl does not
        judge responses, an exact hash with the page's ``simhash`` (near within ``config.hamming`` bits).
        ``redirect_urls`` (and a ``request_url`` other than ``url``) led to this page: they served it too.
        """
        self.pages += 1
        self._since_mining += 1
        sources = [u for u in redirect_urls if u != url]
        if request_url and request_url != url and request_url not in sources:
            sources.append(request_url)
        record: dict[str, Any] = {"url": url, "redirect_urls": sources}
        if simhash is None:
            record["cluster"] = str(content)
        else:
            record.update(exact_hash=content, simhash=simhash)
        self.miner.add_record(record)  # the miner's own reading of a crawl-log line: one notion of evidence
        value = (content, simhash)
        if simhash is None and content in self.pagess:
            self._new_evidence += 1  # a page met again under another URL: what candidates are made of
        self.pagess.add(content)
        for u in (url, *sources):
            self.fetched.setdefault(u, value)
            key = self.key_of(u)
            if key not in self.content_of:
                self.content_of[key] = value
                self.first_url[key] = u
            self.canonicals.fetched(u, value)
        if self._since_mining >= self.every or (self._new_evidence >= self.config.min_support
                                                 and self._since_mining * 10 >= self.pages):
            return self.mine_now()
        return []

    def declared(self, url: str, canonical: str, content: str | int, simhash: int | None = None) -> None:
        """The page fetched at ``url`` (named as in :meth:`record`) declares ``rel="canonical"`` ``canonical``:
        judged and, once its host is trusted, used as evidence (:class:`DeclaredCanonicals`)."""
        used = self.events["canonical_used"]
        self.canonicals.declared(url, canonical, (content, simhash))
        self._new_evidence += self.events["canonical_used"] - used  # a same-page pair, without a fetch

    def mine_now(self) -> list[RuleValidation]:
        self._since_mining = self._new_evidence = 0
        self.events["mining_runs"] += 1
        result = self.miner.mine(existing=self.rules)
        activated = []
        for verdict in result.kept():
            ident = (verdict.host, verdict.rule.key)
            if ident in self.banned or ident in self.learned:
                continue
            if self.rules.add(verdict.host, verdict.rule):
                self.learned[ident] = verdict
                self._single[ident] = HostRules(verdict.host, [verdict.rule])
                activated.append(verdict)
        aliased = self._take_aliases(result.rules.aliases)
        if activated:
            self.events["activated"] += len(activated)
        if activated or aliased:
            self._rekey()
        return activated

    def _take_aliases(self, mined: dict[str, dict[str, str]]) -> bool:
        """The alias table of this mining run (redirects, pages the rules leave under two keys), written under
        the rules now in force, replaces the one learned before; aliases loaded with the rules stay first.

        Only aliases the crawl's own fetches back are taken: the target was fetched, and so was a URL of
        the key. The miner also holds what trusted canonicals declared, which may be wrong, and an alias
        sends every request of its key elsewhere: unchecked, it would lose the key's page."""
        changed = False
        for host in set(mined) | set(self._aliased_hosts):
            backed = self._fetched_keys(host)
            rules_only = HostRules(host, self.rules.hosts.get(host, []))
            keys = {join_key(*rules_only.apply(*split_key(k))) for k in backed}
            learned = {key: target for key, target in mined.get(host, {}).items() if target in backed and key in keys}
            self.events["aliases_unbacked"] += len(mined.get(host, {})) - len(learned)
            table = {**learned, **self._loaded_aliases.get(host, {})}
            if table != self.rules.aliases.get(host, {}):
                self.rules.aliases[host] = table
                self._aliased_hosts.add(host)
                changed = True
                self.events["aliases"] = sum(len(t) for h, t in self.rules.aliases.items()
                                             if h in self._aliased_hosts)
        if changed:
            self.rules.recompile()
        return changed

    def _fetched_keys(self, host: str) -> set[str]:
        """The ``path?query`` (after the safe steps) of every URL of ``host`` that answered a page."""
        return {key for (h, key), content in self.canonicals.pages.items() if h == host and content != ERROR}

    def _rekey(self) -> None:
        """Canonical keys of the pages fetched so far, under the rules now in force."""
        content: dict[str, tuple[Any, int | None]] = {}
        first: dict[str, str] = {}
        for url, value in self.fetched.items():
            key = self.key_of(url)
            if key not in content:
                content[key], first[key] = value, url
        self.content_of, self.first_url = content, first

    def is_fetched(self, key: str) -> bool:
        """Was a page with this canonical key (under the rules in force) fetched already?"""
        return key in self.content_of

    # --- exploration ---

    def should_explore(self, url: str, key: str) -> bool:
        """Would ``url`` be collapsed by learned rules onto an already fetched ``key``? Then fetch it anyway
        when a rule that collapses it has exploration budget left.

        Budget per rule: of the distinct URLs a learned rule collapses, the first and then a share
        ``explore`` are fetched (``ceil(collapsed * explore)``), so a rule is checked at once and then
        now and then, and a densely linked site does not get every variant fetched once. A rule that
        drops a parameter's value (or a path parameter's) is also checked on the first URL of each value
        it drops, until ``config.min_support`` values were checked: ``?lang=en`` agreeing says nothing of
        ``?lang=de``, ``?start=6`` nothing of ``?start=12``; and only against a page fetched without
        that value (the key's page fetched as ``?lang=de`` says nothing of ``?lang=de``). Decided once
        per distinct URL: a URL already fetched, explored, or judged is never explored (again).
        """
        if self.explore <= 0 or key not in self.content_of or url in self._decided or url in self.fetched:
            return False
        parts = self.miner.split_url(url)
        if parts is None:
            return False
        rules = self._learned_firing(*parts)
        if not rules:
            return False  # collapsed by loaded rules only: those were reviewed, not learned here
        self._decided.add(url)
        explore = False
        for ident in rules:
            budget = self._budget.get(ident)
            if budget is None:
                budget = self._budget[ident] = _Budget()
            budget.collapsed += 1
            rule = self._single[ident].rules[0]
            value = _dropped_value(rule, parts[1], parts[2])
            first = self.miner.split_url(self.first_url.get(key, ""))
            if first is not None and value is not None and _dropped_value(rule, first[1], first[2]) == value:
                value = None  # the key's page came with this very value: comparing says nothing of it
            if value is not None and value not in budget.values and len(budget.values) < self.config.min_support:
                budget.values.add(value)
                explore = True
            explore = explore or budget.explored < math.ceil(budget.collapsed * self.explore)
        if not explore:
            return False
        for ident in rules:
            self._budget[ident].explored += 1
        self.exploring[url] = key
        self.events["explored"] += 1
        return True

    def _learned_firing(self, host: str, path: str, query: str) -> list[tuple[str, tuple]]:
        """The learned rules of ``host`` that rewrite this URL (each alone; all of them when only their
        composition does; none when they do not rewrite it)."""
        learned = [(ident, rule) for ident, rule in self._single.items() if ident[0] == host]
        firing = [ident for ident, single in learned if single.fired(path, query)]
        if firing or not learned:
            return firing
        together = HostRules(host, [single.rules[0] for _, single in learned])
        return [ident for ident, _ in learned] if together.fired(path, query) else []

    def hold(self, url: str, request: Any) -> bool:
        """``request`` (for ``url``) was dropped as a duplicate because learned rules collapse it: keep it,
        so that it is sent again if one of those rules is deactivated (a wrong rule loses no page). True
        when held; at most ``MAX_HELD`` per rule (beyond, counted in ``events["held_over_limit"]``)."""
        if url in self.fetched:
            return False  # the page is fetched: nothing to lose (sending it again would fetch it twice)
        parts = self.miner.split_url(url)
        rules = self._learned_firing(*parts) if parts else []
        if not rules:
            return False
        held = False
        for ident in rules:
            bucket = self._held.setdefault(ident, {})
            if url in bucket or len(bucket) < self.MAX_HELD:
                bucket.setdefault(url, request)
                held = True
            else:
                self.events["held_over_limit"] += 1
        return held

    def release(self, removed: Iterable[tuple[str, tuple]]) -> list[Any]:
        """The requests held for ``removed`` (deactivated) rules, to send again (each URL once)."""
        out: dict[str, Any] = {}
        for ident in removed:
            for url, request in self._held.pop(ident, {}).items():
                if url not in self.fetched:
                    out.setdefault(url, request)
        for bucket in self._held.values():  # held under another rule too: sent now, not again later
            for url in out:
                bucket.pop(url, None)
        self.events["released"] += len(out)
        return list(out.values())

    def take_exploration(self, url: str) -> bool:
        """Is ``url`` (about to be downloaded) an exploration? Not any more once an alias of the table, learned
        since, sends it elsewhere: an alias is a fact (a redirect, a page under two keys), not a rule to check,
        and its target may have been fetched already."""
        if url not in self.exploring:
            return False
        parts = self.miner.split_url(url)
        if parts is None:
            return True
        host, path, query = parts
        host_rules = self.rules.for_host(host)
        target = host_rules.alias_of(path, query) if host_rules is not None and host_rules.aliases else None
        if target is not None and target != (path, query):
            del self.exploring[url]
            self.events["explore_cancelled"] += 1
            return False
        return True

    def check_explored(self, url: str, exact: Any, simhash: int | None) -> list[DustRule]:
        """An exploration page arrived: a different page than its key's deactivates the rules that fired."""
        key = self.exploring.pop(url, None)
        if key is None:
            return []
        known = self.content_of.get(key)
        if known is None:
            return []
        if _same_content(known, (exact, simhash), self.config.hamming):
            self.events["explore_agreed"] += 1
            return []
        self.events["explore_violations"] += 1
        parts = self.miner.split_url(url)
        if parts is None:
            return []
        host, path, query = parts
        removed = []
        for rule in list(self.rules.hosts.get(host, [])):
            ident = (host, rule.key)
            if ident in self.learned and self._single[ident].fired(path, query):
                self.rules.remove(host, rule)
                self.banned.add(ident)
                del self.learned[ident], self._single[ident]
                removed.append(rule)
        if removed:
            self.events["deactivated"] += len(removed)
            self._rekey()
            self.resend.extend(self.release((host, rule.key) for rule in removed))
        return removed


class _Budget:
    """Exploration of one learned rule: distinct URLs it collapsed, how many were explored, the values of
    the parameter it drops that were explored."""

    __slots__ = ("collapsed", "explored", "values")

    def __init__(self) -> None:
        self.collapsed = 0
        self.explored = 0
        self.values: set[str] = set()


def _dropped_value(rule: DustRule, path: str, query: str) -> str | None:
    """The value ``rule`` drops from this URL (a query or path parameter's), None for other kinds."""
    if rule.kind == "drop_param":
        for part in query.split("&") if query else ():
            name, _, value = part.partition("=")
            if name == rule.param:
                return value
    elif rule.kind == "drop_pathparam":
        marker = f";{rule.param}="
        at = path.find(marker)
        if at != -1:
            return path[at + len(marker):].split("/", 1)[0].split(";", 1)[0]
    return None


class DeclaredCanonicals:
    """``rel="canonical"`` as evidence, never as an order: trusted per host only once fetched pairs confirm it.

    A page at URL ``u`` declaring canonical ``c`` (another URL of its host) says "``u`` is the page
    ``c``". When ``c`` has been fetched (before or later) the content verdicts judge it: the same page
    confirms the declaration, another page or an error (4xx, 5xx) refuses it. A host whose
    confirmations reach ``config.min_support`` with refusals at most ``config.max_violation_rate`` of
    the judged declarations is **trusted**: from then on each declaration whose canonical was not
    fetched is handed to the miner as a page of ``c`` (a same-page pair without a fetch: rules are
    learned sooner). A host whose refusals reach ``min_support`` and exceed that rate is
    **misconfigured** (every listing page declaring page 1, every page declaring the home page,
    canonicals to 404s) and its declarations are ignored for the rest of the crawl. Nothing here
    ever stops a fetch: a wrong canonical can only mislead the miner, whose rules exploration checks.

    ``events`` counts ``canonical_confirmed``, ``canonical_refused``, ``canonical_used`` (handed to the
    miner), ``canonical_ignored`` (declared on a misconfigured host); :attr:`changes` lists
    ``(host, "trusted" | "untrusted" | "misconfigured", confirmed, refused)`` for the caller to log (a
    trusted host whose refusals pass the rate is no longer used, and may be trusted again).
    """

    #: declarations waiting for their canonical to be fetched, per host (beyond: not judged, not used)
    MAX_PENDING = 10_000

    def __init__(self, miner: DustMiner, config: MiningConfig, events: Counter):
        self.miner = miner
        self.config = config
        self.events = events
        self.hosts: dict[str, _HostCanonicals] = {}
        #: (host, "path?query") of every URL fetched -> its content (ERROR for 4xx, 5xx)
        self.pages: dict[tuple[str, str], Any] = {}
        self.changes: list[tuple[str, str, int, int]] = []

    def _where(self, url: str) -> tuple[str, str] | None:
        parts = self.miner.split_url(url)
        if parts is None:
            return None
        host, path, query = parts
        return host, f"{path}?{query}" if query else path

    def declared(self, url: str, canonical: str, content: Any) -> None:
        """The page ``content`` fetched at ``url`` declares ``canonical`` (an absolute URL)."""
        here, there = self._where(url), self._where(canonical)
        if here is None or there is None or here[0] != there[0] or here == there:
            return  # another host (aliases are per host), unparsable, or the page itself: no evidence
        host = self.hosts.setdefault(here[0], _HostCanonicals())
        if host.state == "misconfigured":
            self.events["canonical_ignored"] += 1
            return
        known = self.pages.get(there)
        if known is not None:
            self._judge(here[0], host, known == content)
            return
        if host.state == "trusted":
            self._use(canonical, content)
        if sum(len(v) for v in host.pending.values()) < self.MAX_PENDING:  # judged when it is fetched, used or not
            host.pending.setdefault(there[1], []).append((canonical, content))

    def fetched(self, url: str, content: Any) -> None:
        """``url`` answered a page: it judges the declarations that named it."""
        where = self._where(url)
        if where is None:
            return
        self.pages.setdefault(where, content)
        host = self.hosts.get(where[0])
        if host is None or host.state == "misconfigured":
            return
        for _, declared_content in host.pending.pop(where[1], ()):
            self._judge(where[0], host, declared_content == self.pages[where])

    def failed(self, url: str) -> None:
        """``url`` answered an error (4xx, 5xx): every declaration naming it is refused."""
        self.fetched(url, ERROR)

    def _judge(self, name: str, host: _HostCanonicals, same: bool) -> None:
        if host.state == "misconfigured":  # decided (several declarations may name one fetched URL)
            return
        if same:
            host.confirmed += 1
            self.events["canonical_confirmed"] += 1
        else:
            host.refused += 1
            self.events["canonical_refused"] += 1
        judged = host.confirmed + host.refused
        too_many_refused = host.refused > self.config.max_violation_rate * judged
        if too_many_refused and host.refused >= self.config.min_support:
            host.state = "misconfigured"
            host.pending.clear()
            self.changes.append((name, host.state, host.confirmed, host.refused))
        elif host.state == "trusted" and too_many_refused:  # not misconfigured (yet): no longer used
            host.state = "untrusted"
            self.changes.append((name, host.state, host.confirmed, host.refused))
        elif host.state == "untrusted" and not too_many_refused and host.confirmed >= self.config.min_support:
            host.state = "trusted"
            self.changes.append((name, host.state, host.confirmed, host.refused))
            for declarations in host.pending.values():
                for canonical, content in declarations:
                    self._use(canonical, content)

    def _use(self, canonical: str, content: Any) -> None:
        """A trusted declaration: the miner sees the canonical URL serving the declaring page's content."""
        record: dict[str, Any] = {"url": canonical}
        if content[1] is None:
            record["cluster"] = str(content[0])
        else:
            record.update(exact_hash=content[0], simhash=content[1])
        if self.miner.add_record(record):
            self.events["canonical_used"] += 1


#: what an URL that answered an error (4xx, 5xx) holds, for the declarations naming it
ERROR = ("error",)


class _HostCanonicals:
    __slots__ = ("confirmed", "refused", "state", "pending")

    def __init__(self) -> None:
        self.confirmed = 0
        self.refused = 0
        self.state = "untrusted"  # then "trusted" or "misconfigured"
        self.pending: dict[str, list[tuple[str, Any]]] = {}  # canonical "path?query" -> declarations


def _same_content(a: tuple[Any, int | None], b: tuple[Any, int | None], hamming: int) -> bool:
    if a[0] == b[0]:
        return True
    if a[1] is None or b[1] is None:
        return False
    return hamming_distance(a[1], b[1]) <= hamming
