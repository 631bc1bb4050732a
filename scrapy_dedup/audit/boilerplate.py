"""Boilerplate learning in the offline audit: two passes over the dump, the crawl's decision rule.

Pass one (:func:`learn_templates`) judges every page as a crawl would (:class:`BoilerplateJudge`:
only pages judged unique are counted), to count the blocks of each host. Then the learner is
frozen, and pass two (:class:`BoilerplateDecider`, the runner's decider) judges the dump again, each
page less its host's whole template: no warm-up, no page judged before its host's template was
known. Both passes share one parse of each record: pass one reads the dump once (stdin and pipes
too) and spools what each record gave (``audit/runner.py``), pass two judges the spooled pages. Pass
one's verdicts, read at the URL strictness, are the mirrors report's DUST miner's where its judge is
the same (``SharedJudgements`` in ``audit/runner.py``): that miner does not judge the pages again.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from scrapy_dedup.audit.methods import Decision, SimhashDecider
from scrapy_dedup.content.boilerplate import BoilerplateJudge, BoilerplateLearner, BoilerplateRule, PageWords, \
    RecentBlocks, host_of
from scrapy_dedup.content.engine import UNDECIDABLE_NAMED, ContentDeduplicator, ContentFingerprint, \
    ContentFingerprinter
from scrapy_dedup.content.judge import PageJudge, PageVerdict, memory_store

__all__ = ["PageBlocks", "RecentPageWords", "BoilerplateDecider", "learner_for", "learn_templates",
           "learns_boilerplate"]


def learns_boilerplate(cfg: Any) -> bool:
    """Whether the audit learns boilerplate: ``boilerplate`` on, and the simhash method (the crawl's engine)."""
    return bool(cfg.boilerplate) and cfg.method == "simhash"


@dataclass(frozen=True)
class PageBlocks:
    """What a worker hands the decider of a page when boilerplate is learnt: the whole text's
    fingerprint (what the other paths and ``--all-pairs`` use), the page's blocks, its ``<title>`` and its
    words (:class:`PageWords`: both passes fingerprint its texts without tokenizing it again)."""

    whole: ContentFingerprint
    blocks: list[str]
    title: str | None = None
    words: PageWords | None = None

    @classmethod
    def of(cls, fingerprinter: ContentFingerprinter, blocks: list[str], title: str | None,
           recent: RecentPageWords | None = None) -> PageBlocks:
        """The page of ``blocks`` tokenized once: its words, and from them its whole text's fingerprint (the
        fingerprinter's own of ``" ".join(blocks)``); ``recent``: the words of the last pages read, which a
        page of the same blocks takes instead of tokenizing them again."""
        words = recent.words(fingerprinter, blocks) if recent is not None else PageWords(fingerprinter, blocks)
        return cls(words.fingerprint(), blocks, title, words)


#: pages whose words a worker remembers (:class:`RecentPageWords`): about 48 KB each for a page of 2,000 words
#: (its blocks, words, their hashes and fingerprints), so at most about 50 MB a worker. On the benchmark's real
#: corpus (development material for this choice) a third of the pages repeat one of the last 1,024 read (512:
#: 23%, all of them: 35%)
RECENT_PAGES = 1024


class RecentPageWords:
    """The :class:`PageWords` of the last :data:`RECENT_PAGES` pages a worker read, by their blocks: a page read
    again under another URL (a mirror, a tracking or session variant; a third of the pages of the benchmark's
    real corpus) is not tokenized, hashed, normalized or fingerprinted again. A page's words are a function of
    its blocks alone (and of the fingerprinter, one per worker), and what they remember (block hashes, normal
    hash, fingerprints) too, so two pages of the same blocks may share them. A page that is not one of them is
    cut, hashed and normalized only in its blocks that are not among the worker's last blocks read
    (:class:`~scrapy_dedup.content.boilerplate.RecentBlocks`: on the benchmark's real corpus, 71% of the text of
    the pages tokenized is among them, its sites' templates and its near duplicates' paragraphs)."""

    def __init__(self, size: int | None = None, blocks: RecentBlocks | None = None):
        self.size = RECENT_PAGES if size is None else size
        self._words: OrderedDict[tuple[str, ...], PageWords] = OrderedDict()
        self.blocks = RecentBlocks() if blocks is None else blocks

    def words(self, fingerprinter: ContentFingerprinter, blocks: list[str]) -> PageWords:
        key = tuple(blocks)  # (not the blocks joined: a join widens each block of another string width)
        words = self._words.get(key)
        if words is not None and words.made_like(fingerprinter):
            self._words.move_to_end(key)
            return words
        words = PageWords(fingerprinter, blocks, self.blocks)
        if self.size:
            self._words[key] = words
            if len(self._words) > self.size:
                self._words.popitem(last=False)
        return words


def learner_for(cfg: Any) -> BoilerplateLearner:
    """A learner with the thresholds of ``cfg`` (``boilerplate_min_pages``, ``_warmup_pages``, ``_capacity``)."""
    return BoilerplateLearner(BoilerplateRule.from_params(cfg))


class _Hosts:
    """Store key (a page number, as text) -> host; one interned string per host."""

    def __init__(self) -> None:
        self.of: dict[str, str] = {}
        self._interned: dict[str, str] = {}

    def add(self, key: str, url: str) -> str:
        host = host_of(url)
        host = self._interned.setdefault(host, host)
        self.of[key] = host
        return host

    def __call__(self, key: str) -> str:
        return self.of.get(key, "")


def learn_templates(cfg: Any, fingerprinter: Any, pages: Iterable[tuple[str, PageBlocks]],
                    judged: Callable[[int, PageVerdict], None] | None = None) -> BoilerplateLearner:
    """Pass one: judge ``(url, page)`` in dump order as a crawl would, counting each host's blocks; frozen.
    ``judged``: told each page's number and verdict with its URL-level sameness (the judge's keys are the
    pages' numbers, as text): the DUST miner's judgement of the page when the miner judges with the same
    parameters and the dump's URLs are distinct (``audit/runner.py``)."""
    learner = learner_for(cfg)
    hosts = _Hosts()
    judge = BoilerplateJudge(ContentDeduplicator(fingerprinter, memory_store(cfg)), learner, host_of_key=hosts)
    page_judge = PageJudge(judge.engine, judge, url_sameness=True) if judged is not None else None
    for n, (url, page) in enumerate(pages):
        key = str(n)
        if page_judge is None or judged is None:
            judge.check(key, page.blocks, host=hosts.add(key, url), whole=page.whole, title=page.title,
                        words=page.words)
        else:  # the same check, its verdict read at the URL strictness too
            judged(n, page_judge.judge_blocks(key, page.blocks, host=hosts.add(key, url), whole=page.whole,
                                              title=page.title, words=page.words))
    learner.freeze()
    return learner


class BoilerplateDecider(SimhashDecider):
    """The simhash decider with the boilerplate rule in front: pages judged less their host's template."""

    def __init__(self, cfg: Any, fingerprinter: Any, learner: BoilerplateLearner):
        super().__init__(cfg, fingerprinter)
        self.learner = learner
        self.hosts = _Hosts()
        self.judge = BoilerplateJudge(self.engine, learner, host_of_key=self.hosts)
        self.page_judge = PageJudge(self.engine, self.judge)  # the crawl's page judge, at the item strictness
        self._undecidable_urls: list[str] = []  # the report names pages by URL, the judge's keys are numbers

    def check(self, index: int, url: str, fp: Any) -> Decision:
        key = str(index)
        judged = self.page_judge.judge_blocks(key, fp.blocks, host=self.hosts.add(key, url), whole=fp.whole,
                                              title=fp.title, words=fp.words)
        judgement, verdict = judged.judgement, judged.verdict
        assert judgement is not None  # the boilerplate rule's account
        if judgement.undecidable and len(self._undecidable_urls) < UNDECIDABLE_NAMED:
            self._undecidable_urls.append(url)
        if verdict.is_duplicate and verdict.kept_url is not None:
            return Decision(verdict.kind, int(verdict.kept_url), float(verdict.distance or 0))
        return Decision(verdict.kind, -1, 0.0)

    def all_matches(self, index: int, fp: Any) -> list[tuple[int, float, str]]:
        return super().all_matches(index, fp.whole)

    def report(self) -> Any:
        report = super().report()
        return replace(report, undecidable_named=tuple(self._undecidable_urls)) if report.undecidable else report

    def commit(self, index: int, fp: Any, decision: Decision) -> None:
        super().commit(index, fp.whole, decision)

    def boilerplate_of(self, url: str, blocks: list[str]) -> list[str]:
        """The blocks of a page of ``url`` that its host's template leaves out of its fingerprint."""
        reduction = self.learner.prepare(host_of(url), blocks)
        if reduction.state != "reduced":
            return []
        return [b for b, gone in zip(blocks, self.learner.table(host_of(url)).is_boilerplate(reduction.hashes))
                if gone]
