"""The item a cluster keeps in drop mode (content/keeper.py, docs/items.md): real crawls of a local site.

Each crawl fixes its order (one request at a time, each page's callback asks for the next), so the
page fetched first is the one that used to keep the cluster's item.
"""
from __future__ import annotations

import logging

import pytest
import scrapy
from pytest_twisted import inlineCallbacks
from scrapy.exceptions import DropItem
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule
from scrapy.utils.defer import deferred_from_coro
from twisted.internet import reactor

from tests.contentsite import edited_text, product_text, template, words
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite, Page

pytestmark = pytest.mark.crawl

ADDON = {"ADDONS": {"scrapy_dedup.Addon": 0}, "CONCURRENT_REQUESTS": 1}

ARTICLE = "/index.php?title=Harbor"
DIFF = "/index.php?title=Harbor&diff=2&oldid=1"
REVISION = "/index.php?title=Harbor&oldid=1"


def wiki(host: str, path: str) -> Page | None:
    """A wiki's article, its diff view (a diff table above the whole article) and its earlier revision."""
    if path == ARTICLE:
        return Page(template(product_text(1), title="Harbor"))
    if path == DIFF:
        table = "<table class='diff'><tr><td>- changedword</td><td>+ harbor</td></tr></table>"
        return Page(template(f"{product_text(1)}", title="Harbor: Difference between revisions")
                    .replace("<main>", f"<main>{table}"))
    if path == REVISION:
        return Page(template(edited_text(1), title="Harbor"))  # MediaWiki titles an old revision as its article
    return None


class OrderedSpider(scrapy.Spider):
    """Fetches ``paths`` in this order, one at a time; an item per page."""

    name = "ordered"

    def __init__(self, base: str, paths: list[str], **kwargs):
        super().__init__(**kwargs)
        self.base, self.paths = base, paths

    async def start(self):
        yield scrapy.Request(self.base + self.paths[0], cb_kwargs={"step": 0})

    def parse(self, response, step):
        yield {"url": response.url}
        if step + 1 < len(self.paths):
            yield scrapy.Request(self.base + self.paths[step + 1], cb_kwargs={"step": step + 1})


def urls_of(crawler, site) -> list[str]:
    return sorted(item["url"].replace(site.url("wiki.test", ""), "") for item in crawler.items)


@pytest.mark.parametrize("order", [[DIFF, REVISION, ARTICLE], [REVISION, DIFF, ARTICLE], [ARTICLE, DIFF, REVISION]])
@inlineCallbacks
def test_a_views_item_waits_for_its_article_whatever_the_order(order):
    with LocalSite(wiki) as site:
        crawler = yield run_crawl(OrderedSpider, ADDON, base=site.url("wiki.test", ""), paths=order)
    assert all(site.hits[("wiki.test", path)] == 1 for path in order)  # each page fetched, once
    assert urls_of(crawler, site) == [ARTICLE]  # one item, the article's, under the article's URL
    stats = crawler.stats.get_stats()
    held = sum(path != ARTICLE and order.index(path) < order.index(ARTICLE) for path in order)
    assert stats.get("dedup/items/held", 0) >= (1 if held else 0)
    assert stats.get("dedup/items/released", 0) == 0


@inlineCallbacks
def test_a_view_whose_article_never_comes_is_released_at_the_end():
    with LocalSite(wiki) as site:
        crawler = yield run_crawl(OrderedSpider, ADDON, base=site.url("wiki.test", ""), paths=[DIFF, REVISION])
    # the better-ranked view's item (fewer query parameters), released at the crawl's end
    assert urls_of(crawler, site) == [REVISION]
    stats = crawler.stats.get_stats()
    assert stats["dedup/items/released_at_end"] == 1
    assert stats["dedup/items/superseded"] == 1  # the diff's, dropped for the revision's


def home_site(link_home: bool):
    """A home page at three URLs and an about page; ``link_home``: every page links "/" too (the start request,
    dont_filter, is then fetched again: the same URL's items are kept, so one of them must be the home's)."""
    home = '<a href="/">Home</a>' if link_home else ""
    links = home + "".join(f' <a href="{p}">{p}</a>' for p in ("/index.html", "/home", "/about"))

    def router(host: str, path: str) -> Page | None:
        if path in ("/", "/index.html", "/home"):
            return Page(template(product_text(2), title="Welcome").replace('<a href="/">Home</a>', links))
        if path == "/about":
            return Page(template(product_text(3), title="About").replace('<a href="/">Home</a>', home))
        return None

    return router


class SiteSpider(CrawlSpider):
    """A new user's CrawlSpider: the start page goes to parse_start_url, which yields nothing."""

    name = "site"
    rules = (Rule(LinkExtractor(), callback="parse_item", follow=True),)

    def parse_item(self, response):
        yield {"url": response.url}


@pytest.mark.parametrize("link_home", [False, True])
@inlineCallbacks
def test_a_crawlspiders_start_page_keeps_one_item_through_its_variants(link_home):
    with LocalSite(home_site(link_home)) as site:
        base = site.url("site.test", "")
        crawler = yield run_crawl(SiteSpider, ADDON, start_urls=[base + "/"])
    urls = sorted(item["url"].replace(base, "") for item in crawler.items)
    assert "/about" in urls
    assert len([u for u in urls if u in ("/", "/index.html", "/home")]) == 1, urls  # the home page: one item
    # the start page's own fetch yielded none: one later member's item passed in its place (with link_home,
    # today's code kept the refetched start page's; the keeper must not add a variant's beside it)
    assert crawler.stats.get_value("dedup/items/cluster_had_no_item") == 1


class DropFirstPipeline:
    """A project's own filter after the add-on: drops the items of one URL."""

    def process_item(self, item, spider=None):
        if item["url"].endswith("/a"):
            raise DropItem("not wanted")
        return item


class CopyPipeline:
    """Returns another object (the keeper follows items by their response, not by identity)."""

    def process_item(self, item, spider=None):
        return dict(item)


@pytest.mark.parametrize("pages,copy", [(["/a", "/b", "/c"], False), (["/a", "/b"], False),
                                        (["/a", "/b", "/c"], True)])
@inlineCallbacks
def test_a_later_pipeline_dropping_the_first_pages_item_leaves_the_cluster_one(pages, copy):
    def router(host, path):
        return Page(template(product_text(4), title="Same page")) if path in pages else None

    pipelines = {f"{__name__}.DropFirstPipeline": 900, **({f"{__name__}.CopyPipeline": 800} if copy else {})}
    settings = {**ADDON, "ITEM_PIPELINES": pipelines}
    with LocalSite(router) as site:
        base = site.url("site.test", "")
        crawler = yield run_crawl(OrderedSpider, settings, base=base, paths=pages)
    urls = [item["url"].replace(base, "") for item in crawler.items]
    assert urls == ["/b"]  # the next member's item, and only one
    assert crawler.stats.get_value("item_dropped_reasons_count/DropItem") == 1


@inlineCallbacks
def test_held_items_over_the_bound_are_released_at_once():
    settings = {**ADDON, "DEDUP_HOLD_MAX_ITEMS": 0}
    with LocalSite(wiki) as site:
        crawler = yield run_crawl(OrderedSpider, settings, base=site.url("wiki.test", ""), paths=[DIFF, ARTICLE])
    assert urls_of(crawler, site) == [DIFF]  # released at once, it stays the cluster's item, whichever of its
    # release and the article reaches the pipelines first (the article, held behind it, is not released over the bound)
    assert crawler.stats.get_value("dedup/items/released_over_bound") == 1


def home_and_page(host: str, path: str) -> Page | None:
    """A start page and a page that links back to it."""
    if path == "/":
        return Page(template(product_text(1) + " <a href='/a'>a</a>", title="Home"))
    if path == "/a":
        return Page(template(product_text(2) + " <a href='/'>home</a>", title="A"))
    return None


class LinkSpider(scrapy.Spider):
    """Scrapy's own start request (``dont_filter``: a link back to it is fetched again) and every link."""

    name = "links"

    def __init__(self, base: str, **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [base + "/"]

    def parse(self, response):
        yield {"url": response.url}
        yield from response.follow_all(css="a")


@inlineCallbacks
def test_a_start_page_fetched_again_through_a_link_keeps_one_item():
    with LocalSite(home_and_page) as site:
        crawler = yield run_crawl(LinkSpider, ADDON, base=site.url("wiki.test", ""))
    assert site.hits[("wiki.test", "/")] == 2  # the start request is not in the dupefilter: fetched again
    assert urls_of(crawler, site) == ["/", "/a"]  # its item stored once: the link's fetch is a known duplicate
    stats = crawler.stats.get_stats()
    assert stats["dedup/items/refetch_dropped"] == 1 and "dedup/items/refetch_kept" not in stats


SOURCE = "/index.php?title=Harbor&action=edit"


def wiki_with_source(host: str, path: str) -> Page | None:
    """The wiki above, and its article's source view: the article's words as markup in a text area."""
    if path == SOURCE:
        markup = "== Harbor ==\n" + product_text(1)
        return Page(template(f"<form method='post'><textarea name='text'>{markup}</textarea></form>",
                             title="Editing Harbor"))
    return wiki(host, path)


@pytest.mark.parametrize("order", [[ARTICLE, SOURCE], [SOURCE, ARTICLE], [DIFF, SOURCE, ARTICLE]])
@inlineCallbacks
def test_a_source_view_near_its_article_keeps_its_own_item(order):
    # the content engine takes the source for the article's near duplicate (the same words, a title that only
    # adds one): still, it is another resource of the page (action=edit), with an item of its own
    with LocalSite(wiki_with_source) as site:
        crawler = yield run_crawl(OrderedSpider, ADDON, base=site.url("wiki.test", ""), paths=order)
    assert crawler.stats.get_value("dedup/content/redundant", 0) >= 1  # (judged one page: the keeper's case)
    assert urls_of(crawler, site) == sorted([ARTICLE, SOURCE])
    if DIFF not in order:  # (after the diff, the source is another cluster's first page)
        assert crawler.stats.get_value("dedup/items/other_resource_kept") == 1


COMMIT = "b13b61ab3f96dcc7558f08940806ddab61d3fed5"
FILE, PLAIN, AT_COMMIT = "/cgit/docs/tree/a.md", "/cgit/docs/plain/a.md", f"/cgit/docs/tree/a.md?id={COMMIT}"


def git_viewer(host: str, path: str) -> Page | None:
    """A git web viewer's file page, the same file at an earlier commit (one word edited), and its raw text."""
    if path == FILE:
        return Page(template(product_text(1), title="a.md - docs"))
    if path == AT_COMMIT:
        return Page(template(edited_text(1), title="a.md - docs"))
    if path == PLAIN:
        return Page(product_text(1), content_type="text/plain; charset=utf-8")
    return None


class HtmlItemSpider(OrderedSpider):
    """An item per HTML page only (a text/plain response yields none), as a link-following spider does."""

    name = "html_items"

    def parse(self, response, step):
        for obj in super().parse(response, step):
            if isinstance(obj, dict) and not isinstance(response, scrapy.http.HtmlResponse):
                continue
            yield obj


@inlineCallbacks
def test_a_file_at_a_commit_and_its_raw_text_fetched_first_leave_the_file_page_its_item():
    # the commit-pinned page is a view (held); the raw text, kept first of the cluster's plain members, yields no
    # item: the file's own page, fetched last, keeps the cluster's item under its URL
    with LocalSite(git_viewer) as site:
        crawler = yield run_crawl(HtmlItemSpider, ADDON, base=site.url("wiki.test", ""),
                                  paths=[AT_COMMIT, PLAIN, FILE])
    assert all(site.hits[("wiki.test", path)] == 1 for path in (AT_COMMIT, PLAIN, FILE))
    assert urls_of(crawler, site) == [FILE]
    assert crawler.stats.get_value("dedup/items/superseded") == 1


class StoppedSpider(OrderedSpider):
    """Asks the crawler to stop (what Scrapy does on SIGINT or SIGTERM) once it has fetched ``stop_after``."""

    name = "stopped"

    def __init__(self, stop_after: str, **kwargs):
        super().__init__(**kwargs)
        self.stop_after = stop_after

    def parse(self, response, step):
        if not response.url.endswith(self.stop_after):
            yield from super().parse(response, step)
            return
        yield {"url": response.url}
        stop_async = getattr(self.crawler, "stop_async", None)  # Scrapy >= 2.14
        # from the reactor, as Scrapy's signal handler does
        reactor.callLater(0, lambda: deferred_from_coro(stop_async()) if stop_async else self.crawler.stop())


@pytest.mark.parametrize("how", ["closespider_pagecount", "shutdown"])
@inlineCallbacks
def test_a_crawl_closed_before_its_end_releases_what_it_still_held(how, caplog):
    # closed after the diff (no spider_idle comes): its item goes to the pipelines as the crawl closes
    caplog.set_level(logging.INFO, logger="scrapy_dedup.middlewares")
    with LocalSite(wiki) as site:
        if how == "shutdown":
            crawler = yield run_crawl(StoppedSpider, ADDON, base=site.url("wiki.test", ""), paths=[DIFF, ARTICLE],
                                      stop_after=DIFF)
        else:
            crawler = yield run_crawl(OrderedSpider, {**ADDON, "CLOSESPIDER_PAGECOUNT": 1},
                                      base=site.url("wiki.test", ""), paths=[DIFF, ARTICLE])
    assert crawler.stats.get_value("finish_reason") == how
    assert urls_of(crawler, site) == [DIFF]  # the cluster's one item, not lost
    assert crawler.stats.get_value("dedup/items/released_at_close") == 1
    assert crawler.stats.get_value("dedup/items/unreleased_at_close") is None
    assert any(f"Released 1 held items as the crawl closed ({how})" in r.getMessage()
               for r in caplog.records)


@inlineCallbacks
def test_with_jobdir_release_requests_are_not_journaled(tmp_path):
    settings = {**ADDON, "JOBDIR": str(tmp_path / "job")}
    with LocalSite(wiki) as site:
        crawler = yield run_crawl(OrderedSpider, settings, base=site.url("wiki.test", ""), paths=[DIFF])
    assert urls_of(crawler, site) == [DIFF]  # released at the end
    assert crawler.stats.get_value("dedup/items/released_at_end") == 1
    assert crawler.stats.get_value("dedup/jobdir/unserializable") is None  # no warning about a journal


@pytest.mark.filterwarnings("ignore:Passing a 'spider' argument:scrapy.exceptions.ScrapyDeprecationWarning")
@inlineCallbacks
def test_under_scrapy_redis_scheduler_the_keeper_is_off_and_the_crawl_runs(redis_url, caplog):
    # its queue serializes every request: a release request (no spider method as callback) would be refused
    caplog.set_level(logging.INFO, logger="scrapy_dedup.middlewares")
    settings = {**ADDON, "SCHEDULER": "scrapy_redis.scheduler.Scheduler", "SCHEDULER_PERSIST": False,
                "REDIS_URL": redis_url, "DUPEFILTER_CLASS": "scrapy_dedup.RedisDupeFilter"}
    with LocalSite(wiki) as site:
        crawler = yield run_crawl(OrderedSpider, settings, base=site.url("wiki.test", ""), paths=[DIFF, ARTICLE])
    assert urls_of(crawler, site) == [DIFF]  # the first page keeps the item, as without the keeper
    assert crawler.stats.get_value("finish_reason") == "finished"
    assert crawler.stats.get_value("dedup/items/held") is None
    assert any(r.getMessage().startswith("Item keeper off: SCHEDULER is not Scrapy's") for r in caplog.records)


ARTICLES = 12


def small_wiki(host: str, path: str) -> Page | None:
    """A wiki's recent changes (diff and revision links first, as a wiki lists them), its articles, their
    diffs, earlier revisions and history pages (pages of their own)."""
    from urllib.parse import parse_qs, urlsplit

    query = {k: v[0] for k, v in parse_qs(urlsplit(path).query).items()}
    title = query.get("title", "")
    if title == "Special:RecentChanges":
        # (Scrapy's default queue is last in, first out: the views linked last are fetched first)
        links = "".join(f'<a href="/index.php?title=A{i}">A{i}</a> ' for i in range(ARTICLES))
        links += "".join(f'<a href="/index.php?title=A{i}&diff=2&oldid=1">diff</a> '
                         f'<a href="/index.php?title=A{i}&oldid=1">prev</a> '
                         f'<a href="/index.php?title=A{i}&action=history">hist</a> ' for i in range(ARTICLES))
        return Page(template(" ".join(f"change {i} of article A{i}" for i in range(ARTICLES)) + " " + links,
                             title="Recent changes"))
    if not title.startswith("A") or not title[1:].isdigit() or int(title[1:]) >= ARTICLES:
        return None
    i = int(title[1:])
    if query.get("action") == "history":
        revisions = " ".join(f"revision {r} of {title} by editor{i * 7 + r} at 2026-0{r}-1{i % 10}" for r in (1, 2))
        return Page(template(f"{revisions} {' '.join(product_text(100 + i).split()[:60])}", title=f"{title} history"))
    if "diff" in query:
        table = "<table class='diff'><tr><td>- changedword</td><td>+ harbor</td></tr></table>"
        return Page(template(product_text(10 + i), title=f"{title}: Difference between revisions").replace("<main>", f"<main>{table}"))
    if "oldid" in query:
        return Page(template(edited_text(10 + i), title=title))  # as MediaWiki titles an old revision
    return Page(template(product_text(10 + i), title=title))


class WikiSpider(scrapy.Spider):
    """Follows every link of the wiki; an item per page."""

    name = "wiki"

    def parse(self, response):
        yield {"url": response.url}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)


@inlineCallbacks
def test_a_link_following_crawl_of_a_wiki_keeps_every_article_under_its_own_url():
    settings = {**ADDON, "CONCURRENT_REQUESTS": 4}
    with LocalSite(small_wiki) as site:
        base = site.url("wiki.test", "")
        crawler = yield run_crawl(WikiSpider, settings,
                                  start_urls=[base + "/index.php?title=Special:RecentChanges"])
    urls = sorted(item["url"].replace(base, "") for item in crawler.items)
    articles = [f"/index.php?title=A{i}" for i in range(ARTICLES)]
    histories = [f"/index.php?title=A{i}&action=history" for i in range(ARTICLES)]
    assert sorted(urls) == sorted(["/index.php?title=Special:RecentChanges", *articles, *histories])


# A MediaWiki-shaped article of about 120 words whose later revision rewrote one sentence and added a note: its
# earlier revision and a diff (the diff table, then the article rendered whole) are no near duplicates of it by
# resemblance (on a page this short, the edit is a sibling's share of words of its own), yet they show it.
SENTENCES = [
    "The harbor lies at the mouth of the river, sheltered from the western gales by a long breakwater of granite.",
    "Fishing boats leave before dawn and return in the early afternoon with their catch of cod and herring.",
    "A lighthouse built in the eighteenth century still guides ships past the shoals at the northern entrance.",
    "The old customs house now holds a small museum of maps, ship models and the logbooks of local captains.",
    "Ferries to the islands depart twice a day in summer and once a day through the winter months.",
    "Every August the town holds a regatta that draws sailors from the whole coast and many visitors.",
]
REWRITTEN = "Fishing trawlers sail out at first light and come back by noon loaded with mackerel and sprats."
NOTE = "Note: the breakwater was lengthened by forty metres after the storms of the last decade."
MW_ARTICLE, MW_REVISION, MW_DIFF = ("/index.php/Harbor", "/index.php?title=Harbor&oldid=7",
                                   "/index.php?title=Harbor&diff=9&oldid=7")


def mediawiki(host: str, path: str) -> Page | None:
    current = [SENTENCES[0], REWRITTEN, *SENTENCES[2:], NOTE]
    if path == MW_ARTICLE:
        return Page(template(" ".join(current), title="Harbor - Field Wiki"))
    if path == MW_REVISION:
        return Page(template(" ".join(SENTENCES), title="Harbor - Field Wiki"))
    if path == MW_DIFF:
        table = (f"<table class='diff'><tr><td>Revision as of 12:00, 3 December 2026</td><td>Latest revision as of "
                 f"12:05, 3 December 2026</td></tr><tr><td>Line 1:</td><td>Line 1:</td></tr><tr><td>- {SENTENCES[1]}"
                 f"</td><td>+ {REWRITTEN}</td></tr><tr><td></td><td>+ {NOTE}</td></tr></table>")
        return Page(template(" ".join(current), title="Harbor: Difference between revisions - Field Wiki")
                    .replace("<main>", f"<main>{table}"))
    return None


@pytest.mark.parametrize("order", [[MW_DIFF, MW_REVISION, MW_ARTICLE], [MW_REVISION, MW_DIFF, MW_ARTICLE],
                                   [MW_ARTICLE, MW_DIFF, MW_REVISION], [MW_REVISION, MW_ARTICLE, MW_DIFF]])
@inlineCallbacks
def test_an_edited_revision_and_a_diff_keep_the_articles_item_under_its_url(order):
    with LocalSite(mediawiki) as site:
        crawler = yield run_crawl(OrderedSpider, ADDON, base=site.url("wiki.test", ""), paths=order)
    assert all(site.hits[("wiki.test", path)] == 1 for path in order)
    assert urls_of(crawler, site) == [MW_ARTICLE]  # one item, the article's, under its URL
    assert crawler.stats.get_value("dedup/items/views_joined", 0) >= 1  # the engine alone kept a view apart


@inlineCallbacks
def test_a_diff_against_another_text_keeps_its_item():
    """A diff whose old side is a wholly other text (a start page's installer text) shows that text too: it is a
    record of its own, not the article's view, whichever comes first."""
    other = " ".join(words(4242, 150))

    def site_with_other_diff(host: str, path: str) -> Page | None:
        if path == MW_DIFF:
            table = f"<table class='diff'><tr><td>- {other}</td><td>+ {' '.join(SENTENCES)}</td></tr></table>"
            return Page(template(" ".join(SENTENCES), title="Harbor: Difference between revisions - Field Wiki")
                        .replace("<main>", f"<main>{table}"))
        if path == MW_ARTICLE:
            return Page(template(" ".join(SENTENCES), title="Harbor - Field Wiki"))
        return None

    with LocalSite(site_with_other_diff) as site:
        crawler = yield run_crawl(OrderedSpider, ADDON, base=site.url("wiki.test", ""), paths=[MW_DIFF, MW_ARTICLE])
    assert urls_of(crawler, site) == sorted([MW_ARTICLE, MW_DIFF])


# Listings of a wiki that share their <title> and most of their text: the chrome of a recent-changes form, and
# entries that other lists show too. What names each is a heading or the line under its first heading.
LIST_CHROME = "".join(f"<p>{' '.join(words(7000 + i, 30))}</p>" for i in range(5))
LIST_ENTRIES = [f"Page {word} diff hist Maintenance script talk contribs (revision {i % 3 + 1})"
                for i, word in enumerate(words(7100, 12))]
RELATED_HARBOR = "/index.php/Special:RecentChangesLinked/Harbor"
RELATED_LIGHTHOUSE = "/index.php/Special:RecentChangesLinked/Lighthouse"
RELATED_HARBOR_FILTERED = "/index.php?title=Special:RecentChangesLinked&target=Harbor&hidebots=0"
MEDIA_FILES = "/doku.php?do=media&tab_files=files"
MEDIA_SEARCH = "/doku.php?do=media&tab_files=search"


def listings(host: str, path: str) -> Page | None:
    """The related changes of two pages (the second lists one entry more), the first again with another filter
    (the same entries: one listing), and a media manager's file list and search tab (both empty)."""
    def related(subject: str, entries: int, bots: str = "Hide bots") -> Page:
        items = "".join(f"<li>{entry}</li>" for entry in LIST_ENTRIES[:entries])
        return Page("<!DOCTYPE html><html><head><title>Related changes - Wiki</title></head><body><main>"
                    f"<h1>Related changes</h1><div>&larr; <a href='/index.php/{subject}'>{subject}</a></div>"
                    f"{LIST_CHROME}<p>Show last 50 | 100 changes | {bots} | Hide minor edits</p><ul>{items}</ul>"
                    "</main></body></html>")

    def media(tab: str) -> Page:
        return Page("<!DOCTYPE html><html><head><title>Media Manager - Wiki</title></head><body><main>"
                    f"<h1>Media Manager</h1>{LIST_CHROME}<h3>{tab} in [root]</h3><p>Nothing was found.</p>"
                    "</main></body></html>")

    pages = {RELATED_HARBOR: lambda: related("Harbor", 5), RELATED_LIGHTHOUSE: lambda: related("Lighthouse", 6),
             RELATED_HARBOR_FILTERED: lambda: related("Harbor", 5, bots="Show bots"),
             MEDIA_FILES: lambda: media("Files"), MEDIA_SEARCH: lambda: media("Search")}
    return pages[path]() if path in pages else None


@inlineCallbacks
def test_listings_under_one_title_keep_their_items_when_their_heading_or_subtitle_differs():
    """Near duplicates by their text (the content engine merged both pairs before the judge read headings and
    the line under the first heading): each listing of its own subject keeps its item; the same listing under
    another filter is still the first one's duplicate."""
    order = [RELATED_HARBOR, RELATED_LIGHTHOUSE, RELATED_HARBOR_FILTERED, MEDIA_FILES, MEDIA_SEARCH]
    with LocalSite(listings) as site:
        crawler = yield run_crawl(OrderedSpider, ADDON, base=site.url("wiki.test", ""), paths=order)
    assert all(site.hits[("wiki.test", path)] == 1 for path in order)
    assert urls_of(crawler, site) == sorted([RELATED_HARBOR, RELATED_LIGHTHOUSE, MEDIA_FILES, MEDIA_SEARCH])
    assert crawler.stats.get_value("dedup/items/near_duplicates") == 1  # the filtered listing's


# A wiki's recent changes asked for the last 100 and the last 250 when it holds 101: one entry more under the same
# title, heading and form. Two windows of one listing, each a resource of its own (the parameter selects what the
# page shows); the same page with a word edited under another value of a parameter stays one page.
CHANGES_100 = "/index.php?title=Special:RecentChanges&limit=100"
CHANGES_250 = "/index.php?title=Special:RecentChanges&limit=250"
CHANGES_500 = "/index.php?title=Special:RecentChanges&limit=500"
ARTICLE_REF_A, ARTICLE_REF_B = "/index.php?title=Harbor&ref=a", "/index.php?title=Harbor&ref=b"
CHANGE_ENTRIES = [f"10:{i:02d} Page {word} diff hist Maintenance script talk contribs (revision {i % 3 + 1})"
                  for i, word in enumerate(words(7200, 41))]


def recent_changes(host: str, path: str) -> Page | None:
    """Recent changes at three limits (the wiki holds 41 changes: the first limit shows 40), and an article under
    two values of a parameter that changes nothing, the second with words edited."""
    def changes(entries: int) -> Page:
        items = "".join(f"<li>{entry}</li>" for entry in CHANGE_ENTRIES[:entries])
        return Page("<!DOCTYPE html><html><head><title>Recent changes - Wiki</title></head><body><main>"
                    f"<h1>Recent changes</h1>{LIST_CHROME}<p>Show last 40 | 100 | 500 changes</p><ul>{items}</ul>"
                    "</main></body></html>")

    pages = {CHANGES_100: lambda: changes(40), CHANGES_250: lambda: changes(41), CHANGES_500: lambda: changes(41),
             ARTICLE_REF_A: lambda: Page(template(product_text(3), title="Harbor")),
             ARTICLE_REF_B: lambda: Page(template(edited_text(3), title="Harbor"))}
    return pages[path]() if path in pages else None


@pytest.mark.parametrize("order", [[CHANGES_250, CHANGES_100, CHANGES_500], [CHANGES_100, CHANGES_250]])
@inlineCallbacks
def test_two_windows_of_a_listing_keep_their_items_and_an_edited_page_under_another_value_stays_one(order):
    """The content engine takes the shorter window for the longer one's near duplicate: it holds every entry of
    it but one. Another value of the parameter that selects the window, and one text nested in the other: each
    keeps its item (the same window again is still a duplicate). The article under ``ref=a`` and ``ref=b``, a
    word edited: not nested, one item."""
    paths = [*order, ARTICLE_REF_A, ARTICLE_REF_B]
    with LocalSite(recent_changes) as site:
        crawler = yield run_crawl(OrderedSpider, ADDON, base=site.url("wiki.test", ""), paths=paths)
    assert all(site.hits[("wiki.test", path)] == 1 for path in paths)
    assert crawler.stats.get_value("dedup/content/near", 0) >= 2  # (the windows, and the article edited)
    assert urls_of(crawler, site) == sorted([CHANGES_100, CHANGES_250, ARTICLE_REF_A])
    assert crawler.stats.get_value("dedup/items/other_resource_kept") == 1
