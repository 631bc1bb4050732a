"""The offline audit: stream a dump through the content engine, then write the outputs.

Memory: page texts live only while a page is fingerprinted (in a worker with
``--jobs N``); what stays is, per page, its URL, its line number, and a few
bytes of verdict in typed arrays (kind, matched page, distance), plus the
engine's fingerprints and index. The HTML sample needs the texts of a few
pairs: they are read again from the dump in a second pass, by line number (a dump
that cannot be read twice, on stdin or a pipe, is first spooled to a temporary file,
see :func:`spool_dump`).

Parallelism: with ``jobs > 1``, batches of raw lines go to worker processes
that parse JSON, extract the text and fingerprint it; the decisions (index
look-ups and inserts) stay in this process, in dump order, so the result is
the same for any ``jobs`` (the first page of a cluster in the dump is kept).
At most ``2 * jobs`` batches are in flight, so a fast reader never buffers
the dump in memory.

Representatives: the page kept is the first of its cluster in the dump, and the
outputs name each cluster by the member ``cfg.representative`` prefers
(:mod:`scrapy_dedup.content.representative`; from URLs and timestamps only, a page's
``rel="canonical"`` link is not read here). ``newest`` reads a WARC record's
``WARC-Date``, a JSON Lines record's ``timestamp_field``, or, without one, the
record's place in the dump (a crawl writes its feed in fetch order).
"""
from __future__ import annotations

import math
import os
import pickle
import random
import stat
import sys
import tempfile
import time
from array import array
from bisect import bisect_left
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack, suppress
from dataclasses import asdict, replace
from functools import partial
from hashlib import blake2b
from typing import TYPE_CHECKING, Any, NamedTuple, Optional, cast

import numpy as np

from scrapy_dedup._util.batching import batches
from scrapy_dedup.audit.boilerplate import RECENT_PAGES, BoilerplateDecider, PageBlocks, RecentPageWords, \
    learn_templates, learns_boilerplate
from scrapy_dedup.audit.config import AuditConfig
from scrapy_dedup.audit.dump import BadLines, FieldNames, decode_record, input_items, open_input, page_record, \
    parse_record
from scrapy_dedup.audit.html import render_html
from scrapy_dedup.audit.methods import Decision, SimhashMethod, make_method
from scrapy_dedup.audit.mirrors import MirrorReport, explain_mirrors, mine_dust_command
from scrapy_dedup.audit.output import OutputError, OutputFile, json_text, silence_stdout, stream_is_utf8, \
    write_line
from scrapy_dedup.audit.pairs import categorize, word_diff
from scrapy_dedup.audit.paragraphs import ParagraphAudit, block_digests_of
from scrapy_dedup.audit.records import BadLine, DumpError, PageRecord
from scrapy_dedup.audit.result import AuditResult, ClusterSummary, SamplePair
from scrapy_dedup.content.compact import StringList
from scrapy_dedup.content.extract import Extraction, ExtractionPolicy, extract_text
from scrapy_dedup.content.judge import PageVerdict
from scrapy_dedup.content.params import ENGINE_PARAMS
from scrapy_dedup.content.paragraphs import text_blocks
from scrapy_dedup.content.representative import Member, member_key, parse_timestamp
from scrapy_dedup.url.mining import HASH_FIELDS, DustMiner, MiningConfig
from scrapy_dedup.url.preference import url_preference

if TYPE_CHECKING:  # the progress bar's type; tqdm itself is imported where the bar is made
    from tqdm import tqdm

__all__ = ["run_report", "audit_dump", "AuditResult", "KIND_CODES"]

BATCH_LINES = 64
BATCH_BYTES = 1 << 20
KIND_CODES = {"unique": 0, "exact": 1, "near": 2, "degenerate": 3}
KINDS = {v: k for k, v in KIND_CODES.items()}
LARGEST_CLUSTERS = 20
MEMBERS_SHOWN = 50


# --- the per-page work (in this process or a worker) ----------------------------------------------

class PageWorker:
    """Turns one input item into ``("page", number, url, fingerprint, timestamp, digests, mining)`` or a bad line.
    Picklable by its config. ``timestamp`` (``newest`` only, else None): seconds, NaN when the record has no
    usable one. ``digests`` (``paragraphs`` only, else None): the page's block digests (audit/paragraphs.py).
    ``mining`` (``feeds_miner`` only, else None): what the DUST miner reads of the JSON Lines record, its
    object less its ``html`` and that HTML's extraction (:func:`feed_miner`), so that the mirrors report
    mines the dump without reading it again.

    An item is a JSON Lines line (bytes, parsed here), a :class:`PageRecord` (a WARC
    record's payload, extracted here), or a decision the WARC reader took already (a
    tuple: ``("skip", ...)``, ``("revisit", ...)``, ``("bad", ...)``), passed on.
    """

    def __init__(self, cfg: AuditConfig, feeds_miner: bool = False):
        self.cfg = cfg
        self.fields = FieldNames(cfg.url_field, cfg.html_field, cfg.text_field, cfg.timestamp_field)
        self.newest = cfg.representative == "newest"
        self.method = make_method(cfg)
        self.policy = ExtractionPolicy.from_values(asdict(cfg))
        self.blocks = learns_boilerplate(cfg)
        self.paragraphs = bool(cfg.paragraphs)
        self.feeds_miner = feeds_miner
        self.recent_words = RecentPageWords()  # a page read again (a mirror) is not tokenized again

    def text_of(self, record: PageRecord) -> str:
        if not record.is_html:
            return record.content  # type: ignore[return-value]
        return extract_text(record.content, self.policy, encoding=record.encoding).text

    def blocks_of(self, record: PageRecord) -> list[str]:
        """The page's main text cut at block elements (a text record: one block)."""
        return self.titled_blocks_of(record)[0]

    def titled_blocks_of(self, record: PageRecord) -> tuple[list[str], str | None]:
        """:meth:`blocks_of` and the page's ``<title>`` (None without one, and for a text record)."""
        if not record.is_html:
            return [" ".join(str(record.content).split())], None
        extraction = extract_text(record.content, self.policy, encoding=record.encoding, blocks=True)
        return extraction.blocks or [], extraction.title

    def process(self, number: int, raw: Any) -> tuple:
        record: Any = None
        if isinstance(raw, PageRecord):
            parsed = raw
        elif isinstance(raw, tuple):
            return raw
        else:
            record = decode_record(number, raw)
            parsed = record if isinstance(record, tuple) else page_record(  # type: ignore[assignment]
                number, record, self.fields)
            if not isinstance(parsed, PageRecord):
                bad, keys = parsed
                return ("bad", bad, keys)
        fingerprint: Any
        digests = None
        mining = None
        try:
            blocks: Optional[list[str]] = None
            title = None
            if self.blocks or (parsed.is_html and (self.paragraphs or self.feeds_miner)):
                # one extraction: the blocks, their title, and the text they join to
                blocks, title = self.titled_blocks_of(parsed)
            if self.blocks:
                # blocks are asked for with the simhash method only (learns_boilerplate): its fingerprinter
                fingerprint = PageBlocks.of(cast(SimhashMethod, self.method).fingerprinter, blocks or [], title,
                                            self.recent_words)
            elif blocks is not None:
                fingerprint = self.method.fingerprint(" ".join(blocks))
            else:
                fingerprint = self.method.fingerprint(self.text_of(parsed))
            if self.paragraphs:  # a text record's blocks are its lines
                digests = block_digests_of(blocks if parsed.is_html and blocks is not None
                                           else text_blocks(str(parsed.content)), self.cfg)
            if self.feeds_miner and isinstance(record, dict):
                mining = miner_record(record, parsed, blocks, title)
        except Exception as exc:  # hostile markup is a bad line, never the end of the run
            return ("bad", BadLine(number, f"text extraction failed ({type(exc).__name__})"), ())
        return ("page", number, parsed.url, fingerprint, self.timestamp_of(number, raw, parsed), digests, mining)

    def timestamp_of(self, number: int, raw: Any, record: PageRecord) -> Optional[float]:
        if not self.newest:
            return None
        if record.timestamp is None and not isinstance(raw, PageRecord) and self.fields.timestamp is None:
            return float(number)  # a JSON Lines dump without a time field: its order is the fetch order
        return _seconds(record.timestamp)

    def process_batch(self, batch: list) -> list:
        return [self.process(number, raw) for number, raw in batch]


def miner_record(record: dict, page: PageRecord, blocks: Optional[list[str]], title: Optional[str]) -> tuple:
    """What :meth:`DustMiner.add_record` reads of a JSON Lines record (``feeds_miner``): the object less its
    ``html``, with that HTML's blocks and title (None: the miner reads a record's ``text`` first, then none is
    needed); :func:`_feed` makes them the extraction (not its text: the blocks, spooled once, join to it)."""
    slim = {key: value for key, value in record.items() if key != "html"}
    if isinstance(record.get("text"), str) or not page.is_html or blocks is None:
        return slim, None, None
    return slim, blocks, title


def _feed(miner: DustMiner, mining: tuple, fingerprint: Any, url_of: Optional[Callable[[int], str]] = None) -> None:
    """Give ``miner`` one page record the audit read (:func:`miner_record`), with the page's words if tokenized;
    ``url_of`` (page number -> URL): the record carries the audit's first pass's verdict, which is the miner's
    (:class:`SharedJudgements`), given as the crawl log gives it."""
    if url_of is not None:
        miner.add_record(SharedJudgements.log_record(mining[0], mining[3], url_of))
        return
    record, blocks, title = mining[:3]
    extraction = Extraction(None, False, blocks, title) if blocks is not None else None
    miner.add_record(record, extraction, fingerprint.words if isinstance(fingerprint, PageBlocks) else None)


def feeds_miner(cfg: AuditConfig, miner: Optional[DustMiner], input_format: str) -> bool:
    """Whether the audit's reading of the dump is the reading of ``miner`` (``scrapy-dedup mine-dust`` on it):
    JSON Lines with the fields it reads (``url``, ``html``, ``text``), extracted as it extracts them."""
    if miner is None or input_format != "jsonl":
        return False
    if (cfg.url_field, cfg.html_field, cfg.text_field) != ("url", "html", "text"):
        return False
    mine = miner.config.extraction
    return (tuple(cfg.strip_tags), tuple(cfg.strip_selectors), cfg.max_bytes) == (
        tuple(mine.strip_tags), tuple(mine.strip_selectors), mine.max_bytes)


class SharedJudgements:
    """The DUST miner's judgement of each page, taken from the audit's first pass (``learn_templates``, told
    each verdict at the URL strictness) instead of judging the page a third time.

    The miner judges a record that brings its HTML and no evidence of its own (:data:`MINER_EVIDENCE`) with
    the crawl's page judge at the engine's default parameters and its ``min_words``, keyed by URL; the first
    pass judges every page with the same rule, keyed by its number. The two judges take the same decisions
    when their parameters are the same (:meth:`applies`) and the keys map one to one: every record's URL its
    own (checked over the whole dump, by a 64-bit hash of each URL kept during the first pass: two URLs of one
    hash count as a repeat) and every record one the miner judges from its blocks. Else the miner judges
    each page itself, as before. The verdict reaches the miner as the crawl log writes it (``cluster``, and
    ``page`` when the URL-level sameness names another page; ``kind: degenerate``), with URLs for names."""

    #: fields of a record that the miner reads as evidence of sameness instead of judging the page
    MINER_EVIDENCE = frozenset({"kind", "words", "cluster", "page", "basis", "normal_hash", "simhash", "text",
                                *HASH_FIELDS})
    #: the fields the miner still reads of a judged record
    KEPT_FIELDS = ("url", "request_url", "redirect_urls")

    def __init__(self) -> None:
        self.pending: dict[int, Optional[tuple[int, int]]] = {}  # page number -> (cluster, page) numbers
        self.url_hashes = array("q")
        self.usable = True

    @staticmethod
    def applies(cfg: AuditConfig, miner: Optional[DustMiner]) -> bool:
        """Whether the miner's page judge is the first pass's: every engine parameter at its default (as the
        miner's, :meth:`DustMiner.page_judge`), the miner's ``min_words`` the audit's, boilerplate learnt."""
        if miner is None or not learns_boilerplate(cfg) or cfg.allow_approximate:
            return False
        own = ("min_words", "max_bytes", "strip_tags", "strip_selectors", "paragraphs", "paragraphs_min_chars")
        return miner.config.min_words == cfg.min_words and all(
            getattr(cfg, param.key) == param.default for param in ENGINE_PARAMS if param.key not in own)

    def judged(self, number: int, page: PageVerdict) -> None:
        """The first pass's verdict of page ``number`` (its judge's keys are the pages' numbers, as text)."""
        name = page.page("url")
        self.pending[number] = None if page.verdict.kind == "degenerate" or name is None else (
            int(page.verdict.cluster or name), int(name))

    def attach(self, number: int, item: tuple) -> tuple:
        """``item`` (a page of pass one, number ``number``) with its verdict's names added to its miner record."""
        names = self.pending.pop(number, None)
        mining = item[6]
        if mining is None:
            return item
        record, blocks, title = mining
        url = item[2]
        if blocks is None or record.get("url") != url or not self.MINER_EVIDENCE.isdisjoint(record):
            self.usable = False
        self.url_hashes.append(int.from_bytes(blake2b(url.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                                              "little", signed=True))
        return item[:6] + ((record, blocks, title, names),)

    def valid(self) -> bool:
        """After the first pass: whether the miner may take its verdicts (every record judged from its blocks,
        no URL twice)."""
        hashes = np.frombuffer(self.url_hashes, dtype=np.int64) if len(self.url_hashes) else np.zeros(0, np.int64)
        return self.usable and len(np.unique(hashes)) == len(hashes)

    @classmethod
    def log_record(cls, record: dict, names: Optional[tuple[int, int]], url_of: Callable[[int], str]) -> dict:
        """The record the miner reads the verdict from, as a crawl log line (``url_of``: a page number's URL)."""
        fed = {key: record[key] for key in cls.KEPT_FIELDS if key in record}
        if names is None:
            fed["kind"] = "degenerate"
            return fed
        cluster, page = names
        fed["cluster"] = url_of(cluster)
        if page != cluster:  # the URL-level sameness names a page of its own: counted in reduced_verdicts
            fed["page"] = url_of(page)
        return fed


_WORKER: Optional[PageWorker] = None


def _seconds(value: Any) -> float:
    """A record's time in seconds, NaN when it has none or it cannot be read (counted, ranked after the dated)."""
    if value is None:
        return math.nan
    try:
        return parse_timestamp(value)
    except ValueError:
        return math.nan


def _init_worker(cfg: AuditConfig, mining: bool) -> None:
    global _WORKER
    _WORKER = PageWorker(cfg, mining)


def _work(batch: list) -> list:
    assert _WORKER is not None
    return _WORKER.process_batch(batch)


def _line_batches(lines: Iterable[tuple[int, bytes]]) -> Iterator[list]:
    """Batches of at most ``BATCH_LINES`` lines and about ``BATCH_BYTES`` bytes (38 KB pages: 26 a batch).

    A batch is one task for a worker: large enough that the task overhead (about 0.1 ms)
    is small against the pages' work (2-3 ms each), small enough that the batches in
    flight (``2 * jobs``, each pickled once more on its way) stay a few MB.
    """
    batch: list = []
    size = 0
    for item in lines:
        batch.append(item)
        size += _weight(item[1])
        if len(batch) >= BATCH_LINES or size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _weight(item: Any) -> int:
    """Bytes of an item on its way to a worker: a raw line, a WARC payload, or a small decided tuple."""
    if isinstance(item, PageRecord):
        return len(item.content)
    return len(item) if isinstance(item, (bytes, bytearray)) else 64


def _results(cfg: AuditConfig, lines: Iterable[tuple[int, bytes]], jobs: int, mining: bool = False) -> Iterator[list]:
    """Processed batches in dump order; bounded look-ahead with workers."""
    if jobs <= 1:
        worker = PageWorker(cfg, mining)
        for batch in batches(lines, BATCH_LINES):
            yield worker.process_batch(batch)
        return
    with ProcessPoolExecutor(max_workers=jobs, initializer=_init_worker, initargs=(cfg, mining)) as pool:
        pending: deque = deque()
        for batch in _line_batches(lines):
            pending.append(pool.submit(_work, batch))
            if len(pending) >= 2 * jobs:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


# --- the run --------------------------------------------------------------------------------------

class _Pages:
    """Per-page state in typed arrays (17 bytes per page) plus the URLs (UTF-8 in one buffer, 8 bytes each more);
    with ``newest``, 8 bytes more for each page's timestamp (NaN: none)."""

    def __init__(self, dated: bool = False) -> None:
        self.urls = StringList()
        self.lines = array("q")
        self.kinds = array("b")
        self.matched = array("i")  # index of the kept page a duplicate matched, else -1
        self.distances = array("f")  # bits, or 1 - Jaccard (float32: a fraction of num_perm, 4 digits reported)
        self.text_lines: dict[int, int] = {}  # a WARC revisit's index -> the record number its text is read from
        self.stamps: Optional[array] = array("d") if dated else None
        self.undated = 0  # pages without a usable timestamp (with ``newest``)

    def __len__(self) -> int:
        return len(self.urls)

    def add(self, url: str, line: int, kind: str, matched: int, distance: float,
            stamp: Optional[float] = None) -> None:
        if self.stamps is not None:
            stamp = math.nan if stamp is None else stamp
            self.stamps.append(stamp)
            self.undated += math.isnan(stamp)
        self.urls.append(url)
        self.lines.append(line)
        self.kinds.append(KIND_CODES[kind])
        self.matched.append(matched)
        self.distances.append(distance)

    def index_of_line(self, line: int) -> Optional[int]:
        """The page read from line (or record) ``line``, if it is one (numbers only grow along the input)."""
        i = bisect_left(self.lines, line)
        return i if i < len(self.lines) and self.lines[i] == line else None

    def text_line(self, index: int) -> int:
        return self.text_lines.get(index, self.lines[index])

    def copy_of(self, target: int) -> Any:
        """The decision for an identical copy of page ``target`` (a WARC revisit): what the engine says of its twin.

        The copy of a kept page is its exact duplicate; the copy of a duplicate matches
        what that one matched (the engine keeps kept pages only); a degenerate page's copy
        is degenerate.
        """
        kind = KINDS[self.kinds[target]]
        if kind == "unique":
            return Decision("exact", target, 0.0)
        if kind in ("exact", "near"):
            return Decision(kind, self.matched[target], float(self.distances[target]))
        return Decision("degenerate", -1, 0.0)


def _progress(mode: str, total_bytes: Optional[int]) -> Optional["tqdm[Any]"]:
    enabled = mode == "always" or (mode == "auto" and sys.stderr.isatty())
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency; a broken install only loses the bar
        return None
    return tqdm(total=total_bytes, unit="B", unit_scale=True, desc="reading dump", disable=not enabled,
                file=sys.stderr, dynamic_ncols=True, mininterval=0.5)


def audit_dump(path: str, cfg: AuditConfig, *, jobs: int = 1, strict: bool = False,
               progress: str = "never", want_samples: bool = True, pairs_out: Any = None,
               all_pairs: bool = False, miner: Optional[DustMiner] = None) -> tuple[AuditResult, _Pages, Any]:
    """Run the engine over the dump at ``path``; returns the result, the per-page state and the method.
    ``miner``: a DUST miner fed every page record in dump order when :func:`feeds_miner` (the mirrors report
    then mines from it: the dump is read once)."""
    method = make_method(cfg)
    # lshbloom sizes its filter for the dump when the dump can be counted first (a second read)
    decider = method.decider(count_lines(path) if cfg.method == "lshbloom" and can_read_twice(path) else None)
    started = time.perf_counter()  # the run's wall time: both passes
    pages = _Pages(dated=cfg.representative == "newest")
    paragraphs = ParagraphAudit(cfg) if cfg.paragraphs else None
    size = None
    if path != "-":
        try:
            info = os.stat(path)
            size = info.st_size if stat.S_ISREG(info.st_mode) else None  # a pipe's size says nothing
        except OSError:
            size = None
    opened = ExitStack()  # closes the dump (and what open_input opened under it) after the loop
    source = opened.enter_context(open_input(path))
    items, unit, reader = input_items(source, max_bytes=cfg.max_bytes)
    bad = BadLines(unit=unit)
    stream = source.stream
    bar = _progress(progress, size)
    raw_pos = getattr(stream, "fileobj", stream)  # gzip: progress over compressed bytes
    last_pos = 0
    lines_read = 0
    parsed: Counter[str] = Counter()  # "page": records extracted and fingerprinted (each once, whatever the passes)
    feeding = feeds_miner(cfg, miner, source.format)
    judged_by_pass_one = False  # the miner takes pass one's verdicts (SharedJudgements)
    results = _counted(_results(cfg, items, jobs, feeding), parsed)
    if learns_boilerplate(cfg):
        assert isinstance(method, SimhashMethod)  # learns_boilerplate: the simhash method only
        # two passes (audit/boilerplate.py) over one parse: pass one reads the dump, spools what each record
        # gave and counts every host's template; pass two judges the spooled pages with it
        spool = opened.enter_context(tempfile.TemporaryFile(prefix="scrapy-dedup-pass-"))
        shared = SharedJudgements() if feeding and SharedJudgements.applies(cfg, miner) else None
        size = RECENT_PAGES if jobs <= 1 else 0  # (a worker's words come back as new objects with each batch)
        learner = learn_templates(cfg, method.fingerprinter, _spooling(results, spool, shared, SpooledWords(size)),
                                  shared.judged if shared is not None else None)
        results = _unspooled(spool, SpooledWords(size))
        decider = BoilerplateDecider(cfg, method.fingerprinter, learner)
        judged_by_pass_one = shared is not None and shared.valid()

    def add_bad(bad_line: BadLine, keys: tuple = ()) -> None:
        if strict:
            raise DumpError(f"{unit} {bad_line.line}: {bad_line.reason} (--strict)")
        bad.add(bad_line, keys)

    try:
        for batch in results:
            for item in batch:
                lines_read += 1
                tag = item[0]
                if tag == "bad":
                    _, bad_line, keys = item
                    add_bad(bad_line, tuple(keys))
                    continue
                if tag == "skip":  # a WARC response that is not a page: counted apart, as the crawl does
                    decider.skip(item[2])
                    continue
                index = len(pages)
                if tag == "revisit":  # a WARC revisit: its page's payload again, at its own URL
                    _, number, url, target_line, date = item
                    target = pages.index_of_line(target_line)
                    if target is None:
                        add_bad(BadLine(number, f"revisit of a record that could not be fingerprinted "
                                                f"({unit} {target_line})"))
                        continue
                    verdict = pages.copy_of(target)
                    decider.count_copy(index, verdict)
                    if paragraphs is not None:
                        paragraphs.copy(index, url, target)
                    pages.add(url, number, verdict.kind, verdict.matched, verdict.distance,
                              _seconds(date) if pages.stamps is not None else None)
                    pages.text_lines[index] = pages.text_line(target)
                    if pairs_out is not None and verdict.matched >= 0:
                        pairs_out.write(index, verdict.matched, verdict.distance, verdict.kind, pages)
                    continue
                _, number, url, fingerprint, stamp, digests, mining = item
                if mining is not None:  # the miner reads the page as mine-dust does, from this one parse
                    assert miner is not None
                    _feed(miner, mining, fingerprint,
                          partial(_url_of, pages, index, url) if judged_by_pass_one else None)
                verdict = decider.check(index, url, fingerprint)
                if paragraphs is not None:
                    paragraphs.check(index, url, digests)
                pages.add(url, number, verdict.kind, verdict.matched, verdict.distance, stamp)
                if pairs_out is not None:
                    if all_pairs and verdict.kind != "degenerate":
                        for other, distance, kind in decider.all_matches(index, fingerprint):
                            pairs_out.write(index, other, distance, kind, pages)
                    elif verdict.matched >= 0:  # a duplicate whose kept page is named (lshbloom: exact only)
                        pairs_out.write(index, verdict.matched, verdict.distance, verdict.kind, pages)
                decider.commit(index, fingerprint, verdict)
            if bar is not None and size:
                try:
                    pos = raw_pos.tell()
                except (OSError, ValueError, AttributeError):
                    pos = last_pos
                bar.update(max(0, pos - last_pos))
                last_pos = pos
    finally:
        if bar is not None:
            bar.close()
        opened.close()
    if lines_read and bad.count == lines_read:
        hint = "\n".join(bad.describe(FieldNames(cfg.url_field, cfg.html_field, cfg.text_field)))
        raise DumpError(f"no {unit} is a usable page record:\n{hint}")
    if reader is not None:
        lines_read = reader.counts["records"]  # every record, also those only counted (requests, redirects, ...)
    result = AuditResult(source=path, config=cfg, report=decider.report(), bad_lines=bad,
                         lines_read=lines_read, elapsed=time.perf_counter() - started, jobs=jobs, unit=unit,
                         pages_parsed=parsed["page"],
                         input_format=source.format, input_counts=dict(reader.counts) if reader is not None else {},
                         undated=pages.undated, paragraphs=paragraphs.summary() if paragraphs is not None else None)
    _summarize(result, pages, cfg, want_samples)
    return result, pages, decider


def _url_of(pages: _Pages, index: int, url: str, number: int) -> str:
    """The URL of page ``number`` while page ``index`` (at ``url``) is judged: it or one before it."""
    return url if number == index else pages.urls[number]


def _counted(results: Iterable[list], counts: Counter) -> Iterator[list]:
    """``results`` as they come, each item counted by its tag in ``counts`` (``page``: a record parsed)."""
    for batch in results:
        counts.update(item[0] for item in batch)
        yield batch


def _spooling(results: Iterable[list], spool: Any, shared: Optional[SharedJudgements] = None,
              words: Optional[SpooledWords] = None) -> Iterator[tuple[str, Any]]:
    """Pass one: (url, fingerprint) of every page, in dump order, each batch of ``results`` pickled into
    ``spool`` once pass one judged it (bad lines, skips and revisits too: pass two reports them; a page's
    words with the block hashes pass one computed, or with ``words``, a reference to the same words spooled
    lately; with ``shared``, each page's miner record with pass one's verdict)."""
    number = 0
    for batch in results:
        first = number
        for item in batch:
            if item[0] == "page":
                yield item[2], item[3]
                number += 1
        if shared is not None:
            pages = iter(range(first, number))
            batch = [shared.attach(next(pages), item) if item[0] == "page" else item for item in batch]
        if words is not None:
            batch = [words.spooled(item) for item in batch]
        pickle.dump(batch, spool, protocol=pickle.HIGHEST_PROTOCOL)


def _unspooled(spool: Any, words: Optional[SpooledWords] = None) -> Iterator[list]:
    """Pass two: the batches pass one spooled, in order (no record parsed again); ``words``: the reader of the
    references :func:`_spooling` wrote with its own."""
    spool.seek(0)
    while True:
        try:
            batch = pickle.load(spool)
        except EOFError:
            return
        yield batch if words is None else [words.read(item) for item in batch]


class _SameWords(NamedTuple):
    """In the spool, a page whose words were spooled lately: their number, and the page less them."""

    number: int
    page: PageBlocks


class SpooledWords:
    """A page's words (:class:`~scrapy_dedup.content.boilerplate.PageWords`) spooled once while they are among
    the last ``size`` words spooled: a page of the same blocks as one read lately (a mirror, which the worker
    gives the words of its first reading, ``RecentPageWords``) is spooled with a reference to them, and pass
    two reads the same words back, with the fingerprints pass two made of them already. One object spools
    (:meth:`spooled`), another reads (:meth:`read`): both number the words spooled whole in spool order and
    keep the last ``size`` used, so a reference always finds its words. Only with the pages' words made in this
    process (``--jobs 1``): a worker's come back as new objects with each batch."""

    def __init__(self, size: int):
        self.size = size
        self._recent: OrderedDict[int, Any] = OrderedDict()  # (spooling) id of words -> (number, words): held,
        # so that no other object takes the id; (reading) number -> words
        self._count = 0

    def spooled(self, item: tuple) -> tuple:
        """``item`` as spooled: a page whose words were spooled lately refers to them."""
        page = item[3] if item[0] == "page" else None
        if not self.size or not isinstance(page, PageBlocks) or page.words is None:
            return item
        known = self._recent.get(id(page.words))
        if known is not None:
            self._recent.move_to_end(id(page.words))
            return item[:3] + (_SameWords(known[0], replace(page, words=None)),) + item[4:]
        self._add(id(page.words), (self._count, page.words))
        return item

    def read(self, item: tuple) -> tuple:
        """``item`` as pass one gave it (:meth:`spooled` undone, by the reading object)."""
        page = item[3] if item[0] == "page" else None
        if isinstance(page, _SameWords):
            self._recent.move_to_end(page.number)
            return item[:3] + (replace(page.page, words=self._recent[page.number]),) + item[4:]
        if self.size and isinstance(page, PageBlocks) and page.words is not None:
            self._add(self._count, page.words)
        return item

    def _add(self, key: int, value: Any) -> None:
        self._recent[key] = value
        self._count += 1
        if len(self._recent) > self.size:
            self._recent.popitem(last=False)


def _cluster_roots(pages: _Pages) -> list[int]:
    """Cluster id (index of the kept page) of every page; kept pages whose cluster has no duplicates map to
    themselves."""
    roots = list(range(len(pages)))
    for i in range(len(pages)):
        m = pages.matched[i]
        if m >= 0:
            roots[i] = roots[m]  # matched pages come earlier in the dump: already resolved
    return roots


def _representatives(pages: _Pages, roots: list[int], policy: str) -> dict[int, int]:
    """Cluster id -> index of its representative under ``policy``, for clusters of two or more.

    One pass, one entry per cluster: the best member so far against each member in
    turn (the order of :func:`~scrapy_dedup.content.representative.rank_members`, whose
    ``rel="canonical"`` rule has nothing to read here).
    """
    best: dict[int, tuple[tuple, int]] = {}
    stamps = pages.stamps

    def key(i: int) -> tuple:
        stamp = stamps[i] if stamps is not None and not math.isnan(stamps[i]) else None
        return member_key(policy, Member(pages.urls[i], i, stamp), url_key=url_preference)

    for i in range(len(pages)):
        if pages.matched[i] < 0:
            continue
        root = roots[i]
        current = best.get(root)
        if current is None:
            current = best[root] = (key(root), root)
        mine = key(i)
        if mine < current[0]:
            best[root] = (mine, i)
    return {root: i for root, (_, i) in best.items()}


def _summarize(result: AuditResult, pages: _Pages, cfg: AuditConfig, want_samples: bool) -> None:
    roots = _cluster_roots(pages)
    reps = _representatives(pages, roots, cfg.representative)
    sizes: Counter = Counter()
    flagged: list[int] = []
    distances: Counter = Counter()
    categories: Counter = Counter()
    for i in range(len(pages)):
        if pages.matched[i] >= 0:
            flagged.append(i)
            sizes[roots[i]] += 1
            d = pages.distances[i]
            distances[_distance_key(d, cfg)] += 1
            categories[categorize(pages.urls[pages.matched[i]], pages.urls[i], KINDS[pages.kinds[i]])] += 1
    result.flagged_pairs = len(flagged)
    result.distance_histogram = dict(distances)
    result.categories = dict(categories)
    result.cluster_sizes = dict(Counter(n + 1 for n in sizes.values()))
    members: dict[int, list] = {}
    top = [root for root, _ in sizes.most_common(LARGEST_CLUSTERS)]
    wanted = set(top)
    for root in top:  # the kept page is a member like the others when another one represents the cluster
        if reps[root] != root:
            members[root] = [(pages.urls[root], "kept", 0)]
    for i in flagged:
        root = roots[i]
        if root in wanted and i != reps[root]:
            bucket = members.setdefault(root, [])
            if len(bucket) < MEMBERS_SHOWN:
                bucket.append((pages.urls[i], KINDS[pages.kinds[i]], _distance_key(pages.distances[i], cfg)))
    result.largest_clusters = [ClusterSummary(root, sizes[root] + 1, pages.urls[reps[root]], members.get(root, []))
                               for root in top]
    if want_samples and cfg.sample and flagged:
        rng = random.Random(cfg.seed)
        chosen = sorted(rng.sample(flagged, min(cfg.sample, len(flagged))))
        result.samples = [SamplePair(pages.urls[pages.matched[i]], pages.urls[i], KINDS[pages.kinds[i]],
                                     _distance_key(pages.distances[i], cfg),
                                     categorize(pages.urls[pages.matched[i]], pages.urls[i], KINDS[pages.kinds[i]]),
                                     [])
                          for i in chosen]
        result.sample_pages = [(pages.matched[i], i) for i in chosen]


def _distance_key(distance: float, cfg: AuditConfig) -> Any:
    if cfg.method == "simhash":
        return int(distance)
    return round(distance, 4)


def mirror_miner(cfg: AuditConfig, source: str) -> Optional[DustMiner]:
    """The miner of the ``mine-dust`` command the mirrors report prints for the dump ``source`` (as the user
    named it), for :func:`audit_dump` to feed; None when the report would not mine as that command (standard
    input, a pipe: the command cannot read it again)."""
    if source == "-" or not os.path.isfile(source):
        return None
    return DustMiner(MiningConfig(min_words=cfg.min_words))


def mirror_report(pages: _Pages, cfg: AuditConfig, source: str, input_format: str,
                  miner: Optional[DustMiner] = None) -> MirrorReport:
    """What causes the dump's mirrors (:mod:`.mirrors`): its duplicate pairs, clusters and URLs; ``source`` is
    the dump as the user named it (``-``: standard input), for the ``mine-dust`` command. ``miner``: the
    :func:`mirror_miner` :func:`audit_dump` fed, if it did (:func:`feeds_miner`): the rules are mined from it,
    else the dump is read again by the command's own path."""
    degenerate = KIND_CODES["degenerate"]
    pairs = ((pages.matched[i], i) for i in range(len(pages)) if pages.matched[i] >= 0)
    other_engine = [f"method {cfg.method}"] if cfg.method != "simhash" else []
    other_engine += [f"{param.key} {getattr(cfg, param.key)!r}" for param in ENGINE_PARAMS
                     if param.key != "min_words" and getattr(cfg, param.key, param.default) != param.default]
    command = mine_dust_command(source, input_format=input_format, url_field=cfg.url_field,
                                html_field=cfg.html_field, text_field=cfg.text_field, min_words=cfg.min_words,
                                other_engine=other_engine)
    # the --min-words the printed command carries (other thresholds are mine-dust's defaults, as the command's)
    mining = {"mining": MiningConfig(min_words=cfg.min_words)} if cfg.min_words != MiningConfig().min_words else {}
    note = ("method lshbloom names the page an exact duplicate matched only: near-duplicate mirrors are not "
            "explained" if cfg.method == "lshbloom" else "")
    fed = miner if command[0] is not None and feeds_miner(cfg, miner, input_format) else None
    return explain_mirrors(pages.urls, _cluster_roots(pages), pairs, lambda i: pages.kinds[i] != degenerate,
                           command=command, note=note, **mining, fed_miner=fed,
                           mine_from=source if command[0] is not None and fed is None and os.path.isfile(source)
                           else None)


def fill_sample_texts(result: AuditResult, pages: _Pages, path: str, decider: Any = None) -> None:
    """Second pass over the dump: the text of the sampled pairs only, for the side-by-side diff.

    The diff is over whitespace-separated tokens of the main text (case and punctuation kept, as
    the reader sees the page), not over the fingerprint's lowercased words.
    """
    indexes = result.sample_pages
    if not indexes:
        return
    wanted: dict[int, list[int]] = {}  # line (record) number -> the sampled pages whose text it holds
    for pair in indexes:
        for i in pair:
            wanted.setdefault(pages.text_line(i), []).append(i)
    worker = PageWorker(result.config)
    texts: dict[int, list] = {}
    boiler: dict[int, list[str]] = {}  # the blocks its host's template left out of a page's fingerprint
    found = 0
    with open_input(path) as source:
        items, _, _ = input_items(source, max_bytes=result.config.max_bytes)
        for number, raw in items:
            if number in wanted:
                parsed = raw if isinstance(raw, PageRecord) else (
                    None if isinstance(raw, tuple) else parse_record(number, raw, worker.fields))
                if isinstance(parsed, PageRecord):
                    blocks = worker.blocks_of(parsed) if isinstance(decider, BoilerplateDecider) else None
                    words = (" ".join(blocks) if blocks is not None else worker.text_of(parsed)).split()
                    for i in wanted[number]:
                        texts[i] = words
                        if blocks is not None:
                            boiler[i] = decider.boilerplate_of(pages.urls[i], blocks)
                found += 1
                if found == len(wanted):
                    break
    for sample, (a, b) in zip(result.samples, indexes):
        sample.diff = word_diff(texts.get(a, []), texts.get(b, []))
        if boiler:
            sample.boilerplate = (boiler.get(a, []), boiler.get(b, []))


# --- outputs --------------------------------------------------------------------------------------

class PairsWriter:
    """``--pairs`` JSONL, written to ``out`` while the dump streams (nothing accumulates in memory)."""

    def __init__(self, out: OutputFile):
        self.out = out
        self.count = 0

    def write(self, index: int, other: int, distance: Any, kind: str, pages: _Pages) -> None:
        a, b = (other, index) if other < index else (index, other)
        url_a = pages.urls[a]
        url_b = pages.urls[b] if b < len(pages) else None
        distance = int(distance) if float(distance).is_integer() else round(float(distance), 4)
        self.out.write(json_text({"url_a": url_a, "url_b": url_b, "distance": distance, "kind": kind}) + "\n")
        self.count += 1


def write_clusters(out: OutputFile, pages: _Pages, cfg: AuditConfig) -> int:
    """``--clusters`` JSONL: every page of a cluster of two or more, in dump order.

    ``cluster`` is the id of the cluster (the index of its first page in the dump);
    ``kind`` is ``representative`` for the member ``cfg.representative`` names it by,
    ``kept`` for its first page when another member represents it, else ``exact`` or
    ``near``; ``distance`` is to the page it matched (0 for the first page).
    """
    roots = _cluster_roots(pages)
    reps = _representatives(pages, roots, cfg.representative)
    written = 0
    for i in range(len(pages)):
        root = roots[i]
        rep = reps.get(root)
        if rep is None:
            continue
        kind = "representative" if i == rep else "kept" if i == root else KINDS[pages.kinds[i]]
        out.write(json_text({
            "url": pages.urls[i], "cluster": root, "representative": pages.urls[rep],
            "distance": 0 if i == root else _distance_key(pages.distances[i], cfg), "kind": kind,
        }) + "\n")
        written += 1
    return written


def count_lines(path: str) -> Optional[int]:
    """Lines of a JSON Lines dump (gzip undone), read once ahead; None for a WARC (records are not lines)."""
    with open_input(path) as source:
        if source.format != "jsonl":
            return None
        lines, last = 0, b""
        while True:
            chunk = source.stream.read(1 << 20)
            if not chunk:
                return lines + (1 if last and not last.endswith(b"\n") else 0)
            lines += chunk.count(b"\n")
            last = chunk


def can_read_twice(path: str) -> bool:
    """Is ``path`` a regular file, which a second pass can open again? Not stdin, a FIFO, a pipe, a socket."""
    if path == "-":
        return False
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return True  # nothing to spool: opening it fails with the reason (DumpError)


def spool_dump(path: str, directory: Optional[str] = None) -> str:
    """Copy the dump at ``path`` (``-``: standard input) as bytes, gzip or not, to a new temporary file.

    Why: the HTML page's sample of pairs needs the texts of a few pages that are only
    chosen once the whole dump has been seen, and stdin, a FIFO or a pipe cannot be
    read twice. Keeping every kept page's text in memory "in case" would break the
    streaming promise, so the dump is spooled to disk (its own size, compressed if it
    came compressed) and read like a file. Returns the temporary file's path; the
    caller removes it.
    """
    owned = path != "-"
    try:
        source = open(path, "rb") if owned else sys.stdin.buffer
    except OSError as exc:
        raise DumpError(f"cannot open dump: {exc.strerror or exc}") from None
    spooled = None
    try:
        fd, spooled = tempfile.mkstemp(prefix="scrapy-dedup-dump-", suffix=".spool", dir=directory)
        with os.fdopen(fd, "wb") as copy:
            for chunk in _chunks(source):
                copy.write(chunk)
    except OSError as exc:  # creating or writing the copy (reading errors are DumpErrors)
        if spooled is not None:
            _remove_quietly(spooled)
        raise OutputError(spooled or exc.filename or directory or tempfile.gettempdir(),
                          "temporary copy of the dump (for the --html sample)", exc) from None
    except BaseException:
        if spooled is not None:
            _remove_quietly(spooled)
        raise
    finally:
        if owned:
            source.close()
    return spooled


def _chunks(source: Any) -> Iterator[bytes]:
    while True:
        try:
            chunk = source.read(1 << 20)
        except OSError as exc:
            raise DumpError(f"cannot read dump: {exc.strerror or exc}") from None
        if not chunk:
            return
        yield chunk


def run_report(args: Any, cfg: AuditConfig) -> int:
    """The ``report`` subcommand: run, print, write the requested files, apply ``--fail-above``.

    The output files are opened first (:class:`OutputFile`: a temporary file next to
    each, renamed into place at the end), so a path that cannot be written fails before
    the dump is read (:class:`OutputError`) and a failed run leaves old files as they were. With ``--html``
    and a dump that cannot be read twice (stdin, a FIFO, a pipe), the dump is first spooled to a temporary file
    (:func:`spool_dump`, removed at the end) so the sampled pairs can show their text.
    Returns 0, or 1 when ``--fail-above`` is exceeded; errors are exceptions.
    """
    with ExitStack() as stack:
        outputs = {flag: stack.enter_context(OutputFile(path, f"--{flag} file"))
                   for flag, path in (("pairs", args.pairs), ("clusters", args.clusters), ("html", args.html))
                   if path}
        dump = args.dump
        started = time.perf_counter()
        if "html" in outputs and not can_read_twice(dump):
            dump = spool_dump(dump)
            stack.callback(_remove_quietly, dump)
        pairs_out = PairsWriter(outputs["pairs"]) if "pairs" in outputs else None
        miner = mirror_miner(cfg, args.dump)  # fed by the audit's one reading of the dump
        result, pages, decider = audit_dump(dump, cfg, jobs=args.jobs, strict=args.strict, progress=args.progress,
                                            want_samples="html" in outputs, pairs_out=pairs_out,
                                            all_pairs=args.all_pairs, miner=miner)
        result.source = args.dump
        result.mirrors = mirror_report(pages, cfg, args.dump, result.input_format, miner)  # before the HTML page
        result.pages_parsed += result.mirrors.records_read  # a dump the miner could not be fed is read again
        if "clusters" in outputs:
            write_clusters(outputs["clusters"], pages, cfg)
        if "html" in outputs:
            fill_sample_texts(result, pages, dump, decider)
        result.elapsed = time.perf_counter() - started  # the run's wall time, mirrors and samples included
        if "html" in outputs:
            outputs["html"].write(render_html(result))
    # the files are closed and in place here: a full disk is an error before stdout says anything
    if args.json:
        text = json_text(result.to_dict(), indent=2, ensure_ascii=not stream_is_utf8(sys.stdout))
    else:
        text = result.to_text()
    try:
        write_line(text)
    except BrokenPipeError:  # `scrapy-dedup report dump | head`: the reader left; the gate still decides
        silence_stdout()
    if args.fail_above is not None and result.redundant_ratio > args.fail_above:
        print(f"scrapy-dedup report: redundant share {result.redundant_ratio:.1%} is above "
              f"--fail-above {args.fail_above:.1%}", file=sys.stderr)
        return 1
    return 0


def _remove_quietly(path: str) -> None:
    with suppress(OSError):
        os.unlink(path)

