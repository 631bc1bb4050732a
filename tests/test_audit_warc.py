"""`scrapy-dedup report` and `mine-dust` on WARC files written by warcio's own writer, with answers known by construction.

Every WARC here is built record by record with ``warcio.warcwriter.WARCWriter`` (plain or
one gzip member per record, as crawlers write them); damage is made by cutting or
changing the bytes it wrote. The audit's numbers on a WARC are checked against the
audit of a JSON Lines dump of the same pages (their text as a reader sees it), so a
payload decoded wrongly (its charset, its transfer or content encoding) shows as a
page that is no longer the exact duplicate it is.
"""
from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Optional

import brotli
import pytest
from hypothesis import given
from hypothesis import strategies as st
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from scrapy_dedup.audit.config import build_config
from scrapy_dedup.audit.runner import audit_dump
from scrapy_dedup.cli import main
from scrapy_dedup.url.dust import RuleSet
from tests.test_cli_report import body_words, edit_to_distance, html_page, write_dump

ROOT = Path(__file__).resolve().parents[1]
CYRILLIC = [w + "ский" for w in ("про", "вод", "лес", "мор", "гор", "дом", "сад", "мир", "час", "род")]


def cyrillic_words(seed: int, n: int = 120) -> list[str]:
    import random

    rng = random.Random(seed)
    return [rng.choice(CYRILLIC) + rng.choice("абвгдежз") for _ in range(n)]


class Warc:
    """WARC records as warcio writes them, one byte string per record (one gzip member each when ``gz``)."""

    def __init__(self, gz: bool):
        self.gz = gz
        self.records: list[bytes] = []
        self.last = None  # the last record object written (its headers give IDs and digests)

    def _write(self, record) -> None:
        out = io.BytesIO()
        WARCWriter(out, gzip=self.gz).write_record(record)
        self.records.append(out.getvalue())
        self.last = record

    def _writer(self) -> WARCWriter:
        return WARCWriter(io.BytesIO(), gzip=self.gz)

    def warcinfo(self) -> None:
        self._write(self._writer().create_warcinfo_record("test.warc", {"software": "tests"}))

    def request(self, url: str) -> None:
        http = StatusAndHeaders(f"GET {url} HTTP/1.1", [("Host", "shop.test")], is_http_request=True)
        self._write(self._writer().create_warc_record(url, "request", http_headers=http))

    def response(self, url: str, body: bytes, content_type: Optional[str] = "text/html; charset=utf-8",
                 status: str = "200 OK", headers: tuple = (), warc_headers: Optional[dict] = None) -> None:
        fields = [("Content-Type", content_type)] if content_type else []
        fields += list(headers)
        if not any(name.lower() == "transfer-encoding" for name, _ in headers):
            fields.append(("Content-Length", str(len(body))))
        http = StatusAndHeaders(status, fields, protocol="HTTP/1.1")
        self._write(self._writer().create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http,
                                                      warc_headers_dict=warc_headers or {}))

    def revisit(self, url: str, *, refers_to: Optional[str] = None, digest: Optional[str] = None,
                refers_to_uri: Optional[str] = None, refers_to_date: Optional[str] = None) -> None:
        extra = {"WARC-Refers-To": refers_to} if refers_to else {}
        record = self._writer().create_revisit_record(url, digest=digest or "sha1:NOTINTHISINPUT",
                                                      refers_to_uri=refers_to_uri, refers_to_date=refers_to_date,
                                                      warc_headers_dict=extra)
        record.rec_headers.headers = [(k, v) for k, v in record.rec_headers.headers if v is not None]
        self._write(record)

    def metadata(self, url: str) -> None:
        self._write(self._writer().create_warc_record(url, "metadata", payload=io.BytesIO(b"outlinks: none\n"),
                                                      warc_content_type="application/warc-fields"))

    def header(self, name: str) -> str:
        return self.last.rec_headers.get_header(name)

    def save(self, path: Path) -> Path:
        path.write_bytes(b"".join(self.records))
        return path


def chunked(body: bytes, size: int = 700) -> bytes:
    parts = [body[i:i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


def audit(path: Path, **overrides):
    result, _, _ = audit_dump(str(path), build_config({}, overrides), want_samples=False)
    return result


def numbers(result) -> dict:
    n = dict(result.numbers)
    n.pop("skipped_non_text"), n.pop("skipped_non_html")
    return n


# --- one WARC with every kind of record ------------------------------------------------------------

class EveryKind:
    """A WARC with every kind of record and payload, and the JSON Lines dump of the pages it holds.

    Page A (Cyrillic text) seven times: UTF-8; windows-1251 by the HTTP charset; KOI8-R by
    its ``<meta>`` only; gzip-, br- and deflate-encoded; chunked and gzip-encoded; then a
    revisit of it by record ID. Page B, a near copy of B, page C twice (a revisit by
    payload digest only, and one by target URI and date), a degenerate page. Not pages: a
    JSON answer and an XHTML-less XML feed (non-HTML), a PNG (non-text), a 404, a 301, a
    truncated response, a revisit of a record not in the file, requests, metadata, warcinfo.
    """

    def __init__(self, gz: bool):
        w = self.warc = Warc(gz)
        text_a = cyrillic_words(1)
        words_b = body_words(2)
        self.pages: list[tuple[str, str]] = []  # (url, html) of every page, revisits repeated, in order

        def page(url: str, html: str, body: bytes, **kw) -> None:
            w.request(url)
            w.response(url, body, **kw)
            self.pages.append((url, html))

        w.warcinfo()
        html_a = html_page(text_a, title="Страница")
        page("http://shop.test/a", html_a, html_a.encode("utf-8"))
        record_a = w.header("WARC-Record-ID")
        page("http://shop.test/a?cp=1251", html_a, html_a.encode("windows-1251"),
             content_type="text/html; charset=windows-1251")
        meta_a = html_a.replace("<head>", '<head><meta charset="koi8-r">')
        page("http://shop.test/a?cp=koi8", meta_a, meta_a.encode("koi8-r"), content_type="text/html")
        page("http://shop.test/a?enc=gzip", html_a, gzip.compress(html_a.encode("utf-8")),
             headers=(("Content-Encoding", "gzip"),))
        page("http://shop.test/a?enc=br", html_a, brotli.compress(html_a.encode("utf-8")),
             headers=(("Content-Encoding", "br"),))
        page("http://shop.test/a?enc=deflate", html_a, zlib.compress(html_a.encode("utf-8")),
             headers=(("Content-Encoding", "deflate"),))
        page("http://shop.test/a?te=chunked", html_a, chunked(gzip.compress(html_a.encode("utf-8"))),
             headers=(("Transfer-Encoding", "chunked"), ("Content-Encoding", "gzip")))
        w.revisit("http://shop.test/a?again", refers_to=record_a, refers_to_uri="http://shop.test/a")
        self.pages.append(("http://shop.test/a?again", html_a))

        html_b = html_page(words_b)
        page("http://shop.test/b", html_b, html_b.encode("utf-8"))
        html_b2 = html_page(edit_to_distance(words_b, 2, seed=5))
        page("http://shop.test/b-copy", html_b2, html_b2.encode("utf-8"))
        html_c = html_page(body_words(3))
        page("http://shop.test/c", html_c, html_c.encode("utf-8"))
        digest_c, date_c = w.header("WARC-Payload-Digest"), w.header("WARC-Date")
        w.revisit("http://shop.test/c?session=1", digest=digest_c)  # identical payload: the digest alone
        self.pages.append(("http://shop.test/c?session=1", html_c))
        w.revisit("http://shop.test/c", refers_to_uri="http://shop.test/c", refers_to_date=date_c)
        self.pages.append(("http://shop.test/c", html_c))
        html_d = "<html><body><p>Access denied</p></body></html>"
        page("http://shop.test/denied", html_d, html_d.encode())

        w.request("http://shop.test/api")
        w.response("http://shop.test/api", b'{"items": [1, 2, 3]}', content_type="application/json")
        w.response("http://shop.test/feed", b'<?xml version="1.0"?><rss><channel></channel></rss>',
                   content_type="application/rss+xml")
        w.response("http://shop.test/logo.png", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8, content_type="image/png")
        w.revisit("http://shop.test/api?v=2", refers_to=None, refers_to_uri="http://shop.test/api")
        w.response("http://shop.test/missing", html_d.encode(), status="404 Not Found")
        w.response("http://shop.test/old", b"", status="301 Moved Permanently", headers=(("Location", "/b"),))
        w.response("http://shop.test/big", html_b.encode(), warc_headers={"WARC-Truncated": "length"})
        w.revisit("http://shop.test/gone", refers_to="<urn:uuid:00000000-0000-0000-0000-000000000000>")
        w.metadata("http://shop.test/a")

    def dump(self, path: Path) -> Path:
        return write_dump(path, [{"url": u, "html": h} for u, h in self.pages])


@pytest.mark.parametrize("gz", [False, True], ids=["warc", "warc.gz"])
def test_a_warc_is_audited_like_the_dump_of_its_pages(tmp_path, gz):
    every = EveryKind(gz)
    warc = every.warc.save(tmp_path / ("crawl.warc.gz" if gz else "crawl.warc"))
    result = audit(warc)
    expected = audit(every.dump(tmp_path / "pages.jsonl"))
    assert numbers(result) == numbers(expected)
    # page A in seven encodings and its revisit: one page and seven exact duplicates of it
    assert result.largest_clusters[0].size == 8 and result.largest_clusters[0].representative == "http://shop.test/a"
    n = result.numbers
    assert (n["total"], n["exact"], n["near"], n["degenerate"]) == (len(every.pages), 7 + 2, 1, 1)
    assert (n["skipped_non_html"], n["skipped_non_text"]) == (3, 1)  # JSON, RSS and the JSON's revisit; the PNG
    assert result.input_format == "warc" and result.unit == "record"
    reasons = {r["reason"]: r["count"] for r in result.bad_lines.to_dict()["reasons"]}
    assert reasons == {"truncated by the crawler (WARC-Truncated: length)": 1,
                       "revisit of a record not in this input": 1}
    counts = result.input_counts
    assert counts["type/request"] == 12 and counts["type/metadata"] == 1 and counts["type/warcinfo"] == 1
    assert counts["redirects"] == 1 and counts["status/4xx"] == 1 and counts["revisits"] == 5
    assert counts["records"] == len(every.warc.records) == result.lines_read


def test_the_report_names_records_not_lines(tmp_path, capsys):
    warc = EveryKind(gz=True).warc.save(tmp_path / "crawl.warc.gz")
    assert main(["report", str(warc)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert "Bad records:         2 (skipped)" in out
    assert "revisit of a record not in this input (record 35)" in out
    assert "WARC records:        36 (response 17, request 12, revisit 5, metadata 1, warcinfo 1)" in out
    assert "redirects 1, status 4xx 1" in out
    assert main(["report", str(warc), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["format"] == "warc" and data["warc"]["type/revisit"] == 5


def test_format_is_told_by_content_not_by_name(tmp_path):
    every = EveryKind(gz=True)
    misnamed_warc = every.warc.save(tmp_path / "crawl.jsonl")
    misnamed_dump = every.dump(tmp_path / "pages.warc.gz")
    assert audit(misnamed_warc).input_format == "warc"
    assert audit(misnamed_dump).input_format == "jsonl"
    gz_dump = write_dump(tmp_path / "pages", [{"url": u, "html": h} for u, h in every.pages], compress=True)
    assert numbers(audit(gz_dump)) == numbers(audit(misnamed_warc))


def test_jobs_give_the_same_report(tmp_path):
    warc = EveryKind(gz=True).warc.save(tmp_path / "crawl.warc.gz")
    cfg = build_config({}, {})
    one, _, _ = audit_dump(str(warc), cfg, jobs=1, want_samples=False)
    two, _, _ = audit_dump(str(warc), cfg, jobs=2, want_samples=False)
    assert one.numbers == two.numbers and one.bad_lines.to_dict() == two.bad_lines.to_dict()


def test_pairs_and_clusters_list_revisits(tmp_path):
    every = EveryKind(gz=False)
    warc = every.warc.save(tmp_path / "crawl.warc")
    pairs, clusters = tmp_path / "pairs.jsonl", tmp_path / "clusters.jsonl"
    assert main(["report", str(warc), "--pairs", str(pairs), "--clusters", str(clusters)]) == 0
    rows = [json.loads(line) for line in pairs.read_text().splitlines()]
    assert {"url_a": "http://shop.test/a", "url_b": "http://shop.test/a?again", "distance": 0, "kind": "exact"} in rows
    assert {"url_a": "http://shop.test/c", "url_b": "http://shop.test/c?session=1", "distance": 0,
            "kind": "exact"} in rows
    members = {json.loads(line)["url"] for line in clusters.read_text().splitlines()}
    assert {"http://shop.test/a?again", "http://shop.test/c?session=1"} <= members


# --- damage -----------------------------------------------------------------------------------------

def pages_warc(gz: bool, n: int) -> tuple[Warc, list[str]]:
    w = Warc(gz)
    urls = [f"http://shop.test/p{i}" for i in range(n)]
    for i, url in enumerate(urls):
        w.response(url, html_page(body_words(50 + i)).encode())
    return w, urls


def test_damage_in_a_plain_warc_costs_the_damaged_records_only(tmp_path):
    w, urls = pages_warc(gz=False, n=6)
    records = list(w.records)
    cut = records[5][: len(records[5]) // 2]
    # garbage where record 3 should start (a wrong Content-Length before it would leave the same)
    data = records[0] + records[1] + b"<html>stray bytes</html>\r\n\r\n" + records[2] + records[3] + records[4] + cut
    path = tmp_path / "damaged.warc"
    path.write_bytes(data)
    result = audit(path)
    assert result.numbers["total"] == 5 and result.numbers["unique"] == 5  # records 1-5 all read
    bad = {r["reason"]: r["lines"] for r in result.bad_lines.to_dict()["reasons"]}
    assert bad == {"not a WARC record header (a wrong Content-Length before it?); skipped to the next record": [3],
                   "cut short: the input ends inside the record": [6]}


def _with_length(record: bytes, length: int) -> bytes:
    """``record`` with its WARC Content-Length header replaced by ``length`` (the block itself unchanged)."""
    head, sep, block = record.partition(b"\r\n\r\n")
    lines = [b"Content-Length: %d" % length if line.lower().startswith(b"content-length:") else line
             for line in head.split(b"\r\n")]
    return b"\r\n".join(lines) + sep + block


@pytest.mark.parametrize("claim", ["1 GB", "5000 bytes too long"])
def test_a_lying_content_length_costs_its_record_only_counted(tmp_path, capsys, claim):
    """A record claiming 1 GB hid the next 47 of 50 records; 5,000 bytes too many swallowed 4, uncounted."""
    w, urls = pages_warc(gz=False, n=50)
    records = list(w.records)
    liar = 2
    block = len(records[liar].partition(b"\r\n\r\n")[2]) - 4  # the block without its closing CRLF CRLF
    length = 10**9 if claim == "1 GB" else block + 5000
    records[liar] = _with_length(records[liar], length)
    path = tmp_path / "lying.warc"
    path.write_bytes(b"".join(records))
    result = audit(path)
    assert result.numbers["total"] == 49  # every other record read, none swallowed
    assert result.input_counts["wrong_lengths"] == 1
    (bad,) = result.bad_lines.to_dict()["reasons"]
    assert bad["lines"] == [liar + 1] and f"its Content-Length ({length}) runs past the next record" in bad["reason"]
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "wrong lengths:     1" in out


def test_a_page_about_warc_keeps_its_record_whose_length_is_true(tmp_path):
    """A payload quoting a WARC header is not a record boundary when the length ends where a record ends."""
    w = Warc(False)
    quoted = html_page(body_words(60)).replace("</body>", "<pre>\r\n\r\nWARC/1.0\r\nWARC-Type: response</pre></body>")
    w.response("http://shop.test/about-warc", quoted.encode())
    w.response("http://shop.test/next", html_page(body_words(61)).encode())
    path = tmp_path / "quoted.warc"
    path.write_bytes(b"".join(w.records))
    result = audit(path)
    assert result.numbers["total"] == 2 and not result.bad_lines.count
    assert not result.input_counts.get("wrong_lengths")


def test_damage_in_a_warc_gz_costs_the_damaged_members_only(tmp_path):
    w, urls = pages_warc(gz=True, n=6)
    records = list(w.records)
    member = bytearray(records[2])
    for i in range(len(member) // 2, len(member) // 2 + 40):  # deflate data no longer decodes (or fails its CRC)
        member[i] ^= 0x5A
    data = records[0] + records[1] + bytes(member) + records[3] + records[4] + records[5][:-30]
    path = tmp_path / "damaged.warc.gz"
    path.write_bytes(data)
    result = audit(path)
    assert result.numbers["total"] == 4 and result.numbers["unique"] == 4  # records 1, 2, 4, 5
    bad = {r["reason"].split(" (")[0]: r["lines"] for r in result.bad_lines.to_dict()["reasons"]}
    assert bad == {"damaged gzip data": [3], "in a damaged gzip member: the input ends inside a gzip member": [6]}
    assert result.input_counts["damaged_gzip_members"] == 2


def test_a_content_encoding_that_breaks_midway_is_a_bad_record_and_nothing_leaks_to_stderr(tmp_path):
    import random

    rng = random.Random(7)
    noise = " ".join("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(8)) for _ in range(40000))
    compressed = bytearray(gzip.compress(html_page(noise.split()).encode()))
    assert len(compressed) > 100_000
    for i in range(60_000, 60_100):  # past warcio's first block: it cannot fall back to "not compressed"
        compressed[i] ^= 0xFF
    w = Warc(gz=True)
    w.response("http://shop.test/broken", bytes(compressed), headers=(("Content-Encoding", "gzip"),))
    w.response("http://shop.test/fine", html_page(body_words(1)).encode())
    w.response("http://shop.test/with space", html_page(body_words(2)).encode())  # warcio would log a warning
    path = w.save(tmp_path / "enc.warc.gz")
    proc = subprocess.run([sys.executable, "-m", "scrapy_dedup", "report", str(path)], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0 and proc.stderr == ""
    assert "payload could not be decoded (Content-Encoding: gzip) (record 1)" in proc.stdout
    assert "Total URLs:          2" in proc.stdout


def test_exit_status_of_warc_input(tmp_path, capsys):
    w, _ = pages_warc(gz=True, n=3)
    for i in range(3):
        w.response(f"http://shop.test/mirror{i}", html_page(body_words(50)).encode())
    path = w.save(tmp_path / "crawl.warc.gz")
    assert main(["report", str(path), "--fail-above", "0.6"]) == 0
    assert main(["report", str(path), "--fail-above", "0.4"]) == 1
    capsys.readouterr()
    bad = Warc(gz=False)
    bad.response("http://shop.test/big", b"<html></html>", warc_headers={"WARC-Truncated": "length"})
    bad_path = bad.save(tmp_path / "bad.warc")
    assert main(["report", str(bad_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("scrapy-dedup report: ") and "no record is a usable page record" in err
    assert "Traceback" not in err
    mixed = Warc(gz=False)
    mixed.records = bad.records + w.records
    assert main(["report", str(mixed.save(tmp_path / "mixed.warc")), "--strict"]) == 2
    err = capsys.readouterr().err
    assert "record 1: truncated by the crawler (WARC-Truncated: length) (--strict)" in err


# --- streams ----------------------------------------------------------------------------------------

def run_script(script: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SD": f"{sys.executable} -m scrapy_dedup"}
    return subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("how", ["cat crawl.warc.gz | $SD report - --json --html report.html",
                                 "mkfifo fifo; (cat crawl.warc.gz > fifo &); $SD report fifo --json --html report.html"],
                         ids=["stdin", "fifo"])
def test_a_warc_that_cannot_seek_is_read_once_and_spooled_for_the_html_sample(tmp_path, how):
    every = EveryKind(gz=True)
    every.warc.save(tmp_path / "crawl.warc.gz")
    proc = run_script(how, tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["numbers"] == audit(tmp_path / "crawl.warc.gz").numbers
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "shop.test/a?again" in page and "shop.test/c?session=1" in page  # the revisits' pairs are sampled


def test_the_html_sample_shows_a_revisit_with_its_page_text(tmp_path):
    from scrapy_dedup.audit.runner import fill_sample_texts

    path = EveryKind(gz=True).warc.save(tmp_path / "crawl.warc.gz")
    result, pages, _ = audit_dump(str(path), build_config({}, {}), want_samples=True)
    fill_sample_texts(result, pages, str(path))
    sample = next(s for s in result.samples if s.url_b == "http://shop.test/a?again")
    assert sample.url_a == "http://shop.test/a" and sample.kind == "exact"
    assert [run.op for run in sample.diff] == ["equal"]
    words = sample.diff[0].a
    assert words[0] == "Страница" and words[1:] == cyrillic_words(1)  # the title and text, decoded


# --- mine-dust --------------------------------------------------------------------------------------

def dust_warc(gz: bool, redirects_first: bool) -> Warc:
    """Stories at /story/N; /story?id=N redirects there (before or after the story is fetched)."""
    w = Warc(gz)
    for n in range(1, 7):
        story = (f"http://news.test/story/{n}", html_page(body_words(300 + n)).encode())
        redirect = f"http://news.test/story?id={n}"
        steps = [lambda redirect=redirect, n=n: w.response(redirect, b"", status="301 Moved Permanently",
                                                           headers=(("Location", f"/story/{n}"),)),
                 lambda story=story: w.response(*story)]
        for step in (steps if redirects_first else steps[::-1]):
            step()
    return w


@pytest.mark.parametrize("redirects_first", [True, False], ids=["redirect-then-page", "page-then-redirect"])
def test_mine_dust_takes_redirects_as_evidence(tmp_path, redirects_first):
    path = dust_warc(gz=True, redirects_first=redirects_first).save(tmp_path / "news.warc.gz")
    rules_file = tmp_path / "rules.json"
    assert main(["mine-dust", str(path), "-o", str(rules_file)]) == 0
    rules = RuleSet.load(rules_file).hosts["news.test"]
    assert [(r.kind, r.param, r.to) for r in rules] == [("query_to_path", "id", "/story/{value}")]


def test_mine_dust_on_a_warc_and_on_the_dump_of_its_pages_agree(tmp_path, capsys):
    w = Warc(gz=False)
    pages = []
    for n in range(1, 6):
        html = html_page(body_words(400 + n))
        for url in (f"http://news.test/story/{n}", f"http://news.test/story/{n}?print=1"):
            w.response(url, html.encode())
            pages.append({"url": url, "html": html})
        w.revisit(f"http://news.test/story/{n}?utm_source=feed", refers_to=None, digest=w.header("WARC-Payload-Digest"))
        pages.append({"url": f"http://news.test/story/{n}?utm_source=feed", "html": html})
    warc = w.save(tmp_path / "news.warc")
    dump = write_dump(tmp_path / "news.jsonl", pages)
    for source in (warc, dump):
        assert main(["mine-dust", str(source), "-o", str(tmp_path / f"{source.name}.rules")]) == 0
    from_warc = RuleSet.load(tmp_path / "news.warc.rules")
    from_dump = RuleSet.load(tmp_path / "news.jsonl.rules")
    assert from_warc.to_json()["hosts"] == from_dump.to_json()["hosts"]
    assert {r.param for r in from_warc.hosts["news.test"]} == {"print", "utm_source"}
    assert "read 15 line(s), 15 URL(s)" in capsys.readouterr().err


def test_mine_dust_error_on_a_log_that_cannot_be_opened(tmp_path, capsys):
    assert main(["mine-dust", str(tmp_path / "missing.warc.gz")]) == 2
    err = capsys.readouterr().err
    assert "missing.warc.gz: cannot open log: No such file or directory" in err and "Traceback" not in err


# --- the crawl's decision -------------------------------------------------------------------------

CASES = [
    ("text/html; charset=utf-8", "http://a.test/", b"<html><body>hi</body></html>"),
    ("text/plain", "http://a.test/rfc.txt", b"Network Working Group\n\nabstract"),
    ("application/json", "http://a.test/api", b'{"a": 1}'),
    ("text/html", "http://a.test/api", b'[{"id": 1}]'),
    ("application/rss+xml", "http://a.test/feed", b"<?xml version='1.0'?><rss/>"),
    ("application/xml", "http://a.test/x", b"<?xml version='1.0'?><html><body>x</body></html>"),
    ("text/css", "http://a.test/s.css", b"body { color: red }"),
    ("image/png", "http://a.test/i.png", b"\x89PNG\r\n\x1a\n" + bytes(range(64)) * 4),
    ("application/pdf", "http://a.test/d.pdf", b"%PDF-1.4\n" + bytes(range(256))),
    ("application/octet-stream", "http://a.test/page", b"<html><body>served oddly</body></html>"),
    (None, "http://a.test/page.html", b"<html><body>no type</body></html>"),
    (None, "http://a.test/blob", bytes(range(200))),
    ("text/html", "http://a.test/bin", b"\x00\x01\x02\x03" * 300),
    ("image/svg+xml", "http://a.test/i.svg", b"<svg xmlns='http://www.w3.org/2000/svg'/>"),
    ("application/x-unknown", "http://a.test/x.bin", b"\x01\x02 some bytes"),
]


@pytest.mark.parametrize("content_type,url,body", CASES)
def test_warc_responses_are_skipped_as_the_crawl_skips_them(content_type, url, body):
    from scrapy.http import Headers, TextResponse
    from scrapy.responsetypes import responsetypes

    from scrapy_dedup.audit.warc import _NON_HTML, _NON_TEXT, _PAGE, _page_kind
    from scrapy_dedup.content.structured import SNIFF_BYTES, looks_binary, structured_kind

    headers = Headers({"Content-Type": content_type} if content_type else {})
    response = responsetypes.from_args(headers=headers, url=url, body=body)(url=url, headers=headers, body=body)
    kind = structured_kind(response.headers.get(b"Content-Type"), response.body[:SNIFF_BYTES])
    # the crawl's rule (scrapy_dedup/content/pages.py, PageReader.read) on Scrapy's own response
    if looks_binary(response.body) or (kind is None and not isinstance(response, TextResponse)):
        crawl = _NON_TEXT
    else:
        crawl = _NON_HTML if kind is not None else _PAGE
    assert _page_kind(content_type, url, body) == crawl


# --- any bytes ----------------------------------------------------------------------------------------

def _fuzz_base(gz: bool) -> bytes:
    w, _ = pages_warc(gz, n=3)
    w.request("http://shop.test/p0")
    w.response("http://shop.test/te", chunked(gzip.compress(html_page(body_words(9)).encode())),
               headers=(("Transfer-Encoding", "chunked"), ("Content-Encoding", "gzip")))
    w.revisit("http://shop.test/again", refers_to=w.header("WARC-Record-ID"))
    w.response("http://shop.test/old", b"", status="302 Found", headers=(("Location", "http://[::1"),))
    return b"".join(w.records)


FUZZ_BASES = {gz: _fuzz_base(gz) for gz in (False, True)}
MUTATION = st.tuples(st.sampled_from(["flip", "cut", "insert", "delete"]), st.floats(0, 1), st.binary(max_size=40))


@given(gz=st.booleans(), mutations=st.lists(MUTATION, min_size=1, max_size=4))
def test_any_damage_to_a_warc_is_counted_never_raised(gz, mutations):
    import tempfile

    from scrapy_dedup.audit.dump import DumpError
    from scrapy_dedup.audit.mine_dust import read_log
    from scrapy_dedup.url.mining import DustMiner

    data = bytearray(FUZZ_BASES[gz])
    for kind, where, chunk in mutations:
        at = int(where * len(data))
        if kind == "flip" and data:
            at = min(at, len(data) - 1)
            data[at] ^= (chunk[0] if chunk else 0xFF) or 1
        elif kind == "cut":
            del data[at:]
        elif kind == "insert":
            data[at:at] = chunk
        else:
            del data[at:at + len(chunk) + 1]
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "fuzzed.warc.gz"
        path.write_bytes(bytes(data))
        try:
            result = audit(path)
        except DumpError:
            pass  # no usable record (or not a readable dump at all): exit 2 with its reason
        else:  # (a mutation of the first bytes can make it another format: then it is read as JSON Lines)
            assert ("WARC records:" in result.to_text()) == (result.input_format == "warc")
        try:
            read_log(DustMiner(), str(path))
        except DumpError:
            pass
