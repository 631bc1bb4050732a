"""Online DUST learning in a crawl: ``DEDUP_DUST_LEARN = True`` (the Scrapy adapter).

:class:`DustLearningMiddleware` is a downloader middleware (``DOWNLOADER_MIDDLEWARES``,
order 100: it sees responses after decompression and requests just before download):

* every fetched text page (2xx) is named by the crawl's own content verdict (the
  :class:`~scrapy_dedup.extensions.DedupExtension`'s: main text under its host's
  extraction policy, exact or verified near duplicates share a cluster; taken once,
  the spider middleware reuses it) and fed, with the URLs that redirected to it, to
  :class:`~scrapy_dedup.url.learner.OnlineDustLearner`. It mines when pages met again
  under another URL (the evidence rules are made of) reach the miner's ``min_support``,
  and at the latest every ``DEDUP_DUST_LEARN_EVERY`` pages; the rules that pass
  validation are activated in the fingerprinter's rule set, so later requests of that
  host get the new canonical key (the dupefilter then drops them), and the alias table
  the run mined (redirects, a page under two keys) replaces the learned one. Each
  activation is logged at INFO with its support and counted (``dedup/dust/activated``);
* a request for another form of a page already met (the same page name in its URL)
  is parked at ``request_scheduled`` instead of scheduled (``dedup/dust/deferred``),
  and sent back when the scheduler runs dry, by then mostly folded by the rules its
  evidence taught (:class:`~scrapy_dedup.url.learner.VariantDeferral`,
  ``dedup/dust/deferred_released``); a redirect is evidence as soon as the 3xx is
  downloaded, and a learned rule the server itself redirects by rewrites a request's
  URL before download (``dedup/dust/redirect_rewritten``). Parked requests are in this
  process's memory only, so nothing is parked with ``JOBDIR`` or a scheduler not Scrapy's
  own (one INFO line at start, ``dedup/dust/deferral_off``): a pause or a kill would lose
  them, and one process's idle is not a shared queue's end;
* a request queued before a rule was activated is checked again against the
  updated canonical key just before download and dropped if a page with that key
  was already fetched or is being fetched (``dedup/dust/skipped_queued``); one the
  dupefilter drops under a learned rule for a key no page was fetched under (the key
  a redirecting URL took) is sent again past it (``dedup/dust/resent_unfetched_key``);
* an active rule hides its own violations, so of the distinct URLs a learned rule collapses onto
  an already fetched page the first, the first of each value it drops that its evidence did not
  show, and then a ``DEDUP_DUST_EXPLORE`` share are still fetched (``dedup/dust/explored``; a URL
  is explored at most once, a URL already fetched never; a request dropped while its key's page
  was still being fetched is judged when the crawl runs dry, ``dedup/dust/explored_held``); an
  explored page that differs from its key's page deactivates the learned rules that fired for it
  (logged, ``dedup/dust/deactivated``). An exploration answered by a redirect is judged on the
  page the redirect leads to (its request is not dropped under the rules it checks); one that
  brings no page (an error, or an answer the learner cannot read: not a page, too short, the content index
  away) checked nothing, and the values it was to check wait for another URL (``dedup/dust/explore_abandoned``;
  each URL is still explored at most once, so abandoning cannot loop). A URL that answered a page the learner
  cannot read was downloaded all the same: a request dropped for it is not sent past the dupefilter again.
  An explored page that is the same page is a duplicate like any other: its items go the way of
  ``DEDUP_CONTENT_ACTION`` (dropped in ``drop`` mode);
* at crawl end the rules in force are written to ``DEDUP_DUST_RULES_OUT``.

The rules of ``DEDUP_DUST_RULES`` are claims checked the same way, with or without
``DEDUP_DUST_LEARN``: explored (``DEDUP_DUST_EXPLORE``), withdrawn on a violation
(logged, ``dedup/dust/deactivated`` and ``dedup/dust/loaded_withdrawn``), the requests
they dropped sent again. So is a host's alias table, one claim: the first URL it sends
to a target is fetched as it is (then a ``DEDUP_DUST_EXPLORE`` share), compared with
the target's page, and the table withdrawn whole on a difference (the same log line
and stats), the requests it sent elsewhere sent again. Without
``DEDUP_DUST_LEARN`` nothing is mined and no request is parked: only that check runs.

It needs ``REQUEST_FINGERPRINTER_CLASS = "scrapy_dedup.CanonicalRequestFingerprinter"``,
whose canonicalizer holds the live rule set, and the extension in ``EXTENSIONS`` (the
add-on sets both).
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import DontCloseSpider, IgnoreRequest, NotConfigured
from scrapy.http import TextResponse
from w3lib.url import safe_url_string

from scrapy_dedup.extensions import DedupExtension
from scrapy_dedup.responses import declared_canonical as canonical_link_in_head
from scrapy_dedup.jobdir import uses_scrapys_scheduler
from scrapy_dedup.duplicates import (  # noqa: F401 (the meta keys re-exported: their former home)
    ALIAS_META,
    DEFERRED_META,
    DUST_KEY_META,
    RESENT_META,
    REWRITTEN_META,
    SAME_KEY_REDIRECT_META,
    middleware_enabled,
)
from scrapy_dedup.settings import DedupConfigError, read_settings
from scrapy_dedup.url.learner import OnlineDustLearner
from scrapy_dedup.url.mining import MiningConfig

if TYPE_CHECKING:  # pragma: no cover
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

__all__ = ["DustLearningMiddleware"]


#: seconds between two INFO lines of what learning is doing (at most; none when nothing changed)
PROGRESS_SECONDS = 5.0


class _ExploringCanonicalizer:
    """The fingerprinter's canonicalizer, letting a share of DUST-collapsed URLs keep their own key."""

    def __init__(self, inner: Any, learner: OnlineDustLearner):
        from scrapy_dedup.url.canonical import Canonicalizer

        self.inner = inner
        self.learner = learner
        self.without_dust = Canonicalizer(inner.policies)

    def canonicalize_with_info(self, url: str) -> Any:
        result = self.inner.canonicalize_with_info(url)
        if "dust" in result.fired and self.learner.should_explore(url, result.url):
            return self.without_dust.canonicalize_with_info(url)
        return result

    def canonicalize(self, url: str) -> str:
        return self.canonicalize_with_info(url).url

    __call__ = canonicalize

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class DustLearningMiddleware:
    """Downloader middleware of ``DEDUP_DUST_LEARN`` (see the module docstring)."""

    def __init__(self, crawler: Crawler):
        cfg = read_settings(crawler.settings)
        if not cfg.enabled or not (cfg.dust_learn or cfg.dust_rules):
            raise NotConfigured  # off: no message, so Scrapy does not log a warning
        fingerprinter: Any = getattr(crawler, "request_fingerprinter", None)  # has a canonicalizer if ours
        canonicalizer = getattr(fingerprinter, "canonicalizer", None)
        if fingerprinter is None or canonicalizer is None or getattr(canonicalizer, "dust", None) is None:
            # asked for and impossible: a configuration error, not a component quietly switched off
            raise DedupConfigError(f"{'DEDUP_DUST_LEARN' if cfg.dust_learn else 'DEDUP_DUST_RULES'} needs "
                                   "REQUEST_FINGERPRINTER_CLASS = "
                                   "'scrapy_dedup.CanonicalRequestFingerprinter' (the learned rules act through "
                                   "it): add it, or use ADDONS = {'scrapy_dedup.Addon': 0}")
        #: the content extension fingerprints each response once, for this and for its verdict
        self.content = DedupExtension.of(crawler, "DustLearningMiddleware (DEDUP_DUST_LEARN, DEDUP_DUST_RULES)")
        self.crawler = crawler
        self.stats = crawler.stats
        self.cfg = cfg
        self.canonicalizer = canonicalizer
        self.learner = OnlineDustLearner(
            canonicalizer.dust, canonicalizer.canonicalize, every=cfg.dust_learn_every, explore=cfg.dust_explore,
            config=MiningConfig(hamming=cfg.hamming_threshold, min_words=cfg.min_words), learn=cfg.dust_learn,
        )
        #: mining and parking are learning's; loaded rules alone are only checked
        self.learning = cfg.dust_learn
        fingerprinter.canonicalizer = _ExploringCanonicalizer(canonicalizer, self.learner)
        #: responses are judged by ContentFingerprintMiddleware: the learner reads the same verdict
        self.judge_responses = not cfg.content_field and middleware_enabled(crawler)
        self.inflight: dict[str, int] = {}  # canonical key -> requests being downloaded
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(self.request_dropped, signal=signals.request_dropped)
        crawler.signals.connect(self.request_scheduled, signal=signals.request_scheduled)
        crawler.signals.connect(self.response_downloaded, signal=signals.response_downloaded)
        crawler.signals.connect(self.spider_idle, signal=signals.spider_idle)
        self.fingerprinter = fingerprinter
        self._progress_at = time.monotonic()
        self._progress_state: tuple = ()
        #: parked requests live in this process's memory only: where the frontier must outlive it (a JOBDIR
        #: to resume from; a scheduler not Scrapy's own, e.g. a shared Redis queue whose end one process's
        #: idle does not mark) a pause or a kill would lose them, so variants are scheduled as they come
        self.defer_off_reason = _deferral_off_reason(crawler) if self.learning else "DEDUP_DUST_LEARN is off"
        if self.defer_off_reason and self.learning:
            logger.info("DUST learning: variant deferral off (%s: a parked request would be lost at a pause "
                        "or a kill); learning stays on", self.defer_off_reason)
            crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)

    def spider_opened(self, spider: Spider | None = None) -> None:
        self.stats.set_value("dedup/dust/deferral_off", 1)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DustLearningMiddleware:
        return cls(crawler)

    # --- requests: deferral of variants, the re-check of already queued requests ---

    def request_scheduled(self, request: Request, spider: Spider | None = None) -> None:
        """Before the scheduler takes ``request``: a variant of a URL already met (another form of it) is
        parked until the scheduler runs dry, beyond the few the rule of that form is learned from
        (:class:`~scrapy_dedup.url.learner.VariantDeferral`); raising IgnoreRequest here keeps it out of
        the scheduler (and its dupefilter) without calling the spider's errback."""
        if self.defer_off_reason or request.meta.get("verbatim_url"):
            return
        # a redirect, a request sent again or released, or one the spider wants fetched: indexed, never parked
        may_park = not (request.dont_filter or request.meta.get("redirect_urls") or request.meta.get(DEFERRED_META))
        key = self.canonicalizer.canonicalize(request.url)
        if self.learner.is_fetched(key) or self.inflight.get(key):
            return  # the dupefilter, or the check before download, drops it
        if self.learner.deferral.consider(request.url, key, request, may_park):
            self.stats.inc_value("dedup/dust/deferred")
            raise IgnoreRequest(f"DUST: {request.url} deferred (another form of a URL already met)")

    def spider_idle(self, spider: Spider | None = None) -> None:
        """The scheduler ran dry: the parked requests go to it (the dupefilter drops those a rule learned
        meanwhile gave the key of a fetched page), and the crawl goes on. So do the explorations of requests
        a learned rule dropped before their key's page was fetched (never judged then)."""
        self._progress(force=True)
        explore = self.learner.explore_held()
        for request in explore:
            self.crawler.engine.crawl(request.replace(dont_filter=True, meta={**request.meta, RESENT_META: True}))
        if explore:
            self.stats.inc_value("dedup/dust/explored_held", len(explore))
        if not self.learner.deferral.parked:
            if explore:
                raise DontCloseSpider
            return
        self._activated(self.learner.mine_pending(), self.learner.pages)  # the evidence fetched since counts
        parked = self.learner.release_deferred()
        for request in parked:
            request.meta[DEFERRED_META] = True
            self.crawler.engine.crawl(request)
        if parked:
            self.stats.inc_value("dedup/dust/deferred_released", len(parked))
        if parked or explore:
            raise DontCloseSpider

    def response_downloaded(self, response: Response, request: Request, spider: Spider | None = None) -> None:
        """A redirect is evidence at once (the redirected request may be dropped as already seen)."""
        location = response.headers.get("Location") if 300 <= response.status < 400 else None
        if not location:
            return
        try:
            target = response.urljoin(safe_url_string(location.decode("latin-1")))
        except ValueError:
            return
        if self.learner.redirect_agrees(request.url, target):
            self._sync_stats()  # the server's word: agreed, its page not fetched again
        elif self.learner.follow_exploration(request.url, target) and target in self.learner.fetched:
            # the exploration's page is known already: judged now, not fetched again
            if self._judge_exploration(target, *self.learner.fetched[target]):
                self._activated(self.learner.mine_now(), self.learner.pages)
                self._resend()
        self._activated(self.learner.redirected(request.url, target), self.learner.pages)

    def process_request(self, request: Request, spider: Spider | None = None) -> Request | None:
        # A request that carries a key came back: the redirect of a request this middleware let through (a
        # 3xx is answered by RedirectMiddleware before this one sees the response), or its replacement by a
        # later middleware (an alias target): the former download is over, its key no longer in flight.
        self._release(request)
        # dont_filter set by this add-on, not by the spider: sent again here, or the redirect of a request
        # within its key (a page fetched meanwhile under another URL of the key is not fetched again)
        ours = (request.meta.get(RESENT_META) or request.meta.get(SAME_KEY_REDIRECT_META)
                or request.meta.get(REWRITTEN_META))
        if (request.dont_filter and not ours) or request.meta.get("verbatim_url"):
            return None
        if ours and (request.url in self.learner.fetched or request.url in self.learner.unread):
            # learning sends requests again past the dupefilter (a withdrawn rule's, an exploration held): never
            # one whose URL was downloaded already, whatever key it has now
            self.stats.inc_value("dedup/dust/refetch_refused")
            raise IgnoreRequest(f"DUST: {request.url} was downloaded already")
        if self.learner.take_exploration(request.url):
            request.meta[DUST_KEY_META] = None
            request.meta[ALIAS_META] = request.url  # fetched as it is: not sent to an alias target (650)
            return None
        key = self.canonicalizer.canonicalize(request.url)
        if self.learner.is_fetched(key) or self.inflight.get(key):
            self.stats.inc_value("dedup/dust/skipped_queued")
            self.learner.hold(request.url, request)
            logger.debug("DUST: %s dropped before download: %s was already fetched", request.url, key)
            raise IgnoreRequest(f"DUST duplicate of {key}")
        target = None if REWRITTEN_META in request.meta else self.learner.redirect_target(request.url)
        if target is not None:
            # the server would redirect it there: requested at once (its key is the one this request has)
            self.stats.inc_value("dedup/dust/redirect_rewritten")
            logger.debug("DUST: %s requested as %s (a learned rule the server redirects by)", request.url, target)
            return request.replace(url=target, dont_filter=True, meta={**request.meta, REWRITTEN_META: request.url})
        # a loaded alias on trial sends it to its target (CanonicalRedirectMiddleware): kept, to send again
        self.learner.hold_aliased(request.url, request)
        self.inflight[key] = self.inflight.get(key, 0) + 1
        request.meta[DUST_KEY_META] = key
        return None

    def _release(self, request: Request) -> None:
        key = request.meta.pop(DUST_KEY_META, None)
        if key and self.inflight.get(key):
            self.inflight[key] -= 1
            if not self.inflight[key]:
                del self.inflight[key]

    def process_exception(self, request: Request, exception: BaseException, spider: Spider | None = None) -> None:
        self._release(request)
        self.learner.abandon_exploration(request.url)
        return None

    def request_dropped(self, request: Request, spider: Spider | None = None) -> None:
        """The scheduler dropped ``request`` as seen: held when learned rules collapsed it, so that it is sent
        again if one of them is deactivated. A redirect of a request let through here, dropped because its
        target was seen, ends that download: its key is no longer in flight."""
        self._release(request)
        if "dust" not in self.fingerprinter.fired_switches(request):  # the key the dupefilter used (cached)
            return
        key = self.canonicalizer.canonicalize(request.url)
        if not (request.meta.get(RESENT_META) or self.learner.is_fetched(key) or self.inflight.get(key)
                or request.url in self.learner.unread):
            # The dupefilter holds this key from a request that brought no page under it: a URL that
            # redirected to another key before the rule gave both one key (/a -> /a/, then "'/' -> ''"), or
            # an error. Dropped, the page of the key would be lost: sent again past the dupefilter, checked
            # before download against the pages fetched by then. Not a URL that answered a page the learner
            # cannot read (its key stays unfetched): sent again, it was fetched again once per link to it.
            self.stats.inc_value("dedup/dust/resent_unfetched_key")
            self.crawler.engine.crawl(request.replace(dont_filter=True, meta={**request.meta, RESENT_META: True}))
            return
        self.learner.hold(request.url, request)

    def _resend(self) -> None:
        """Requests a deactivated rule had made the crawl drop go to the scheduler again. Past the dupefilter,
        which holds their URL's own key from before the rule (the very key they need now), but checked here
        before download against the keys the remaining rules give them."""
        while self.learner.resend:
            request = self.learner.resend.pop()
            self.stats.inc_value("dedup/dust/resent")
            self.crawler.engine.crawl(request.replace(dont_filter=True, meta={**request.meta, RESENT_META: True}))

    # --- responses: learning and exploration ---

    def process_response(self, request: Request, response: Response,
                         spider: Spider | None = None) -> Response | Request:
        self._release(request)
        if response.status >= 400:
            self.learner.canonicals.failed(response.url)  # refuses the canonicals that named it
            original = request.meta.get(REWRITTEN_META)
            if original and original != request.url:
                # the rewritten URL does not answer: the URL as linked is requested after all (nothing lost)
                self.stats.inc_value("dedup/dust/redirect_rewrite_failed")
                meta = {k: v for k, v in request.meta.items() if k != DUST_KEY_META}
                return request.replace(url=original, dont_filter=True, meta={**meta, REWRITTEN_META: original})
        if not (200 <= response.status < 300):
            self.learner.abandon_exploration(request.url)  # no page to compare: it checked nothing
            self._sync_stats()
            return response
        if not isinstance(response, TextResponse):
            return self._unread(request, response)
        content, sim = self._content_of(response)
        if content is None:  # not a page, unreadable, too short, or the content index away
            return self._unread(request, response)
        verdict = self.content.verdict_for_response(response) if self.judge_responses else None
        item = verdict.cluster if verdict is not None else None  # the page at the lenient strictness
        deactivated = self._judge_exploration(request.url, content, sim, item)
        before = self.learner.pages
        redirects = request.meta.get("redirect_urls") or ()
        activated = self.learner.record(response.url, content, sim, request_url=request.url,
                                        redirect_urls=[u for u in redirects if isinstance(u, str)], item=item)
        if deactivated:
            # mined again at once, the violating page included, so that what the wrong rule got right (a
            # narrower rule) is in force before the requests it dropped are checked again
            activated += self.learner.mine_now()
            self._resend()
        self._activated(activated, before + 1)
        canonical = _declared_canonical(response)
        if canonical is not None:
            self.learner.declared(response.url, canonical, content, sim)
        self._canonical_changes()
        self.stats.set_value("dedup/dust/learned_pages", self.learner.pages)
        self._sync_stats()
        self._progress()
        return response

    def _progress(self, force: bool = False) -> None:
        """One INFO line of what learning is doing, at most every :data:`PROGRESS_SECONDS` and only when it
        changed (``force``: now, if it changed): so a long wait for parked requests or explorations is never
        silent, and a busy crawl's log is not flooded."""
        now = time.monotonic()
        if not force and now - self._progress_at < PROGRESS_SECONDS:
            return
        learner, events = self.learner, self.learner.events
        state = (learner.pages, len(learner.learned), events["deactivated"], events["loaded_withdrawn"],
                 events["explored"], len(learner.deferral.parked), learner.held_count())
        if state == self._progress_state:
            return
        self._progress_at, self._progress_state = now, state
        logger.info("DUST learning: %d page(s) read, %d rule(s) learned in force, %d withdrawn (%d loaded), "
                    "%d URL(s) explored, %d request(s) parked, %d held by rules", state[0], state[1], state[2],
                    state[3], state[4], state[5], state[6])

    def _unread(self, request: Request, response: Response) -> Response:
        """A 2xx answer the learner cannot read: an exploration checked nothing (its values go back to its
        rules; the URL is not explored again); the URL was downloaded all the same (not sent again)."""
        self.learner.abandon_exploration(request.url)
        self.learner.answered_unread(request.url)
        if response.url != request.url:
            self.learner.answered_unread(response.url)
        self._sync_stats()
        return response

    def _sync_stats(self) -> None:
        events = self.learner.events
        for name in ("explored", "explore_agreed", "explore_violations", "explore_undecided", "explore_abandoned",
                     "mining_runs",
                     "aliases"):
            if events[name]:
                self.stats.set_value(f"dedup/dust/{name}", events[name])
        for name in ("confirmed", "refused", "used", "ignored"):
            if events[f"canonical_{name}"]:
                self.stats.set_value(f"dedup/dust/canonical/{name}", events[f"canonical_{name}"])

    def _judge_exploration(self, url: str, content: Any, sim: int | None, item: Any = None) -> bool:
        """``url``'s page, when it is an exploration, judged against its key's page; True when rules were
        deactivated (the caller mines again and sends back what they dropped)."""
        if url not in self.learner.exploring:
            return False
        deactivated = False
        loaded = self.learner.events["loaded_withdrawn"]
        for rule in self.learner.check_explored(url, content, sim, item):
            deactivated = True
            self.stats.inc_value("dedup/dust/deactivated")
            logger.info("DUST rule deactivated: %s: %s (an explored URL, %s, holds another page)",
                        _host(url), rule.describe(), url)
        withdrawn = self.learner.events["loaded_withdrawn"] - loaded
        if withdrawn:
            self.stats.inc_value("dedup/dust/loaded_withdrawn", withdrawn)
            logger.warning("DEDUP_DUST_RULES: %d loaded rule(s) or alias(es) of %s withdrawn: the explored URL %s "
                           "holds another page than the URL they fold it onto; the requests they dropped are sent "
                           "again", withdrawn, _host(url), url)
        return deactivated or bool(withdrawn)

    def _activated(self, activated: list, pages: int) -> None:
        for verdict in activated:
            self.stats.inc_value("dedup/dust/activated")
            logger.info("DUST rule activated after %d pages: %s: %s (support %d from %d pages, %d violations)",
                        pages, verdict.host, verdict.rule.describe(), verdict.support,
                        verdict.support_pages, verdict.violations)

    def _canonical_changes(self) -> None:
        changes = self.learner.canonicals.changes
        while changes:
            host, state, confirmed, refused = changes.pop(0)
            self.stats.inc_value(f"dedup/dust/canonical/{state}_hosts")
            if state == "trusted":
                logger.info("rel=canonical trusted on %s: %d declaration(s) confirmed by the pages fetched, %d "
                            "refused; its declarations now count as evidence for DUST learning",
                            host, confirmed, refused)
            elif state == "untrusted":
                logger.info("rel=canonical no longer trusted on %s: %d declaration(s) refused, %d confirmed",
                            host, refused, confirmed)
            else:
                logger.info("rel=canonical ignored on %s: misconfigured (%d declaration(s) name another page or "
                            "an error, %d confirmed); no fetch was ever skipped for it", host, refused, confirmed)

    def _content_of(self, response: Response) -> tuple[str | None, int | None]:
        """What names the page for the learner: the content engine's cluster (the verdict the crawl takes of
        this response anyway, taken once), or where the crawl does not judge responses (items carry their
        own content, ``DEDUP_CONTENT_FIELD``) the exact hash and simhash of its main text."""
        if self.judge_responses:  # the cluster where it says which page the URL serves (same_page_cluster)
            return self.content.same_page_cluster(response), None
        fingerprint = self.content.fingerprint_of_response(response)  # the host's extraction policy
        if fingerprint is None:
            return None, None
        return fingerprint.exact.hex(), fingerprint.simhash

    # --- crawl end ---

    def spider_closed(self, spider: Spider | None = None, reason: str = "") -> None:
        self._sync_stats()  # explorations abandoned or errors after the last page read
        rules = self.learner.rules
        if self.learning:
            logger.info("DUST learning: %d page(s), %d rule(s) learned and in force, %d deactivated",
                        self.learner.pages, len(self.learner.learned), self.learner.events["deactivated"])
        if self.cfg.dust_rules:
            logger.info("DEDUP_DUST_RULES: %d loaded rule(s) and %d alias(es) in force, %d withdrawn (explored: %d "
                        "URL(s), %d held another page)", len(self.learner.loaded), self.learner.loaded_aliases(),
                        self.learner.events["loaded_withdrawn"], self.learner.events["explored"],
                        self.learner.events["explore_violations"])
        if self.cfg.dust_rules_out:
            rules.meta = {**rules.meta, "generated_by": "scrapy-dedup online learning (DEDUP_DUST_LEARN)",
                          "pages": self.learner.pages}
            try:
                rules.save(self.cfg.dust_rules_out)
                logger.info("DUST rules written to %s (%d rule(s))", self.cfg.dust_rules_out, len(rules))
            except OSError as exc:
                logger.error("Could not write DEDUP_DUST_RULES_OUT %s: %s", self.cfg.dust_rules_out, exc)


def _deferral_off_reason(crawler: Crawler) -> str | None:
    """Why parking variant requests in memory is not safe in this crawl (None: it is)."""
    if crawler.settings.get("JOBDIR"):
        return "JOBDIR is set"
    if not uses_scrapys_scheduler(crawler):
        return f"SCHEDULER {crawler.settings.get('SCHEDULER')} is not Scrapy's own"
    return None


def _declared_canonical(response: TextResponse) -> str | None:
    """The ``rel="canonical"`` URL a response declares, absolute: the HTTP ``Link`` header first (RFC 8288,
    RFC 6596), then ``<link rel="canonical">`` in the HTML head; None when there is none."""
    for value in response.headers.getlist(b"Link"):
        for link in value.decode("latin-1").split(","):
            target, _, params = link.partition(";")
            target = target.strip()
            if target.startswith("<") and target.endswith(">") and _rel_is_canonical(params):
                return response.urljoin(target[1:-1].strip())
    return canonical_link_in_head(response)


def _rel_is_canonical(params: str) -> bool:
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "rel" and "canonical" in value.strip().strip('"').lower().split():
            return True
    return False


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""
