"""The content extension remembers recent fingerprints by text digest: same verdicts, same crawl log, less work."""
from __future__ import annotations

import json

from scrapy.utils.test import get_crawler

from scrapy_dedup.content import pages
from scrapy_dedup.content.engine import ContentFingerprinter
from scrapy_dedup.extensions import DedupExtension


def text_of(n: int, start: int = 0) -> str:
    return " ".join(f"word{i}" for i in range(start, start + n))


def make_layer(tmp_path, **settings) -> DedupExtension:
    crawler = get_crawler(settings_dict={"DEDUP_LOG_FILE": str(tmp_path / "log.jsonl"),
                                         "EXTENSIONS": {"scrapy_dedup.DedupExtension": 500}, **settings})
    return crawler.get_extension(DedupExtension).open_content()


def test_exact_duplicate_text_reuses_the_fingerprint(tmp_path):
    layer = make_layer(tmp_path)
    text = text_of(120)
    first = layer.check_text("http://a.test/1", text)
    second = layer.check_text("http://a.test/2?ref=x", text)
    assert (first.kind, second.kind, second.kept_url) == ("unique", "exact", "http://a.test/1")
    assert len(layer.reader._cache) == 1
    layer.close()
    fresh = ContentFingerprinter(shingle_size=layer.cfg.shingle_size, bits=layer.cfg.fingerprint_bits,
                                 min_words=layer.cfg.min_words, sketch_size=layer.cfg.sketch_size).fingerprint(text)
    lines = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [line["kind"] for line in lines] == ["unique", "exact"]
    for line in lines:  # what the crawl log records is the fresh fingerprint, cached or not
        assert line["simhash"] == format(fresh.simhash, "016x")
        assert line["exact_hash"] == fresh.exact.hex()
        assert line["words"] == fresh.words


def test_cache_is_bounded_and_evicted_texts_are_judged_the_same(tmp_path, monkeypatch):
    monkeypatch.setattr(pages, "FINGERPRINT_CACHE_SIZE", 3)
    layer = make_layer(tmp_path)
    texts = [text_of(100, start=1000 * k) for k in range(5)]
    assert [layer.check_text(f"http://a.test/{k}", t).kind for k, t in enumerate(texts)] == ["unique"] * 5
    assert len(layer.reader._cache) == 3
    # texts 0 and 1 were evicted, 4 is cached: all are still exact duplicates of their first URL
    for k in (0, 1, 4):
        verdict = layer.check_text(f"http://a.test/{k}/copy", texts[k])
        assert (verdict.kind, verdict.kept_url) == ("exact", f"http://a.test/{k}")
    assert len(layer.reader._cache) == 3
    layer.close()


def test_per_domain_min_words_never_share_a_cached_decision(tmp_path):
    layer = make_layer(tmp_path, DEDUP_CONTENT_POLICIES={"strict.test": {"min_words": 60}})
    text = text_of(40)
    assert layer.check_text("http://a.test/p", text).kind == "unique"
    assert layer.check_text("http://strict.test/p", text).kind == "degenerate"
    assert layer.check_text("http://a.test/q", text).kind == "exact"
    layer.close()
