"""Boilerplate learning judged in many crawl orders (core level, no Scrapy): nothing lost, exact copies exact.

A crawl's order varies with concurrency, and a host's template is learnt as its pages come: a decision
may rest on a template half learnt. These tests feed whole sites to :class:`BoilerplateJudge` in many
random orders and hold every order to what the site's truth says:

* the example site (``example_project/demosite``, rendered page by page as its server would, with fresh
  per-fetch tokens), one page per URL the crawl fetches: every family of content kept, and the exact/near
  split the engine gives without learning in the same order (a byte-identical copy is exact);
* a generated blog of listing pages (a paginated index, tag pages, year archives: post teasers that
  recur on four or five pages each, so they become boilerplate) and the posts: no page dropped for
  another, whatever the order.
"""
from __future__ import annotations

import random
import sys
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from scrapy_dedup.content.boilerplate import BoilerplateJudge, BoilerplateLearner
from scrapy_dedup.content.engine import ContentDeduplicator
from scrapy_dedup.content.extract import ExtractionPolicy, extract_text

EXAMPLE = Path(__file__).resolve().parent.parent / "example_project"


def _judge() -> BoilerplateJudge:
    return BoilerplateJudge(ContentDeduplicator.in_memory(threshold=3, bands=4), BoilerplateLearner())


@pytest.fixture(scope="module")
def example_site():
    """(truth pages, one per URL the demo crawl fetches; a renderer of a page's blocks)."""
    if str(EXAMPLE) not in sys.path:
        sys.path.insert(0, str(EXAMPLE))
    from demosite import DemoSite, load

    site, first = DemoSite(), {}
    for page in load()["pages"]:
        first.setdefault(page["url_layer_key"], page)
    # the example project's content settings (store/settings.py), learning on
    policy = ExtractionPolicy(min_words=20, strip_selectors=(".generated-at",), boilerplate=True)
    eu = ExtractionPolicy(min_words=20, strip_selectors=(".generated-at", ".vat-notice"), boilerplate=True)

    def blocks_of(page: dict) -> list[str]:
        parts = urlsplit(page["url"])
        body = site.handle(page["host"], parts.path + (f"?{parts.query}" if parts.query else "")).body
        return extract_text(body, eu if page["host"] == "eu.shop.test" else policy, blocks=True).blocks

    return list(first.values()), blocks_of


@pytest.mark.parametrize("seed", range(12))
def test_example_site_in_any_order_keeps_every_family_and_counts_exact_copies_exact(example_site, seed):
    pages, blocks_of = example_site
    order = list(range(len(pages)))
    random.Random(seed).shuffle(order)
    blocks = {i: blocks_of(pages[i]) for i in order}  # one fetch each: the per-fetch tokens differ
    plain, judge = ContentDeduplicator.in_memory(threshold=3, bands=4), _judge()
    kept, without = [], Counter()
    for i in order:
        page = pages[i]
        without[plain.check(page["url"], " ".join(blocks[i])).kind] += 1
        if not judge.check(page["url"], blocks[i]).verdict.is_duplicate:
            kept.append(page)

    def family(page: dict) -> str:
        return page["near_of"] or page["content"]

    lost = {family(p) for p in pages if not p["degenerate"]} - {family(p) for p in kept if not p["degenerate"]}
    assert not lost, f"order {seed}: lost {sorted(lost)}"
    # learning may find more near duplicates than the engine alone, never fewer exact copies: here it finds
    # the same (the site's near duplicates are one-word and price edits, the engine finds them all)
    assert judge.engine.counts() == plain.counts() == without



# --- a generated blog of listing pages ------------------------------------------------------------------

_WORDS = ("boot trail wax sole lace heel rain snow city walk grip cork suede leather stitch season winter "
          "summer morning brush patience comfort sizing repair workshop commute footbed mile stone coast path "
          "sock fit width arch strap buckle canvas rubber welt dye polish cream layer storm hike").split()


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n)).capitalize() + "."


def generated_blog(seed: int) -> dict[str, list[str]]:
    """URL -> blocks: 40 posts (3 paragraphs each), an index of 10 teasers a page, a page per tag (each post
    has two of eight tags), an archive per year; every page in the host's chrome."""
    rng = random.Random(seed)
    chrome_top = ["The Example blog", "Home About Contact Shop", "Popular posts this week on the blog",
                  "Free shipping on orders over 50 euros this month"]
    chrome_end = ["Written by the Example team in Lisbon", "Log in Drafts Social",
                  "Page generated 2026-01-05 12:00 by worker 3 in 41 ms"]
    tags = [f"tag{n}" for n in range(8)]
    posts = []
    for n in range(40):
        title = f"{_sentence(rng, 4)[:-1]} part {n}"
        paragraphs = [_sentence(rng, 40) for _ in range(3)]
        posts.append({"slug": f"post-{n}", "title": title, "teaser": " ".join(paragraphs[0].split()[:25]) + " ...",
                      "paragraphs": paragraphs, "tags": rng.sample(tags, 2), "year": 2024 + n % 2})

    def teasers(chosen: list[dict]) -> list[str]:
        return [block for post in chosen for block in (post["title"], post["teaser"])]

    site = {}
    for post in posts:
        site[f"https://blog.test/posts/{post['slug']}/"] = (
            chrome_top + [post["title"], f"Posted in {post['year']} by the team"] + post["paragraphs"]
            + ["Tags: " + " ".join(post["tags"])] + chrome_end)
    for page in range(4):
        site[f"https://blog.test/page/{page + 1}/"] = (
            chrome_top + ["Latest posts"] + teasers(posts[page * 10:page * 10 + 10])
            + [str(n) for n in range(1, 5)] + chrome_end)
    for tag in tags:
        chosen = [p for p in posts if tag in p["tags"]]
        site[f"https://blog.test/tags/{tag}/"] = (chrome_top + [f"Posts tagged {tag}", f"{len(chosen)} posts about it"]
                                                 + teasers(chosen) + chrome_end)
    for year in (2024, 2025):
        site[f"https://blog.test/{year}/"] = (chrome_top + [f"Archive {year}"]
                                              + teasers([p for p in posts if p["year"] == year]) + chrome_end)
    return site


@pytest.mark.parametrize("site_seed", range(3))
def test_listing_pages_are_never_dropped_for_one_another_in_any_order(site_seed):
    site = generated_blog(site_seed)
    urls = sorted(site)
    rng = random.Random(site_seed)
    dropped = []
    for _ in range(25):
        rng.shuffle(urls)
        judge = _judge()
        for url in urls:
            verdict = judge.check(url, site[url]).verdict
            if verdict.is_duplicate:
                dropped.append((url, verdict.kept_url))
        assert judge.engine.counts()["unique"] > 0 and judge.learner.blocks_learned("blog.test") > 0
    assert not dropped, f"{len(dropped)} pages dropped, e.g. {dropped[:3]}"
