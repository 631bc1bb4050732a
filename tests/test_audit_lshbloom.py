"""``scrapy-dedup report --method lshbloom``: band S-curve, bounded false flags, bounded memory, the report."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest

from scrapy_dedup.audit.config import AuditConfig, AuditConfigError, build_config
from scrapy_dedup.audit.lshbloom import LshBloomMethod, band_keys, bloom_bytes, capacity_for
from scrapy_dedup.cli import main
from tests.test_cli_report import VOCAB, body_words, html_page, write_dump


def resembling_pair(rng: np.random.Generator, jaccard: float, union: int = 600) -> tuple[np.ndarray, np.ndarray]:
    """Two sets of 64-bit hashes whose Jaccard resemblance is ``jaccard`` (to the element)."""
    common = round(union * jaccard)
    own = (union - common) // 2
    shared = rng.integers(0, 2**63, common, dtype=np.uint64)
    return (np.concatenate([shared, rng.integers(0, 2**63, own, dtype=np.uint64)]),
            np.concatenate([shared, rng.integers(0, 2**63, own, dtype=np.uint64)]))


@pytest.mark.parametrize("jaccard", [0.9, 0.8, 0.7, 0.6, 0.5, 0.3])
@pytest.mark.parametrize("bands, rows", [(32, 8), (20, 5)])
def test_pairs_share_a_band_key_as_the_s_curve_says(jaccard, bands, rows):
    rng = np.random.default_rng(int(jaccard * 100) + bands)
    trials = 400
    shared = sum(bool(np.any(band_keys(a, bands, rows) == band_keys(b, bands, rows)))
                 for a, b in (resembling_pair(rng, jaccard) for _ in range(trials)))
    expected = 1 - (1 - jaccard ** rows) ** bands
    # binomial standard deviation, 4 of them (and 2 trials for the curve's near-0 and near-1 ends)
    slack = 4 * (expected * (1 - expected) / trials) ** 0.5 + 2 / trials
    assert abs(shared / trials - expected) <= slack, (shared / trials, expected)


def test_band_keys_are_the_same_in_every_process_and_order_free():
    rng = np.random.default_rng(3)
    hashes = rng.integers(0, 2**63, 300, dtype=np.uint64)
    keys = band_keys(hashes, 32, 8)
    assert len(keys) == 32 and len(set(keys.tolist())) == 32
    assert np.array_equal(keys, band_keys(rng.permutation(hashes), 32, 8))
    import subprocess
    import sys

    code = ("import numpy as np; from scrapy_dedup.audit.lshbloom import band_keys; "
            "h = np.random.default_rng(3).integers(0, 2**63, 300, dtype=np.uint64); "
            "print(','.join(map(str, band_keys(h, 32, 8).tolist())))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ",".join(map(str, keys.tolist()))


def test_memory_follows_the_flag_and_the_dump():
    cfg = AuditConfig(method="lshbloom", lshbloom_memory_mb=64)
    capacity = capacity_for(cfg)
    assert bloom_bytes(capacity, cfg.lshbloom_bands, cfg.lshbloom_error_rate) <= 64 * 2**20
    assert bloom_bytes(capacity * 11 // 10, cfg.lshbloom_bands, cfg.lshbloom_error_rate) > 64 * 2**20
    assert capacity_for(cfg, 1000) == 1000
    decider = LshBloomMethod(cfg).decider(1000)
    assert len(decider.bloom.bitarray) // 8 == bloom_bytes(1000, cfg.lshbloom_bands, cfg.lshbloom_error_rate)


def random_text(rng: random.Random, words: int = 120) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(words))


def test_distinct_pages_are_wrongly_flagged_at_most_at_the_error_rate():
    """3,000 unrelated pages (resemblance about 0): any near flag is a false positive of the filter."""
    cfg = build_config(overrides={"method": "lshbloom", "lshbloom_error_rate": 1e-3})
    method = LshBloomMethod(cfg)
    decider = method.decider(3000)
    rng = random.Random(11)
    flagged = 0
    for index in range(3000):
        fp = method.fingerprint(random_text(rng))
        decision = decider.check(index, str(index), fp)
        flagged += decision.kind == "near"
        decider.commit(index, fp, decision)
    # expected at most 3 (1e-3 of 3,000); 12 is far beyond the Poisson tail of a working filter
    assert flagged <= 12, flagged


def test_a_full_filter_keeps_pages_and_says_so(caplog):
    cfg = build_config(overrides={"method": "lshbloom"})
    method = LshBloomMethod(cfg)
    decider = method.decider(5)
    rng = random.Random(5)
    texts = [random_text(rng) for _ in range(8)]
    with caplog.at_level("WARNING", logger="scrapy_dedup.audit.lshbloom"):
        for index, text in enumerate(texts):
            fp = method.fingerprint(text)
            decision = decider.check(index, str(index), fp)
            decider.commit(index, fp, decision)
    assert decider.inserted == 5 and decider.full_at == 5
    assert sum("filter full" in r.getMessage() for r in caplog.records) == 1
    # a page of the last three is kept as unique again (not inserted), never flagged for lack of room
    late = method.fingerprint(texts[6] + " one more word")
    assert decider.check(9, "9", late).kind == "unique"


def edited(words: list[str], rng: random.Random, n: int) -> list[str]:
    out = list(words)
    for _ in range(n):
        out[rng.randrange(len(out))] = rng.choice(VOCAB)
    return out


def test_report_of_a_dump(tmp_path, capsys):
    """Exact copies are named (pairs, clusters); near copies counted, not named; distinct pages unique."""
    rng = random.Random(2)
    originals = [body_words(100 + i, 300) for i in range(30)]
    lines = [{"url": f"https://a.example/p{i}", "html": html_page(w)} for i, w in enumerate(originals)]
    lines += [{"url": f"https://a.example/p{i}?utm_source=x", "html": html_page(originals[i])} for i in range(5)]
    lines += [{"url": f"https://a.example/p{i}/print", "html": html_page(edited(originals[i], rng, 2))}
              for i in range(10, 16)]
    dump = write_dump(tmp_path / "dump.jsonl", lines)
    pairs = tmp_path / "pairs.jsonl"
    code = main(["report", str(dump), "--method", "lshbloom", "--json", "--pairs", str(pairs)])
    out, err = capsys.readouterr()
    assert code == 0, err
    numbers = json.loads(out)["numbers"]
    assert (numbers["exact"], numbers["near"], numbers["unique"]) == (5, 6, 30)
    assert numbers["clusters"] == 5
    named = [json.loads(line) for line in pairs.read_text().splitlines()]
    assert sorted(p["url_b"] for p in named) == sorted(f"https://a.example/p{i}?utm_source=x" for i in range(5))
    assert all(p["kind"] == "exact" for p in named)


def test_text_report_names_the_method(tmp_path, capsys):
    lines = [{"url": f"https://a.example/p{i}", "text": " ".join(body_words(i, 60))} for i in range(4)]
    dump = write_dump(tmp_path / "d.jsonl", lines)
    code = main(["report", str(dump), "--method", "lshbloom", "--lshbloom-bands", "16", "--lshbloom-rows", "4"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "16 bands of 4 rows in a Bloom filter" in out and "not named" in out


@pytest.mark.parametrize("overrides, message", [
    ({"method": "lshbloom", "lshbloom_error_rate": 0.5}, "lshbloom_error_rate must be below 0.1"),
    ({"method": "lshbloom", "lshbloom_bands": 0}, "lshbloom_bands must be between 1 and 256"),
    ({"method": "lshbloom", "lshbloom_bands": 256, "lshbloom_rows": 64}, "must not exceed 4096"),
    ({"method": "lshbloomm"}, "method must be one of"),
])
def test_bad_settings_are_refused_naming_the_key(overrides, message):
    with pytest.raises(AuditConfigError, match=message):
        build_config(overrides=overrides)
