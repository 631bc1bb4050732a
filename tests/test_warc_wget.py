"""WARC files as a real crawler writes them: GNU wget ``--warc-file`` against the project's local sites.

wget crawls through :class:`~tests.support.recording_proxy.RecordingProxy` (the sites'
``*.test`` names resolve only inside the tests), which keeps every response wget
received: the independent record the WARC is checked against. The audit of wget's WARC
must give the numbers of the audit of a JSON Lines dump of the same responses, and the
example site's truth file (example_project/demosite/truth.json) for the pages fetched;
``mine-dust`` on it must give the rules it gives on the dump of the same pages.

Needs GNU wget (``scripts/test.sh`` installs Debian's ``wget``). Skipped when it is
missing, except under ``CI=true``, where a missing wget is a failure.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import scrapy
from pytest_twisted import inlineCallbacks

from scrapy_dedup.audit.config import build_config
from scrapy_dedup.audit.runner import audit_dump
from scrapy_dedup.cli import main
from scrapy_dedup.url.dust import RuleSet
from tests import dustsite
from tests.support import require
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite
from tests.support.recording_proxy import RecordingProxy
from tests.test_cli_report import write_dump

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "example_project"
if str(EXAMPLE) not in sys.path:
    sys.path.insert(0, str(EXAMPLE))

from demosite import HOSTS, START_HOSTS, SiteServer, expected_numbers, load  # noqa: E402

pytestmark = pytest.mark.crawl
WGET_OK = (0, 8)  # 8: the server answered some request with an error (the example site's 404s)


@pytest.fixture(scope="module")
def wget_path() -> str:
    path = shutil.which("wget")
    require(path is not None, "wget is missing (apt-get install wget)")
    return path


def wget(wget_path: str, proxy: RecordingProxy, workdir: Path, name: str, start_urls: list[str],
         *options: str) -> Path:
    """Crawl recursively from ``start_urls`` through ``proxy``; the WARC wget wrote (``workdir/name.warc.gz``)."""
    files = workdir / f"{name}-files"
    cmd = [wget_path, "--quiet", "-e", "robots=off", "-e", "use_proxy=yes", "-e", f"http_proxy={proxy.address}",
           "--recursive", "--level=inf", "--adjust-extension", "-P", str(files),  # -E: "/a" and "/a/" both fit
           f"--warc-file={workdir / name}", "--no-warc-keep-log", *options, *start_urls]
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=600)
    assert proc.returncode in WGET_OK, (proc.returncode, proc.stderr[-2000:])
    shutil.rmtree(files, ignore_errors=True)
    return workdir / f"{name}.warc.gz"


def pages_dump(path: Path, exchanges: list) -> Path:
    """The JSON Lines dump of the 2xx responses, in the order wget received them."""
    return write_dump(path, [{"url": e.url, "html": e.body.decode("utf-8")} for e in exchanges
                             if 200 <= e.status < 300])


def report(path: Path, **overrides) -> dict:
    result, _, _ = audit_dump(str(path), build_config({}, overrides), want_samples=False)
    return result


def portless(url: str) -> str:
    parts = urlsplit(url)
    return url.replace(f"//{parts.netloc}", f"//{parts.hostname}", 1)


def page_numbers(result) -> dict:
    return {k: v for k, v in result.numbers.items() if not k.startswith("skipped_")}


def test_wget_warc_of_the_example_site_gives_the_numbers_of_its_pages_and_its_truth(wget_path, tmp_path):
    with SiteServer() as site, RecordingProxy() as proxy:
        warc = wget(wget_path, proxy, tmp_path, "demo", [site.url(h) for h in START_HOSTS],
                    "--span-hosts", f"--domains={','.join(HOSTS)}")
        exchanges = list(proxy.exchanges)
    dump = pages_dump(tmp_path / "demo.jsonl", exchanges)
    # the demo project's content settings (example_project/store/settings.py): the per-fetch
    # "generated at" line, and the EU mirror's VAT notice (found on that host only)
    options = {"strip_selectors": ".generated-at,.vat-notice"}
    from_warc, from_dump = report(warc, **options), report(dump, **options)
    assert page_numbers(from_warc) == page_numbers(from_dump)

    truth = {p["url"]: p for p in load()["pages"]}
    fetched = [truth[portless(e.url)] for e in exchanges if e.status == 200]
    assert len({p["url"] for p in fetched}) == len(fetched) == len(truth)  # every page, each once
    expected = expected_numbers(fetched, url_layer=False)
    n = from_warc.numbers
    assert {"pages_fetched": n["total"], "exact_duplicates": n["exact"], "near_duplicates": n["near"],
            "unique_pages": n["unique"], "redundant_pages": n["redundant"], "duplicate_clusters": n["clusters"],
            "largest_cluster": n["largest_cluster"], "degenerate_pages": n["degenerate"]} == expected

    counts = from_warc.input_counts
    errors = sum(1 for e in exchanges if e.status >= 400)
    assert counts["type/request"] == counts["type/response"] == len(exchanges)
    assert counts["pages"] == len(fetched) and counts.get("status/4xx", 0) == errors
    assert from_warc.bad_lines.count == 0


@pytest.fixture(scope="module")
def dust_crawls(wget_path, tmp_path_factory):
    """The DUST site crawled twice by wget: ``one`` (with its CDX index), ``two`` deduplicated against it (revisits)."""
    workdir = tmp_path_factory.mktemp("dust")
    with LocalSite(dustsite.router) as site, RecordingProxy() as proxy:
        start = [site.url(dustsite.HOST)]
        one = wget(wget_path, proxy, workdir, "one", start, "--warc-cdx")
        first = len(proxy.exchanges)
        two = wget(wget_path, proxy, workdir, "two", start, f"--warc-dedup={workdir / 'one.cdx'}")
        exchanges = list(proxy.exchanges)
    return {"one": one, "two": two, "dir": workdir, "first": exchanges[:first], "all": exchanges}


def test_wget_revisits_count_as_the_copies_they_are(dust_crawls):
    workdir = dust_crawls["dir"]
    both = workdir / "both.warc.gz"
    both.write_bytes(dust_crawls["one"].read_bytes() + dust_crawls["two"].read_bytes())  # `cat one two`
    from_warcs = report(both)
    from_dump = report(pages_dump(workdir / "both.jsonl", dust_crawls["all"]))
    assert page_numbers(from_warcs) == page_numbers(from_dump)
    counts = from_warcs.input_counts
    assert counts["revisits"] > 10 and counts["revisits_of_pages"] == counts["revisits"]
    assert from_warcs.bad_lines.count == 0
    # alone, the second crawl's revisits of the first crawl's records point out of the input
    alone = report(dust_crawls["two"])
    unresolved = {r["reason"]: r["count"] for r in alone.bad_lines.to_dict()["reasons"]}
    assert unresolved.get("revisit of a record not in this input", 0) > 0
    assert alone.numbers["total"] + alone.bad_lines.count == len(dust_crawls["all"]) - len(dust_crawls["first"])


class SiteSpider(scrapy.Spider):
    """Follows every link of the site (as tests/test_crawl_dust.py)."""

    name = "dustsite"

    def parse(self, response):
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)


def mine(path: Path, out: Path) -> set:
    assert main(["mine-dust", str(path), "-o", str(out)]) == 0
    return {(host, rule.key) for host, rules in RuleSet.load(out).hosts.items() for rule in rules}


@inlineCallbacks
def test_mine_dust_on_a_wget_warc_finds_the_rules_of_the_same_pages_and_of_a_crawl_log(dust_crawls):
    workdir = dust_crawls["dir"]
    from_warc = mine(dust_crawls["one"], workdir / "warc.rules")
    from_dump = mine(pages_dump(workdir / "one.jsonl", dust_crawls["first"]), workdir / "dump.rules")
    assert from_warc == from_dump
    kinds = sorted({key[1][0] for key in from_warc})
    assert kinds == ["default_param", "drop_param", "drop_segment", "query_to_path", "substitute"]

    log = workdir / "crawl-log.jsonl"
    with LocalSite(dustsite.router) as site:
        yield run_crawl(SiteSpider, {"ADDONS": {"scrapy_dedup.Addon": 0}, "DEDUP_LOG_FILE": str(log)},
                        start_urls=[site.url(dustsite.HOST)])
    from_log = mine(log, workdir / "log.rules")
    # Scrapy and wget fetch the same pages through different URL sets (Scrapy's request
    # fingerprint sorts query arguments; wget keeps each link as written), so the rules'
    # support may differ; the rules found are the same.
    assert from_log == from_warc, json.dumps(sorted(map(str, from_log ^ from_warc)), indent=1)
