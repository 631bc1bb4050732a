"""Online DUST learning: rules mined during a crawl from the pages fetched so far, checked as it goes.

The miner is :class:`~scrapy_dedup.url.mining.DustMiner`, run again as same-page
evidence arrives (at the latest every ``every`` pages); requests for other forms of
a page already met wait (:class:`VariantDeferral`) until the evidence they need has
taught the rules that fold them; the Scrapy side is :mod:`scrapy_dedup.dust_learning`.
This module imports nothing from Scrapy.
"""
from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

from scrapy_dedup.content.simhash import hamming as hamming_distance
from scrapy_dedup.url.dust import (
    DustRule,
    HostRules,
    RuleSet,
    compile_shape,
    join_key,
    shape_of_segment,
    split_key,
)
from scrapy_dedup.url.mining import _PATHPARAM, DustMiner, MiningConfig, RuleValidation

__all__ = ["DeclaredCanonicals", "OnlineDustLearner", "VariantDeferral"]


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

    Rules loaded with ``rules`` (``DEDUP_DUST_RULES``) are claims checked the same
    way: explored from the first URL they collapse, withdrawn on a violation (and
    never learned again), the requests they dropped sent again; counted apart
    (``events["loaded_withdrawn"]``). So is a host's loaded alias table, one claim as a rule is
    (each entry sends one URL key to another URL): explored from the first URL it sends
    elsewhere, withdrawn whole on a violation, what it held back (:meth:`hold_aliased`) sent
    again. With ``learn=False`` nothing is mined: only the loaded rules and aliases are checked.

    ``key_of(url)`` is the canonical key with the rules in force (the fingerprinter's
    canonicalizer). Cost: mining is re-run over everything recorded, so it grows
    with the crawl; ``every`` trades activation delay against that cost.
    """

    #: parked requests sent at a time when none is evidence (see :meth:`release_deferred`)
    FLUSH = 12
    #: requests kept per learned rule to send again if it is deactivated (see :meth:`hold`)
    MAX_HELD = 10_000

    def __init__(self, rules: RuleSet, key_of: Any, *, every: int = 25, explore: float = 0.05,
                 config: MiningConfig | None = None, learn: bool = True):
        self.rules = rules
        self.learn = learn
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
        self._banned_params: set[tuple[str, str]] = set()  # (host, parameter) of a deactivated rule
        self.learned: dict[tuple[str, tuple], RuleValidation] = {}
        #: learned rules the server redirects by: applied to a request's URL before download (no hop)
        self.redirect_rules: set[tuple[str, tuple]] = set()
        self.fetched: dict[str, tuple[Any, int | None]] = {}  # fetched URL -> (exact, simhash)
        self.content_of: dict[str, tuple[Any, int | None]] = {}  # canonical key -> content of its first page
        self.first_url: dict[str, str] = {}  # canonical key -> the URL that page was fetched at
        #: URLs that answered (2xx) with nothing the learner reads (not a page, too short, the content index
        #: away): downloaded, so not sent past the dupefilter again (:meth:`answered_unread`)
        self.unread: set[str] = set()
        self.exploring: dict[str, str] = {}  # URL let through for exploration -> the key it collapses onto
        self._decided: set[str] = set()  # URLs an exploration decision was taken for (once per URL)
        self._explore_taken: set[str] = set()  # explorations whose request went to download
        self._explore_checks: dict[str, list] = {}  # exploration not judged yet -> [(rule, value it checks)]
        self._budget: dict[tuple[str, tuple], _Budget] = {}  # learned rule -> its exploration so far
        self._single: dict[tuple[str, tuple], HostRules] = {}  # learned rule -> itself, compiled alone
        self._held: dict[tuple[str, tuple], dict[str, Any]] = {}  # learned rule -> {URL: request it dropped}
        #: requests of deactivated rules to send again (the caller takes them)
        self.resend: list[Any] = []
        self.events: Counter = Counter()
        #: a page (``content`` as recorded) -> its page at the item-level strictness, when the crawl said
        self.item_of: dict[Any, Any] = {}
        #: rel="canonical" declarations, trusted per host once fetched pairs confirm them
        self.canonicals = DeclaredCanonicals(self.miner, self.config, self.events)
        #: requests for other forms of URLs already met, held back until the crawl runs dry
        self.deferral = VariantDeferral(self.miner.split_url, self.events)
        self._evidence_sent: Counter = Counter()  # (host, form class) -> parked URLs sent as its evidence
        self._evidence_values: dict[tuple[str, tuple], set[str]] = {}  # (host, parameter class) -> values sent
        self._evidence_urls: set[str] = set()  # parked URLs sent to be fetched (a later rule's confirmations)
        self._redirected: set[str] = set()  # URLs that redirected to a page fetched (the server's own word)
        self._loaded_aliases = {host: dict(table) for host, table in rules.aliases.items()}
        self._aliased_hosts: set[str] = set()
        #: rules loaded with the rule set: on trial like learned ones (explored, withdrawn on a violation)
        self.loaded: set[tuple[str, tuple]] = set()
        #: loaded rules whose file records the miner's evidence (``support_pages`` of at least ``min_support``:
        #: what ``mine-dust`` writes): explored within a share of their host's pages (:meth:`should_explore`)
        self._vouched: set[tuple[str, tuple]] = set()
        self._vouched_of: dict[str, list[tuple[str, tuple]]] = {}  # host -> its vouched rules
        for host, host_rules in rules.hosts.items():
            for rule in host_rules:
                ident = (host, rule.key)
                self.loaded.add(ident)
                self._single[ident] = HostRules(host, [rule])
                if rule.support_pages >= self.config.min_support:
                    self._vouched.add(ident)
                    self._vouched_of.setdefault(host, []).append(ident)
        self._host_pages: Counter = Counter()  # host -> pages recorded
        self._vouched_explored: Counter = Counter()  # host -> explorations its vouched rules' share made
        self._vouched_urls: set[str] = set()  # the URLs of those explorations
        #: host -> its rules without the alias table, compiled (:meth:`_aliases_firing`; cleared by :meth:`_rekey`)
        self._rules_only: dict[str, HostRules] = {}

    # --- feeding ---

    def record(self, url: str, content: str | int, simhash: int | None = None, *, request_url: str | None = None,
               redirect_urls: Iterable[str] = (), item: Any = None) -> list[RuleValidation]:
        """A page was fetched: remember it, mine every ``every`` pages; returns the rules activated now.

        ``content`` names the page: the content engine's cluster (exact and verified near duplicates share
        it, so sameness is the crawl's own verdict) with ``simhash`` None; or, where the crawl does not
        judge responses, an exact hash with the page's ``simhash`` (near within ``config.hamming`` bits).
        ``redirect_urls`` (and a ``request_url`` other than ``url``) led to this page: they served it too.
        ``item``: the page at the judge's lenient, item-level strictness (its cluster), when the crawl judged it.
        """
        if item is not None:
            self.item_of.setdefault(content, item)
        self.pages += 1
        self._since_mining += 1
        parts = self.miner.split_url(url)
        if parts is not None:
            self._host_pages[parts[0]] += 1
        sources = [u for u in redirect_urls if u != url]
        if request_url and request_url != url and request_url not in sources:
            sources.append(request_url)
        record: dict[str, Any] = {"url": url, "redirect_urls": sources}
        if simhash is None:
            record["cluster"] = str(content)
        else:
            record.update(exact_hash=content, simhash=simhash)
        if self.learn:
            self.miner.add_record(record)  # the miner's own reading of a crawl-log line: one notion of evidence
        value = (content, simhash)
        if (simhash is None and content in self.pagess) or sources:
            self._new_evidence += 1  # a page met again under another URL (or redirected to): what rules are made of
        self.pagess.add(content)
        self._redirected.update(sources)
        for u in (url, *sources):
            self.fetched.setdefault(u, value)
            key = self.key_of(u)
            if key not in self.content_of:
                self.content_of[key] = value
                self.first_url[key] = u
            self.canonicals.fetched(u, value)
        return self._mine_if_due()

    def _mine_if_due(self) -> list[RuleValidation]:
        if not self.learn:
            return []
        if self._since_mining >= self.every or (self._new_evidence >= self.config.min_support
                                                 and self._since_mining * 10 >= self.pages):
            return self.mine_now()
        return []

    def mine_pending(self) -> list[RuleValidation]:
        """Mine now if pages were recorded since the last mining; returns the rules activated."""
        return self.mine_now() if self._since_mining else []

    def redirected(self, source: str, target: str) -> list[RuleValidation]:
        """``source`` answered a redirect to ``target``: evidence at once, not only if the redirected request
        is fetched (the scheduler drops it when ``target``'s key was fetched: then its page is known, and
        the pair ``source`` / ``target`` is what a rule of the old scheme is mined from). Returns the rules
        activated now."""
        self.miner.add_record({"kind": "redirect", "request_url": source, "url": target})
        if source in self._explore_taken:
            return []  # an exploration: the target's own page is what it checks (follow_exploration), not its key's
        value = self.fetched.get(target)
        if value is None:
            value = self.content_of.get(self.key_of(target))
            if value is None:
                return []  # the redirected request is fetched, and recorded with its redirect_urls
            # the target's key's page, under the rules in force (not marked fetched: should a rule prove
            # wrong, the dropped redirected request is held, and sent again)
            self._add_to_miner(target, value)
        if source in self.fetched:
            return []
        self.fetched[source] = value
        key = self.key_of(source)
        if key not in self.content_of:  # the source's key answered that page (as record() has it)
            self.content_of[key], self.first_url[key] = value, source
        self._new_evidence += 1
        return self._mine_if_due()

    def _add_to_miner(self, url: str, value: tuple[Any, int | None]) -> None:
        record: dict[str, Any] = {"url": url}
        if value[1] is None:
            record["cluster"] = str(value[0])
        else:
            record.update(exact_hash=value[0], simhash=value[1])
        self.miner.add_record(record)

    def declared(self, url: str, canonical: str, content: str | int, simhash: int | None = None) -> None:
        """The page fetched at ``url`` (named as in :meth:`record`) declares ``rel="canonical"`` ``canonical``:
        judged and, once its host is trusted, used as evidence (:class:`DeclaredCanonicals`)."""
        used = self.events["canonical_used"]
        self.canonicals.declared(url, canonical, (content, simhash))
        self._new_evidence += self.events["canonical_used"] - used  # a same-page pair, without a fetch

    def mine_now(self) -> list[RuleValidation]:
        if not self.learn:
            return []
        self._since_mining = self._new_evidence = 0
        self.events["mining_runs"] += 1
        result = self.miner.mine(existing=self.rules, exclude=self.banned)
        activated = []
        for verdict in result.kept():
            ident = (verdict.host, verdict.rule.key)
            if ident in self.banned or ident in self.learned or (
                    verdict.rule.kind in _PARAM_KINDS and (verdict.host, verdict.rule.param) in self._banned_params):
                continue
            if self.rules.add(verdict.host, verdict.rule):
                self.learned[ident] = verdict
                self._single[ident] = HostRules(verdict.host, [verdict.rule])
                if self._redirect_backed(ident):
                    self.redirect_rules.add(ident)
                activated.append(verdict)
        aliased = self._take_aliases(result.rules.aliases)
        if activated:
            self.events["activated"] += len(activated)
        if activated or aliased:
            self._rekey()
        for verdict in activated:
            self._credit_evidence((verdict.host, verdict.rule.key))
        return activated

    def _credit_evidence(self, ident: tuple[str, tuple]) -> None:
        """What a rule was just activated on counts toward its exploration. A pair of fetched URLs of one page
        that only this rule joins (the other rules in force leave them under two keys) shows what exploring
        one of them would: when the values of what the rule drops differ (``?lang=en`` beside no ``lang``)
        those values are checked (``de`` is not). When the pair's URL was a parked request sent to be fetched
        (:meth:`release_deferred`: a request the rule would fold, held back, not dropped, and fetched as
        evidence or at the end), or a URL that answered a redirect to the page (the server's own word), it
        also counts as one of the rule's explorations, as collapsed and explored: the rule was confirmed on
        requests it would have dropped, which is what its first explorations do.
        A rule met only on pages fetched as they came is explored from its first collapsed URL on."""
        host = ident[0]
        single = self._single[ident]
        rule = single.rules[0]
        others = HostRules(host, [r for r in self.rules.hosts.get(host, []) if r.key != rule.key])
        budget = self._budget.setdefault(ident, _Budget())
        for url, value in self.fetched.items():
            parts = self.miner.split_url(url)
            if parts is None or parts[0] != host:
                continue
            key = self.key_of(url)
            first = self.first_url.get(key)
            first_parts = self.miner.split_url(first) if first and first != url else None
            if first_parts is None or not (single.fired(parts[1], parts[2]) or single.fired(*first_parts[1:])) \
                    or not _same_content(self.content_of[key], value, self.config.hamming):
                continue
            if join_key(*others.apply(*parts[1:])) == join_key(*others.apply(*first_parts[1:])):
                continue  # joined without this rule: says nothing of it
            if url in self._evidence_urls or url in self._redirected:
                budget.collapsed += 1
                budget.explored += 1
            budget.seen_shapes.add(_path_shape((parts if single.fired(parts[1], parts[2]) else first_parts)[1]))
            if rule.kind not in _VALUE_KINDS:
                continue
            mine = _value_class(_dropped_value(rule, parts[1], parts[2]))
            theirs = _value_class(_dropped_value(rule, first_parts[1], first_parts[2]))
            if mine != theirs:
                for checked in (mine, theirs):
                    if checked is not None and len(budget.values) < self.config.min_support:
                        budget.values.add(checked)

    def _redirect_backed(self, ident: tuple[str, tuple]) -> bool:
        """Does the server itself redirect by this rule? At least ``min_support`` redirects recorded whose
        target is the source rewritten by the rule alone, and violations (a redirect the rule rewrites
        elsewhere) within ``max_violation_rate``."""
        single = self._single[ident]
        agree = disagree = 0
        for source, target in self.miner.redirects.get(ident[0], {}).items():
            path, query = split_key(source)
            if single.fired(path, query):
                if join_key(*single.apply(path, query)) == target:
                    agree += 1
                else:
                    disagree += 1
        return agree >= self.config.min_support and disagree <= self.config.max_violation_rate * (agree + disagree)

    def redirect_target(self, url: str) -> str | None:
        """The URL ``url`` is rewritten to before its download by the learned rules the server redirects by
        (:meth:`_redirect_backed`: an old URL scheme, an old extension), so that it is requested at once
        instead of hopping; None when none of them rewrites it."""
        if not self.redirect_rules:
            return None
        parts = self.miner.split_url(url)
        if parts is None:
            return None
        host, path, query = parts
        new_path, new_query = path, query
        for ident in self.redirect_rules:
            if ident[0] == host:
                new_path, new_query = self._single[ident].apply(new_path, new_query)
        if (new_path, new_query) == (path, query):
            return None
        scheme, _, rest = url.partition("://")
        authority = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
        return f"{scheme}://{authority}{join_key(new_path, new_query)}"

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
            loaded = self._loaded_aliases.get(host, {})
            if loaded:  # no chain through a loaded alias (refused at load: the rules file written must load)
                ends = set(loaded) | set(loaded.values())
                learned = {key: target for key, target in learned.items() if key not in ends
                           and target not in loaded and join_key(*rules_only.apply(*split_key(target))) not in loaded}
            table = {**learned, **loaded}
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
        self._rules_only.clear()  # the rules changed

    def is_fetched(self, key: str) -> bool:
        """Was a page with this canonical key (under the rules in force) fetched already?"""
        return key in self.content_of

    def answered_unread(self, url: str) -> None:
        """``url`` answered a response the learner cannot read: not evidence, not a page an exploration
        compares with (its key stays unfetched, so other URLs of the key are still fetched: one of them may
        be readable), but the URL itself was downloaded (:attr:`unread`)."""
        self.unread.add(url)

    # --- deferral ---

    def release_deferred(self) -> list[Any]:
        """The scheduler ran dry: the parked requests to schedule now (:class:`VariantDeferral`; the caller
        mines first, :meth:`mine_pending`, so that the evidence fetched since counts): every parked request
        whose key under the rules in force is a fetched page's (the dupefilter drops it, or explores it);
        per form, up to
        ``config.min_support`` parked URLs one step from a fetched page (of distinct pages: the evidence a
        rule is mined from; at most twice per form); when there is none such, the next ``FLUSH`` of the
        rest. The others stay parked."""
        parked = self.deferral.parked
        if not parked:
            return []
        fetched: dict[tuple[str, str], tuple | None] = {}  # (host, form) -> its class; a fetched key: None
        for key in self.content_of:
            parts = self.miner.split_url(key)
            if parts is None:
                continue
            host, path, query = parts
            fetched[(host, join_key(path, query))] = None
            for form, form_class in variant_forms(path, query):
                fetched.setdefault((host, form), form_class)
        out: list[Any] = []
        rest: dict[str, Any] = {}
        evidence: dict[tuple[str, tuple], set[str]] = {}  # (host, form class) -> the pages of its evidence now
        for url, request in parked.items():
            key = self.key_of(url)
            parts = self.miner.split_url(key)
            if key in self.content_of or parts is None:
                out.append(request)
                continue
            host, path, query = parts
            own = join_key(path, query)
            near, klass = own, fetched.get((host, own))
            if klass is None:
                near, klass = next(((form, k) for form, k in variant_forms(path, query)
                                    if (host, form) in fetched and fetched[(host, form)] is None), ("", None))
            pages = evidence.setdefault((host, klass), set()) if klass is not None else None
            sent = self._evidence_sent[(host, klass)]
            # a value of the parameter not seen in its evidence yet: what may refute the rule (?lang=en agrees,
            # ?lang=de is another page); parked, it was never fetched before the rule was mined from ?lang=en
            value = _param_value(klass, query) if klass is not None else None
            values = self._evidence_values.setdefault((host, klass or ()), set())
            refuting = value is not None and value not in values
            if pages is not None and sent < 2 * self.config.min_support and (  # else: wait for the end
                    refuting or (len(pages) < self.config.min_support and near not in pages)):
                pages.add(near)
                if value is not None:
                    values.add(value)
                self._evidence_sent[(host, klass)] += 1
                self._evidence_urls.add(url)
                out.append(request)
                self.events["deferred_evidence"] += 1
            else:
                rest[url] = request
        if not any(evidence.values()):
            # no evidence left to fetch: the rest goes (nothing stays parked for ever), a few at a time, so
            # that rules mined from the first ones fold the next ones before they are fetched
            flush = list(rest)[: self.FLUSH]
            out.extend(rest.pop(url) for url in flush)
            self._evidence_urls.update(flush)
        self.deferral.parked = rest
        self.events["deferred_released"] += len(out)
        return out

    # --- exploration ---

    def should_explore(self, url: str, key: str, *, new_values_only: bool = False) -> bool:
        """Would ``url`` be collapsed by learned rules onto an already fetched ``key`` (or by a loaded alias onto
        a target that answered what the learner cannot read)? Then fetch it anyway when a rule that collapses
        it has exploration budget left.

        Budget per rule: of the distinct URLs a learned rule collapses, the first and then a share
        ``explore`` are fetched (``ceil(collapsed * explore)``), so a rule is checked at once and then
        now and then, and a densely linked site does not get every variant fetched once. A rule that
        drops a parameter's value (or a path parameter's, or a path segment of its shape) is also checked
        on the first URL of each value it drops, until ``config.min_support`` values were checked:
        ``?lang=en`` agreeing says nothing of ``?lang=de``, ``?start=6`` nothing of ``?start=12``,
        ``/v1/`` nothing of ``/v2/`` (generated tokens of 8 characters or more count as one value: one
        session id says what another says); and only against a page fetched without
        that value (the key's page fetched as ``?lang=de`` says nothing of ``?lang=de``); the values of the
        pages the rule was learned from count as checked (:meth:`_credit_evidence`). A learned rule that folds
        both directories (a path ending in ``/``) and files (:func:`_path_shape`) is also checked on the first
        URL of each of the two it folds after its activation, whatever its evidence (at most two fetches per
        rule): its evidence, met first, is often of one part of its domain only (cgit's ``drop ?id=`` under
        ``/tree/``, learned from three recent commits, where the tree is the newest one's, folded 23 parked
        trees and files of older commits, none explored, as its three evidence pages had taken its share; the
        directory listings of older commits are other pages). Decided once per distinct URL: a URL already
        fetched, explored, or judged is never explored (again).
        ``new_values_only``: explored only for a value not checked yet (not for the share).
        """
        if self.explore <= 0 or url in self._decided or url in self.fetched:
            return False
        if key not in self.content_of and not self._alias_target_unread(url):
            return False
        parts = self.miner.split_url(url)
        if parts is None:
            return False
        rules = self._learned_firing(*parts)
        if not rules:
            return False
        self._decided.add(url)
        explore = False
        checks: list[tuple[tuple[str, tuple], tuple[str | None, str | None]]] = []  # (rule, (value, shape) it checks)
        for ident in rules:
            budget = self._budget.get(ident)
            if budget is None:
                budget = self._budget[ident] = _Budget()
            budget.collapsed += 1
            if ident in self._vouched:
                checks.append((ident, (None, None)))  # checked within its host's share (below)
                continue
            value = self._checked_value(ident, parts, key)
            if value is not None and value not in budget.values and len(budget.values) < self.config.min_support:
                budget.values.add(value)
                explore = True
            else:
                value = None
            shape = _path_shape(parts[1])
            budget.seen_shapes.add(shape)
            # a learned rule that folds directories and files: its first of each after activation checked apart
            new_shape = ident in self.learned and len(budget.seen_shapes) > 1 and shape not in budget.shapes
            if new_shape:
                budget.shapes.add(shape)
                explore = True
            checks.append((ident, (value, shape if new_shape else None)))
            explore = explore or (not new_values_only
                                  and budget.explored < math.ceil(budget.collapsed * self.explore))
        if not explore and not new_values_only and self._vouched_turn(parts[0], rules):
            explore = True
            self._vouched_explored[parts[0]] += 1
            self._vouched_urls.add(url)
        if not explore:
            return False
        for ident in rules:
            self._budget[ident].explored += 1
        self.exploring[url] = key
        self._explore_checks[url] = checks
        self.events["explored"] += 1
        return True

    def _vouched_turn(self, host: str, rules: list[tuple[str, tuple]]) -> bool:
        """May a URL that these rules (firing on it) collapse be explored for the host's vouched rules (loaded with
        the miner's evidence, :attr:`_vouched`)? Their explorations on a host stay within ``explore`` of the
        pages fetched there (one at the 20th page at 5%, then one every 20 pages), taken by the vouched rules
        explored least so far: a mined rule was checked on every page pair of the crawl it was mined from, so
        its trial in the next crawl is a sample of the host's pages, whose cost is bounded by the share,
        rather than every rule's first URL and each of its values (10 to 15% of a 50-page site's fetches)."""
        firing = [ident for ident in rules if ident in self._vouched]
        if not firing or self._vouched_explored[host] + 1 > self.explore * self._host_pages[host]:
            return False
        least = min(self._budget[ident].explored for ident in self._vouched_of[host]  # (in force: not withdrawn)
                    if ident in self.loaded and ident in self._budget and self._budget[ident].collapsed)
        return any(self._budget[ident].explored <= least for ident in firing)

    def _checked_value(self, ident: tuple[str, tuple], parts: tuple[str, str, str], key: str) -> str | None:
        """What exploring this URL (``parts``: host, path, query; canonical ``key``) checks of the rule or alias
        ``ident`` beyond the share (:meth:`should_explore`): the value the rule drops, None when the key's page
        came with this very value (comparing says nothing of it) or the rule drops none; a host's loaded alias
        table (no value) is itself the value, checked once, on the first URL it sends elsewhere."""
        if ident[1][0] == _ALIAS:
            return _ALIAS
        rule = self._single[ident].rules[0]
        value = _value_class(_dropped_value(rule, parts[1], parts[2]))
        first = self.miner.split_url(self.first_url.get(key, ""))
        if first is not None and value is not None \
                and _value_class(_dropped_value(rule, first[1], first[2])) == value:
            return None
        return value

    def _learned_firing(self, host: str, path: str, query: str) -> list[tuple[str, tuple]]:
        """The rules on trial (learned, or loaded) of ``host`` that rewrite this URL (each alone; all of them
        when only their composition does), and the loaded alias on trial that sends it elsewhere; none when
        nothing on trial rewrites it."""
        return self._rules_firing(host, path, query) + self._aliases_firing(host, path, query)

    def _rules_firing(self, host: str, path: str, query: str) -> list[tuple[str, tuple]]:
        learned = [(ident, rule) for ident, rule in self._single.items() if ident[0] == host]
        firing = [ident for ident, single in learned if single.fired(path, query)]
        if firing or not learned:
            return firing
        together = HostRules(host, [single.rules[0] for _, single in learned])
        return [ident for ident, _ in learned] if together.fired(path, query) else []

    def _aliases_firing(self, host: str, path: str, query: str) -> list[tuple[str, tuple]]:
        """``[(host, ("alias",))]``, the ident of the host's loaded alias table, when one of its aliases (still
        on trial, :attr:`_loaded_aliases`) sends this URL elsewhere; ``[]`` when none."""
        return [(host, (_ALIAS,))] if self._loaded_alias_target(host, path, query) is not None else []

    def _loaded_alias_target(self, host: str, path: str, query: str) -> str | None:
        """The target of the loaded alias whose key this URL has after the rules (None: none). Never the URL
        itself: a key that is its own target is refused at load. None too for an alias within its key (its
        target has that key under the rules in force: a redirect the rules explain, the miner's ``key -> key``):
        it only picks which URL of the key to request, merges nothing the rules do not, and claims nothing to
        explore (the rules' own trial checks them; withdrawn, the target's key differs and the alias is on
        trial again)."""
        table = self._loaded_aliases.get(host)
        if not table:
            return None
        rules_only = self._rules_only.get(host)
        if rules_only is None:
            rules_only = self._rules_only[host] = HostRules(host, self.rules.hosts.get(host, []))
        key = join_key(*rules_only.apply(path, query))
        target = table.get(key)
        if target is None or join_key(*rules_only.apply(*split_key(target))) == key:
            return None
        return target

    def loaded_aliases(self) -> int:
        """How many loaded aliases are in force (not withdrawn)."""
        return sum(len(table) for table in self._loaded_aliases.values())

    def _alias_target_unread(self, url: str) -> bool:
        """Does a loaded alias on trial send ``url`` to a target that answered what the learner cannot read (not
        a page, too short: :meth:`answered_unread`)? Then no fetched page stands for the alias's key, and an
        explored URL of it that answers a readable page proves the alias wrong (:meth:`check_explored`): a page
        is not an unreadable answer (the fault round's table sent 58 articles to a one-link home page)."""
        if not self._loaded_aliases:
            return False
        parts = self.miner.split_url(url)
        target = self._loaded_alias_target(*parts) if parts is not None else None
        if target is None:
            return False
        prefix = url[: url.find("/", url.find("://") + 3)] if url.count("/") >= 3 else url
        return prefix + target in self.unread

    def hold_aliased(self, url: str, request: Any) -> bool:
        """``request`` (for ``url``) is about to be downloaded, and a loaded alias on trial sends it to its
        target instead (the URL itself is not fetched): kept as :meth:`hold` keeps a dropped request, so that
        it is sent again should the alias be withdrawn, and judged when the crawl runs dry if no other URL of
        the alias was explored (:meth:`explore_held`). True when held."""
        parts = self.miner.split_url(url)
        return parts is not None and bool(self._aliases_firing(*parts)) and self.hold(url, request)

    def _withdraw_aliases(self, host: str, guilty: Iterable[tuple[str, tuple]]) -> list[tuple[str, tuple]]:
        """When the host's loaded alias table is among ``guilty``: all its aliases taken out of the rule set (a
        table one of whose aliases proved wrong is not trusted for the others; never loaded again in this
        crawl), each counted in ``events["loaded_withdrawn"]``. Returns ``[its ident]`` (:meth:`release` sends
        back what it held), else ``[]``."""
        ident = (host, (_ALIAS,))
        if ident not in guilty or not self._loaded_aliases.get(host):
            return []
        table = self._loaded_aliases.pop(host)
        in_force = self.rules.aliases.get(host, {})
        for key, target in table.items():
            if in_force.get(key) == target:
                del in_force[key]
        self.rules.recompile()
        self.events["loaded_withdrawn"] += len(table)
        return [ident]

    def held_count(self) -> int:
        """Requests the learned rules made the crawl drop, kept to send again should a rule be withdrawn."""
        return sum(map(len, self._held.values()))

    def explore_held(self) -> list[Any]:
        """Held requests (:meth:`hold`) no exploration decision was taken for, judged now: a request dropped while
        its key's page was only being fetched (in flight, or queued under another URL) met no fetched key
        then, so it was never explored, and a wrong rule that only such requests would refute stayed in
        force for good. The caller sends those that carry a value of a dropped parameter or segment not
        checked yet (:meth:`should_explore`; the share of the budget is not spent on them: each would be a
        fetch of a page met already), past the dupefilter; called when the crawl runs dry."""
        out: dict[str, Any] = {}
        for bucket in self._held.values():
            for url, request in bucket.items():
                if url in out or url in self._decided or url in self.fetched:
                    continue
                if self.should_explore(url, self.key_of(url), new_values_only=True):
                    out[url] = request
        self.events["explored_held"] += len(out)
        return list(out.values())

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
        and its target may have been fetched already. A cancelled exploration checked nothing: the values it
        was to check go back to its rules' budgets, for the next URL that carries them (generated site 19:
        the only exploration of ``drop ?sort=`` on ``sort=title`` was cancelled so, ``title`` counted as
        checked, and the eight pages of the listing sorted by title were lost)."""
        if url not in self.exploring or url in self._explore_taken:
            return False  # (another request for the URL while it is explored: not an exploration)
        self._explore_taken.add(url)
        parts = self.miner.split_url(url)
        if parts is None:
            return True
        host, path, query = parts
        host_rules = self.rules.for_host(host)
        target = host_rules.alias_of(path, query) if host_rules is not None and host_rules.aliases else None
        # (a loaded alias on trial is what the exploration checks: it goes on)
        if target is not None and target != (path, query) and not self._aliases_firing(host, path, query):
            if url in self._vouched_urls:  # not downloaded: the host's share has its turn back
                self._vouched_explored[host] -= 1
            self.abandon_exploration(url)
            self.events["explore_cancelled"] += 1
            return False
        return True

    def abandon_exploration(self, url: str) -> None:
        """The exploration of ``url`` brings no page to compare (cancelled, an error, no readable page): it
        checked nothing, so the values it was to check go back to its rules' budgets, for the next URL that
        carries them. Counted (``events["explore_abandoned"]``); a URL is explored at most once
        (:meth:`should_explore`), so giving values back cannot explore one URL again."""
        if self.exploring.pop(url, None) is None:
            return
        self.events["explore_abandoned"] += 1
        for ident, value in self._explore_checks.pop(url, []):
            budget = self._budget.get(ident)
            if budget is not None:
                budget.explored -= 1
                budget.values.discard(value[0])
                budget.shapes.discard(value[1])

    def redirect_agrees(self, source: str, target: str) -> bool:
        """The exploration of ``source`` answered a redirect to ``target``, which is, under the rules in force
        less the claims the exploration checks, the URL its key's page was fetched at: the server's own word
        that ``source`` is that page. The claims agree, the page is not fetched again (True; the redirected
        request goes the way of any other). Generated site 6204: each explored opaque id of the alias table
        answered a redirect to its page under a locale prefix another rule folds, and the page was fetched
        again, two fetches for one check. False otherwise (then :meth:`follow_exploration`)."""
        if source not in self._explore_taken or source not in self.exploring:
            return False
        first = self.first_url.get(self.exploring[source])
        src, dst = self.miner.split_url(source), self.miner.split_url(target)
        fst = self.miner.split_url(first) if first else None
        if src is None or dst is None or fst is None or not src[0] == dst[0] == fst[0]:
            return False
        host = src[0]
        checked = {ident for ident, _ in self._explore_checks.get(source, [])}
        others = HostRules(host, [r for r in self.rules.hosts.get(host, []) if (host, r.key) not in checked])
        if join_key(*others.apply(*dst[1:])) != join_key(*others.apply(*fst[1:])):
            return False
        del self.exploring[source]
        self._explore_checks.pop(source, None)
        self.events["explore_agreed"] += 1
        return True

    def follow_exploration(self, source: str, target: str) -> bool:
        """The exploration of ``source`` answered a redirect to ``target``: the page it checks is the target's,
        so the exploration goes on there (the redirected request is downloaded, not dropped under the rules
        it checks, and judged by :meth:`check_explored`). True when ``source`` was an exploration; when
        ``target`` was fetched already the caller judges it at once (``fetched[target]``) instead.

        Generated site 5009: ``/guide/start?lang=de`` explored ``drop ?lang=``, answered a redirect to
        ``/guide/start/?lang=de``, whose key (the English page's) was fetched: the redirected request was
        dropped, ``de`` counted as checked, and no German page was fetched again under the wrong rule."""
        if source not in self._explore_taken:
            return False
        key = self.exploring.pop(source, None)
        if key is None:
            return False
        checks = self._explore_checks.pop(source, [])
        if target not in self.exploring and target not in self._explore_taken:
            self.exploring[target] = key
            self._explore_checks[target] = checks
            self._decided.add(target)
        return True

    def _to_blame(self, url: str, host: str, path: str, query: str, page: tuple[Any, int | None]) -> set:
        """The learned rules that fired on ``url`` (another page than its key's), less those proven innocent:
        the rule alone rewrites the URL to a URL fetched with this very page (``?lang=de&sid=x`` is the page
        of ``?lang=de``: dropping ``sid`` did not do it). All of them when none is left."""
        fired = {ident for ident, single in self._single.items() if ident[0] == host and single.fired(path, query)}
        fired.update(self._aliases_firing(host, path, query))
        prefix = url[: url.find("/", url.find("://") + 3)] if url.count("/") >= 3 else url
        innocent = set()
        for ident in fired if len(fired) > 1 else ():
            rewritten = (self._loaded_alias_target(host, path, query) or "" if ident[1][0] == _ALIAS
                         else join_key(*self._single[ident].apply(path, query)))
            alone = self.fetched.get(prefix + rewritten)
            if alone is not None and _same_content(alone, page, self.config.hamming):
                innocent.add(ident)
        return (fired - innocent) or fired

    def check_explored(self, url: str, exact: Any, simhash: int | None, item: Any = None) -> list[DustRule]:
        """An exploration page arrived: a different page than its key's deactivates the rules that fired on it,
        but those proven innocent (:meth:`_to_blame`), and withdraws the loaded alias table that sent it there
        (:meth:`_withdraw_aliases`). Returns the rules deactivated.

        Different at the URL-level strictness but one page at the lenient, item-level one (``item``, the
        judge's cluster, the same as its key's page's): the site's own noise (a per-fetch footer, a date the
        whole text differs by), no proof the rule merged two pages; counted (``explore_undecided``), and the
        rule stays. Only a page the judge tells apart at both strictnesses withdraws it."""
        key = self.exploring.get(url)
        if key is None:
            return []
        known = self.content_of.get(key)
        if known is None and not self._alias_target_unread(url):
            self.abandon_exploration(url)  # nothing to compare with: nothing checked
            return []
        del self.exploring[url]
        self._explore_checks.pop(url, None)
        if known is not None and _same_content(known, (exact, simhash), self.config.hamming):
            self.events["explore_agreed"] += 1
            return []
        if item is not None and known is not None and self.item_of.get(known[0]) == item:
            self.events["explore_undecided"] += 1
            return []
        self.events["explore_violations"] += 1
        parts = self.miner.split_url(url)
        if parts is None:
            return []
        host, path, query = parts
        removed = []
        guilty = self._to_blame(url, host, path, query, (exact, simhash))
        for rule in list(self.rules.hosts.get(host, [])):
            ident = (host, rule.key)
            if ident in guilty:
                self.rules.remove(host, rule)
                self.banned.add(ident)
                if rule.kind in _PARAM_KINDS:  # a value of it proved to matter: no rule of that parameter now
                    self._banned_params.add((host, rule.param))
                self.redirect_rules.discard(ident)
                self.learned.pop(ident, None)
                del self._single[ident]
                if ident in self.loaded:
                    self.loaded.discard(ident)
                    self.events["loaded_withdrawn"] += 1
                removed.append(rule)
        aliases = self._withdraw_aliases(host, guilty)
        if removed or aliases:
            self.events["deactivated"] += len(removed)
            self._rekey()
            self.resend.extend(self.release([*((host, rule.key) for rule in removed), *aliases]))
        return removed


class VariantDeferral:
    """Requests for a URL that looks like another form of a page already met wait until the crawl runs dry.

    A rule needs ``support`` pages fetched under two forms before it is mined; every other URL of that
    form fetched before the rule is active is a fetch for nothing, and so is every pair of forms two
    steps apart (``/en/a.html?ref=x`` beside ``/a.html?sid=y``: no rule explains it alone). So a request
    whose URL names a page already met (the same *name*: the last path segment without its ending,
    lower-cased, or the last segment of a path carried in a query value) is parked instead of scheduled.
    When the scheduler runs dry, :meth:`OnlineDustLearner.release_deferred` sends back the parked
    requests a rule learned meanwhile gave a fetched key (the dupefilter drops them, or explores), and
    then the evidence the next rules need, cheapest first: per form (:func:`variant_forms`: which
    parameter, segment or ending), ``support`` parked URLs one step from a fetched page; only when none
    is one step from one are all the rest sent. A parked URL no rule explains (a trap: ``?page=2``, a
    translation) is fetched then: nothing is lost, only delayed.

    Bounded: at most ``MAX_NAMES`` names indexed and ``MAX_PARKED`` requests parked (beyond, requests
    are scheduled as they come; counted in ``events["deferral_over_limit"]``).
    """

    MAX_NAMES = 2_000_000
    MAX_PARKED = 100_000

    def __init__(self, split_url: Any, events: Counter):
        self.split_url = split_url
        self.events = events
        self._names: dict[str, set[str]] = {}  # host -> page names met
        self._indexed = 0
        self.parked: dict[str, Any] = {}  # URL -> its request, in the order parked

    def consider(self, url: str, key: str, request: Any, may_park: bool = True) -> bool:
        """``request`` for ``url`` (canonical key ``key``, not fetched yet) is about to be scheduled: index the
        page name(s) it carries; True when it is parked (the caller does not schedule it)."""
        if url in self.parked:
            if may_park:
                return True  # linked again while parked
            del self.parked[url]  # requested by a redirect meanwhile: it goes on, the parked one is not needed
        parts = self.split_url(key)
        if parts is None:
            return False
        host, path, query = parts
        names = self._names.setdefault(host, set())
        carried = _page_names(path, query)
        known = any(name in names for name in carried)
        if self._indexed < self.MAX_NAMES:
            new = carried - names
            names |= new
            self._indexed += len(new)
        if not known or not may_park:
            return False
        if len(self.parked) >= self.MAX_PARKED:
            self.events["deferral_over_limit"] += 1
            return False
        self.parked[url] = request
        self.events["deferred"] += 1
        return True


def _page_names(path: str, query: str) -> set[str]:
    """The names a URL gives its page: its last path segment without path parameters and ending, lower-cased
    (``/en/Guide/Intro.html;jsessionid=x`` -> ``intro``), and the same of each path-shaped query value."""
    out = set()
    for value in (path, *(part.partition("=")[2] for part in query.split("&") if query)):
        value = value.replace("%2F", "/").replace("%2f", "/")
        if value is not path and "/" not in value and "." not in value:
            continue
        segments = [s.split(";", 1)[0] for s in value.split("/")]
        segments = [s for s in segments if s]
        while segments and (segments[-1].lower().startswith("index.") or segments[-1].lower() in _VIEW_WORDS):
            segments.pop()
        if segments:
            name = segments[-1].lower()
            out.add(name.rsplit(".", 1)[0] if "." in name[1:] else name)
    return out


#: last path segments that name a view of the page before them, not a page (/2024/05/slug/amp/)
_VIEW_WORDS = frozenset({"amp", "print", "printable", "mobile", "m"})


def variant_forms(path: str, query: str) -> list[tuple[str, tuple]]:
    """``(form, class)`` of a URL (``path``, ``query``): what it would be under each one-step rewrite of the
    miner's vocabulary, each with the class of that rewrite (``("param", name)``, ``("segment", word)``,
    ``("case",)``...): a URL one of whose forms is another URL is one step from it."""
    out = _forms_of(path, query)
    lower = path.lower()
    if lower != path:
        out.append((join_key(lower, query), ("case",)))
    return out


def _forms_of(path: str, query: str) -> list[tuple[str, tuple]]:
    out: list[tuple[str, tuple]] = []
    params = query.split("&") if query else []
    if len(params) <= 8:
        for i, part in enumerate(params):
            name, _, value = part.partition("=")
            rest = "&".join(params[:i] + params[i + 1:])
            out.append((join_key(path, rest), ("param", name)))
            value = value.replace("%2F", "/").replace("%2f", "/")
            if "/" in value or "." in value:  # a path in a query value (/view.php?doc=sec/slug.html)
                out.append((join_key("/" + value.lstrip("/"), rest), ("query-path", name)))
            elif value and path.endswith(".php"):  # MediaWiki's /w/index.php?title=Slug
                out.append((join_key("/" + value, rest), ("query-path", name)))
        ordered = "&".join(sorted(params))
        if ordered != query:
            out.append((join_key(path, ordered), ("order",)))
    for match in _PATHPARAM.finditer(path):
        out.append((join_key(path[:match.start()] + path[match.end():], query), ("path-param", match.group(1))))
    segments = path.split("/")
    for i in range(1, len(segments) - 1):  # [0] is "" (the leading "/"), the last is the file (or "")
        segment = segments[i]
        shape = shape_of_segment(segment)
        out.append((join_key("/".join(segments[:i] + segments[i + 1:]), query),
                    ("segment", shape if shape is not None else segment.lower())))
        following = shape_of_segment(segments[i + 1]) if i + 1 < len(segments) - 1 else None
        if shape is None and following is not None:  # a session under a word: /s/<token>/
            out.append((join_key("/".join(segments[:i] + segments[i + 2:]), query),
                        ("segment", f"{segment.lower()}/{following}")))
    last = segments[-1]
    if path.endswith("/") and len(path) > 1:
        stem, ending = path[:-1], "/"
    elif last.lower().startswith("index."):
        stem, ending = path[: -len(last) - 1], "/" + last
    elif "." in last:
        stem, ending = path[: path.rfind(".")], last[last.rfind("."):]
    else:
        stem = ending = ""
    if stem:
        out.append((join_key(stem, query), ("ending", ending)))
    return out


def _param_value(klass: tuple, query: str) -> str | None:
    """The value of the parameter a ``("param", name)`` form class drops, in ``query``; None for a generated
    token (one session id says what another says) or another class."""
    if klass[0] != "param":
        return None
    for part in query.split("&") if query else ():
        name, _, value = part.partition("=")
        if name == klass[1]:
            value_class = _value_class(value)
            return None if value_class == "<token>" else value_class
    return None


#: the ident of a host's loaded alias table on trial is ``(host, ("alias",))`` (a rule's key starts with its kind)
_ALIAS = "alias"
#: the rule kinds of a query parameter
_PARAM_KINDS = ("drop_param", "default_param")
#: the rule kinds that drop a value (:func:`_dropped_value`), explored per value
_VALUE_KINDS = ("drop_param", "drop_pathparam", "drop_segment", "drop_param_when")


class _Budget:
    """Exploration of one learned rule: distinct URLs it collapsed, how many were explored, the values of
    the parameter it drops that were explored, the shapes of paths it folded and those explored."""

    __slots__ = ("collapsed", "explored", "seen_shapes", "shapes", "values")

    def __init__(self) -> None:
        self.collapsed = 0
        self.explored = 0
        self.seen_shapes: set[str] = set()  # the shapes of the paths it folded or was learned from (_path_shape)
        self.shapes: set[str] = set()  # those an exploration after its activation checked
        self.values: set[str] = set()


def _path_shape(path: str) -> str:
    """What a rule folds, as exploration tells its parts apart: a directory (a path ending in ``/``: a listing,
    which another revision or view changes as a whole) or a file. cgit's ``drop ?id=`` under ``/tree/`` agrees
    on a file unchanged between two commits and not on the directory listing of the older commit."""
    return "directory" if path.endswith("/") else "file"


def _value_class(value: str | None) -> str | None:
    """A dropped value as exploration and deferral tell values apart: generated tokens (8 characters or more,
    with a digit) all alike (one session id says as much as another), a word or a small number by itself
    (``de`` is not ``en``, ``2`` not ``1``)."""
    if value is None:
        return None
    return "<token>" if len(value) >= 8 and shape_of_segment(value) is not None else value


def _dropped_value(rule: DustRule, path: str, query: str) -> str | None:
    """The value ``rule`` drops from this URL (a query or path parameter's, a path segment's), None for other
    kinds."""
    if rule.kind in ("drop_param", "drop_param_when"):
        for part in query.split("&") if query else ():
            name, _, value = part.partition("=")
            if name == rule.param:
                return value
    elif rule.kind == "drop_pathparam":
        marker = f";{rule.param}="
        at = path.find(marker)
        if at != -1:
            return path[at + len(marker):].split("/", 1)[0].split(";", 1)[0]
    elif rule.kind == "drop_segment":  # the segment of its shape (/v1/ says nothing of /v2/)
        segments = path.split("/")[1:-1]  # a segment with one after it (the rule never drops the file)
        matches = _shape_matcher(rule.shape)
        for i, segment in enumerate(segments):
            if matches(segment) and (not rule.lead or (i and segments[i - 1] == rule.lead)):
                return segment
    return None


@functools.lru_cache(maxsize=256)
def _shape_matcher(shape: str) -> Any:
    return compile_shape(shape).match


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
