"""`scrapy-dedup report --paragraphs`: the block-level ratio of a small dump whose repeats are known by construction."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from scrapy_dedup.cli import main

SYLLABLES = ["ka", "lo", "mi", "nu", "pe", "ro", "su", "ti", "va", "ze"]


def paragraph(rng: random.Random) -> str:
    """A paragraph of lowercase invented words: its own normal form (nothing for normalization to change)."""
    return " ".join("".join(rng.choice(SYLLABLES) for _ in range(3)) for _ in range(rng.randint(9, 14)))


def build_dump(path: Path, pages: int = 40, seed: int = 7) -> dict:
    """A dump of HTML and text records drawing paragraphs from a small pool (so they repeat), with short lines.

    Returns what the report must say, counted here by a plain set of the paragraphs, in dump order.
    """
    rng = random.Random(seed)
    pool = [paragraph(rng) for _ in range(25)]
    seen: set[str] = set()
    blocks = duplicates = short = 0
    hosts: dict[str, list[int]] = {}
    lines = []
    for i in range(pages):
        host = f"site{i % 3}.test"
        chosen = [rng.choice(pool) for _ in range(rng.randint(2, 6))]
        shorts = ["Home", "Next page"][: rng.randint(0, 2)]
        counts = hosts.setdefault(host, [0, 0])
        for text in chosen:
            blocks += 1
            counts[0] += 1
            if text in seen:
                duplicates += 1
                counts[1] += 1
            seen.add(text)
        short += len(shorts)
        if i % 4 == 3:  # a text record: its blocks are its lines
            record = {"url": f"http://{host}/t{i}", "text": "\n".join(shorts + chosen)}
        else:
            body = "".join(f"<p>{t}</p>" for t in chosen) + "".join(f"<div>{s}</div>" for s in shorts)
            record = {"url": f"http://{host}/p{i}", "html": f"<html><body><nav>menu</nav>{body}</body></html>"}
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"blocks": blocks, "duplicates": duplicates, "short": short, "hosts": hosts}


@pytest.fixture
def dump(tmp_path):
    path = tmp_path / "dump.jsonl"
    return path, build_dump(path)


def report_json(args: list, capsys) -> dict:
    assert main(["report", *args, "--json", "--progress", "never"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("extra", [[], ["--paragraphs-bloom"], ["--jobs", "2"]])
def test_the_block_ratio_is_the_one_counted_by_hand(dump, extra, capsys):
    path, want = dump
    assert want["duplicates"] > 0 and want["short"] > 0  # the dump holds what the test is about
    out = report_json([str(path), "--paragraphs", "--min-words", "5", *extra], capsys)
    got = out["paragraphs"]
    assert (got["blocks"], got["duplicate_blocks"], got["short_blocks"]) == (
        want["blocks"], want["duplicates"], want["short"])
    assert out["duplicate_block_ratio"] == pytest.approx(want["duplicates"] / want["blocks"])
    assert got["store"] == ("bloom" if "--paragraphs-bloom" in extra else "exact")
    assert {h["host"]: [h["blocks"], h["duplicate_blocks"]] for h in got["hosts"]} == want["hosts"]
    assert "redundant_ratio" in out  # beside the page-level one


def test_text_and_html_outputs_show_the_ratio(dump, tmp_path, capsys):
    path, want = dump
    page = tmp_path / "audit.html"
    assert main(["report", str(path), "--paragraphs", "--min-words", "5", "--html", str(page),
                 "--progress", "never"]) == 0
    text = capsys.readouterr().out
    line = next(line for line in text.splitlines() if line.startswith("Repeated blocks:"))
    assert f"{want['duplicates']} of {want['blocks']}" in line
    assert f"({100 * want['duplicates'] / want['blocks']:.1f}%" in line
    assert text.index("Redundant pages:") < text.index("Repeated blocks:")
    html = page.read_text(encoding="utf-8")
    assert f"<td>Repeated blocks</td><td class='n'>{want['duplicates']} of {want['blocks']}</td>" in html


def test_without_the_flag_nothing_changes(dump, capsys):
    path, _ = dump
    out = report_json([str(path), "--min-words", "5"], capsys)
    assert "paragraphs" not in out and "duplicate_block_ratio" not in out
    assert main(["report", str(path), "--min-words", "5", "--progress", "never"]) == 0
    assert "Repeated blocks" not in capsys.readouterr().out


def test_the_threshold_flag_and_a_bad_value(dump, capsys):
    path, want = dump
    out = report_json([str(path), "--paragraphs", "--paragraphs-min-chars", "1000", "--min-words", "5"], capsys)
    assert out["paragraphs"]["blocks"] == 0  # every paragraph under 1000 characters: none counted
    assert out["paragraphs"]["short_blocks"] == want["blocks"] + want["short"]
    assert main(["report", str(path), "--paragraphs", "--paragraphs-min-chars", "0"]) == 2
    assert "paragraphs_min_chars" in capsys.readouterr().err


def test_a_warc_with_revisits_counts_blocks_like_the_dump_of_its_pages(tmp_path):
    """A revisit is its page's payload again: its blocks count again, all repeats, as in the JSON Lines dump."""
    from scrapy_dedup.audit.config import build_config
    from scrapy_dedup.audit.runner import audit_dump
    from tests.test_audit_warc import EveryKind

    every = EveryKind(gz=False)
    cfg = build_config({}, {"paragraphs": True, "paragraphs_min_chars": 20})
    warc, _, _ = audit_dump(str(every.warc.save(tmp_path / "crawl.warc")), cfg, want_samples=False)
    dump, _, _ = audit_dump(str(every.dump(tmp_path / "pages.jsonl")), cfg, want_samples=False)
    assert warc.paragraphs == dump.paragraphs
    assert warc.input_counts["revisits"] == 5 and warc.paragraphs["duplicate_blocks"] > 0
