"""Online DUST learning: rules mined during a crawl from the pages fetched so far, checked as it goes.

The miner is :class:`~scrapy_dedup.url.mining.DustMiner`, run again every ``every``
pages; the Scrapy side is :mod:`scrapy_dedup.dust_learning`. This module imports
nothing from Scrapy.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from scrapy_dedup.content.simhash import hamming as hamming_distance
from scrapy_dedup.url.dust import DustRule, HostRules, RuleSet
from scrapy_dedup.url.mining import DustMiner, MiningConfig, RuleValidation

__all__ = ["OnlineDustLearner"]


class OnlineDustLearner:
    """Learns DUST rules during a crawl and keeps a live :class:`RuleSet` up to date (no Scrapy here).

    ``record(url, exact, simhash)`` after each fetched page; every ``every`` pages
    the pages so far are mined (with the rules in force applied first, so only new
    rules come out) and the rules that pass validation are added to ``rules`` (the
    very object the canonicalizer reads, so later requests of that host use them).

    An active rule hides its own violations (the URLs it collapses are no longer
    fetched), so :meth:`should_explore` lets a share of the collapsed requests
    through; :meth:`check_explored` compares the page fetched with the page its
    canonical key stands for, and a rule that meets a violation there is removed
    and never activated again.

    ``key_of(url)`` is the canonical key with the rules in force (the fingerprinter's
    canonicalizer). Cost: mining is re-run over everything recorded, so it grows
    with the crawl; ``every`` trades activation delay against that cost.
    """

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
        self.banned: set[tuple[str, tuple]] = set()
        self.learned: dict[tuple[str, tuple], RuleValidation] = {}
        self.fetched: dict[str, tuple[Any, int | None]] = {}  # fetched URL -> (exact, simhash)
        self.content_of: dict[str, tuple[Any, int | None]] = {}  # canonical key -> content of its first page
        self.exploring: dict[str, str] = {}  # URL let through for exploration -> the key it collapses onto
        self._collapsed = 0
        self._explored = 0
        self.events: Counter = Counter()

    # --- feeding ---

    def record(self, url: str, exact: Any, simhash: int | None, request_url: str | None = None) -> list[RuleValidation]:
        """A page was fetched: remember it, mine every ``every`` pages; returns the rules activated now."""
        self.pages += 1
        self._since_mining += 1
        self.miner.add_page(url, exact, simhash)
        if request_url and request_url != url:
            self.miner.add_page(request_url, exact, simhash)
        for u in {url, request_url or url}:
            self.fetched.setdefault(u, (exact, simhash))
            self.content_of.setdefault(self.key_of(u), (exact, simhash))
        if self._since_mining >= self.every:
            return self.mine_now()
        return []

    def mine_now(self) -> list[RuleValidation]:
        self._since_mining = 0
        self.events["mining_runs"] += 1
        result = self.miner.mine(existing=self.rules)
        activated = []
        for verdict in result.kept():
            ident = (verdict.host, verdict.rule.key)
            if ident in self.banned or ident in self.learned:
                continue
            if self.rules.add(verdict.host, verdict.rule):
                self.learned[ident] = verdict
                activated.append(verdict)
        if activated:
            self.events["activated"] += len(activated)
            self._rekey()
        return activated

    def _rekey(self) -> None:
        """Canonical keys of the pages fetched so far, under the rules now in force."""
        content: dict[str, tuple[Any, int | None]] = {}
        for url, value in self.fetched.items():
            content.setdefault(self.key_of(url), value)
        self.content_of = content

    def is_fetched(self, key: str) -> bool:
        """Was a page with this canonical key (under the rules in force) fetched already?"""
        return key in self.content_of

    # --- exploration ---

    def should_explore(self, url: str, key: str) -> bool:
        """Would ``url`` be collapsed onto an already fetched ``key``? Then let a share of them through."""
        if key not in self.content_of or self.explore <= 0:
            return False
        self._collapsed += 1
        if int(self._collapsed * self.explore) > self._explored:
            self._explored += 1
            self.exploring[url] = key
            self.events["explored"] += 1
            return True
        return False

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
            if ident in self.learned and HostRules(host, [rule]).fired(path, query):
                self.rules.remove(host, rule)
                self.banned.add(ident)
                del self.learned[ident]
                removed.append(rule)
        if removed:
            self.events["deactivated"] += len(removed)
            self._rekey()
        return removed


def _same_content(a: tuple[Any, int | None], b: tuple[Any, int | None], hamming: int) -> bool:
    if a[0] == b[0]:
        return True
    if a[1] is None or b[1] is None:
        return False
    return hamming_distance(a[1], b[1]) <= hamming
