"""The HTML audit page in a real headless Chromium: it renders, shows the numbers, runs nothing from the dump.

Needs Debian's ``chromium`` and ``chromium-driver`` packages and the ``selenium`` test extra.
Skipped when they are missing, except under ``CI=true``, where a missing browser is a failure.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from scrapy_dedup.cli import main
from tests.support import require
from tests.support.localsite import LocalSite, Page
from tests.test_cli_report import KnownDump, body_words, write_dump

CHROMIUM = os.environ.get("DEDUP_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("DEDUP_CHROMEDRIVER", "/usr/bin/chromedriver")


def _missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (os.path.exists(path) and os.access(path, os.X_OK)):
            return f"{path} is missing (apt-get install chromium chromium-driver)"
    return None


@pytest.fixture(scope="module")
def browser():
    reason = _missing()
    require(not reason, f"the browser test cannot run: {reason}")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="dedup-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def payloads(base: str) -> list[str]:
    """Markup that, if it ever ran or loaded, sets the title, a global, or requests ``base``."""
    return [
        f"<script>document.title='PWNED';window.__pwned=1;fetch('{base}/script')</script>",
        f"<img src=x onerror=\"window.__pwned=2;new Image().src='{base}/onerror'\">",
        f"<img src='{base}/img'>",
        f"<svg onload=\"window.__pwned=3;fetch('{base}/svg')\"></svg>",
        f"<iframe src='{base}/iframe'></iframe>",
        f"<link rel=stylesheet href='{base}/css'>",
        f"<meta http-equiv=refresh content='0;url={base}/refresh'>",
        f"\"><script src='{base}/src.js'></script>",
        f"</style></title></textarea><script>window.__pwned=4;fetch('{base}/breakout')</script>",
    ]


def hostile_dump(tmp_path: Path, base: str) -> Path:
    """Pairs whose URLs and text carry the payloads, so they appear in clusters and in the sample."""
    lines = []
    for i, payload in enumerate(payloads(base)):
        words = body_words(500 + i)
        # The payload as text of the page (escaped in HTML, so page_text gives it back literally)...
        text_a = " ".join(words[:30]) + " " + payload + " " + " ".join(words[30:])
        text_b = text_a.replace(words[5], "changed", 1) + " " + payload
        url = f"https://evil.test/p{i}?q={payload}"
        lines.append({"url": url, "text": text_a})
        # ...and in the flagged near copy, whose URL carries it as well.
        lines.append({"url": f"https://evil.test/p{i}/copy/{payload}", "text": text_b})
        lines.append({"url": url + "&utm=1", "text": text_a})
    return write_dump(tmp_path / "hostile.jsonl", lines)


def load(driver, path: Path) -> None:
    driver.get(path.resolve().as_uri())


def test_report_renders_and_shows_the_numbers(browser, tmp_path, capsys):
    known = KnownDump(tmp_path)
    html = tmp_path / "audit.html"
    assert main(["report", str(known.path), "--html", str(html), "--json"]) == 0
    numbers = json.loads(capsys.readouterr().out)["numbers"]
    load(browser, html)
    assert browser.title.startswith("Duplication audit")
    table = browser.find_element("id", "numbers").text
    for label, key in (("Total URLs", "total"), ("Exact duplicates", "exact"), ("Near duplicates", "near"),
                       ("Unique pages", "unique"), ("Degenerate pages", "degenerate")):
        row = next(line for line in table.splitlines() if line.startswith(label))
        assert str(numbers[key]) in row.split(), row
    # Our own stylesheet is allowed by its CSP hash (it would be blocked if the hash were wrong).
    pair = browser.find_elements("css selector", "section.pair")
    assert len(pair) == numbers["redundant"]  # fewer flagged pairs than --sample 25: all are shown
    border = browser.execute_script(
        "return getComputedStyle(document.querySelector('section.pair')).borderTopStyle")
    assert border == "solid"
    assert browser.find_elements("css selector", "svg rect")  # the histograms rendered


def test_markup_from_the_dump_runs_nothing(browser, tmp_path, capsys):
    with LocalSite(lambda host, path: Page("window.__pwned=9")) as site:
        base = site.url("127.0.0.1", "").rstrip("/")
        dump = hostile_dump(tmp_path, base)
        html = tmp_path / "audit.html"
        assert main(["report", str(dump), "--html", str(html), "--sample", "100"]) == 0
        capsys.readouterr()
        load(browser, html)
        body = browser.find_element("tag name", "body").text
        browser.execute_script("return 1")  # the page is live
        assert browser.title.startswith("Duplication audit")
        assert browser.execute_script("return typeof window.__pwned") == "undefined"
        # The payloads are shown as text, verbatim, in the URLs and the side-by-side diff.
        assert "<script>document.title='PWNED'" in body
        assert "onerror=" in body
        assert browser.find_elements("css selector", "script, iframe, img, link[rel=stylesheet]") == []
        site_hits = sum(site.hits.values())
        assert site_hits == 0, site.hits

        # Control: the same payloads, unescaped in a page without the CSP, do run in this browser and
        # reach the counting server, so the assertions above can fail.
        control = tmp_path / "control.html"
        control.write_text("<!DOCTYPE html><html><head><title>control</title></head><body>"
                           + "".join(payloads(base)) + "</body></html>", encoding="utf-8")
        load(browser, control)
        browser.execute_script("return 1")
        import time

        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and sum(site.hits.values()) == 0:
            time.sleep(0.1)
        assert sum(site.hits.values()) > 0


def test_flagged_pair_shows_the_blocks_treated_as_boilerplate(browser, tmp_path, capsys):
    """A templated site's re-fetches: each flagged pair lists, per page, the blocks its host's template
    left out of the fingerprints, as text (the footer's markup is shown, not rendered)."""
    from tests.test_audit_boilerplate import _learning, templated_dump

    dump, site = templated_dump(tmp_path)
    html = tmp_path / "audit.html"
    assert main(["report", str(dump), "--html", str(html), *_learning(tmp_path)]) == 0
    capsys.readouterr()
    load(browser, html)
    views = browser.find_elements("css selector", "section.pair details.boilerplate")
    assert len(views) == site.docs
    views[0].find_element("tag name", "summary").click()
    shown = views[0].text
    assert "Blocks treated as boilerplate" in shown
    assert "Page generated at" in shown and "Example Docs: the reference of the example toolkit" in shown
    assert "<b>& friends</b>" in shown  # the footer's escaped markup, verbatim
    assert views[0].find_elements("css selector", "ul.boilerplate b") == []
    kept, flagged = views[0].find_elements("css selector", "ul.boilerplate")
    assert len(kept.find_elements("tag name", "li")) >= 3 and len(flagged.find_elements("tag name", "li")) >= 3


def test_mirrors_section_shows_causes_and_commands_and_runs_nothing(browser, tmp_path, capsys):
    """The mirrors section: its numbers are the JSON's, the settings and the mine-dust command are shown,
    and URLs carrying markup are shown as text (the unexplained examples), never run."""
    with LocalSite(lambda host, path: Page("window.__pwned=9")) as site:
        base = site.url("127.0.0.1", "").rstrip("/")
        dump = hostile_dump(tmp_path, base)
        payload = payloads(base)[0]
        text = " ".join(body_words(600))
        with dump.open("a", encoding="utf-8") as f:  # one page on two sites, under URLs carrying markup
            for url in (f"https://evil.test/x/{payload}", f"https://mirror.test/{payload}"):
                f.write(json.dumps({"url": url, "text": text}) + "\n")
        html = tmp_path / "audit.html"
        assert main(["report", str(dump), "--html", str(html), "--json"]) == 0
        mirrors = json.loads(capsys.readouterr().out)["mirrors"]
        assert mirrors["unexplained"]["across_hosts"] == 1
        load(browser, html)
        section = browser.find_element("id", "mirrors")
        shown = section.text
        rows = {line.rsplit(" ", 1)[0]: line.rsplit(" ", 1)[1] for line in
                section.find_element("css selector", "table.numbers").text.splitlines()}
        assert rows["Mirror pairs (duplicates at different URLs)"] == str(mirrors["pairs"])
        assert rows["Folded by settings off by default"] == str(mirrors["settings"]["pairs"])
        assert rows["Unexplained"] == str(mirrors["unexplained"]["pairs"])
        assert "tracking parameter ?utm= on evil.test" in shown
        assert "DEDUP_URL_POLICIES = {'evil.test': {'tracking_params': ['utm']}}" in shown
        assert mirrors["command"] in shown
        a, b = mirrors["unexplained"]["examples"][0]
        assert a in shown and b in shown and "<script>" in b  # the payload, verbatim as text
        assert browser.execute_script("return typeof window.__pwned") == "undefined"
        assert section.find_elements("css selector", "script, iframe, img, svg, link") == []
        assert sum(site.hits.values()) == 0, site.hits


def test_mirrors_warning_of_merged_pages_is_shown_as_text(browser, tmp_path, capsys, monkeypatch):
    """A miner allowed to keep bad rules drops ?page=: the section warns, naming the rule and the URLs, whose
    markup is shown as text."""
    import functools

    import scrapy_dedup.audit.runner as runner
    from scrapy_dedup.url.mining import MiningConfig

    permissive = MiningConfig(min_support=1, max_violation_rate=0.99, content_aliases=False)
    monkeypatch.setattr(runner, "explain_mirrors", functools.partial(runner.explain_mirrors, mining=permissive))
    payload = "<script>window.__pwned=5</script>"
    rows = [("/list", 1), ("/list?page=1", 1), ("/list?page=2", 2), (f"/list?page=3{payload}", 3)]
    dump = write_dump(tmp_path / "list.jsonl", [{"url": f"http://list.test{path}",
                                                 "text": " ".join(body_words(700 + n))} for path, n in rows])
    html = tmp_path / "audit.html"
    assert main(["report", str(dump), "--html", str(html), "--json"]) == 0
    mirrors = json.loads(capsys.readouterr().out)["mirrors"]
    assert mirrors["merged_distinct"]["urls"] == 2
    load(browser, html)
    shown = browser.find_element("id", "mirrors").text
    assert "Warning: distinct pages merged" in shown
    assert "list.test: drop ?page= under / (2 URLs)" in shown
    assert f"http://list.test/list?page=3{payload}" in shown
    assert browser.execute_script("return typeof window.__pwned") == "undefined"
    assert browser.find_elements("css selector", "#mirrors script") == []
