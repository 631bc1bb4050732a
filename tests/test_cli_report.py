"""`scrapy-dedup report` on small dumps whose answers are known by construction."""
from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from scrapy_dedup.cli import main
from scrapy_dedup.content.simhash import hamming, simhash
from tests.support import require_module

ROOT = Path(__file__).resolve().parents[1]
VOCAB = [f"{a}{b}{c}" for a in ("ka", "lo", "mi", "nu", "pe", "ro", "su", "ti", "va", "ze")
         for b in ("b", "d", "g", "k", "l", "m", "n", "r", "s", "t") for c in ("a", "e", "i", "o", "u", "ar")]


def body_words(seed: int, n: int = 220) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(VOCAB) for _ in range(n)]


TEMPLATE_NAV = " ".join(f"<a href='/c/{i}'>Category {i} of the shop</a>" for i in range(60))


def html_page(words: list[str], title: str = "Shop") -> str:
    """A page with a long site template (header/nav/footer, stripped) around its main text."""
    paragraphs = "".join(f"<p>{' '.join(words[i:i + 40])}</p>" for i in range(0, len(words), 40))
    return (f"<!DOCTYPE html><html><head><title>{title}</title><script>var t=1;</script></head><body>"
            f"<header>Big Shop banner, free shipping today only</header><nav>{TEMPLATE_NAV}</nav>"
            f"<main>{paragraphs}</main><footer>Copyright Big Shop, all rights reserved, terms, "
            f"privacy, imprint, contact us</footer></body></html>")


def edit_to_distance(words: list[str], target: int, seed: int) -> list[str]:
    """Replace words until the text's simhash is exactly ``target`` bits from the original's."""
    base = simhash(" ".join(words))
    rng = random.Random(seed)
    for _ in range(20000):
        edited = list(words)
        for _ in range(rng.randint(1, 3)):
            edited[rng.randrange(len(edited))] = rng.choice(VOCAB)
        if hamming(simhash(" ".join(edited)), base) == target:
            return edited
    raise AssertionError(f"no edit at distance {target}")


def far_apart(pages: list[list[str]]) -> bool:
    fps = [simhash(" ".join(p)) for p in pages]
    return all(hamming(a, b) > 10 for i, a in enumerate(fps) for b in fps[i + 1:])


def write_dump(path: Path, lines: list, compress: bool = False) -> Path:
    data = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    if compress:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


class KnownDump:
    """A dump with known answers.

    10 distinct pages; 3 exact mirrors of page 0 (query string, other host, same URL
    re-crawled); near copies of page 1 at distances 1, 2 and 3; a near copy of page 2 at
    distance 3 + 2 = 5 (beyond the threshold: unique); 4 degenerate pages (three of them
    identical); 2 templated siblings (page 3's template, other text); 2 broken lines.
    """

    def __init__(self, tmp_path: Path, compress: bool = False):
        distinct = [body_words(100 + i) for i in range(12)]  # 10 base + 2 siblings' texts
        assert far_apart(distinct)
        self.lines: list = []
        self.expect_bad_lines: list[int] = []
        add = self.lines.append
        for i in range(10):  # pages 1 and 2 as plain text: their near copies are built at exact distances
            field = {"text": " ".join(distinct[i])} if i in (1, 2) else {"html": html_page(distinct[i])}
            add({"url": f"https://shop.test/item/{i}", **field})
        mirror = html_page(distinct[0])
        add({"url": "https://shop.test/item/0?utm_source=mail", "html": mirror})
        add({"url": "https://shop.example.co.uk/item/0", "html": mirror})
        add({"url": "https://shop.test/item/0", "html": mirror.replace("Big Shop banner", "Other banner")})
        for d in (1, 2, 3):
            add({"url": f"https://shop.test/item/1?v={d}", "text": " ".join(edit_to_distance(distinct[1], d, d))})
        add({"url": "https://shop.test/item/2-old", "text": " ".join(edit_to_distance(distinct[2], 5, 7))})
        add("{this is not json")
        self.expect_bad_lines.append(len(self.lines))
        for i in range(3):
            add({"url": f"https://shop.test/private/{i}", "html": "<html><body><h1>403 Forbidden</h1></body></html>"})
        add({"url": "https://shop.test/empty", "html": ""})
        add({"address": "https://shop.test/wrong-field", "body": "<p>x</p>"})
        self.expect_bad_lines.append(len(self.lines))
        add({"url": "https://shop.test/sibling/a", "html": html_page(distinct[10])})
        add({"url": "https://shop.test/sibling/b", "html": html_page(distinct[11])})
        suffix = ".jsonl.gz" if compress else ".jsonl"
        self.path = write_dump(tmp_path / f"dump{suffix}", self.lines, compress)

    total = 10 + 3 + 3 + 1 + 4 + 2
    exact = 3
    near = 3
    degenerate = 4
    unique = 10 + 1 + 2
    clusters = 2
    largest = 4


PLAIN_RULE: dict = {}  # filled per test by the plain_rule fixture


@pytest.fixture(autouse=True)
def plain_rule(tmp_path):
    """The dumps of this module are built at exact simhash distances, for the plain distance rule:
    reports run with the verification stage off (``sketch_size: 0``) unless a test passes its own
    ``--config``. The verification stage of the report is checked by ``test_report_verifies_by_default``."""
    path = tmp_path / "plain-rule.json"
    path.write_text('{"sketch_size": 0}')
    PLAIN_RULE["path"] = path
    yield
    PLAIN_RULE.clear()


def run_cli(args: list, capsys) -> tuple[int, str, str]:
    args = [str(a) for a in args]
    if args and args[0] == "report" and "--config" not in args and PLAIN_RULE:
        args += ["--config", str(PLAIN_RULE["path"])]
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def known(tmp_path):
    return KnownDump(tmp_path)


def test_numbers_of_a_known_dump(known, capsys):
    code, out, err = run_cli(["report", known.path, "--json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    n = data["numbers"]
    assert (n["total"], n["exact"], n["near"], n["degenerate"]) == (known.total, known.exact, known.near,
                                                                     known.degenerate)
    assert n["unique"] == known.unique
    assert n["clusters"] == known.clusters and n["largest_cluster"] == known.largest
    assert n["redundant"] == known.exact + known.near
    assert data["bad_lines"]["count"] == 2
    lines = sorted(line for r in data["bad_lines"]["reasons"] for line in r["lines"])
    assert lines == known.expect_bad_lines
    assert data["distance_histogram"] == {"0": 3, "1": 1, "2": 1, "3": 1}
    # mirrors of item/0: ?utm_source (query), other host, same URL; copies of item/1 at ?v=1..3 (query)
    assert data["categories"] == {"query-string mirror": 4, "mirror host": 1, "stale re-crawl": 1}


def test_stdin_and_progress_bar(known, capsys, monkeypatch):
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(known.path.read_bytes()))))
    code, out, err = run_cli(["report", "-", "--json", "--progress", "always"], capsys)
    assert code == 0, err
    assert json.loads(out)["numbers"]["total"] == known.total
    code, out, err = run_cli(["report", known.path, "--progress", "always"], capsys)
    assert code == 0 and "reading dump" in err and "%" in err  # tqdm drew a bar over the file's bytes


def test_text_output_puts_the_numbers_first(known, capsys):
    code, out, _ = run_cli(["report", known.path], capsys)
    assert code == 0
    first = out.splitlines()[:3]
    assert first[0].startswith("Total URLs:") and first[0].split()[2] == str(known.total)
    assert first[1].startswith("Exact duplicates:") and f"{known.exact}" in first[1].split()
    assert first[2].startswith("Near duplicates:") and f"{known.near}" in first[2].split()
    assert "Degenerate pages:" in out and "invalid JSON (line" in out


def test_clusters_and_pairs_files(known, tmp_path, capsys):
    clusters, pairs = tmp_path / "clusters.jsonl", tmp_path / "pairs.jsonl"
    code, _, _ = run_cli(["report", known.path, "--clusters", clusters, "--pairs", pairs], capsys)
    assert code == 0
    rows = [json.loads(line) for line in clusters.read_text().splitlines()]
    by_rep: dict = {}
    for row in rows:
        by_rep.setdefault(row["representative"], []).append(row)
    assert set(by_rep) == {"https://shop.test/item/0", "https://shop.test/item/1"}
    assert len(by_rep["https://shop.test/item/0"]) == 4
    assert sorted(r["distance"] for r in by_rep["https://shop.test/item/1"]) == [0, 1, 2, 3]
    assert not any("private" in r["url"] or "sibling" in r["url"] or "2-old" in r["url"] for r in rows)
    pair_rows = [json.loads(line) for line in pairs.read_text().splitlines()]
    assert len(pair_rows) == known.exact + known.near
    assert {(p["url_b"], p["kind"], p["distance"]) for p in pair_rows if p["url_a"].endswith("/item/1")} == {
        (f"https://shop.test/item/1?v={d}", "near", d) for d in (1, 2, 3)}


def test_all_pairs_lists_every_kept_page_within_the_threshold(tmp_path, capsys):
    a = body_words(1)
    b = edit_to_distance(a, 2, 1)  # b is 2 bits from a: a new page only if threshold < 2
    c = edit_to_distance(a, 1, 5)
    dump = write_dump(tmp_path / "d.jsonl", [{"url": "u:a", "text": " ".join(a)},
                                              {"url": "u:b", "text": " ".join(b)},
                                              {"url": "u:c", "text": " ".join(c)}])
    pairs = tmp_path / "p.jsonl"
    d_bc = hamming(simhash(" ".join(b)), simhash(" ".join(c)))
    code, _, _ = run_cli(["report", dump, "-k", "1", "--bands", "2", "--pairs", pairs, "--all-pairs"], capsys)
    assert code == 0
    got = {(p["url_a"], p["url_b"]) for p in map(json.loads, pairs.read_text().splitlines())}
    expected = {("u:a", "u:c")} | ({("u:b", "u:c")} if d_bc <= 1 else set())
    assert got == expected


def test_gzip_dump_and_jobs_give_the_same_answer(tmp_path, capsys):
    known = KnownDump(tmp_path, compress=True)
    results = []
    for jobs in ("1", "2"):
        code, out, err = run_cli(["report", known.path, "--json", "--jobs", jobs], capsys)
        assert code == 0, err
        data = json.loads(out)
        results.append((data["numbers"], data["bad_lines"]))
    assert results[0] == results[1]
    assert results[0][0]["exact"] == known.exact and results[0][0]["near"] == known.near


def test_wrong_field_names_are_reported_with_a_hint(tmp_path, capsys):
    dump = write_dump(tmp_path / "d.jsonl", [{"link": f"https://x.test/{i}", "body": "<p>hello</p>"}
                                             for i in range(3)])
    code, _, err = run_cli(["report", dump], capsys)
    assert code == 2
    assert "missing field 'url'" in err and "link" in err and "--url-field" in err
    code, out, err = run_cli(["report", dump, "--url-field", "link", "--html-field", "body", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["numbers"]["degenerate"] == 3


def test_strict_stops_at_the_first_bad_line(known, capsys):
    code, _, err = run_cli(["report", known.path, "--strict"], capsys)
    assert code == 2
    assert f"line {known.expect_bad_lines[0]}" in err


def test_fail_above(known, capsys):
    redundant = (known.exact + known.near) / known.total
    assert run_cli(["report", known.path, "--fail-above", str(redundant - 0.01)], capsys)[0] == 1
    assert run_cli(["report", known.path, "--fail-above", str(redundant + 0.01)], capsys)[0] == 0


def test_report_verifies_by_default(known, tmp_path, capsys):
    """With the crawl's defaults (verification on), the 1-3 word edit of page 2 that sits 5 bits
    away (beyond the 3-bit threshold) is a near duplicate too; nothing else changes."""
    PLAIN_RULE.clear()
    code, out, err = run_cli(["report", known.path, "--json"], capsys)
    assert code == 0, err
    numbers = json.loads(out)["numbers"]
    assert (numbers["exact"], numbers["near"], numbers["degenerate"]) == (known.exact, known.near + 1,
                                                                          known.degenerate)
    assert numbers["clusters"] == known.clusters + 1


def test_config_file_and_flag_override(known, tmp_path, capsys):
    config = tmp_path / "dupcheck.yaml"
    config.write_text("hamming_threshold: 1\nbands: 2\nmin_words: 20\nsketch_size: 0\n")
    code, out, _ = run_cli(["report", known.path, "--config", config, "--json"], capsys)
    assert code == 0
    assert json.loads(out)["numbers"]["near"] == 1  # only the distance-1 copy
    code, out, _ = run_cli(["report", known.path, "--config", config, "-k", "2", "--bands", "3", "--json"], capsys)
    assert json.loads(out)["numbers"]["near"] == 2


@pytest.mark.parametrize("content, message", [
    ("hamming_threshold: 4\nbands: 4\n", "bands (4) must be greater than hamming_threshold (4)"),
    ("bandz: 5\n", "did you mean 'bands'"),
    ("min_words: 3\n", "min_words (3) must be at least shingle_size (5)"),
    ("shingle_size: many\n", "shingle_size must be an integer"),
    ("- a list\n", "must hold a mapping"),
])
def test_bad_config_is_refused_with_a_clear_message(known, tmp_path, capsys, content, message):
    config = tmp_path / "dupcheck.yaml"
    config.write_text(content)
    code, out, err = run_cli(["report", known.path, "--config", config], capsys)
    assert code == 2 and out == ""
    assert message in err


def test_json_config_and_approximate_bands(known, tmp_path, capsys):
    config = tmp_path / "dupcheck.json"
    config.write_text(json.dumps({"hamming_threshold": 4, "bands": 4, "allow_approximate": True}))
    code, out, err = run_cli(["report", known.path, "--config", config, "--json"], capsys)
    assert code == 0, err


def test_minhash_method_same_outputs(known, tmp_path, capsys):
    require_module("datasketch")
    clusters = tmp_path / "c.jsonl"
    code, out, err = run_cli(["report", known.path, "--method", "minhash", "--json", "--clusters", clusters], capsys)
    assert code == 0, err
    n = json.loads(out)["numbers"]
    assert n["total"] == known.total and n["exact"] == known.exact and n["degenerate"] == known.degenerate
    # one or two replaced words in 220 keep the Jaccard of 5-word shingles far above 0.8
    assert n["near"] == known.near + 1
    reps = {json.loads(line)["representative"] for line in clusters.read_text().splitlines()}
    assert reps == {"https://shop.test/item/0", "https://shop.test/item/1", "https://shop.test/item/2"}


def test_unreadable_dump(tmp_path, capsys):
    code, _, err = run_cli(["report", tmp_path / "missing.jsonl"], capsys)
    assert code == 2 and "cannot open dump" in err
    bad = tmp_path / "truncated.jsonl.gz"
    bad.write_bytes(gzip.compress(b'{"url": "a", "text": "b"}\n' * 50)[:40])
    code, _, err = run_cli(["report", bad], capsys)
    assert code == 2 and "truncated or corrupt" in err


def test_mine_dust_dispatch(capsys):
    code = main(["mine-dust", "--help"])
    out, _ = capsys.readouterr()
    assert code == 0 and out.startswith("usage: scrapy-dedup mine-dust")


def test_console_entry_points(known):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for cmd in ([sys.executable, "-m", "scrapy_dedup"],
                [str(Path(sys.executable).with_name("scrapy-dedup"))]):
        if not Path(cmd[0]).exists():
            continue
        proc = subprocess.run(cmd + ["report", str(known.path)], capture_output=True, text=True, env=env,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("Total URLs:")
        assert proc.stderr == ""  # no progress bar when stderr is not a terminal


@pytest.mark.parametrize("compress", [False, True])
def test_html_from_stdin_shows_the_sampled_pairs_text(tmp_path, capsys, monkeypatch, compress):
    """The HTML sample re-reads its pages: a dump on stdin is spooled to a temporary file for that."""
    import io
    import re
    import tempfile

    original = body_words(31)
    edited = edit_to_distance(original, 2, seed=5)
    changed = {w for a, w in zip(original, edited) if a != w}
    assert changed
    lines = [{"url": "https://shop.test/item/1", "text": " ".join(original)},  # text: exact distances
             {"url": "https://shop.test/item/1?ref=mail", "text": " ".join(edited)},
             {"url": "https://shop.test/item/2", "html": html_page(body_words(32))}]
    dump = write_dump(tmp_path / ("dump.jsonl.gz" if compress else "dump.jsonl"), lines, compress)
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool_dir))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(dump.read_bytes()))))
    code, out, err = run_cli(["report", "-", "--html", tmp_path / "stdin.html"], capsys)
    assert code == 0, err
    code, out, err = run_cli(["report", dump, "--html", tmp_path / "file.html"], capsys)
    assert code == 0, err
    from_stdin = (tmp_path / "stdin.html").read_text(encoding="utf-8")
    from_file = (tmp_path / "file.html").read_text(encoding="utf-8")
    inserted = re.findall(r"<ins>(.*?)</ins>", from_stdin)
    assert inserted and changed <= set(" ".join(inserted).split())  # the flagged pair's own words
    assert inserted == re.findall(r"<ins>(.*?)</ins>", from_file)
    assert re.findall(r"<del>(.*?)</del>", from_stdin) == re.findall(r"<del>(.*?)</del>", from_file)
    assert list(spool_dir.iterdir()) == []  # the spooled copy is removed
