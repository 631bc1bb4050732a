"""The truth file of the example site: every URL a crawl can reach, and the content it holds.

It is built by walking the site's links from the start URLs exactly as a crawler
does (same hosts, same link targets), without HTTP: each page's truth comes from
the router (:meth:`DemoSite.resolve`), never from a duplicate detector. The
expected numbers of a crawl (:func:`expected_numbers`) follow from it by counting.

``python -m demosite truth`` prints it; ``python -m demosite truth --write`` refreshes
``demosite/truth.json`` (committed, and checked against this module by the tests).
"""
from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urldefrag, urljoin, urlsplit

from lxml import html as lxml_html

from .app import BLOG, HOSTS, WWW, DemoSite
from .catalog import SEED

TRUTH_FILE = Path(__file__).with_name("truth.json")
_TRACKING = re.compile(r"^(utm_[a-z]+|gclid)$")
_JSESSIONID = re.compile(r";jsessionid=[0-9A-F]{32}$")


def links_of(html: str, page_url: str) -> list[str]:
    """Absolute http(s) link targets of ``<a href>`` in a page, fragments dropped, in page order."""
    doc = lxml_html.fromstring(html)
    base = doc.xpath("//head/base/@href")  # as browsers and Scrapy's response.urljoin do
    if base:
        page_url = urljoin(page_url, base[0].strip())
    out = []
    for href in doc.xpath("//a/@href"):
        href = href.strip()
        if not href or href.startswith(("mailto:", "javascript:", "#")):
            continue
        out.append(urldefrag(urljoin(page_url, href))[0])
    return out


def demo_url_layer_key(url: str) -> str:
    """The URL the example project's URL policy (``store/settings.py``) reduces ``url`` to.

    Written by hand from the policy, on purpose independent of scrapy_dedup's
    canonicalizer, so a test can compare the two: tracking parameters (``utm_*``,
    ``gclid``) and session ids (``;jsessionid=``, ``PHPSESSID``) removed, ``www.`` dropped
    on the store, the trailing slash dropped except on the blog (where it is significant),
    query parameters sorted by name.
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = parts.netloc
    if host == WWW:
        netloc = netloc.replace(WWW, "shop.test", 1)
    path = _JSESSIONID.sub("", parts.path)
    if host != BLOG and path != "/" and path.endswith("/"):
        path = path.rstrip("/")
    params = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
              if not _TRACKING.match(k) and k != "PHPSESSID"]
    params.sort(key=lambda kv: kv[0])
    query = "&".join(f"{k}={v}" for k, v in params)
    return f"{parts.scheme}://{netloc}{path}" + (f"?{query}" if query else "")


def crawl_truth(seed: int = SEED) -> dict[str, Any]:
    """Walk the site from its start URLs; return the truth document (URLs without a port)."""
    site = DemoSite(80, seed=seed, dynamic=False)
    start = site.start_urls()
    seen = set(start)
    queue = list(start)
    pages: dict[str, dict[str, Any]] = {}
    while queue:
        url = queue.pop(0)
        parts = urlsplit(url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        resolved = site.resolve(parts.hostname, target)
        if resolved is None:
            raise AssertionError(f"the site links to a page it does not have: {url}")
        info, render = resolved
        html = render(site._fetch_tokens())
        pages[url] = {
            "url": url, "host": parts.hostname, "target": target, "content": info.content, "kind": info.kind,
            "variants": list(info.variants), "near_of": info.near_of, "edit": info.edit,
            "degenerate": info.degenerate, "url_layer_key": demo_url_layer_key(url),
        }
        for link in links_of(html, url):
            if urlsplit(link).hostname in HOSTS and link not in seen:
                seen.add(link)
                queue.append(link)
    ordered = [pages[u] for u in sorted(pages)]
    return {
        "seed": seed,
        "hosts": sorted({p["host"] for p in ordered}),
        "start_urls": start,
        "pages": ordered,
        "expected": {"plain": expected_numbers(ordered, url_layer=False),
                     "demo": expected_numbers(ordered, url_layer=True)},
    }


def expected_numbers(pages: list[dict[str, Any]], *, url_layer: bool) -> dict[str, int]:
    """What a crawl of ``pages`` must find, whatever the order pages are fetched in.

    ``url_layer=False``: plain Scrapy (every URL fetched once). ``url_layer=True``: the
    demo's URL policy first collapses URLs with the same :func:`demo_url_layer_key`
    (all of them hold one content, so which one is fetched does not matter).

    Content layer: a *family* is a content id together with its near-duplicate edits.
    The first page of a family is unique; a later page with a content id already
    fetched is an exact duplicate; the first page of each further content id of the
    family is a near duplicate. Degenerate pages are counted apart and never clustered.
    """
    if url_layer:
        classes: dict[str, dict[str, Any]] = {}
        for page in pages:
            first = classes.setdefault(page["url_layer_key"], page)
            if first["content"] != page["content"]:
                raise AssertionError(f"URL layer would merge different contents: {first['url']} {page['url']}")
        fetched = list(classes.values())
    else:
        fetched = list(pages)
    degenerate = [p for p in fetched if p["degenerate"]]
    normal = [p for p in fetched if not p["degenerate"]]
    per_content = Counter(p["content"] for p in normal)
    families: dict[str, set[str]] = defaultdict(set)
    family_size: Counter[str] = Counter()
    for page in normal:
        family = page["near_of"] or page["content"]
        families[family].add(page["content"])
        family_size[family] += 1
    exact = sum(n - 1 for n in per_content.values())
    near = sum(len(contents) - 1 for contents in families.values())
    return {
        "pages_fetched": len(fetched),
        "exact_duplicates": exact,
        "near_duplicates": near,
        "unique_pages": len(families),
        "redundant_pages": exact + near,
        "duplicate_clusters": sum(1 for n in family_size.values() if n > 1),
        "largest_cluster": max(family_size.values(), default=0),
        "degenerate_pages": len(degenerate),
    }


def with_port(url: str, port: int) -> str:
    """A truth URL (no port) as served on ``port``."""
    parts = urlsplit(url)
    return url.replace(f"//{parts.netloc}", f"//{parts.hostname}:{port}", 1) if port != 80 else url


def load(path: Path = TRUTH_FILE) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def dumps(truth: dict[str, Any]) -> str:
    """JSON with one page per line: small, and readable in a diff."""
    head = {k: v for k, v in truth.items() if k != "pages"}
    lines = [json.dumps(p, sort_keys=True) for p in truth["pages"]]
    body = json.dumps(head, indent=1, sort_keys=True)[:-2]
    return body + ',\n "pages": [\n  ' + ",\n  ".join(lines) + "\n ]\n}\n"
