"""The DUST site generator (tests/dustgen.py): deterministic per seed, every linked URL routes, and its
ground truth agrees with the content engine (a DUST variant is the same page, a trap page is another).

Seeds here are neither the benchmark's tuning seeds (0..19) nor its held-out ones (1000..1019).
"""
from __future__ import annotations

from collections import defaultdict

import lxml.html
import pytest
import scrapy
from pytest_twisted import inlineCallbacks

from scrapy_dedup.content.engine import ContentDeduplicator
from scrapy_dedup.content.text import page_text
from tests import dustgen
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite

SEEDS = list(range(100, 112))
SLOW_SEEDS = list(range(112, 212))


@pytest.fixture(autouse=True)
def _content():
    dustgen.require_content()


def _hrefs(html: str) -> list[str]:
    return lxml.html.fromstring(html).xpath("//a/@href")


def _served(site: dustgen.DustSite, url: str):
    page = site.router(site.host, url)
    assert page is not None, f"{site.host}{url} answered 404"
    return page


# ------------------------------------------------------------------------------------ determinism

@pytest.mark.parametrize("seed", SEEDS[:4])
def test_the_same_seed_gives_the_same_site(seed):
    a, b = dustgen.DustSite(seed), dustgen.DustSite(seed)
    assert a.describe() == b.describe()
    assert a.universe() == b.universe()
    for pid in a.pages:
        for view in a.views():
            assert a.page_html(pid, view, fetch=7) == b.page_html(pid, view, fetch=7)
    # the noise is per fetch: the same page fetched twice differs in its bytes
    pid = next(iter(a.pages))
    assert a.page_html(pid, fetch=1) != a.page_html(pid, fetch=2)


def test_seeds_draw_different_sites_and_every_form_and_trap_somewhere():
    sites = [dustgen.generate(seed) for seed in range(100, 140)]
    assert len({s.host for s in sites}) == len(sites)
    assert len({(s.scheme, s.families, s.traps) for s in sites}) >= 35
    assert {s.scheme for s in sites} == set(dustgen.SCHEMES)
    drawn = {f for s in sites for f in s.families}
    assert drawn == set(dustgen.FAMILIES) - {"root"}, set(dustgen.FAMILIES) - drawn
    assert {t for s in sites for t in s.traps} == set(dustgen.TRAPS)
    # parameter names are drawn too: sites do not share one name for their session parameter
    assert len({s.session_param_name for s in sites if "session-param" in s.families}) >= 4


# ------------------------------------------------------------------------------------ routing

def _check_routing(seed: int) -> None:
    site = dustgen.DustSite(seed)
    universe = site.universe()
    assert site.distinct_pages() == set(site.pages), "a page no link leads to"
    for pid in site.pages:
        t = site.truth(site.canonical_url(pid))
        assert (t.kind, t.page, t.forms) == ("page", pid, ()), (pid, site.canonical_url(pid), t)
    used_forms = set()
    for url, truth in universe.items():
        assert truth.kind != "error", f"{site.describe()}: linked URL {url} does not route"
        used_forms.update(truth.forms)
        page = _served(site, url)
        assert page.status == truth.status
        if truth.kind == "redirect":
            target = site.truth(truth.location)
            assert page.headers["Location"] == truth.location
            assert (target.kind, target.page) == ("page", truth.page), (url, truth.location)
            continue
        html = page.body
        for href in _hrefs(html):
            assert href in universe and universe[href].kind != "error", (url, href)
        declared = lxml.html.fromstring(html).xpath('//link[@rel="canonical"]/@href')
        header = page.headers.get("Link")
        if site.canonical_mode in ("link", "both"):
            assert len(declared) == 1
        if site.canonical_mode in ("header", "both"):
            assert header and header.endswith('>; rel="canonical"')
            declared = declared or [header[1:header.index(">")]]
        if site.canonical_mode == "none":
            assert not declared and not header
            continue
        target = site.truth(declared[0])
        traps = site.pages[truth.page].traps
        if "canonical-404" in traps:
            assert target.kind == "error"
        elif "canonical-home" in traps:
            assert target.page == "home"
        elif "canonical-listing" in traps:
            assert target.page == site.first_listing()
        else:
            assert (target.kind, target.page, target.forms) == ("page", truth.page, ()), (url, declared)
    # every drawn family shows up in the URLs a crawler meets
    missing = set(site.families) - used_forms - {"query-order"}
    assert not missing, (site.describe(), missing)


@pytest.mark.parametrize("seed", SEEDS)
def test_every_linked_url_routes_and_redirects_and_canonicals_agree(seed):
    _check_routing(seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SLOW_SEEDS)
def test_every_linked_url_routes_many_seeds(seed):
    _check_routing(seed)


# ------------------------------------------------------------------------------------ ground truth vs the engine

def _check_engine(seed: int) -> None:
    """Every distinct page is unique to the engine; every other URL of a page is its exact or near duplicate."""
    site = dustgen.DustSite(seed)
    urls_of = defaultdict(list)
    for url, truth in site.universe().items():
        if truth.kind == "page":
            urls_of[truth.page].append(url)
    engine = ContentDeduplicator.in_memory()
    for pid in sorted(urls_of):
        url = site.canonical_url(pid)
        verdict = engine.check(url, page_text(_served(site, url).body))
        assert verdict.kind == "unique", (site.describe(), pid, verdict,
                                          verdict.kept_url and site.truth(verdict.kept_url).page)
    for pid, urls in sorted(urls_of.items()):
        for url in urls:
            if url == site.canonical_url(pid):
                continue
            verdict = engine.check(url, page_text(_served(site, url).body))
            assert verdict.is_duplicate and site.truth(verdict.kept_url).page == pid, \
                (site.describe(), pid, url, site.truth(url).forms, verdict)
    # each trap page against the page a wrong rule would merge it with, on its own
    for pid, page in site.pages.items():
        for trap in page.traps:
            base = site.trap_base(pid, trap)
            if base is None:
                continue
            pair = ContentDeduplicator.in_memory()
            pair.check("base", page_text(site.page_html(base)))
            verdict = pair.check("trap", page_text(site.page_html(pid)))
            assert verdict.kind == "unique", (site.describe(), trap, pid, base, verdict)


@pytest.mark.parametrize("seed", SEEDS[:6])
def test_dust_variants_are_one_page_and_traps_are_others_to_the_content_engine(seed):
    _check_engine(seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SLOW_SEEDS[:40])
def test_ground_truth_agrees_with_the_content_engine_many_seeds(seed):
    _check_engine(seed)


# ------------------------------------------------------------------------------------ scoring

def test_score_counts_waste_recall_forms_traps_and_duplicate_items():
    site = dustgen.DustSite(SEEDS[0])
    canonical = [site.canonical_url(pid) for pid in sorted(site.pages)]
    ideal = dustgen.score(site, canonical, [f"http://{site.host}:8080{u}" for u in canonical])
    assert (ideal.fetches, ideal.distinct, ideal.wasted, ideal.recall, ideal.duplicate_items) == \
        (len(site.pages), len(site.pages), 0, 1.0, 0)
    assert ideal.per_form == {"canonical": [len(site.pages), 0]}
    assert all(got == pages for pages, got in ideal.per_trap.values())

    variant = next(u for u, t in site.universe().items() if t.kind == "page" and t.forms)
    page_of_variant = site.truth(variant).page
    partial = [u for u in canonical if site.truth(u).page != page_of_variant]
    traps = site.pages[page_of_variant].traps
    fetched = partial + [variant, variant, "/no/such/page"]
    s = dustgen.score(site, fetched, [variant, variant, canonical[0]])
    assert s.fetches == len(fetched) and s.errors == 1
    assert s.distinct == len(site.pages)
    assert s.wasted == 2  # the second fetch of the variant and the 404
    assert s.waste == pytest.approx(2 / len(fetched))
    assert s.requests_per_page == pytest.approx(len(fetched) / len(site.pages))
    for form in site.truth(variant).forms:
        assert s.per_form[form] == [2, 1]
    assert s.duplicate_items == 1
    for trap in traps:
        assert s.per_trap[trap][1] == s.per_trap[trap][0]
    missing = dustgen.score(site, partial)
    assert missing.recall == pytest.approx((len(site.pages) - 1) / len(site.pages))
    for trap in traps:
        assert missing.per_trap[trap][1] == missing.per_trap[trap][0] - 1


# ------------------------------------------------------------------------------------ over HTTP, with Scrapy

class FollowAll(scrapy.Spider):
    name = "dustgen-test"

    def parse(self, response):
        yield {"url": response.url}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)


@pytest.mark.crawl
@pytest.mark.parametrize("seed", SEEDS[:2])
@inlineCallbacks
def test_scrapy_crawls_a_generated_site_exactly_as_the_ground_truth_says(seed):
    site = dustgen.DustSite(seed)
    with LocalSite(site.router) as local:
        crawler = yield run_crawl(FollowAll, {"LOG_LEVEL": "WARNING"}, start_urls=[local.url(site.host)],
                                  allowed_domains=[site.host])
    universe = site.universe()
    assert set(site.log) <= set(universe), set(site.log) - set(universe)  # Scrapy requests what the links say
    s = dustgen.score(site, site.log, [item["url"] for item in crawler.items])
    assert s.errors == 0 and s.recall == 1.0
    assert s.items == s.page_fetches  # plain Scrapy: one item per page response, duplicates included
    assert s.duplicate_items == s.page_fetches - s.distinct > 0
