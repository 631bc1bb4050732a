"""DUST on the URL schemes of real software, end to end (real local sites, real Scrapy crawls): a context rule
learned and applied, an unstable redirect never aliased, a rule the judge proves merges distinct pages refused,
learning never above the add-on alone in fetches or duplicate items."""
from __future__ import annotations

import itertools
from urllib.parse import parse_qs, urlsplit

import pytest
import scrapy
from pytest_twisted import inlineCallbacks

from scrapy_dedup.cli import mine_dust_main
from scrapy_dedup.url.dust import RuleSet
from tests import dustsite
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite, Page

HOST = "wiki.test"
ADDON = {"ADDONS": {"scrapy_dedup.Addon": 0}, "CONCURRENT_REQUESTS": 4}
LEARN = {**ADDON, "DEDUP_DUST_LEARN": True}
PAGES = [f"page{i}" for i in range(24)]


def _html(title: str, text: str, links: list[str]) -> Page:
    anchors = "".join(f'<a href="{href}">{i}</a> ' for i, href in enumerate(links))
    return Page(f"<html><head><title>{title}</title></head><body><main><h1>{title}</h1><p>{text}</p></main>"
                f"<nav>{anchors}</nav></body></html>")


def wiki(host: str, path: str) -> Page | None:
    """A DokuWiki-like site: ``/doku.php?id=X`` is page X; every page links ``?id=X&do=recent`` (recent changes,
    one page whatever the id: the id only says where the reader came from) and two other pages."""
    parts = urlsplit(path)
    if host != HOST or parts.path != "/doku.php":
        return None
    query = parse_qs(parts.query)
    page = query.get("id", ["page0"])[0]
    if page not in PAGES:
        return None
    if query.get("do") == ["recent"]:
        return _html("Recent changes", dustsite.text_of("recent changes of the wiki"),
                     [f"/doku.php?id={p}" for p in PAGES[:3]])
    if set(query) - {"id"}:
        return None
    i = PAGES.index(page)
    return _html(page, dustsite.text_of(page), [f"/doku.php?id={page}&do=recent",
                                                f"/doku.php?id={PAGES[(i + 1) % len(PAGES)]}",
                                                f"/doku.php?id={PAGES[(i + 7) % len(PAGES)]}"])


class SiteSpider(scrapy.Spider):
    """Follows every link, one item per page."""

    name = "dustcontext"

    def parse(self, response):
        yield {"url": response.url}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)


def _recent_fetches(site: LocalSite) -> int:
    return sum(n for (_, path), n in site.hits.items() if "do=recent" in path)


@pytest.mark.crawl
@inlineCallbacks
def test_a_context_rule_is_learned_and_applied(tmp_path):
    """``do=recent`` makes ``id`` irrelevant: no rule kind said so before (``drop ?id=`` merges every page), so
    the recent changes were fetched once per page. Learned as a context rule, they are fetched a few times."""
    out = tmp_path / "learned.json"
    with LocalSite(wiki) as site:
        crawler = yield run_crawl(SiteSpider, {**LEARN, "DEDUP_DUST_RULES_OUT": str(out)},
                                  start_urls=[site.url(HOST, "/doku.php?id=page0")])
        recent = _recent_fetches(site)
        pages = {path for (_, path) in site.hits if "do=" not in path}
    assert len(pages) == len(PAGES)  # every page fetched
    rules = RuleSet.load(out).hosts[HOST]
    assert [(r.kind, r.param, r.when) for r in rules] == [("drop_param_when", "id", "do=recent")]
    assert RuleSet.load(out).rewrite(f"http://{HOST}/doku.php?id=page9&do=recent") == \
        f"http://{HOST}/doku.php?do=recent"
    # the evidence (min_support URLs) and the explorations are fetched; the other forms are not
    assert recent <= len(PAGES) // 2, recent
    assert crawler.stats.get_value("dedup/dust/activated") == 1


def _random_site() -> tuple:
    counter = itertools.count()

    def router(host: str, path: str) -> Page | None:
        if host != HOST:
            return None
        if path == "/random":  # Special:Random: another page each time
            return Page("", status=302, headers={"Location": f"/wiki/{PAGES[next(counter) % len(PAGES)]}"})
        if path.startswith("/wiki/") and path[6:] in PAGES:
            name = path[6:]
            i = PAGES.index(name)
            return _html(name, dustsite.text_of(name), ["/random", f"/wiki/{PAGES[(i + 1) % len(PAGES)]}"])
        return None

    return router


@pytest.mark.crawl
@inlineCallbacks
def test_an_unstable_redirect_is_not_aliased(tmp_path):
    """A redirect to another page each time (``Special:Random``) was made an alias of the page it went to the
    one time it was fetched; seen once it names nothing, seen twice with two targets it is unstable."""
    logs = [tmp_path / "one.jsonl", tmp_path / "two.jsonl"]
    with LocalSite(_random_site()) as site:
        for log in logs:
            yield run_crawl(SiteSpider, {**ADDON, "DEDUP_LOG_FILE": str(log)}, start_urls=[site.url(HOST, "/wiki/page0")])
        assert site.hits[(HOST, "/random")] == 2  # once per crawl
    for used in ([logs[0]], logs):
        rules_file = tmp_path / "rules.json"
        assert mine_dust_main([*map(str, used), "-o", str(rules_file)]) == 0
        assert "/random" not in RuleSet.load(rules_file).aliases.get(HOST, {})


def media(host: str, path: str) -> Page | None:
    """Pages ``/p?id=K`` linked with an ``image=`` that does not matter there, and a media manager
    ``/media?image=N`` where it names the image shown (each its own page)."""
    parts = urlsplit(path)
    query = parse_qs(parts.query)
    if host != HOST:
        return None
    if parts.path == "/p":
        page = query.get("id", [""])[0]
        if page not in PAGES:
            return None
        links = [f"/p?id={page}&image={n}" for n in range(1, 5)] + [f"/p?id={p}" for p in PAGES] + ["/media"]
        return _html(page, dustsite.text_of(page), links)
    if parts.path == "/media":
        image = query.get("image", ["none"])[0]
        links = [f"/media?image={n}" for n in range(1, 4)]
        return _html(f"Media manager {image}", dustsite.text_of(f"the media file {image}"), links)
    return None


@pytest.mark.crawl
@inlineCallbacks
def test_a_rule_merging_pages_the_judge_proves_distinct_is_refused(tmp_path):
    """``drop ?image=`` has 80 agreeing URLs and 3 violations (3.6%, under the fixed 5% rate it was kept on):
    the 3 media views are other clusters, pages the judge proves distinct, on a site where no URL was ever
    judged two pages. Refused, the crawl with the mined rules fetches every media view."""
    log, rules_file = tmp_path / "crawl.jsonl", tmp_path / "rules.json"
    with LocalSite(media) as site:
        yield run_crawl(SiteSpider, {**ADDON, "DEDUP_LOG_FILE": str(log)}, start_urls=[site.url(HOST, "/p?id=page0")])
    assert mine_dust_main([str(log), "-o", str(rules_file)]) == 0
    rules = RuleSet.load(rules_file)
    for n in range(1, 4):
        url = f"http://{HOST}/media?image={n}"
        assert rules.rewrite(url) == url, rules.dumps()
    with LocalSite(media) as site:
        yield run_crawl(SiteSpider, {**ADDON, "DEDUP_DUST_RULES": str(rules_file)},
                        start_urls=[site.url(HOST, "/p?id=page0")])
        assert {path for (_, path) in site.hits if path.startswith("/media?")} == {
            f"/media?image={n}" for n in range(1, 4)}


def _items_and_fetches(crawler, site: LocalSite) -> tuple[int, int]:
    return crawler.stats.get_value("item_scraped_count", 0), sum(site.hits.values())


@pytest.mark.crawl
@inlineCallbacks
def test_learning_adds_no_fetch_and_no_duplicate_item_over_the_addon(tmp_path):
    """On the DUST test site and on the wiki above: with ``DEDUP_DUST_LEARN``, never more fetches and never
    more duplicate items than the add-on without it."""
    for router, host, start in ((dustsite.router, dustsite.HOST, "/"), (wiki, HOST, "/doku.php?id=page0")):
        figures = {}
        for name, settings in (("addon", ADDON), ("learn", LEARN)):
            with LocalSite(router) as site:
                crawler = yield run_crawl(SiteSpider, settings, start_urls=[site.url(host, start)])
                items, fetches = _items_and_fetches(crawler, site)
                figures[name] = (items, fetches)
        assert figures["learn"][1] <= figures["addon"][1], (host, figures)
        # every distinct page gives one item in both crawls: more items are duplicate items
        assert figures["learn"][0] <= figures["addon"][0], (host, figures)
