"""Paragraph dedup in a crawl (``DEDUP_PARAGRAPHS``): the blocks' seen set, each page's check and its
stats, the JOBDIR checkpoint of the local filter. Built by ``DedupExtension`` when a host has paragraph
dedup on; imports no Scrapy (the crawl's stats are any object with ``set_value`` and ``inc_value``)."""
from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from scrapy_dedup.content.boilerplate import host_of
from scrapy_dedup.content.extract import ExtractionPolicy
from scrapy_dedup.content.paragraphs import ParagraphCheck, ParagraphDeduplicator
from scrapy_dedup._util.files import set_aside, where_kept
from scrapy_dedup._util.redis_policy import RedisErrorPolicy, RedisUnavailable, describe
from scrapy_dedup.settings import DedupConfigError, DedupSettings, unallocatable_bloom

__all__ = ["PARAGRAPHS_CHECKPOINT_NAME", "CrawlParagraphs", "check_paragraphs_field", "paragraph_key",
           "redis_paragraph_set"]

#: the crawl's lines, under the logger they always had
logger = logging.getLogger("scrapy_dedup.extensions")

#: the paragraph seen set (local Bloom filter) in JOBDIR: a resumed crawl does not emit its blocks again
PARAGRAPHS_CHECKPOINT_NAME = "dedup-paragraphs.bloom"
#: blocks a Redis paragraph seen set is sized for when DEDUP_PARAGRAPHS_CAPACITY is unset (allocated whole, in
#: Redis: it cannot grow); the local one starts at the seen stores' START_CAPACITY and grows with the crawl
REDIS_PARAGRAPHS_CAPACITY = 10_000_000


def check_paragraphs_field(cfg: DedupSettings, policies: Iterable[ExtractionPolicy]) -> None:
    """``DEDUP_PARAGRAPHS_FIELD`` refused at start-up where it cannot work: paragraph dedup off for every host
    (``policies``), or the field one of the other fields the crawl writes or reads."""
    if cfg.paragraphs_field and not any(p.paragraphs for p in policies):
        raise DedupConfigError("DEDUP_PARAGRAPHS_FIELD is set but paragraph dedup is off for every host: "
                               "set DEDUP_PARAGRAPHS = True (or `paragraphs` in DEDUP_CONTENT_POLICIES)")
    if cfg.paragraphs_field and cfg.paragraphs_field in (cfg.content_field, cfg.tag_field):
        raise DedupConfigError(f"DEDUP_PARAGRAPHS_FIELD ({cfg.paragraphs_field!r}) must differ from "
                               "DEDUP_CONTENT_FIELD and DEDUP_TAG_FIELD")


def paragraph_key(index_prefix: str) -> str:
    """The Redis key of the paragraph seen set: beside the content index's keys (not under its hash tag)."""
    return f"{index_prefix}:paragraphs"


def redis_paragraph_set(cfg: DedupSettings, index: Any) -> Any:
    """The paragraph seen set beside the Redis content ``index`` (its client and prefix): a Redis Bloom filter
    sized by ``DEDUP_PARAGRAPHS_CAPACITY`` (unset: :data:`REDIS_PARAGRAPHS_CAPACITY`) and
    ``DEDUP_PARAGRAPHS_ERROR_RATE``, not yet read or written."""
    from scrapy_dedup.seen import RedisBloomSeenSet

    try:
        return RedisBloomSeenSet(index.client, paragraph_key(index.prefix),
                                 cfg.paragraphs_capacity or REDIS_PARAGRAPHS_CAPACITY, cfg.paragraphs_error_rate,
                                 ttl=cfg.redis_ttl)
    except ValueError as exc:  # a filter too large for one Redis string
        raise DedupConfigError(f"DEDUP_PARAGRAPHS_CAPACITY: {exc}") from None


class CrawlParagraphs:
    """The crawl's paragraph dedup: :attr:`dedup` (a ``ParagraphDeduplicator``) over a local Bloom filter,
    or with the Redis content index (``index``: its client and prefix) a Redis Bloom filter shared by the
    crawl's processes, under its own fail-open outage policy; counts in ``events`` and ``dedup/paragraphs/*``."""

    def __init__(self, cfg: DedupSettings, stats: Any, events: Counter[str], *, index: Any = None,
                 secrets: tuple[str, ...] = (), jobdir: str | None = None):
        self.cfg = cfg
        self.stats = stats
        self.events = events
        self.secrets = secrets
        self.jobdir = jobdir
        self.policy: RedisErrorPolicy | None = None
        self.dedup = self._deduplicator(cfg, index)

    def _deduplicator(self, cfg: DedupSettings, index: Any) -> ParagraphDeduplicator:
        """The blocks' seen set: a local Bloom filter (unsized, it starts small and grows with the crawl, as
        ``BloomDupeFilter``'s), or with the Redis content index a Redis Bloom filter shared by the crawl's
        processes (under its own fail-open outage policy, as the content index). Its memory is logged."""
        from scrapy_dedup.seen import BloomLayoutMismatch, BloomSeenSet
        from scrapy_dedup.seen.bloom import START_CAPACITY

        if cfg.content_backend != "redis":
            capacity = cfg.paragraphs_capacity or START_CAPACITY
            try:
                seen_blocks = BloomSeenSet(capacity, cfg.paragraphs_error_rate)
            except (MemoryError, OverflowError):  # allocated whole at start: too large for this machine
                raise unallocatable_bloom("DEDUP_PARAGRAPHS_CAPACITY", capacity,
                                          "DEDUP_PARAGRAPHS_ERROR_RATE", cfg.paragraphs_error_rate) from None
            grows = "" if cfg.paragraphs_capacity else "; it grows with the crawl, DEDUP_PARAGRAPHS_CAPACITY sizes it"
            logger.info("Paragraph dedup: blocks of at least %d characters in a local Bloom filter of %s%s",
                        cfg.paragraphs_min_chars, seen_blocks.describe(), grows)
            return ParagraphDeduplicator(seen_blocks, cfg.paragraphs_min_chars)
        key = paragraph_key(index.prefix)
        seen = redis_paragraph_set(cfg, index)
        self.policy = RedisErrorPolicy(
            "fail_open", name="Paragraph seen set", url=cfg.redis_url, secrets=self.secrets, stats=self.stats,
            stats_prefix="dedup/paragraphs/redis_", key=key,
            fail_open_means="blocks are counted as new and items keep their whole text until it is back "
                            "(counted in dedup/paragraphs/store_errors)",
            mode_note="the paragraph seen set always fails open", log=logger)
        try:
            self.policy.call(seen.prepare)  # the layout is checked (or written) now
        except RedisUnavailable:
            pass  # down at start: an outage like any other (the policy logged it); prepared on first use
        except BloomLayoutMismatch as exc:
            raise DedupConfigError(f"DEDUP_PARAGRAPHS_CAPACITY / DEDUP_PARAGRAPHS_ERROR_RATE: {exc}") from None
        self.policy.running = True
        logger.info("Paragraph dedup: blocks of at least %d characters in a Redis Bloom filter, key %r, for %d blocks "
                    "at %g (%.1f MiB of Redis, allocated whole)", cfg.paragraphs_min_chars, key, seen.capacity,
                    seen.error_rate, seen.shard_bits * seen.shards / 8 / 2**20)
        return ParagraphDeduplicator(seen, cfg.paragraphs_min_chars)

    def check(self, url: str, blocks: list[str]) -> ParagraphCheck:
        """The page's blocks checked for repeats and counted; with the seen set away, all taken as new."""
        host = host_of(url)
        try:
            if self.policy is not None:
                check = self.policy.call(self.dedup.check, host, blocks)
            else:
                check = self.dedup.check(host, blocks)
        except Exception as exc:  # Redis away (logged once by the policy) or any other fault: never a lost item
            self._count("store_errors")
            if not isinstance(exc, RedisUnavailable):
                logger.error("Paragraph seen set failed (%s); the blocks of %s are taken as new",
                             describe(exc, self.secrets), url)
            return ParagraphCheck(tuple(blocks), (False,) * len(blocks))
        self._write_stats(host)
        return check

    def _count(self, name: str) -> None:
        self.events[f"paragraphs/{name}"] += 1
        self.stats.set_value(f"dedup/paragraphs/{name}", self.events[f"paragraphs/{name}"])

    def _write_stats(self, host: str) -> None:
        """``dedup/paragraphs/*``: totals and the page's host, copied from the deduplicator's counts."""
        set_value = self.stats.set_value
        for prefix, counts in (("dedup/paragraphs/", self.dedup.total),
                               (f"dedup/paragraphs/host/{host or '-'}/", self.dedup.host_counts(host))):
            set_value(prefix + "blocks", counts.blocks)
            set_value(prefix + "duplicate_blocks", counts.duplicates)
            set_value(prefix + "short_blocks", counts.short)
            set_value(prefix + "duplicate_share", round(counts.duplicate_share, 4))

    def restore(self) -> None:
        """The paragraph Bloom filter of the previous run from ``JOBDIR``; a bad file: logged, counted, kept
        aside, and the set starts empty (blocks of the previous run are then emitted again, never lost).

        A filter saved with another DEDUP_PARAGRAPHS_CAPACITY or DEDUP_PARAGRAPHS_ERROR_RATE is resumed
        with its own sizing, and a WARNING says so (as BloomDupeFilter does with its checkpoint): a Bloom
        filter cannot be resized without its blocks, and one that started anew would count every block
        of the previous run as new. It grows past its capacity, its error rate still bounded.
        """
        from scrapy_dedup.seen import BloomSeenSet, CheckpointError

        path = Path(self.jobdir or "", PARAGRAPHS_CHECKPOINT_NAME)
        if not path.exists():
            return
        try:
            seen = self.dedup.seen = BloomSeenSet.load(path)
        except CheckpointError as exc:
            logger.error("%s: starting with an empty paragraph seen set; blocks of the previous run count as new "
                         "(%s)", exc, where_kept(path, set_aside(path)))
            self.stats.inc_value("dedup/paragraphs/checkpoint_errors")
            return
        given = self.cfg.paragraphs_capacity  # (None: unsized, any capacity the file has will do)
        if (seen.capacity if given else None, seen.error_rate) != (given, self.cfg.paragraphs_error_rate):
            logger.warning("Paragraph seen set: the checkpoint %s was made with DEDUP_PARAGRAPHS_CAPACITY=%d and "
                           "DEDUP_PARAGRAPHS_ERROR_RATE=%g; continuing with those (a Bloom filter cannot be resized "
                           "without its blocks), not with the configured %s and %g; delete the file to start anew "
                           "(the previous run's blocks then count as new)", path, seen.capacity, seen.error_rate,
                           given or "(unset)", self.cfg.paragraphs_error_rate)
        logger.info("Paragraph seen set restored from %s: %s", path, seen.describe())
        self.stats.set_value("dedup/paragraphs/restored", len(seen))

    def save(self) -> None:
        """Checkpoint the local paragraph Bloom filter into ``JOBDIR`` if it changed (atomic); errors logged."""
        seen = self.dedup.seen
        if not getattr(seen, "dirty", False):
            return
        path = Path(self.jobdir or "", PARAGRAPHS_CHECKPOINT_NAME)
        try:
            seen.save(path)  # type: ignore[attr-defined]  # a BloomSeenSet: the memory backend's
        except (OSError, ValueError) as exc:
            logger.error("Could not checkpoint the paragraph seen set to %s: %s", path, exc)
            self.stats.inc_value("dedup/paragraphs/checkpoint_errors")
