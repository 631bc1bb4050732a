"""``scrapy-dedup report --representative``: which member names each cluster in the audit's outputs."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from scrapy_dedup.cli import main
from tests.test_cli_report import body_words, html_page, write_dump

SESSION = "sessionid=4f8a2c9e1b7d3a6f0c5e"
#: one page under four URLs, in dump order; the clean URL is neither first nor newest
CLUSTER = [
    ("https://shop.test/p?utm_source=mail", "2024-01-01T10:00:00Z"),
    ("https://shop.test/p", "2024-01-02T10:00:00+00:00"),
    (f"https://shop.test/p?{SESSION}", 1709287200),  # 2024-03-01, as seconds
    ("https://shop.test/p?gclid=7", "yesterday"),  # unreadable: ranked after the dated ones
]
OTHER = "https://shop.test/q"  # a second page, unique


def dump(tmp_path: Path) -> Path:
    page = html_page(body_words(1))
    lines = [{"url": url, "html": page, "fetched_at": stamp} for url, stamp in CLUSTER]
    lines.append({"url": OTHER, "html": html_page(body_words(2)), "fetched_at": "2024-05-01T00:00:00Z"})
    return write_dump(tmp_path / "dump.jsonl", lines)


def report(tmp_path: Path, capsys, *flags: str) -> tuple[dict, list[dict], str]:
    clusters, html = tmp_path / "clusters.jsonl", tmp_path / "audit.html"
    code = main(["report", str(dump(tmp_path)), "--json", "--clusters", str(clusters), "--html", str(html), *flags])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = [json.loads(line) for line in clusters.read_text(encoding="utf-8").splitlines()]
    return json.loads(out), rows, html.read_text(encoding="utf-8")


@pytest.mark.parametrize("flags,expected", [
    (["--representative", "first"], CLUSTER[0][0]),
    ([], CLUSTER[1][0]),  # canonical, the default
    (["--representative", "canonical"], CLUSTER[1][0]),
    (["--representative", "newest", "--timestamp-field", "fetched_at"], CLUSTER[2][0]),
    (["--representative", "newest"], CLUSTER[3][0]),  # no time field: the dump's order, the last is the newest
])
def test_every_output_names_the_cluster_by_the_policys_member(tmp_path, capsys, flags, expected):
    data, rows, html = report(tmp_path, capsys, *flags)
    assert data["largest_clusters"] == [{"cluster": 0, "size": 4, "representative": expected}]
    assert {r["url"] for r in rows} == {url for url, _ in CLUSTER}  # every member, the unique page not
    assert {r["representative"] for r in rows} == {expected}
    assert {r["cluster"] for r in rows} == {0}  # the id stays the first page's, whatever names it
    kinds = {r["url"]: r["kind"] for r in rows}
    assert kinds[expected] == "representative"
    assert kinds[CLUSTER[0][0]] == ("representative" if expected == CLUSTER[0][0] else "kept")
    assert f"represented by: <span class='url'>{expected}</span>" in html
    # the numbers do not depend on the policy: it names clusters, it finds nothing
    assert (data["numbers"]["exact"], data["numbers"]["clusters"]) == (3, 1)


def test_newest_counts_the_pages_without_a_usable_time(tmp_path, capsys):
    data, _, html = report(tmp_path, capsys, "--representative", "newest", "--timestamp-field", "fetched_at")
    assert data["representative_policy"] == "newest" and data["pages_without_timestamp"] == 1
    assert "1 pages without a usable time" in html
    main(["report", str(dump(tmp_path)), "--representative", "newest", "--timestamp-field", "fetched_at"])
    text = capsys.readouterr().out
    assert "Clusters named by: newest (field 'fetched_at'; 1 pages without a usable time" in text


def test_a_warc_is_dated_by_its_records(tmp_path, capsys):
    pytest.importorskip("warcio")
    from tests.test_audit_warc import Warc

    page = html_page(body_words(3)).encode()
    warc = Warc(gz=False)
    for url, date in [("http://shop.test/a", "2024-02-01T00:00:00Z"), ("http://shop.test/a?utm_source=x",
                      "2024-06-01T00:00:00Z"), ("http://shop.test/b", "2024-03-01T00:00:00Z")]:
        warc.response(url, page, warc_headers={"WARC-Date": date})
    path = warc.save(tmp_path / "crawl.warc")
    for flags, expected in ((["--representative", "newest"], "http://shop.test/a?utm_source=x"),
                            ([], "http://shop.test/a")):
        assert main(["report", str(path), "--json", *flags]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["largest_clusters"][0]["representative"] == expected, flags


def test_a_bad_policy_fails_at_start_naming_the_key(tmp_path, capsys):
    config = tmp_path / "dupcheck.json"
    config.write_text(json.dumps({"representative": "oldest"}))
    assert main(["report", str(dump(tmp_path)), "--config", str(config)]) == 2
    assert "representative must be one of 'first', 'canonical', 'newest'" in capsys.readouterr().err
