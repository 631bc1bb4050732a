"""Kill-safe ``JOBDIR`` resume for Scrapy's own scheduler: the frontier journal, wired into a crawl.

Why: Scrapy's scheduler keeps its disk queue's state from the last clean close
only, and a dupefilter's checkpoint is minutes old; after a SIGKILL the resumed
run trusted both, so requests marked seen but gone with the queue were never
fetched, and pages fetched since the last checkpoint were fetched twice.

:class:`JobdirFrontier` keeps a :class:`~scrapy_dedup.seen.journal.FrontierJournal`
in ``JOBDIR/dedup-frontier.journal``: journaled before the dupefilter marks a request
seen (:meth:`~JobdirFrontier.admit`), marked done when the engine is done with it
(:func:`scrapy_dedup.engine_hook.on_request_done`), compacted at each dupefilter
checkpoint. After an unclean end, Scrapy's queue directory is set aside, the journal's
fingerprints go back into the seen set and every pending request is scheduled again.
docs/reliability.md ("A hard kill with JOBDIR and Scrapy's own scheduler") has the
whole account. Used only with Scrapy's own scheduler (or a subclass) and ``JOBDIR``;
scrapy-redis's scheduler keeps its queue in Redis (:mod:`scrapy_dedup.redis_queue`).
"""
from __future__ import annotations

import errno
import logging
import pickle
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.utils.misc import load_object
from scrapy.utils.request import request_from_dict

from scrapy_dedup._util.files import atomic_write, remove_stale_temporaries, set_aside, where_kept
from scrapy_dedup.duplicates import FRONTIER_SEQ_META, UNJOURNALED_META
from scrapy_dedup.engine_hook import close_spider_soon, on_request_done
from scrapy_dedup.seen.journal import FrontierJournal, JournalError, Replay
from scrapy_dedup.settings import DedupConfigError, logged_already
from scrapy_dedup.url.generation import Generation, GenerationChanged
from scrapy_dedup.url.generation import check as generation_check

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request

logger = logging.getLogger(__name__)

JOURNAL_FILE = "dedup-frontier.journal"
#: what wrote the fingerprints of this JOBDIR (:func:`check_generation`)
GENERATION_FILE = "dedup-generation.json"
#: Scrapy's scheduler's disk queue directory inside JOBDIR
QUEUE_DIR = "requests.queue"
#: request meta key of a journaled request: its sequence number in the frontier journal
META_KEY = FRONTIER_SEQ_META
#: the close reason when JOBDIR's disk is full (:meth:`JobdirFrontier.disk_is_full`)
DISK_FULL_REASON = "dedup_disk_full"
#: what a write to a full disk (or past a quota, or past RLIMIT_FSIZE) raises
_DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def is_disk_full(exc: BaseException) -> bool:
    """An ``OSError`` of a write that found no room (no space, a quota, a file size limit)."""
    return isinstance(exc, OSError) and exc.errno in _DISK_FULL_ERRNOS


def report_disk_full(crawler: "Crawler", jobdir: Any, exc: BaseException) -> bool:
    """Whether ``exc`` is a write to JOBDIR that found no room; if so, the first time in this crawl (whichever
    component met it: the journal, a checkpoint), one ERROR line and the spider closes with ``dedup_disk_full``."""
    if not is_disk_full(exc):
        return False
    if getattr(crawler, "_dedup_disk_full", False):
        return True
    crawler._dedup_disk_full = True  # type: ignore[attr-defined]
    crawler.stats.set_value("dedup/jobdir/disk_full", 1)
    error = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
    logger.error("JOBDIR %s: no room left on its disk (%s: %s): closing the spider with reason %r. The frontier "
                 "journal holds every request admitted so far: free some space and run the crawl again with the "
                 "same JOBDIR to resume it (nothing is lost; the pages in flight are fetched again)",
                 jobdir, type(exc).__name__, error, DISK_FULL_REASON)
    close_spider_soon(crawler, DISK_FULL_REASON)
    return True


def disk_full_reported(crawler: "Crawler") -> bool:
    """Whether a component of this crawl found JOBDIR's disk full (:func:`report_disk_full`)."""
    return bool(getattr(crawler, "_dedup_disk_full", False))


def check_generation(jobdir: str, generation: Generation, *, accept: bool, stores: tuple[str, ...]) -> None:
    """Compare the crawl's fingerprint generation with the one ``JOBDIR`` recorded (:mod:`scrapy_dedup.url.generation`),
    before anything in it is read; record it when the JOBDIR is new (or the change accepted).

    ``stores``: the files in JOBDIR that hold fingerprints besides the journal. A difference over a JOBDIR that
    holds some is one ERROR line and :class:`~scrapy_dedup.settings.DedupConfigError` (nothing in it touched).
    """
    path = Path(jobdir, GENERATION_FILE)
    holds = [name for name in (JOURNAL_FILE, *stores) if (Path(jobdir) / name).is_file()
             and (Path(jobdir) / name).stat().st_size > 0]
    recorded = path.read_bytes() if path.is_file() else None
    try:
        write, warning = generation_check(generation, recorded, holds_keys=bool(holds),
                                          where=f"JOBDIR {jobdir} ({', '.join(holds)})", accept=accept)
    except GenerationChanged as exc:
        logger.error("%s", exc)
        raise logged_already(DedupConfigError(str(exc))) from None
    if warning:
        logger.warning("%s", warning)
    if write:
        Path(jobdir).mkdir(parents=True, exist_ok=True)
        text = generation.to_json() + "\n"
        atomic_write(path, lambda f: f.write(text.encode()))


def uses_scrapys_scheduler(crawler: "Crawler") -> bool:
    """Whether the crawl's ``SCHEDULER`` is Scrapy's own (whose disk queue this module makes kill-safe)."""
    from scrapy.core.scheduler import Scheduler

    try:
        scheduler = load_object(crawler.settings["SCHEDULER"])
    except (ImportError, AttributeError, ValueError, NameError):
        return False
    # the MRO, not issubclass: Scrapy's BaseScheduler metaclass makes any class with the three scheduler
    # methods a "subclass" of Scheduler, scrapy-redis's scheduler (its queue in Redis, not JOBDIR) among them
    return isinstance(scheduler, type) and Scheduler in scheduler.__mro__


class JobdirFrontier:
    """The frontier journal of one crawl in ``JOBDIR`` (see the module doc); owned by our dupefilter."""

    def __init__(self, crawler: "Crawler", jobdir: str):
        """The owner compacts the journal (:meth:`compact`): on its clock for a seen set that keeps every mark
        itself (Redis), after each of its checkpoints for the Bloom filter."""
        self.crawler = crawler
        self._watching = False
        self.stats = crawler.stats
        self.jobdir = Path(jobdir)
        self.jobdir.mkdir(parents=True, exist_ok=True)
        self.path = self.jobdir / JOURNAL_FILE
        removed = remove_stale_temporaries(self.jobdir)
        if removed:
            logger.info("JOBDIR %s: removed %d temporary file(s) of checkpoints a kill interrupted (%s)",
                        self.jobdir, len(removed), ", ".join(p.name for p in removed))
            self.stats.inc_value("dedup/jobdir/stale_temporaries_removed", len(removed))
        self.journal = FrontierJournal(self.path)
        try:
            replay = self.journal.open()
        except JournalError as exc:
            raise JournalError(f"{exc}: refusing to resume from it (move it away to start the crawl over)") from None
        self.replay: Replay | None = replay
        #: fingerprint -> old sequence number of the pending requests to schedule again (they pass the seen set once)
        self._readmit: dict[bytes, int] = {}
        self._unserializable_logged = False
        #: JOBDIR's disk filled up: nothing is written any more, the spider is closing (:meth:`disk_is_full`)
        self.disk_full = False
        if replay.damaged or replay.cut_bytes:
            self.stats.inc_value("dedup/jobdir/journal_cut_bytes", replay.cut_bytes)
        if replay.damaged:
            logger.error("JOBDIR %s: the frontier journal %s is damaged %d bytes before its end; what came after "
                         "the damage is ignored (requests admitted there may be lost)", self.jobdir, self.path,
                         replay.cut_bytes)
        if not replay.clean:
            self._set_aside_the_queue()
        crawler.signals.connect(self._request_scheduled, signal=signals.request_scheduled)
        crawler.signals.connect(self._spider_opened, signal=signals.spider_opened)

    @property
    def fingerprints(self) -> list[bytes]:
        """Fingerprints admitted since the journal's last compaction (the seen set must hold them)."""
        return self.replay.fingerprints if self.replay is not None else []

    def _set_aside_the_queue(self) -> None:
        assert self.replay is not None
        queue = self.jobdir / QUEUE_DIR
        had_queue = queue.exists()
        if had_queue:
            shutil.rmtree(queue, ignore_errors=True)
        pending = self.replay.pending
        logger.warning(
            "JOBDIR %s: the previous run did not close cleanly (killed?), so Scrapy's request queue from it "
            "cannot be trusted%s; %d requests it had admitted and not finished are scheduled again (those in "
            "flight at the kill are fetched a second time); the seen set is given back the %d fingerprints admitted "
            "since the journal's last compaction (dedup/jobdir/readmitted)",
            self.jobdir, " and was removed" if had_queue else "", len(pending), len(self.replay.fingerprints))
        self.stats.inc_value("dedup/jobdir/unclean_resumes")

    # --- admitting ---

    def admit(self, request: "Request", fingerprint: bytes) -> int | None:
        """Journal ``request`` before it is marked seen; its sequence number (None: it cannot be serialized, or
        the disk is full: then :attr:`disk_full` is True and the caller must not schedule it)."""
        if self.disk_full:
            return None
        payload = self._serialize(request)
        if payload is None:
            return None
        try:
            seq = self.journal.admitted(fingerprint, payload)
        except OSError as exc:
            self.disk_is_full(exc)
            return None
        request.meta[META_KEY] = seq
        self.stats.inc_value("dedup/jobdir/admitted")
        return seq

    def disk_is_full(self, exc: OSError) -> None:
        """A write to JOBDIR found no room: one ERROR line, then the spider closes with ``dedup_disk_full``.

        From here on nothing is written to JOBDIR: no request is admitted (the dupefilter drops new ones:
        the requests whose responses led to them are never marked done, so a resume fetches and parses those
        again), no request is marked done, no checkpoint is written and the close is not recorded as clean,
        so the next run resumes from the journal as after a kill. Other errors are raised again.
        """
        if not report_disk_full(self.crawler, self.jobdir, exc):
            raise exc
        self.disk_full = True

    def withdraw(self, request: "Request", seq: int | None) -> None:
        """The seen set said "seen" after all: the journaled admission does not stand."""
        if seq is None or self.disk_full:
            return
        try:
            self.journal.done(seq)
        except OSError as exc:
            self.disk_is_full(exc)
            return
        self.stats.inc_value("dedup/jobdir/admitted", -1)
        if request.meta.get(META_KEY) == seq:
            del request.meta[META_KEY]

    def take_readmission(self, fingerprint: bytes) -> int | None:
        """The old sequence number if ``fingerprint`` is a pending request being scheduled again, once."""
        return self._readmit.pop(fingerprint, None) if self._readmit else None

    def _request_scheduled(self, request: "Request", spider: Any = None) -> None:
        if request.dont_filter and not request.meta.get(UNJOURNALED_META):  # enqueued unconditionally
            self.admit(request, b"")

    def _serialize(self, request: "Request") -> bytes | None:
        try:  # what Scrapy's pickle disk queues store
            return pickle.dumps(request.to_dict(spider=self.crawler.spider), protocol=4)
        except Exception as exc:  # a callback that is not a spider method, an unpicklable meta value
            self.stats.inc_value("dedup/jobdir/unserializable")
            if not self._unserializable_logged:
                self._unserializable_logged = True
                logger.warning("JOBDIR: cannot journal %s (%s: %s), so it would be lost if the crawl were killed "
                               "(Scrapy's disk queue cannot hold it either); counted in "
                               "dedup/jobdir/unserializable, not logged again", request, type(exc).__name__, exc)
            return None

    # --- resuming ---

    def watch_engine(self) -> None:
        """Mark each request done when the engine is done with it (called by the dupefilter's ``open``)."""
        self._watching = self._watching or on_request_done(self.crawler, self._done,
                                                           who="The kill-safe JOBDIR frontier")

    def _spider_opened(self, spider: Any) -> None:
        if not self._watching:
            return
        replay, self.replay = self.replay, None  # the replay's memory is not needed past this point
        if replay is None or replay.clean:
            return
        engine = self.crawler.engine
        readmitted = failed = 0
        for old_seq, (fingerprint, payload) in replay.pending.items():
            try:
                request = request_from_dict(pickle.loads(payload), spider=spider)
            except Exception as exc:
                failed += 1
                logger.error("JOBDIR: a journaled request cannot be read back (%s: %s); it is not scheduled "
                             "again", type(exc).__name__, exc)
                continue
            if fingerprint:
                # under this run's fingerprinter: a new generation's (DEDUP_ACCEPT_NEW_GENERATION) differs from
                # the journaled one, and a request readmitted under the old one would never be marked done
                fingerprint = self.crawler.request_fingerprinter.fingerprint(request)
                self._readmit[fingerprint] = old_seq
                engine.crawl(request)
                if self._readmit.pop(fingerprint, None) is not None:  # filtered anyway (another scheduler?)
                    continue
            else:
                engine.crawl(request)  # dont_filter: journaled anew at request_scheduled
            self.journal.done(old_seq)  # replaced by the new admission
            readmitted += 1
        self.stats.inc_value("dedup/jobdir/readmitted", readmitted)
        if failed:
            self.stats.inc_value("dedup/jobdir/unreadable", failed)

    # --- finishing ---

    def _done(self, request: "Request") -> None:
        seq = request.meta.get(META_KEY) if request.meta else None
        if seq is not None and not self.disk_full:  # (disk full: it stays pending, what it led to may be lost)
            try:
                self.journal.done(seq)
            except OSError as exc:
                self.disk_is_full(exc)

    def compact(self) -> None:
        """After a seen-set checkpoint: keep only the pending requests in the journal."""
        if self.disk_full:
            return
        try:
            kept = self.journal.compact()
        except OSError as exc:
            self.disk_is_full(exc)
            return
        logger.debug("JOBDIR: frontier journal compacted to %d pending requests", kept)

    def close(self) -> None:
        """At the dupefilter's close, after Scrapy wrote its queue state: compact, then record the clean close
        (not after a full disk: the next run then resumes from the journal, Scrapy's queue set aside)."""
        try:
            self.compact()
        finally:
            try:
                self.journal.close(clean=not self.disk_full)
            except OSError as exc:
                self.disk_is_full(exc)
                self.journal.close(clean=False)


#: the memory content index's checkpoint in JOBDIR
CHECKPOINT_NAME = "dedup-content.idx"
#: the content index's lines, under the logger they always had
content_logger = logging.getLogger("scrapy_dedup.extensions")


class IndexCheckpoint:
    """The memory content index (``store``) of a crawl in ``JOBDIR``: restored when the spider opens, saved
    by ``DedupExtension.checkpoint`` (every ``DEDUP_CHECKPOINT_SECONDS`` and at close) when it changed."""

    def __init__(self, crawler: Crawler, store: Any, jobdir: str):
        self.crawler = crawler
        self.stats = crawler.stats
        self.store = store
        self.path = Path(jobdir, CHECKPOINT_NAME)
        self.jobdir = jobdir
        self._saved_pages = -1  # pages in the store at the last checkpoint (skip unchanged saves)

    def restore(self) -> None:
        """The previous run's index, if any; an unreadable one is logged, counted and set aside."""
        path = self.path
        if path.exists():
            try:
                self.store.load_into(path)
                content_logger.info("Content index restored from %s (%d pages)", path, len(self.store))
                self.stats.set_value("dedup/content/restored", len(self.store))
                self._saved_pages = len(self.store)
            except Exception as exc:  # a corrupt checkpoint must not pass silently
                content_logger.error("Content index checkpoint %s is unreadable (%s): starting with an empty "
                                     "content index; near duplicates of pages from the previous run will be kept "
                                     "(%s)", path, exc, where_kept(path, set_aside(path)))
                self.stats.inc_value("dedup/content/checkpoint_errors")

    def save(self) -> None:
        """Save the index now if it changed (atomic); a failed write is logged and counted, never raised."""
        pages = len(self.store)
        if pages == self._saved_pages:
            return
        path = self.path
        try:
            self.store.save(path)
        except (OSError, ValueError) as exc:
            if report_disk_full(self.crawler, self.jobdir, exc):
                return
            content_logger.error("Could not checkpoint the content index to %s: %s", path, exc)
            self.stats.inc_value("dedup/content/checkpoint_errors")
            return
        self._saved_pages = pages
        self.stats.inc_value("dedup/content/checkpoints")
