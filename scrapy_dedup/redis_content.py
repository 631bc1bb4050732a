"""The content store's state in a crawl: the Redis content index's start-up checks
(``_util/redis_startup.py``), its outage policy (always ``fail_open``), ``DEDUP_REDIS_FLUSH_ON_START``,
its deletion at close (``DEDUP_REDIS_PERSIST = False``) and the boilerplate tables it shares
(:class:`RedisContentState`); and :class:`StoreCalls`, every call that reaches the store, of either
backend, failing open. Built by ``DedupExtension``; imports no Scrapy."""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from scrapy_dedup.content.boilerplate import BoilerplateRule
from scrapy_dedup.content.stores import ContentIndexMismatch, mismatch_message
from scrapy_dedup.paragraph_flow import paragraph_key, redis_paragraph_set
from scrapy_dedup._util.redis_conn import delete_matching, glob_escape, mask_url
from scrapy_dedup._util.redis_policy import RedisErrorPolicy, RedisStartupError, RedisUnavailable, describe
from scrapy_dedup._util.redis_startup import check_at_start
from scrapy_dedup.settings import DedupConfigError, DedupSettings, logged_already

__all__ = ["RedisContentState", "StoreCalls", "index_key"]

#: the crawl's lines, under the logger they always had
logger = logging.getLogger("scrapy_dedup.extensions")


def index_key(cfg: DedupSettings, spidercls: Any) -> str:
    """The key prefix of the crawl's Redis content index: ``DEDUP_REDIS_INDEX_KEY`` for its spider."""
    return cfg.redis_index_key % {"spider": getattr(spidercls, "name", None) or "spider"}


class StoreCalls:
    """Every call of the crawl that reaches the content store: under the Redis index's outage ``policy`` (None:
    the memory store); a failure fails open, the page kept unjudged (never dropped for an outage)."""

    def __init__(self, policy: RedisErrorPolicy | None, secrets: Any, count: Callable[[str], None]):
        self.policy = policy
        self.secrets = secrets
        self.count = count
        self._store_failing = False

    def call(self, call: Any, *args: Any, **kwargs: Any) -> Any:
        """``call(*args, **kwargs)``, under the Redis outage policy when the content index is in Redis."""
        if self.policy is not None:
            return self.policy.call(lambda: call(*args, **kwargs))
        return call(*args, **kwargs)

    def failed(self, exc: Exception) -> None:
        """Content index unreachable: the page is kept unjudged (never dropped for an outage).

        Logged once per outage (the first error, then again after a success), counted always.
        """
        self.count("store_errors")
        if not self._store_failing:
            self._store_failing = True
            logger.error("Content index unavailable (%s); pages are kept without a duplicate "
                         "check until it is back (counted in dedup/content/store_errors)",
                         describe(exc, self.secrets))

    def succeeded(self) -> None:
        """A call went through: after an outage, one line says so."""
        if self._store_failing:
            self._store_failing = False
            logger.info("Content index is back; duplicate checks resumed")


class RedisContentState:
    """The Redis content ``store`` of a crawl, checked at start-up; :attr:`policy`, its outage policy.

    ``boilerplate``, ``paragraphs``: whether some host's policy learns boilerplate (the block tables shared
    through Redis) or dedups paragraphs (the paragraph seen set beside the index): their commands are
    probed at start with the index's."""

    def __init__(self, cfg: DedupSettings, store: Any, stats: Any, secrets: Any, *, boilerplate: bool = False,
                 paragraphs: bool = False):
        self.cfg = cfg
        self.store = store
        self.stats = stats
        self.secrets = secrets
        self.boilerplate = boilerplate
        self.paragraphs = paragraphs
        logger.info("Content index in Redis at %s, key %r (%s)", mask_url(cfg.redis_url), store.index.prefix,
                    type(store).__name__)  # the layout: one slot, or sharded over a cluster's slots
        self.policy = self._open_policy(cfg)

    def _open_policy(self, cfg: DedupSettings) -> RedisErrorPolicy:
        """The outage policy of the Redis content index, after the start-up checks: always ``fail_open``.

        Why a policy: a page met while Redis is away is kept unjudged either way, but
        without one every page would wait for a failing call (a hung server: the
        socket timeout, each page); with it Redis is probed after growing pauses
        and each outage is logged once.
        """
        policy = RedisErrorPolicy(
            "fail_open", name="Content index", url=cfg.redis_url, secrets=self.secrets,
            stats=self.stats, stats_prefix="dedup/content/redis_",
            fail_open_means="pages are kept without a duplicate check until it is back (counted in "
                            "dedup/content/store_errors)",
            mode_note="the content index always fails open", log=logger)
        check_at_start(self.store.index.client, cfg.redis_url, secrets=self.secrets, what="content index",
                       wait_seconds=cfg.redis_startup_seconds, probes=self.permission_probes(), log=logger,
                       key_setting="DEDUP_REDIS_INDEX_KEY", url_setting=cfg.source_of("DEDUP_REDIS_URL"),
                       logged=logged_already)
        if cfg.redis_flush_on_start:
            self._flush(policy, cfg)
        self._check_index(policy, cfg)
        policy.running = True  # configuration errors were refused just now; from here on every error is an outage
        return policy

    def permission_probes(self) -> tuple[list[tuple[Any, ...]], list[str]]:
        """What the crawl sends to the content index's Redis: the index's commands (one slot or sharded over a
        cluster: each its own), the block tables' when boilerplate is learnt, the paragraph seen set's when
        paragraphs are deduplicated, and :meth:`delete`'s ``SCAN`` and ``DEL`` when the state is deleted
        (``DEDUP_REDIS_FLUSH_ON_START``, ``DEDUP_REDIS_PERSIST = False``); and the probe keys
        (``missing_permissions``'s probes and cleanup)."""
        from scrapy_dedup.content.redis_boilerplate import tables_permission_probes

        index = self.store.index
        probes, keys = index.permission_probes()
        if self.boilerplate:
            more, more_keys = tables_permission_probes(index.client, index.prefix, BoilerplateRule.from_params(
                self.cfg), self.cfg.redis_ttl)
            probes, keys = [*probes, *more], [*keys, *more_keys]
        if self.paragraphs:
            more, more_keys = redis_paragraph_set(self.cfg, index).permission_probes()
            probes, keys = [*probes, *more], [*keys, *more_keys]
        if self.cfg.redis_flush_on_start or not self.cfg.redis_persist:  # else refused mid-start or at close
            probes = [*probes, ("SCAN", "0", "MATCH", glob_escape(keys[0]), "COUNT", 1),
                      *(("DEL", key) for key in keys)]
        return probes, keys

    def _flush(self, policy: RedisErrorPolicy, cfg: DedupSettings) -> None:
        """DEDUP_REDIS_FLUSH_ON_START: delete the crawl's content state in Redis before anything reads it.

        That is the content index (with the boilerplate tables and their salt, under its hash tag)
        and the paragraph seen set, found with SCAN on every node of a cluster. Redis unreachable
        now: the start is refused, since pages judged against the previous crawl's index would be
        dropped as its duplicates, the opposite of the fresh crawl asked for.
        """
        try:
            policy.call(self.delete)
        except RedisUnavailable as exc:
            raise RedisStartupError(
                f"DEDUP_REDIS_FLUSH_ON_START: cannot delete the content index {self.store.index.prefix!r} at "
                f"{mask_url(cfg.redis_url)} ({exc}); the crawl would judge its pages against the previous "
                "crawl's: start it again once Redis is back") from None
        logger.info("Content index %r, its boilerplate tables and paragraph seen set at %s deleted at start "
                    "(DEDUP_REDIS_FLUSH_ON_START)", self.store.index.prefix, mask_url(cfg.redis_url))

    def delete(self) -> None:
        """Delete the crawl's content state in Redis: the content index (with the boilerplate tables and their
        salt, under its hash tag) and the paragraph seen set, SCAN on every node of a cluster."""
        paragraphs = glob_escape(paragraph_key(self.store.index.prefix))
        self.store.clear()
        # the filter's key, its layout, or its shards (each under a hash tag of its own): any layout left
        delete_matching(self.store.index.client, (paragraphs, paragraphs + ":*", f"\\{{{paragraphs}:*"))

    def _check_index(self, policy: RedisErrorPolicy, cfg: DedupSettings) -> None:
        """An index written with another config (an earlier version's key layout, other bits, bands or
        sketch size) stops the crawl now, naming what to change; judged page by page, every page would
        fail and be kept unjudged. Redis gone since the start-up check answered: an outage (the first page's call
        checks it)."""
        try:
            policy.call(self.store.check_config)
        except RedisUnavailable:
            return
        except ContentIndexMismatch as exc:
            raise DedupConfigError(f"Content index: {mismatch_message(exc, mask_url(cfg.redis_url))}") from None

    def delete_at_close(self) -> None:
        """DEDUP_REDIS_PERSIST=False: the content state goes with the crawl, as the dupefilter's keys do. Redis
        away now: a WARNING (the keys stay; nothing of this crawl is lost by that), counted by the policy in
        ``dedup/content/redis_errors``."""
        try:
            self.policy.call(self.delete)
        except RedisUnavailable as exc:
            logger.warning("Content index %r: could not delete it at close (DEDUP_REDIS_PERSIST=False): %s; "
                           "its keys stay", self.store.index.prefix, exc)
            return
        logger.info("Content index %r, its boilerplate tables and paragraph seen set at %s deleted at close "
                    "(DEDUP_REDIS_PERSIST=False)", self.store.index.prefix, mask_url(self.cfg.redis_url))

    def block_tables(self) -> tuple[Any, Any]:
        """The per-host block tables of boilerplate learning, shared through Redis with the content index: the
        table factory and the salt of the block hashes (``BoilerplateLearner``'s ``tables`` and ``hash_key``)."""
        from scrapy_dedup.content.redis_boilerplate import RedisBlockTable, shared_salt, table_prefix

        cfg, rule = self.cfg, BoilerplateRule.from_params(self.cfg)
        client, key = self.store.index.client, self.store.index.prefix
        return (lambda host: RedisBlockTable(client, table_prefix(key, host), rule, cfg.redis_ttl),
                lambda: shared_salt(client, key))
