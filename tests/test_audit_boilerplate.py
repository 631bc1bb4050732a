"""Boilerplate learning in ``scrapy-dedup report``: two passes over the dump, and the HTML view of it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from scrapy_dedup.cli import main
from tests.templatedsite import TemplatedSite
from tests.test_cli_report import write_dump

HOST = "docs.test"


def templated_dump(tmp_path: Path) -> tuple[Path, TemplatedSite]:
    """Each article followed at once by its re-fetch (another generated line), then the siblings: the first
    re-fetches come before any template could be learnt online."""
    site = TemplatedSite()
    lines = []
    for i in range(site.docs):
        for path in (f"/doc/{i}", f"/again/{i}"):
            lines.append({"url": f"http://{HOST}{path}", "html": site.html(path)})
    lines += [{"url": f"http://{HOST}/sib/{i}", "html": site.html(f"/sib/{i}")} for i in range(site.siblings)]
    return write_dump(tmp_path / "templated.jsonl", lines), site


def _report(args: list[str], capsys) -> dict:
    assert main(["report", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _learning(tmp_path) -> list[str]:
    """The flags of a report with boilerplate learning on (the default, said explicitly)."""
    config = tmp_path / "learning.json"
    config.write_text(json.dumps({"boilerplate": True}))
    return ["--config", str(config)]


def test_two_passes_flag_every_refetch_even_before_the_template_is_learnt(tmp_path, capsys):
    dump, site = templated_dump(tmp_path)
    pairs = tmp_path / "pairs.jsonl"
    numbers = _report([str(dump), "--pairs", str(pairs), *_learning(tmp_path)], capsys)["numbers"]
    assert numbers["exact"] + numbers["near"] == site.docs  # every re-fetch, the first ones too
    flagged = {json.loads(line)["url_b"] for line in pairs.read_text().splitlines()}
    assert flagged == {f"http://{HOST}/again/{i}" for i in range(site.docs)}  # no sibling flagged


def test_switched_off_the_audit_judges_whole_texts(tmp_path, capsys):
    dump, site = templated_dump(tmp_path)
    config = tmp_path / "dupcheck.json"
    config.write_text(json.dumps({"boilerplate": False}))
    numbers = _report([str(dump), "--config", str(config)], capsys)["numbers"]
    assert numbers["exact"] + numbers["near"] == 0  # the per-fetch line keeps every pair apart


def test_one_pass_over_stdin_is_spooled_to_two(tmp_path, capsys, monkeypatch):
    import io
    import sys

    dump, site = templated_dump(tmp_path)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(dump.read_bytes())))
    numbers = _report(["-", *_learning(tmp_path)], capsys)["numbers"]
    assert numbers["exact"] + numbers["near"] == site.docs


def test_html_lists_the_blocks_treated_as_boilerplate_escaped(tmp_path, capsys):
    dump, _ = templated_dump(tmp_path)
    html = tmp_path / "audit.html"
    assert main(["report", str(dump), "--html", str(html), *_learning(tmp_path)]) == 0
    capsys.readouterr()
    text = html.read_text(encoding="utf-8")
    assert text.count("Blocks treated as boilerplate") == 14
    assert "Page generated at" in text and "&lt;b&gt;&amp; friends&lt;/b&gt;" in text


def test_both_passes_share_one_parse_of_each_record(tmp_path, capsys, monkeypatch):
    """Boilerplate learning judges the dump twice over one extraction of each record (pass one spools what
    it read): the extraction runs once a page, and the report counts the pages parsed."""
    import scrapy_dedup.audit.runner as runner

    calls = []
    extract = runner.extract_text
    monkeypatch.setattr(runner, "extract_text", lambda *a, **kw: calls.append(1) or extract(*a, **kw))
    dump, site = templated_dump(tmp_path)
    result = _report([str(dump), *_learning(tmp_path)], capsys)
    pages = 2 * site.docs + site.siblings
    assert result["numbers"]["exact"] + result["numbers"]["near"] == site.docs  # judged with the template
    assert len(calls) == pages and result["pages_parsed"] == pages


def test_the_timing_line_is_the_runs_wall_time(tmp_path, capsys, monkeypatch):
    """The summary's seconds cover the whole run (both passes, the mirrors report), not one pass of it."""
    import time

    import scrapy_dedup.audit.runner as runner

    report = runner.mirror_report

    def slow_mirror_report(*args, **kwargs):
        time.sleep(2.0)
        return report(*args, **kwargs)

    monkeypatch.setattr(runner, "mirror_report", slow_mirror_report)
    dump, _ = templated_dump(tmp_path)
    assert _report([str(dump), *_learning(tmp_path)], capsys)["elapsed_seconds"] >= 2.0


def test_pages_of_nothing_but_the_template_are_undecidable_and_named(tmp_path, capsys):
    """The audit judges as the crawl does: a page that, less its host's template, has no text of its own
    is kept (never flagged), counted and named by URL in the report (JSON and text)."""
    from tests.test_boilerplate_siblings import _site_page

    words = "alpha beta gamma delta kappa lambda sigma omega river stone cloud field".split()
    lines = [{"url": f"http://{HOST}/a/{i}",
              "html": _site_page(f"A{i}", " ".join(words[(i * 7 + k * k) % len(words)] for k in range(60))).decode()}
             for i in range(14)]
    lines += [{"url": f"http://{HOST}/empty/{i}", "html": _site_page(f"E{i}", "").decode()} for i in range(3)]
    dump = write_dump(tmp_path / "empty.jsonl", lines)
    numbers = _report([str(dump), *_learning(tmp_path)], capsys)["numbers"]
    assert numbers["undecidable"] == 3 and numbers["exact"] + numbers["near"] == 0
    assert numbers["undecidable_named"] == [f"http://{HOST}/empty/{i}" for i in range(3)]
    assert main(["report", str(dump), *_learning(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "Undecidable pages" in text and f"http://{HOST}/empty/2" in text


def test_recent_page_words_are_shared_by_pages_of_the_same_blocks():
    # a page read again (a mirror) takes the words of its first reading; other blocks (the same text cut
    # elsewhere) or another fingerprinter's parameters are tokenized anew
    from scrapy_dedup.audit.boilerplate import RecentPageWords
    from scrapy_dedup.content.engine import ContentFingerprinter

    fingerprinter = ContentFingerprinter()
    recent = RecentPageWords(size=2)
    first = recent.words(fingerprinter, ["Title of a page", "its one paragraph of words"])
    cases = [  # (blocks, fingerprinter, the first page's words expected)
        (["Title of a page", "its one paragraph of words"], fingerprinter, True),
        (["Title of a page its one paragraph of words"], fingerprinter, False),  # the same text, other blocks
        (["Title of a page", "its one paragraph of words"], ContentFingerprinter(shingle_size=3), False),
    ]
    for blocks, made_by, shared in cases:
        words = recent.words(made_by, list(blocks))
        assert (words is first) == shared
        assert words.fingerprint() == made_by.fingerprint(" ".join(blocks))
    assert recent.words(fingerprinter, ["a\nb", "c"]) is not recent.words(fingerprinter, ["a", "b\nc"])
    for i in range(3):  # past its size, the oldest leave
        recent.words(fingerprinter, [f"page {i}"])
    assert recent.words(fingerprinter, ["Title of a page", "its one paragraph of words"]) is not first


def test_mirrors_sharing_their_words_give_the_same_report(tmp_path, capsys, monkeypatch):
    # exact mirrors (the same HTML under tracking URLs) take the words of their first reading: the report is
    # the one of a run that tokenizes every page (numbers, clusters, pairs)
    import scrapy_dedup.audit.boilerplate as audit_boilerplate

    site = TemplatedSite()
    lines = []
    for i in range(site.docs):
        html = site.html(f"/doc/{i}")
        lines += [{"url": f"http://{HOST}/doc/{i}", "html": html},
                  {"url": f"http://{HOST}/doc/{i}?utm_source={i}", "html": html}]
    lines += [{"url": f"http://{HOST}/doc/{i}?ref=again", "html": site.html(f"/doc/{i}")} for i in range(site.docs)]
    dump = write_dump(tmp_path / "mirrors.jsonl", lines)
    tokenized = []
    page_words = audit_boilerplate.PageWords
    monkeypatch.setattr(audit_boilerplate, "PageWords", lambda *args: tokenized.append(1) or page_words(*args))
    outputs = []
    for size in (audit_boilerplate.RECENT_PAGES, 0):
        monkeypatch.setattr(audit_boilerplate, "RECENT_PAGES", size)
        tokenized.clear()
        clusters, pairs = tmp_path / f"clusters{size}", tmp_path / f"pairs{size}"
        report = _report([str(dump), "--clusters", str(clusters), "--pairs", str(pairs)], capsys)
        report.pop("elapsed_seconds", None)
        outputs.append((report, clusters.read_bytes(), pairs.read_bytes(), len(tokenized)))
    assert outputs[0][:3] == outputs[1][:3]
    assert outputs[0][0]["numbers"]["exact"] >= site.docs  # the mirrors are exact duplicates
    assert (outputs[0][3], outputs[1][3]) == (len(lines) - site.docs, len(lines))  # each mirror not tokenized


@pytest.mark.parametrize("size, refs", [(0, []), (2, [2, 7]), (1024, [2, 5, 6, 7])])
def test_spooled_words_are_read_back_as_the_words_of_their_first_spooling(size, refs):
    # pass one spools a page whose words were spooled lately (a mirror: the worker gave it the same words) as a
    # reference, pass two reads the same object back; each page read back has its own words, blocks and
    # fingerprint, whatever the bound evicted (size 2: words 0 leave after 2 and 3 come, and are spooled whole
    # again), each batch pickled apart as the spool does
    import pickle

    from scrapy_dedup.audit.boilerplate import PageBlocks
    from scrapy_dedup.audit.runner import SpooledWords
    from scrapy_dedup.content.boilerplate import PageWords
    from scrapy_dedup.content.engine import ContentFingerprinter

    fingerprinter = ContentFingerprinter(shingle_size=3, min_words=3)
    pages = [[f"Page {i} title", f"the words of page number {i} here"] for i in range(4)]
    words = [PageWords(fingerprinter, blocks) for blocks in pages]
    order = [0, 1, 0, 2, 3, 0, 1, 1]
    items = [("page", n, f"http://{HOST}/{n}", PageBlocks(words[w].fingerprint(), pages[w], f"Page {w}", words[w]),
              None, None, None) for n, w in enumerate(order)]
    items.insert(4, ("bad", "a bad line", ()))
    spooling, reading = SpooledWords(size), SpooledWords(size)
    spooled = [spooling.spooled(item) for item in items]
    read = [reading.read(pickle.loads(pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL))) for item in spooled]
    pages_spooled = [item for item in spooled if item[0] == "page"]
    assert [i for i, item in enumerate(pages_spooled) if not isinstance(item[3], PageBlocks)] == refs
    assert read[4] == items[4]
    got = [item for item in read if item[0] == "page"]
    for item, back in zip([item for item in items if item[0] == "page"], got):
        assert back[:3] == item[:3] and back[4:] == item[4:]
        assert (back[3].whole, back[3].blocks, back[3].title) == (item[3].whole, item[3].blocks, item[3].title)
        assert (back[3].words.text, back[3].words.fingerprint()) == (item[3].words.text, item[3].words.fingerprint())
    for ref in refs:  # the same object as the last page of the same words read before it
        previous = max(i for i in range(ref) if order[i] == order[ref])
        assert got[ref][3].words is got[previous][3].words
