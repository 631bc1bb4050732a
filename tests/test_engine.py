"""The content engine end to end: fingerprint -> store -> verdict -> report."""
from __future__ import annotations

import random
import subprocess
import sys
import threading

import pytest

from scrapy_dedup import ContentDeduplicator, ContentFingerprinter, MemoryContentStore, Verdict
from scrapy_dedup.content.engine import ContentFingerprint, ContentStore
from scrapy_dedup.content.index import IndexFileError
from scrapy_dedup.content.simhash import hamming
from scrapy_dedup.content.text import page_text
from tests.textgen import article_words, edit_words, page


def text_of(main, **chrome):
    return page_text(page(main, **chrome))


def test_fingerprinter_parameters():
    with pytest.raises(ValueError, match="min_words"):
        ContentFingerprinter(shingle_size=5, min_words=4)
    with pytest.raises(ValueError):
        ContentFingerprinter(bits=96)
    fp = ContentFingerprinter().fingerprint("Only $19.99 today, 2024-01-05!")
    assert fp.words == 7 and len(fp.exact) == 16  # only 19 99 today 2024 01 05 and isinstance(fp.simhash, int)
    assert ContentFingerprinter(bits=128).fingerprint("a b c d e f").simhash >> 64 != 0


def test_ten_forbidden_pages_are_ten_degenerate_pages():
    dedup = ContentDeduplicator.in_memory()
    verdicts = [dedup.check(f"https://example.com/p{i}", "403 Forbidden") for i in range(10)]
    assert [v.kind for v in verdicts] == ["degenerate"] * 10
    assert all(v.kept_url is None and v.cluster is None for v in verdicts)
    report = dedup.report()
    assert (report.total, report.degenerate, report.exact, report.near, report.clusters) == (10, 10, 0, 0, 0)
    assert len(dedup.store) == 0  # never reached the store


def test_exact_near_unique_and_clusters():
    rng = random.Random(1)
    dedup = ContentDeduplicator.in_memory()
    a, b = article_words(rng, 800), article_words(rng, 800)
    assert dedup.check("https://shop.test/a", text_of(a)) == Verdict("unique", "https://shop.test/a", None, None,
                                                                      "https://shop.test/a")
    # same page under a tracking URL, with another CSRF token, banner and footer: exact duplicate
    v = dedup.check("https://shop.test/a?utm_source=x", text_of(a, csrf="other", banner="New!", footer="Bye"))
    assert (v.kind, v.kept_url, v.distance, v.cluster) == ("exact", "https://shop.test/a", 0, "https://shop.test/a")
    # a one-word edit that stays within the threshold: near duplicate of the kept page
    edited = next(
        e for e in (edit_words(a, rng, 1) for _ in range(50))
        if 0 < hamming(ContentFingerprinter().fingerprint(" ".join(e)).simhash,
                       ContentFingerprinter().fingerprint(" ".join(a)).simhash) <= 3
    )
    v = dedup.check("https://mirror.test/a", text_of(edited))
    assert v.kind == "near" and v.kept_url == "https://shop.test/a" and 1 <= v.distance <= 3
    assert v.cluster == "https://shop.test/a" and v.is_duplicate
    # a different page
    assert dedup.check("https://shop.test/b", text_of(b)).kind == "unique"
    assert dedup.check("https://shop.test/b#top", text_of(b)).kind == "exact"
    dedup.check("https://shop.test/403", "Access denied")
    dedup.skip_non_text(2)
    report = dedup.report()
    assert (report.total, report.exact, report.near, report.unique, report.degenerate) == (6, 2, 1, 2, 1)
    assert (report.clusters, report.largest_cluster, report.redundant, report.skipped_non_text) == (2, 3, 3, 2)
    assert dedup.counts() == {"unique": 2, "exact": 2, "near": 1, "degenerate": 1}


def test_only_unique_pages_are_stored_and_duplicates_point_at_the_kept_page():
    store = MemoryContentStore()
    fp = ContentFingerprint(exact=b"\x01" * 16, simhash=0xF0F0, words=100)
    assert store.check_and_add("u1", fp) == ("unique", None, None)
    assert store.check_and_add("u2", fp) == ("exact", "u1", 0)
    near = ContentFingerprint(exact=b"\x02" * 16, simhash=0xF0F1, words=100)
    assert store.check_and_add("u3", near) == ("near", "u1", 1)
    far = ContentFingerprint(exact=b"\x03" * 16, simhash=0x0F0F, words=100)
    assert store.check_and_add("u4", far) == ("unique", None, None)
    assert len(store) == 2 and store.url(1) == "u4"
    assert isinstance(store, ContentStore)


def test_concurrent_checks_let_exactly_one_copy_through():
    rng = random.Random(2)
    pages = [text_of(article_words(rng, 300)) for _ in range(30)]
    dedup = ContentDeduplicator.in_memory()
    verdicts: list[Verdict] = []
    lock = threading.Lock()
    barrier = threading.Barrier(4)

    def worker(t):
        for i, text in enumerate(pages):
            barrier.wait()
            v = dedup.check(f"https://site{t}.test/{i}", text)
            with lock:
                verdicts.append(v)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for i in range(len(pages)):
        mine = [v for v in verdicts if v.url.endswith(f"/{i}")]
        assert sorted(v.kind for v in mine) == ["exact", "exact", "exact", "unique"]
        kept = next(v.url for v in mine if v.kind == "unique")
        assert all(v.kept_url == kept == v.cluster for v in mine if v.kind == "exact")
    report = dedup.report()
    assert (report.unique, report.exact, report.clusters, report.largest_cluster) == (30, 90, 30, 4)


def test_store_persistence_round_trip(tmp_path):
    rng = random.Random(3)
    dedup = ContentDeduplicator.in_memory()
    mains = [article_words(rng, 200) for _ in range(20)]
    for i, main in enumerate(mains):
        dedup.check(f"https://a.test/{i}?q=\u00e9\n", text_of(main))  # odd URLs survive too
    path = tmp_path / "content.store"
    dedup.store.save(path)
    store = MemoryContentStore.load(path)
    assert len(store) == 20 and store.url(3) == "https://a.test/3?q=\u00e9\n"
    resumed = ContentDeduplicator(ContentFingerprinter(), store)
    v = resumed.check("https://b.test/7", text_of(mains[7], csrf="new"))
    assert (v.kind, v.kept_url) == ("exact", "https://a.test/7?q=\u00e9\n")
    assert resumed.check("https://b.test/new", text_of(article_words(rng, 200))).kind == "unique"
    in_place = MemoryContentStore()
    in_place.load_into(path)
    assert len(in_place) == 20 and in_place.check_and_add("z", dedup.fingerprint(text_of(mains[0])))[0] == "exact"
    with pytest.raises(ValueError, match="threshold/bands/bits"):
        MemoryContentStore(threshold=2).load_into(path)
    (tmp_path / "bad").write_bytes(path.read_bytes()[:-5])
    with pytest.raises(IndexFileError):
        MemoryContentStore.load(tmp_path / "bad")


def test_caller_may_decide_degenerate_per_domain():
    dedup = ContentDeduplicator.in_memory(min_words=20)
    short = dedup.fingerprint("one two three four five six seven eight")
    assert dedup.check_fingerprint("a", short).kind == "degenerate"
    assert dedup.check_fingerprint("b", short, degenerate=False).kind == "unique"
    assert dedup.check_fingerprint("c", short, degenerate=False).kind == "exact"
    long = dedup.fingerprint(" ".join(article_words(random.Random(9), 100)))
    assert dedup.check_fingerprint("d", long, degenerate=True).kind == "degenerate"


def test_fingerprint_and_store_bits_must_agree():
    with pytest.raises(ValueError, match="128"):
        ContentDeduplicator(ContentFingerprinter(bits=128), MemoryContentStore(bits=64))
    dedup = ContentDeduplicator.in_memory(bits=128, threshold=5, bands=7)
    text = " ".join(article_words(random.Random(4), 300))
    assert dedup.check("x", text).kind == "unique" and dedup.check("y", text).kind == "exact"


def test_core_imports_nothing_from_scrapy():
    code = (
        "import sys, scrapy_dedup\n"
        "from scrapy_dedup import page_text, simhash, SimhashIndex, DuplicationReport, ContentDeduplicator\n"
        "import scrapy_dedup.content.clusters\n"
        "d = ContentDeduplicator.in_memory(); d.check('u', page_text('<p>' + 'word ' * 30 + '</p>'))\n"
        "assert not [m for m in sys.modules if m == 'scrapy' or m.startswith('scrapy.')], 'scrapy imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_store_file_v3_checksums_the_whole_file_and_v2_files_still_load(tmp_path):
    """Version 3 adds a CRC-32 over everything; a version 2 file (same body, no trailer) still loads."""
    from scrapy_dedup.content.engine import _STORE_HEADER
    from scrapy_dedup.content.index import IndexFileError

    dedup = ContentDeduplicator.in_memory()
    for i in range(5):
        dedup.check(f"https://a.test/{i}", " ".join(f"word{i}x{j}" for j in range(60)))
    path = tmp_path / "store.idx"
    dedup.store.save(path)
    data = path.read_bytes()
    magic, version, *rest = _STORE_HEADER.unpack(data[: _STORE_HEADER.size])
    assert version == 3
    # a flipped bit in the URLs (outside the index's own checksum) is refused
    bad = bytearray(data)
    bad[_STORE_HEADER.size + 4 * 5 + 3] ^= 0x01
    path.write_bytes(bytes(bad))
    with pytest.raises(IndexFileError, match="checksum"):
        MemoryContentStore.load(path)
    # the same body as version 2, without the trailer
    v2 = _STORE_HEADER.pack(magic, 2, *rest) + data[_STORE_HEADER.size : -4]
    path.write_bytes(v2)
    loaded = MemoryContentStore.load(path)
    assert len(loaded) == 5 and loaded.url(0) == "https://a.test/0"
