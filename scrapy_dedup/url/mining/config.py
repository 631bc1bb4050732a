"""The miner's thresholds (:class:`MiningConfig`) and what it returns: a candidate's validation, a host's
report, the mining result. This module imports nothing from Scrapy."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from scrapy_dedup.content.extract import ExtractionPolicy
from scrapy_dedup.url.dust import (
    MAX_ALIASES,
    DustRule,
    RuleSet,
)


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
    unstable_redirects: int = 0  # redirects that stand for nothing (another target each time, or seen once)

    def lines(self) -> list[str]:
        head = (f"{self.host}: {self.urls} URL(s), {self.pages_with_aliases} page(s) reached by two URLs or more, "
                f"{self.candidates} candidate(s)")
        if self.redirects:
            head += (f"; {self.redirects} redirect(s): {self.redirects_explained} explained by a rule, "
                     f"{self.aliases} alias(es) (new keys, or a fetchable URL for a key)")
        if self.unstable_redirects:
            head += (f"; {self.unstable_redirects} redirect(s) not aliased: not stable (another target each "
                     "time, or seen once from a URL that names nothing)")
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
