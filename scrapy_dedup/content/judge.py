"""The page judge: where "same page" is decided, for the crawl, the audit, ``mine-dust`` and the learner.

* :func:`build_engine` assembles the content engine from the engine's parameters (any object with
  the attributes of ``content/params.py``: the crawl's settings, the audit's config, the parameters'
  defaults), so that every caller judges with the same rule, over the store
  :func:`scrapy_dedup.content.stores.open_store` opens (``memory_store`` is re-exported from there).
* :class:`PageJudge` reads one page (its text, or its blocks when its host learns boilerplate)
  into a :class:`PageVerdict`: the engine's verdict with its evidence (the fingerprint it rests
  on, whether it rests on the texts less boilerplate only, the normal hash of the whole text).
* **Strictness.** One verdict, two strictnesses (:data:`STRICTNESS`), read with
  :meth:`PageVerdict.page`: ``"item"``, what an item drop needs (the engine's cluster), and
  ``"url"``, what a URL merge needs (a mined or learned DUST rule, an alias: not fetching a URL
  also forgoes its links). At ``"url"`` the sameness must hold on the two pages' *whole* texts:
  an exact match, a near match of the whole texts, or a near match of the texts less
  boilerplate whose whole texts are alike too (by the engine's own pair rule on the kept page's
  whole fingerprint, or, when that is no longer at hand, by :func:`normal_text_hash`); and the two
  pages must be of one media kind (:data:`MEDIA_KINDS`, when the caller tells it): a raw file
  (``text/plain``) and the HTML page that renders it have the same text, yet are two resources, and
  a URL merge of the two loses one. A verdict that fails it names the page by its own URL at ``"url"``.

The crawl log (``DEDUP_LOG_FILE``) writes ``"basis": "reduced"`` exactly when a verdict fails the
URL-level sameness, so ``mine-dust`` (:func:`same_page_evidence` on the log's fields) reads the
decision the crawl took, and the online learner asks the same judge.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from scrapy_dedup.content.boilerplate import BoilerplateJudge, BoilerplateLearner, BoilerplateRule, Judgement, \
    PageWords, host_of, normal_digest, normal_lines
from scrapy_dedup.content.engine import (
    ContentDeduplicator,
    ContentFingerprint,
    ContentFingerprinter,
    ContentStore,
    Verdict,
)
from scrapy_dedup.content.representative import UrlKey
from scrapy_dedup.content.stores import memory_store, open_store

__all__ = ["MEDIA_KINDS", "STRICTNESS", "Strictness", "REDUCED_BASIS", "KEPT_WHOLE_PAGES", "PageJudge", "PageVerdict",
           "build_engine", "memory_store", "normal_text_hash", "same_page_evidence"]

Strictness = Literal["item", "url"]
#: the two strictnesses of "same page": an item drop's, a URL merge's
STRICTNESS: tuple[str, ...] = ("item", "url")
#: what a page is, for the URL-level sameness: HTML, or another text (a raw file, ``text/plain``, Markdown)
MEDIA_KINDS: tuple[str, ...] = ("html", "text")
#: a crawl log's ``basis`` of a verdict that fails the URL-level sameness (it rests on the texts less boilerplate)
REDUCED_BASIS = "reduced"
#: kept pages whose whole fingerprint the judge keeps for the URL-level sameness (the most recent ones; an older
#: kept page is compared by its normal hash). About 2 KB a page at the default sketch size: 16 MB at most.
KEPT_WHOLE_PAGES = 8192


def normal_text_hash(blocks: list[str]) -> str:
    """A page's whole main text (its ``blocks``) in boilerplate learning's normal form
    (:func:`~scrapy_dedup.content.boilerplate.normalize_block`: case, punctuation, and digits, dates and
    hexadecimal ids to one placeholder), hashed: BLAKE2b, 8 bytes, hex (the same in every process). Two
    fetches of one page that differ only in a per-fetch number, date or id have the same."""
    return normal_digest(normal_lines("\n".join(blocks)))


def same_page_evidence(kind: Any, basis: Any = None, normal_hash: Any = None, kept_normal_hash: Any = None) -> bool:
    """Whether a logged verdict joins a page's URL to its kept page at the URL-level strictness: ``kind``,
    ``basis`` (:data:`REDUCED_BASIS` when the judge found the whole texts not alike) and the
    :func:`normal_text_hash` of both pages (what older logs, whose ``basis`` marked every match of the texts
    less boilerplate, are read by).

    Dropping a near-duplicate item only forgoes the item; not fetching a URL also forgoes the page's
    links, so a URL merge needs a stronger "same page" than an item drop: the sameness must hold on the
    pages' whole texts. Two listing pages that show the same posts under other indexes (page 8 of all
    posts, page 4 of a tag) have the same text less their headings and "page N of M", yet each links to
    pages the other does not."""
    if not (kind == "near" and basis == REDUCED_BASIS):
        return True
    return isinstance(normal_hash, str) and normal_hash == kept_normal_hash


def build_engine(params: Any, store: ContentStore | None = None, *, min_words: int | None = None,
                 representative: str = "first", times_are_arrivals: bool = False,
                 url_key: UrlKey | None = None) -> ContentDeduplicator:
    """The content engine of ``params`` over ``store`` (None: the memory store of
    :func:`~scrapy_dedup.content.stores.open_store`); ``min_words``: the degenerate-page rule when it is
    not ``params.min_words`` (the miner's, a host's); ``url_key``: the sort key of a URL the representative
    policy ranks by (every policy but ``first``; the caller's)."""
    fingerprinter = ContentFingerprinter(shingle_size=params.shingle_size, bits=params.fingerprint_bits,
                                         min_words=params.min_words if min_words is None else min_words,
                                         sketch_size=params.sketch_size)
    return ContentDeduplicator(fingerprinter, open_store(params) if store is None else store,
                               representative=representative, times_are_arrivals=times_are_arrivals,
                               url_key=url_key)


@dataclass(frozen=True)
class PageVerdict:
    """One page judged: the engine's ``verdict`` and its evidence.

    ``fingerprint``: what the verdict rests on (the text less boilerplate when that decided);
    ``judgement``: the boilerplate rule's account (None without it); ``reduced_match``: the match rests
    on the texts less boilerplate; ``normal_hash``: the whole text's :func:`normal_text_hash` (None when
    not asked); ``url_page``: the page the URL serves at the URL strictness (None: the verdict's cluster).
    """

    verdict: Verdict
    fingerprint: ContentFingerprint
    judgement: Judgement | None = None
    reduced_match: bool = False
    normal_hash: str | None = None
    url_page: str | None = None

    @property
    def url_same(self) -> bool:
        """Whether the verdict joins the URL to its kept page at the URL strictness."""
        return self.url_page is None or self.url_page == self.verdict.cluster

    def page(self, strictness: Strictness = "item") -> str | None:
        """The page the URL serves at ``strictness`` (None: degenerate, no page): the verdict's cluster, or at
        ``"url"``, when the sameness does not hold on the whole texts with the kept page, the first page of
        the cluster it holds with (a page of its own, named by its URL)."""
        if strictness not in STRICTNESS:
            raise ValueError(f"strictness must be one of {STRICTNESS}, got {strictness!r}")
        if self.verdict.cluster is None:
            return None
        return self.verdict.cluster if strictness == "item" or self.url_page is None else self.url_page

    @property
    def basis(self) -> str | None:
        """The crawl log's ``basis``: :data:`REDUCED_BASIS` when the verdict fails the URL-level sameness."""
        return None if self.url_same else REDUCED_BASIS


@dataclass
class _UrlPage:
    """A page of a cluster at the URL strictness: its name (the first URL of it), its whole text's normal
    hash and fingerprint (None once the judge let it go: only the normal hash compares then), its media kind
    (:data:`MEDIA_KINDS`; None: not told)."""

    name: str
    normal: str | None
    whole: ContentFingerprint | None
    media: str | None = None


class PageJudge:
    """The one judge of a page: the engine, the boilerplate rule in front of it (None: no host learns
    boilerplate), and the URL-level sameness of its verdicts.

    ``url_sameness``: keep what the URL-level sameness needs: per cluster, its pages at the URL strictness
    (the kept page, then each page that matched it only less boilerplate and whose whole text is like none
    of the cluster's earlier ones), their normal hashes and, for the clusters of the last
    ``kept_whole_pages`` such pages, their whole fingerprints. Off, a match only less boilerplate is a page
    of its own (nothing known to compare it with). Thread-safe."""

    def __init__(self, engine: ContentDeduplicator, boilerplate: BoilerplateJudge | None = None, *,
                 url_sameness: bool = False, kept_whole_pages: int = KEPT_WHOLE_PAGES):
        self.engine = engine
        self.boilerplate = boilerplate
        self.url_sameness = url_sameness
        self._url_pages: dict[str, list[_UrlPage]] = {}  # cluster -> its pages at the URL strictness
        self._with_whole: OrderedDict[str, int] = OrderedDict()  # clusters holding whole fingerprints -> how many
        self._wholes = 0
        self._kept_whole_pages = kept_whole_pages
        self._lock = threading.Lock()

    @classmethod
    def from_params(cls, params: Any, store: ContentStore | None = None, *, learner: BoilerplateLearner | None = None,
                    boilerplate: bool | None = None, host_of_key: Callable[[str], str] = host_of,
                    min_words: int | None = None, representative: str = "first", times_are_arrivals: bool = False,
                    url_sameness: bool = False, kept_whole_pages: int = KEPT_WHOLE_PAGES,
                    url_key: UrlKey | None = None, page_of_key: Callable[[str], str] | None = None) -> PageJudge:
        """The judge of ``params`` (the factory every caller uses): the engine over ``store`` (None: in memory),
        with the boilerplate rule when ``boilerplate`` (None: ``params.boilerplate``), its learner ``learner``
        (None: a fresh one with ``params``' thresholds); ``page_of_key``: the page a key's URL shows by its view
        parameters (``BoilerplateJudge``)."""
        engine = build_engine(params, store, min_words=min_words, representative=representative,
                              times_are_arrivals=times_are_arrivals, url_key=url_key)
        learns = bool(params.boilerplate) if boilerplate is None else boilerplate
        judge = None
        if learns:
            learner = learner or BoilerplateLearner(BoilerplateRule.from_params(params))
            judge = BoilerplateJudge(engine, learner, host_of_key=host_of_key, page_of_key=page_of_key)
        return cls(engine, judge, url_sameness=url_sameness, kept_whole_pages=kept_whole_pages)

    def judge_text(self, url: str, fp: ContentFingerprint, degenerate: bool | None = None, *,
                   media: str | None = None, **kwargs: Any) -> PageVerdict:
        """A page's whole text (fingerprinted as ``fp``) judged by the engine alone (its host learns no
        boilerplate); ``media``: its kind (:data:`MEDIA_KINDS`; None: not told); ``kwargs``: ``timestamp``,
        ``declares`` (the representative policy)."""
        verdict = self.engine.check_fingerprint(url, fp, degenerate, **kwargs)
        return self._noted(PageVerdict(verdict, fp), fp, None, media=media)

    def judge_blocks(self, url: str, blocks: list[str], *, whole: ContentFingerprint | None = None,
                     media: str | None = None, **kwargs: Any) -> PageVerdict:
        """A page made of ``blocks`` judged by the boilerplate rule (:meth:`BoilerplateJudge.check`; ``kwargs``:
        ``host``, ``fingerprint``, ``degenerate``, ``timestamp``, ``declares``, ``title``, ``words``); ``whole``:
        the whole text's fingerprint when the caller has it; ``media`` as in :meth:`judge_text`."""
        assert self.boilerplate is not None, "judge_blocks needs the boilerplate rule"
        judgement = self.boilerplate.check(url, blocks, whole=whole, **kwargs)
        verdict = judgement.verdict
        page = PageVerdict(verdict, judgement.fingerprint, judgement, judgement.reduced_match)
        if (whole is None and self.url_sameness and verdict.cluster is not None
                and (verdict.kind == "unique" or page.reduced_match)):
            words, fingerprint = kwargs.get("words"), kwargs.get("fingerprint")
            if fingerprint is None and words is not None and words.made_like(self.engine.fingerprinter):
                whole = words.fingerprint()  # the page's words, tokenized once by the caller
            else:
                whole = (fingerprint or self.engine.fingerprint)(" ".join(blocks))
        return self._noted(page, whole, blocks, kwargs.get("words"), media=media)

    def judge_page(self, url: str, fp: ContentFingerprint, fingerprinter: ContentFingerprinter,
                   blocks: list[str] | None = None, *, learns_boilerplate: bool = False,
                   fingerprint: Callable[[str], ContentFingerprint] | None = None,
                   call: Callable[..., PageVerdict] = lambda judge, *args, **kwargs: judge(*args, **kwargs),
                   **kwargs: Any) -> PageVerdict:
        """A page as the crawl reads it (``fp``: of its whole text, by ``fingerprinter``, its host's rule of
        degenerate pages): with its ``blocks`` and a host that ``learns_boilerplate``, judged by the boilerplate
        rule (:meth:`judge_blocks`; ``fingerprint``: the caller's fingerprint of a text, cached or not), else by
        its whole text (:meth:`judge_text`). ``call`` runs each call that reaches the store (the crawl's Redis
        outage policy); a degenerate page reaches none. ``kwargs``: ``timestamp``, ``declares``, ``title``,
        ``media``."""
        degenerate = fingerprinter.is_degenerate(fp)
        if blocks is not None and learns_boilerplate and self.boilerplate is not None and not degenerate:
            return call(self.judge_blocks, url, blocks, fingerprint=fingerprint or fingerprinter.fingerprint,
                        degenerate=fingerprinter.is_degenerate, whole=fp, **kwargs)
        kwargs.pop("title", None)  # (only the boilerplate rule reads it)
        if not degenerate:
            return call(self.judge_text, url, fp, degenerate, **kwargs)
        return self.judge_text(url, fp, degenerate, **kwargs)

    def _noted(self, page: PageVerdict, whole: ContentFingerprint | None, blocks: list[str] | None,
               words: PageWords | None = None, *, media: str | None = None) -> PageVerdict:
        """``page`` with its page at the URL strictness; a kept page (or a new page of a cluster at the URL
        strictness) noted for the later ones (``words``: the :class:`PageWords` of ``blocks``, if any: their
        normal hash was made with their block hashes; ``media``: its kind, None when not told). A match of
        the whole texts is the kept page's only when both are of one media kind."""
        verdict = page.verdict
        cluster = verdict.cluster
        if cluster is None or not (verdict.kind == "unique" or page.reduced_match
                                   or self._media_differs(cluster, media)):
            return page
        if not self.url_sameness:
            return _with(page, url_page=verdict.url) if page.reduced_match else page
        normal = None
        if blocks is not None:
            normal = words.normal_hash(blocks) if words is not None else normal_text_hash(blocks)
        with self._lock:
            pages = self._url_pages.setdefault(cluster, [])
            if verdict.kind != "unique":
                for known in pages:  # the first of the cluster's pages of its kind whose whole text is alike
                    if None not in (media, known.media) and media != known.media:
                        continue
                    if (normal is not None and normal == known.normal) or (
                            whole is not None and known.whole is not None
                            and self.engine.pair_matches(known.whole, whole)):
                        return _with(page, normal_hash=normal, url_page=known.name)
            name = cluster if verdict.kind == "unique" else verdict.url
            pages.append(_UrlPage(name, normal, whole, media))
            if whole is not None:
                self._hold_whole(cluster)
        return _with(page, normal_hash=normal, url_page=name)

    def _media_differs(self, cluster: str, media: str | None) -> bool:
        """Is the kept page of ``cluster`` of another media kind than ``media`` (both known)?"""
        if media is None or not self.url_sameness:
            return False
        with self._lock:
            kept = self._url_pages.get(cluster)
            return kept[0].media not in (None, media) if kept else False

    def _hold_whole(self, cluster: str) -> None:
        """Count one more whole fingerprint held for ``cluster``; past the bound, the oldest clusters' go."""
        self._with_whole[cluster] = self._with_whole.get(cluster, 0) + 1
        self._with_whole.move_to_end(cluster)
        self._wholes += 1
        while self._wholes > self._kept_whole_pages and self._with_whole:
            oldest, held = self._with_whole.popitem(last=False)
            for known in self._url_pages.get(oldest, ()):
                known.whole = None
            self._wholes -= held

    def kept_normal_hash(self, cluster: str) -> str | None:
        """The normal hash of the kept page of ``cluster`` (None: unknown)."""
        with self._lock:
            pages = self._url_pages.get(cluster)
            return pages[0].normal if pages else None


def _with(page: PageVerdict, **changes: Any) -> PageVerdict:
    return PageVerdict(**{**page.__dict__, **changes})
