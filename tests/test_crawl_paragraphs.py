"""Paragraph dedup in real crawls (real Scrapy, a real local HTTP server): the item field, the stats, the report;
and processes sharing the blocks' seen set in a real Redis."""
from __future__ import annotations

import logging
import multiprocessing

import pytest
import scrapy
from pytest_twisted import inlineCallbacks

from scrapy_dedup.content.boilerplate import normalize_block
from scrapy_dedup.content.text import page_blocks
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite, Page

pytestmark = pytest.mark.crawl

ADDON = {"ADDONS": {"scrapy_dedup.Addon": 0}}
FIELD = "unique_text"
MIN_CHARS = 40

HEADER = "Example Docs, the reference manual of the example toolkit"
P1 = "The installer copies the toolkit into a directory of your choice and checks its signature."
P2 = "Configuration lives in one file per project; every key has a default documented below."
P3 = "Upgrading keeps the configuration file and rewrites only the keys whose meaning changed."
P4 = "Release notes are published on 2026-01-05 with every version, newest first, for each platform."
P4_LATER = "Release notes are published on 2026-03-17 with every version, newest first, for each platform."
PAGES = {  # (host, path) -> blocks; "Home" and the titles are under MIN_CHARS
    ("a.test", "/1"): ["Install", HEADER, P1, P2, "Home"],
    ("a.test", "/2"): ["Configure", HEADER, P2, P3, P3],
    ("a.test", "/3"): ["Upgrade", HEADER, P1, P3, "Home"],
    ("b.test", "/1"): ["Mirror", P1, P4],
    ("b.test", "/2"): ["News", P4_LATER, P2],
}


def html(blocks: list[str]) -> str:
    return "<html><body>" + "".join(f"<p>{b}</p>" for b in blocks) + "<footer>site footer</footer></body></html>"


SITE = {key: Page(html(blocks)) for key, blocks in PAGES.items()}


class PagesSpider(scrapy.Spider):
    name = "paragraphs"

    def __init__(self, start_urls=(), **kw):
        super().__init__(**kw)
        self.start_urls = list(start_urls)

    def parse(self, response):
        yield {"url": response.url}


class RedisGoneSpider(PagesSpider):
    """Stops its ``redis_server`` when it opens: after the start-up checks, before the first page."""

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.redis_server.stop, signal=scrapy.signals.spider_opened)
        return spider


def expected_fields(order: list[tuple[str, str]], seen: set | None = None) -> dict[tuple[str, str], str]:
    """What each page's field must hold when its page is checked in ``order``, computed here on its own."""
    seen = set() if seen is None else seen
    out = {}
    for key in order:
        kept = []
        for block in page_blocks(html(PAGES[key])):
            norm = normalize_block(block)
            if len(norm) >= MIN_CHARS:
                if norm in seen:
                    continue
                seen.add(norm)
            kept.append(block)
        out[key] = " ".join(kept)
    return out


def host_path(url: str) -> tuple[str, str]:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return parts.hostname or "", parts.path


def counted(key) -> list[str]:
    return [normalize_block(b) for b in page_blocks(html(PAGES[key])) if len(normalize_block(b)) >= MIN_CHARS]


@inlineCallbacks
def test_crawl_fills_the_field_and_counts_repeats_per_host(caplog):
    settings = {**ADDON, "DEDUP_PARAGRAPHS": True, "DEDUP_PARAGRAPHS_FIELD": FIELD,
                "DEDUP_PARAGRAPHS_MIN_CHARS": MIN_CHARS, "CONCURRENT_REQUESTS": 1}
    with LocalSite(SITE) as site, caplog.at_level(logging.INFO, logger="scrapy_dedup.extensions"):
        crawler = yield run_crawl(PagesSpider, settings, start_urls=[site.url(h, p) for h, p in PAGES])
    order = [host_path(item["url"]) for item in crawler.items]
    assert sorted(order) == sorted(PAGES)  # every item kept: paragraph dedup never drops one
    # one response at a time: the pages were checked in the order their items left
    expected = expected_fields(order)
    assert {host_path(item["url"]): item[FIELD] for item in crawler.items} == expected
    stats = crawler.stats.get_stats()
    for host in ("a.test", "b.test"):
        blocks = [n for key in order if key[0] == host for n in counted(key)]
        firsts, repeats = set(), 0
        for key in order:  # a block is a repeat of its host's page when any earlier page (any host) had it
            for n in counted(key):
                repeats += key[0] == host and n in firsts
                firsts.add(n)
        assert stats[f"dedup/paragraphs/host/{host}/blocks"] == len(blocks)
        assert stats[f"dedup/paragraphs/host/{host}/duplicate_blocks"] == repeats
        assert stats[f"dedup/paragraphs/host/{host}/duplicate_share"] == round(repeats / len(blocks), 4)
    every = [n for key in PAGES for n in counted(key)]
    assert stats["dedup/paragraphs/blocks"] == len(every) == 14
    assert stats["dedup/paragraphs/duplicate_blocks"] == len(every) - len(set(every)) == 9  # order-free
    assert stats["dedup/paragraphs/short_blocks"] == 7
    report = next(r.getMessage() for r in caplog.records if "duplication report" in r.getMessage())
    assert f"Repeated blocks:       9 of 14  ({100 * 9 / 14:.1f}%" in report


@inlineCallbacks
def test_off_by_default_and_per_host_switch():
    settings = {**ADDON, "DEDUP_PARAGRAPHS_FIELD": FIELD, "DEDUP_CONTENT_POLICIES": {"b.test": {"paragraphs": True}}}
    with LocalSite(SITE) as site:
        crawler = yield run_crawl(PagesSpider, settings, start_urls=[site.url(h, p) for h, p in PAGES])
    fields = {host_path(i["url"])[0]: FIELD in i for i in crawler.items}
    assert fields == {"a.test": False, "b.test": True}
    stats = crawler.stats.get_stats()
    assert stats["dedup/paragraphs/blocks"] == len(counted(("b.test", "/1")) + counted(("b.test", "/2")))
    assert not [k for k in stats if k.startswith("dedup/paragraphs/host/a.test")]


@pytest.mark.parametrize("settings, named", [
    ({"DEDUP_PARAGRAPHS_FIELD": FIELD}, "DEDUP_PARAGRAPHS_FIELD"),  # the field without dedup on: never filled
    ({"DEDUP_PARAGRAPHS": True, "DEDUP_PARAGRAPHS_FIELD": "dedup", "DEDUP_CONTENT_ACTION": "tag"},
     "DEDUP_PARAGRAPHS_FIELD"),
    ({"DEDUP_PARAGRAPHS": "maybe"}, "DEDUP_PARAGRAPHS"),
    ({"DEDUP_PARAGRAPHS_MIN_CHARS": 0}, "DEDUP_PARAGRAPHS_MIN_CHARS"),
    ({"DEDUP_PARAGRAPHS_ERROR_RATE": 0.5}, "DEDUP_PARAGRAPHS_ERROR_RATE"),
    ({"DEDUP_CONTENT_POLICIES": {"a.test": {"paragraphs": "sometimes"}}}, "paragraphs"),
])
def test_bad_configuration_fails_at_start_naming_the_setting(settings, named):
    from scrapy.utils.test import get_crawler

    from scrapy_dedup.extensions import DedupExtension
    from scrapy_dedup.settings import DedupConfigError

    with pytest.raises(DedupConfigError, match=named):
        crawler = get_crawler(PagesSpider, {**ADDON, **settings})
        DedupExtension(crawler).open_content()


# --- shared through Redis --------------------------------------------------------------------------


def _check_pages(redis_url: str, key: str, keys: list, out) -> None:
    """Another process (spawned) checks ``keys`` against the shared Redis Bloom filter."""
    import redis

    from scrapy_dedup.content.paragraphs import ParagraphDeduplicator
    from scrapy_dedup.seen import RedisBloomSeenSet

    seen = RedisBloomSeenSet(redis.Redis.from_url(redis_url), key, 100_000, 1e-6)
    dedup = ParagraphDeduplicator(seen, MIN_CHARS)
    new = []
    for page in keys:
        check = dedup.check(page[0], page_blocks(html(PAGES[tuple(page)])))
        new += [normalize_block(b) for b, again in zip(check.blocks, check.repeated)
                if not again and len(normalize_block(b)) >= MIN_CHARS]
    out.put((new, dedup.total.blocks, dedup.total.duplicates))


@pytest.mark.redis
def test_two_processes_sharing_redis_see_each_block_new_exactly_once(redis_url):
    """Both processes check every page at once (in opposite orders): each distinct block is new to exactly one."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    pages = [list(k) for k in PAGES] * 3
    procs = [ctx.Process(target=_check_pages, args=(redis_url, "test:paragraphs", order, out))
             for order in (pages, pages[::-1])]
    for proc in procs:
        proc.start()
    results = [out.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(30)
    every = [n for key in PAGES for n in counted(key)]
    news = [n for new, _, _ in results for n in new]
    assert sorted(news) == sorted(set(every))  # each block new once, in one process or the other
    assert sum(blocks for _, blocks, _ in results) == 2 * 3 * len(every)
    assert sum(dups for _, _, dups in results) == 2 * 3 * len(every) - len(set(every))


@pytest.mark.redis
@inlineCallbacks
def test_two_crawls_on_one_redis_share_the_blocks(redis_url):
    """A second crawl process of the spider on the same Redis finds every block of the first one's pages."""
    settings = {**ADDON, "DEDUP_CONTENT_BACKEND": "redis", "DEDUP_REDIS_URL": redis_url, "DEDUP_PARAGRAPHS": True,
                "DEDUP_PARAGRAPHS_FIELD": FIELD, "DEDUP_PARAGRAPHS_CAPACITY": 10_000, "CONCURRENT_REQUESTS": 1,
                "DEDUP_CONTENT_ACTION": "log"}
    first_pages = [k for k in PAGES if k[0] == "a.test"]
    with LocalSite(SITE) as site:
        first = yield run_crawl(PagesSpider, settings, start_urls=[site.url(h, p) for h, p in first_pages])
        second = yield run_crawl(PagesSpider, settings, start_urls=[site.url(h, p) for h, p in PAGES])
    seen: set = set()
    expected_fields([host_path(i["url"]) for i in first.items], seen)
    expected = expected_fields([host_path(i["url"]) for i in second.items], seen)
    assert {host_path(i["url"]): i[FIELD] for i in second.items} == expected
    stats = second.stats.get_stats()
    assert stats["dedup/paragraphs/host/a.test/duplicate_share"] == 1.0  # all of them the first crawl's
    assert "dedup/paragraphs/store_errors" not in stats


@inlineCallbacks
def test_redis_away_keeps_every_item_with_its_whole_text(caplog):
    """The seen set fails open: blocks taken as new, the field holds the whole text, one ERROR line, counted.
    Redis answers at start (unreachable then, the crawl would not start) and is gone when the spider opens."""
    from tests.support.redis_server import RedisServer

    server = RedisServer(password="s3cret").start()
    settings = {**ADDON, "DEDUP_CONTENT_BACKEND": "redis", "DEDUP_REDIS_URL": server.url,
                "DEDUP_PARAGRAPHS": True, "DEDUP_PARAGRAPHS_FIELD": FIELD, "DEDUP_PARAGRAPHS_CAPACITY": 10_000,
                "CONCURRENT_REQUESTS": 1}
    try:
        with LocalSite(SITE) as site, caplog.at_level(logging.INFO):
            crawler = yield run_crawl(RedisGoneSpider, settings, start_urls=[site.url(h, p) for h, p in PAGES],
                                      redis_server=server)
    finally:
        server.stop()
    assert {host_path(i["url"]): i[FIELD] for i in crawler.items} == {
        key: " ".join(page_blocks(html(blocks))) for key, blocks in PAGES.items()}
    stats = crawler.stats.get_stats()
    assert stats["dedup/paragraphs/store_errors"] == len(PAGES)
    assert stats.get("dedup/paragraphs/blocks", 0) == 0
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR and "Paragraph" in r.getMessage()]
    assert len(errors) == 1 and "s3cret" not in errors[0], errors
    assert "s3cret" not in caplog.text


@inlineCallbacks
def test_a_resumed_crawl_keeps_the_blocks_of_the_first_run(tmp_path):
    """With JOBDIR the local Bloom filter is checkpointed: run two's pages lose the blocks run one emitted."""
    settings = {**ADDON, "DEDUP_PARAGRAPHS": True, "DEDUP_PARAGRAPHS_FIELD": FIELD, "CONCURRENT_REQUESTS": 1,
                "DEDUP_PARAGRAPHS_CAPACITY": 10_000, "JOBDIR": str(tmp_path / "job")}
    with LocalSite(SITE) as site:
        first = yield run_crawl(PagesSpider, settings, start_urls=[site.url(h, p) for h, p in PAGES if h == "a.test"])
        second = yield run_crawl(PagesSpider, settings, start_urls=[site.url(h, p) for h, p in PAGES if h == "b.test"])
    assert (tmp_path / "job" / "dedup-paragraphs.bloom").exists()
    seen: set = set()
    expected_fields([host_path(i["url"]) for i in first.items], seen)
    expected = expected_fields([host_path(i["url"]) for i in second.items], seen)
    assert {host_path(i["url"]): i[FIELD] for i in second.items} == expected
    assert len(second.items) == 2 and P1 not in " ".join(i[FIELD] for i in second.items)  # P1 was run one's
    assert second.stats.get_value("dedup/paragraphs/restored") == len({n for k in PAGES if k[0] == "a.test"
                                                                       for n in counted(k)})


@inlineCallbacks
def test_a_corrupt_checkpoint_starts_empty_and_says_so(tmp_path, caplog):
    job = tmp_path / "job"
    job.mkdir()
    (job / "dedup-paragraphs.bloom").write_bytes(b"not a bloom filter")
    settings = {**ADDON, "DEDUP_PARAGRAPHS": True, "DEDUP_PARAGRAPHS_FIELD": FIELD, "CONCURRENT_REQUESTS": 1,
                "DEDUP_PARAGRAPHS_CAPACITY": 10_000, "JOBDIR": str(job)}
    with LocalSite(SITE) as site, caplog.at_level(logging.ERROR):
        crawler = yield run_crawl(PagesSpider, settings, start_urls=[site.url(h, p) for h, p in PAGES])
    assert len(crawler.items) == len(PAGES)
    assert crawler.stats.get_value("dedup/paragraphs/checkpoint_errors") == 1
    assert [r for r in caplog.records if "empty paragraph seen set" in r.getMessage()]
    assert list(job.glob("dedup-paragraphs.bloom.corrupt-*"))


@inlineCallbacks
def test_a_checkpoint_of_another_capacity_is_resumed_with_its_own_and_says_so(tmp_path, caplog):
    """DEDUP_PARAGRAPHS_CAPACITY changed between two runs of a JOBDIR: the saved filter (and its blocks) is kept."""
    settings = {**ADDON, "DEDUP_PARAGRAPHS": True, "DEDUP_PARAGRAPHS_FIELD": FIELD, "CONCURRENT_REQUESTS": 1,
                "DEDUP_PARAGRAPHS_CAPACITY": 10_000, "JOBDIR": str(tmp_path / "job")}
    with LocalSite(SITE) as site:
        first = yield run_crawl(PagesSpider, settings, start_urls=[site.url(h, p) for h, p in PAGES if h == "a.test"])
        with caplog.at_level(logging.WARNING, logger="scrapy_dedup.extensions"):
            second = yield run_crawl(PagesSpider, {**settings, "DEDUP_PARAGRAPHS_CAPACITY": 20_000},
                                     start_urls=[site.url(h, p) for h, p in PAGES if h == "b.test"])
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "Paragraph" in r.getMessage()]
    assert len(warnings) == 1
    assert "DEDUP_PARAGRAPHS_CAPACITY=10000" in warnings[0] and "configured 20000" in warnings[0]
    seen: set = set()
    expected_fields([host_path(i["url"]) for i in first.items], seen)
    expected = expected_fields([host_path(i["url"]) for i in second.items], seen)
    assert {host_path(i["url"]): i[FIELD] for i in second.items} == expected  # the first run's blocks kept
    assert "dedup/paragraphs/checkpoint_errors" not in second.stats.get_stats()


class ContentFieldSpider(PagesSpider):
    """Items carry their page's content (``DEDUP_CONTENT_FIELD``): its HTML, or its blocks as lines of text."""

    name = "paragraphs_content"
    as_text = False

    def parse(self, response):
        body = "\n".join(PAGES[host_path(response.url)]) if self.as_text else response.text
        yield {"url": response.url, "content": body}


@pytest.mark.parametrize("as_text", [False, True])
@inlineCallbacks
def test_items_with_their_own_content_get_the_field_in_the_pipeline(as_text):
    settings = {**ADDON, "DEDUP_PARAGRAPHS": True, "DEDUP_PARAGRAPHS_FIELD": FIELD, "DEDUP_CONTENT_FIELD": "content",
                "CONCURRENT_REQUESTS": 1, "DEDUP_MIN_WORDS": 5, "DEDUP_SHINGLE_SIZE": 3}
    ContentFieldSpider.as_text = as_text
    with LocalSite(SITE) as site:
        crawler = yield run_crawl(ContentFieldSpider, settings, start_urls=[site.url(h, p) for h, p in PAGES])
    order = [host_path(item["url"]) for item in crawler.items]
    assert sorted(order) == sorted(PAGES)
    # the text of a plain-text content is its lines (here the same blocks as the HTML gives)
    assert {host_path(i["url"]): i[FIELD] for i in crawler.items} == expected_fields(order)
    assert crawler.stats.get_value("dedup/paragraphs/duplicate_blocks") == 9


@pytest.mark.redis
def test_a_redis_filter_of_another_size_is_refused_at_start_naming_the_settings(redis_url):
    import redis
    from scrapy.utils.test import get_crawler

    from scrapy_dedup.extensions import DedupExtension
    from scrapy_dedup.seen import RedisBloomSeenSet
    from scrapy_dedup.settings import DedupConfigError

    settings = {**ADDON, "DEDUP_CONTENT_BACKEND": "redis", "DEDUP_REDIS_URL": redis_url, "DEDUP_PARAGRAPHS": True}
    key = "dedup:paragraphs:content:paragraphs"  # <DEDUP_REDIS_INDEX_KEY>:paragraphs for this spider
    client = redis.Redis.from_url(redis_url)
    RedisBloomSeenSet(client, key, 1_000, 1e-6).prepare()  # another process's filter, sized otherwise
    extension = DedupExtension(get_crawler(PagesSpider, {**settings, "DEDUP_PARAGRAPHS_CAPACITY": 1_000}))
    extension.open_content().close()  # the same size: accepted
    with pytest.raises(DedupConfigError, match="DEDUP_PARAGRAPHS_CAPACITY / DEDUP_PARAGRAPHS_ERROR_RATE"):
        DedupExtension(get_crawler(PagesSpider, {**settings, "DEDUP_PARAGRAPHS_CAPACITY": 50_000})).open_content()
    client.close()


def test_the_local_paragraph_seen_set_starts_small_grows_with_the_crawl_and_says_its_memory(caplog):
    """Unsized (DEDUP_PARAGRAPHS_CAPACITY unset), the local filter starts at 100,000 blocks and grows, its error rate
    bounded; its memory is in the start line. Before, the default allocated 10,000,000 blocks' worth at start:
    37.4 MiB (39,190,000 bytes) for a crawl of any size, and said nothing of it."""
    from scrapy.utils.test import get_crawler

    from scrapy_dedup.extensions import DedupExtension
    from scrapy_dedup.settings import read_settings

    caplog.set_level(logging.INFO)
    crawler = get_crawler(PagesSpider, {**ADDON, "DEDUP_PARAGRAPHS": True})
    seen = DedupExtension(crawler).open_content().paragraph_flow.dedup.seen
    assert seen.size_bytes() < 2**19, seen.describe()  # 0.4 MiB, not 37.4
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Paragraph dedup:")]
    assert len(lines) == 1 and " 0.4 MiB" in lines[0] and "grows with the crawl" in lines[0], lines
    for i in range(250_000):  # more blocks than it started for: a second slice, its rate still bounded
        seen.add(i.to_bytes(16, "big"))
    assert len(seen) == 250_000 and len(seen.slices) == 2
    assert seen.expected_false_positive_rate() <= read_settings(crawler.settings).paragraphs_error_rate
    assert seen.size_bytes() < 2 * 2**20
