"""The mirrors report's DUST miner takes the audit's first-pass verdicts (``SharedJudgements``) and mines what
it mines when it judges every page itself: the same URLs, contents, counts and rules. Where the two judges
could differ (a URL twice in the dump, a record bringing evidence of its own, other engine parameters) the
miner judges the pages itself."""
from __future__ import annotations

from pathlib import Path

import pytest

import scrapy_dedup.audit.runner as runner
from scrapy_dedup.audit.config import build_config
from scrapy_dedup.url.mining import DustMiner
from tests.test_audit_mirrors import site_dump
from tests.test_cli_report import body_words, html_page, write_dump


def mined(dump: Path, monkeypatch, share: bool, **config) -> tuple[tuple, int]:
    """What the fed miner holds and mines after the audit of ``dump``, and how often it judged a page itself."""
    judged = []
    original = DustMiner.page_judge
    monkeypatch.setattr(DustMiner, "page_judge", lambda self: judged.append(1) or original(self))
    if not share:
        monkeypatch.setattr(runner.SharedJudgements, "applies", staticmethod(lambda cfg, miner: False))
    cfg = build_config(overrides=config)
    miner = runner.mirror_miner(cfg, str(dump))
    assert miner is not None
    runner.audit_dump(str(dump), cfg, jobs=1, want_samples=False, miner=miner)
    result = miner.mine()
    hosts = {host: {key: miner._contents.representative(cid) for key, cid in urls.items()}
             for host, urls in miner.hosts.items()}
    rules = result.rules.dumps()
    monkeypatch.undo()
    return (dict(miner.stats), hosts, rules, dict(result.stats)), len(judged)


def sided_page(words: list[str], side: int) -> str:
    """A page of ``words`` beside one of two long sidebars of short blocks (its host's boilerplate, once
    learnt): two copies of a page beside different sidebars match only less boilerplate."""
    blocks = "".join(f"<p>{' '.join(body_words(1000 * side + i, 8))}</p>" for i in range(60))
    return html_page(words).replace("<main>", f"<main><div class='side'>{blocks}</div>")


def near_copies_dump(tmp_path: Path, extra: dict | None = None, repeat: bool = False) -> Path:
    """Pages of one host, each with near copies (a word or two changed) under other URLs, some beside
    another sidebar (the same page only less boilerplate: a reduced verdict), a degenerate page; ``extra``:
    fields added to every record; ``repeat``: one URL twice."""
    lines = []
    for doc in range(12):
        words = body_words(doc)
        for copy in range(3):
            edited = list(words)
            if copy:
                edited[copy * 7] = f"edit{copy}"
            url = f"http://shop.example/item/{doc}" + (f"?ref=mail{copy}" if copy else "")
            page = html_page(edited, title=f"Item {doc}") if doc < 4 else sided_page(edited, copy == 1)
            lines.append({"url": url, "html": page, **(extra or {})})
    lines.append({"url": "http://shop.example/404", "html": "<html><body><p>Not found</p></body></html>"})
    if repeat:
        lines.append({"url": lines[0]["url"], "html": html_page(body_words(99), title="Item 0")})
    return write_dump(tmp_path / "dump.jsonl", lines)


@pytest.mark.parametrize("seed", (300, 324))
def test_the_miner_fed_the_first_passs_verdicts_mines_what_it_mines_judging_itself(tmp_path, monkeypatch, seed):
    dump, _, _ = site_dump(tmp_path, seed)
    shared, judged_shared = mined(dump, monkeypatch, share=True)
    alone, judged_alone = mined(dump, monkeypatch, share=False)
    assert judged_shared == 0 and judged_alone > 0  # the first one took the shared verdicts
    assert shared == alone
    assert shared[0]["urls"] > 0 and shared[3].get("rules", 0) > 0


def test_near_copies_degenerate_pages_and_reduced_verdicts_are_taken_alike(tmp_path, monkeypatch):
    dump = near_copies_dump(tmp_path)
    shared, judged_shared = mined(dump, monkeypatch, share=True)
    alone, _ = mined(dump, monkeypatch, share=False)
    assert judged_shared == 0
    assert shared == alone
    assert shared[0].get("degenerate_pages", 0) >= 1 and shared[0].get("reduced_verdicts", 0) >= 1


@pytest.mark.parametrize("case", ["repeated_url", "evidence_field", "other_parameters"])
def test_where_the_judges_could_differ_the_miner_judges_itself(tmp_path, monkeypatch, case):
    dump = near_copies_dump(tmp_path, extra={"words": 500} if case == "evidence_field" else None,
                            repeat=case == "repeated_url")
    config = {"hamming_threshold": 2} if case == "other_parameters" else {}
    shared, judged = mined(dump, monkeypatch, share=True, **config)
    alone, _ = mined(dump, monkeypatch, share=False, **config)
    assert judged > 0
    assert shared == alone
