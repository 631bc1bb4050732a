"""The example site really holds what its truth file says.

The site (example_project/demosite) is served by its real HTTP server on loopback
and every URL of the truth file is fetched over HTTP with its Host header; the
checks below read the served HTML with lxml, independently of scrapy_dedup.
"""
from __future__ import annotations

import difflib
import http.client
import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from lxml import html as lxml_html
from w3lib.url import canonicalize_url

EXAMPLE = Path(__file__).resolve().parent.parent / "example_project"
if str(EXAMPLE) not in sys.path:
    sys.path.insert(0, str(EXAMPLE))

from demosite import HOSTS, SiteServer, crawl_truth, expected_numbers, load  # noqa: E402
from demosite.truth import links_of  # noqa: E402

SPACES = re.compile(r"\s+")


class Client:
    """HTTP/1.1 keep-alive client that sends the site's host names in the Host header."""

    def __init__(self, port: int):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

    def get(self, host: str, target: str) -> tuple[int, str, bytes]:
        self.conn.request("GET", target, headers={"Host": f"{host}:{self.port}"})
        response = self.conn.getresponse()
        return response.status, response.getheader("Content-Type", ""), response.read()


def main_text(html: bytes | str) -> str:
    """Text of the <main> block without forms, scripts and styles (the site's "main text")."""
    doc = lxml_html.fromstring(html)
    mains = doc.xpath("//main")
    assert len(mains) == 1
    main = mains[0]
    for bad in main.xpath(".//form|.//script|.//style"):
        bad.drop_tree()
    return SPACES.sub(" ", main.text_content()).strip()


def title(html: bytes) -> str:
    return SPACES.sub(" ", lxml_html.fromstring(html).findtext(".//title") or "").strip()


def changed_words(a: str, b: str) -> int:
    """Words of ``a`` and ``b`` outside their longest common runs (replaced words count once)."""
    wa, wb = a.split(), b.split()
    changed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, wa, wb, autojunk=False).get_opcodes():
        if tag != "equal":
            changed += max(i2 - i1, j2 - j1)
    return changed


@pytest.fixture(scope="module")
def truth():
    return load()


@pytest.fixture(scope="module")
def served(truth):
    """Every truth URL fetched once over HTTP: url -> (status, content type, body)."""
    with SiteServer() as server:
        client = Client(server.port)
        pages = {p["url"]: client.get(p["host"], p["target"]) for p in truth["pages"]}
        yield server, pages


def test_truth_file_is_up_to_date(truth):
    # demosite/truth.json is committed for readers; it must be what the generator says
    assert truth == crawl_truth(truth["seed"])


def test_site_size_and_hosts(truth):
    pages = truth["pages"]
    assert len(pages) >= 200
    hosts = {p["host"] for p in pages}
    assert hosts == set(HOSTS) and len(hosts) >= 3
    assert len({p["url"] for p in pages}) == len(pages)
    # plain Scrapy's dupefilter (w3lib canonicalize_url) keeps every truth URL apart,
    # so a crawl without scrapy-dedup fetches each of them exactly once
    assert len({canonicalize_url(p["url"]) for p in pages}) == len(pages)
    kinds = {p["kind"] for p in pages}
    assert {"product", "listing", "post", "denied", "help", "home"} <= kinds
    variants = {v for p in pages for v in p["variants"]}
    assert {"print", "query_id", "tracking", "session", "region", "www", "slash", "replytocom", "page1"} <= variants


def test_every_page_is_served_realistically(served, truth):
    _server, pages = served
    for url, (status, ctype, body) in pages.items():
        assert status == 200, url
        assert ctype.startswith("text/html"), url
        assert 20_000 <= len(body) <= 60_000, (url, len(body))
        doc = lxml_html.fromstring(body)
        for part in ("//header", "//footer", "//style", "//script", "//main"):
            assert doc.xpath(part), (url, part)


def test_urls_of_one_content_share_main_text_and_title(served, truth):
    _server, pages = served
    by_content = defaultdict(list)
    for page in truth["pages"]:
        by_content[page["content"]].append(page["url"])
    mirrored = 0
    for content, urls in by_content.items():
        texts = {main_text(pages[u][2]) for u in urls}
        titles = {title(pages[u][2]) for u in urls}
        assert len(texts) == 1 and len(titles) == 1, (content, urls)
        mirrored += len(urls) > 1
    assert mirrored >= 50


def test_distinct_contents_have_distinct_main_text(served, truth):
    _server, pages = served
    text_of = {}
    for page in truth["pages"]:
        if not page["degenerate"]:
            text_of.setdefault(page["content"], main_text(pages[page["url"]][2]))
    assert len(set(text_of.values())) == len(text_of)


def test_near_duplicates_differ_by_one_word(served, truth):
    _server, pages = served
    canonical = {p["content"]: p["url"] for p in truth["pages"] if not p["variants"]}
    near = [p for p in truth["pages"] if p["near_of"]]
    assert {p["edit"] for p in near} == {"price", "one-word"}
    assert len({p["content"] for p in near}) >= 6
    for page in near:
        a = main_text(pages[page["url"]][2])
        b = main_text(pages[canonical[page["near_of"]]][2])
        assert a != b
        assert changed_words(a, b) == 1, page["url"]
        if page["edit"] == "price":
            (old,) = set(a.split()) - set(b.split())
            assert old.startswith("\u20ac"), old


def test_templated_siblings_differ_by_at_least_a_dozen_words(served, truth):
    _server, pages = served
    products = {p["content"]: main_text(pages[p["url"]][2])
                for p in truth["pages"] if p["kind"] == "product" and not p["variants"] and not p["near_of"]}
    catalog_families = defaultdict(list)
    from demosite.catalog import build_catalog

    for product in build_catalog(truth["seed"]).products:
        catalog_families[product.family].append(f"product-{product.id}")
    pairs = 0
    for members in catalog_families.values():
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                ta, tb = products[a], products[b]
                changed = changed_words(ta, tb)
                assert changed >= 12, (a, b, changed)
                # ... and they really are templated: most of the text is shared
                assert changed < 0.5 * min(len(ta.split()), len(tb.split())), (a, b, changed)
                pairs += 1
    assert pairs >= 20


def test_degenerate_pages_are_short_and_others_are_not(served, truth):
    _server, pages = served
    degenerate = [p for p in truth["pages"] if p["degenerate"]]
    assert len(degenerate) >= 3
    # several URLs of one "Access denied" text: identical, yet each its own degenerate page
    assert len({main_text(pages[p["url"]][2]) for p in degenerate}) < len(degenerate)
    for page in truth["pages"]:
        words = len(main_text(pages[page["url"]][2]).split())
        if page["degenerate"]:
            assert words < 20 and "Access denied" in main_text(pages[page["url"]][2]), page["url"]
        else:
            assert words >= 30, (page["url"], words)


def test_mirror_chrome_differs_where_the_truth_says(served, truth):
    _server, pages = served
    for page in truth["pages"]:
        body = pages[page["url"]][2].decode()
        if "print" in page["variants"]:
            assert "<nav" not in body and "printer-friendly" in body, page["url"]
        elif page["host"] == "eu.shop.test":
            assert 'class="vat-notice"' in body
        else:
            assert "<nav" in body and 'class="vat-notice"' not in body, page["url"]


def test_dynamic_tokens_change_on_every_fetch(served):
    server, _pages = served
    client = Client(server.port)
    bodies = [client.get("shop.test", "/product/7")[2].decode() for _ in range(3)]
    csrf = [re.search(r'name="csrf-token" content="([0-9a-f]{32})"', b).group(1) for b in bodies]
    stamps = [re.search(r'class="generated-at">([^<]+)<', b).group(1) for b in bodies]
    banners = [re.search(r'class="banner"><a [^>]+>([^<]+)<', b).group(1) for b in bodies]
    assert len(set(csrf)) == 3 and len(set(stamps)) == 3 and len(set(banners)) == 3
    assert len({main_text(b) for b in bodies}) == 1


def test_served_links_stay_inside_the_truth(served, truth):
    # what a crawler extracts from the live (per-fetch) pages never leaves the truth's URL set
    server, pages = served
    known = {p["url"] for p in truth["pages"]}
    port = server.port
    for page in truth["pages"]:
        page_url = f"http://{page['host']}:{port}{page['target']}"
        for link in links_of(pages[page["url"]][2].decode(), page_url):
            host_port = link.split("/")[2]
            host = host_port.split(":")[0]
            if host in HOSTS:
                assert host_port == f"{host}:{port}", link
                assert link.replace(f":{port}", "", 1) in known, (page["url"], link)


def test_unknown_hosts_and_paths_are_404(served):
    server, _pages = served
    client = Client(server.port)
    assert client.get("other.test", "/")[0] == 404
    assert client.get("shop.test", "/product/9999")[0] == 404
    assert client.get("shop.test", "/product/7?print=2")[0] == 404
    assert client.get("blog.test", "/posts/caring-for-suede")[0] == 404  # the blog's slash is significant
    assert client.get("eu.shop.test", "/sitemap")[0] == 404
    assert server.hits[("other.test", "/")] == 1


def test_expected_numbers_add_up(truth):
    for mode, url_layer in (("plain", False), ("demo", True)):
        numbers = truth["expected"][mode]
        assert numbers == expected_numbers(truth["pages"], url_layer=url_layer)
        assert numbers["unique_pages"] + numbers["redundant_pages"] + numbers["degenerate_pages"] \
            == numbers["pages_fetched"]
    plain, demo = truth["expected"]["plain"], truth["expected"]["demo"]
    assert plain["pages_fetched"] == len(truth["pages"])
    # the URL layer saves fetches, yet every distinct content is still fetched once
    assert demo["pages_fetched"] < plain["pages_fetched"]
    assert demo["unique_pages"] == plain["unique_pages"]
    assert demo["near_duplicates"] == plain["near_duplicates"] >= 6
