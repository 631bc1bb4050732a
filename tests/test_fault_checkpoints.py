"""Damaged JOBDIR checkpoints, in real crawls: a clear ERROR line, a counter, the documented fallback.

A first crawl writes the checkpoints (``seen.bloom``, ``dedup-content.idx``); the
test damages one; a second crawl with the same JOBDIR must say so and follow the
policy: the Bloom filter refuses to start (``DEDUP_BLOOM_ON_CORRUPT='fail'``) or
starts empty (``'empty'``); the content index starts empty. Never silently.
"""
from __future__ import annotations

import logging
import os
import random

import pytest
from pytest_twisted import inlineCallbacks

from scrapy_dedup.content.engine import ContentFingerprinter, MemoryContentStore
from scrapy_dedup.seen.bloom import CheckpointError
from tests import textgen
from tests.faultcrawl import FollowSpider, ResumeSite
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite

HOST = "127.0.0.1"


def damaged(data: bytes, damage: str) -> bytes:
    if damage == "truncated":
        return data[: len(data) // 2]
    if damage == "empty":
        return b""
    if damage == "garbage":
        return random.Random(3).randbytes(len(data))
    raise ValueError(damage)


def error_records(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.fixture
def site():
    design = ResumeSite(lists=4, per_list=3, delay=0)
    with LocalSite(design.route) as server:
        server.design = design
        yield server


def settings_for(jobdir, **extra) -> dict:
    return {"ADDONS": {"scrapy_dedup.Addon": 0}, "JOBDIR": str(jobdir), **extra}


@pytest.mark.crawl
@pytest.mark.parametrize("damage", ["truncated", "empty", "garbage"])
@inlineCallbacks
def test_damaged_content_checkpoint_is_logged_counted_kept_aside_and_the_crawl_goes_on(site, tmp_path, caplog, damage):
    design = site.design
    first_dir = tmp_path / "first"
    yield run_crawl(FollowSpider, settings_for(first_dir), start_url=site.url(HOST, "/"))
    checkpoint = first_dir / "dedup-content.idx"
    assert len(MemoryContentStore.load(checkpoint)) >= len(design.originals)
    # A fresh JOBDIR holding only the damaged content checkpoint: the second crawl fetches every page.
    second_dir = tmp_path / "second"
    second_dir.mkdir()
    (second_dir / "dedup-content.idx").write_bytes(damaged(checkpoint.read_bytes(), damage))
    caplog.clear()
    with caplog.at_level(logging.INFO):
        crawler = yield run_crawl(FollowSpider, settings_for(second_dir), start_url=site.url(HOST, "/"))
    errors = error_records(caplog)
    assert len(errors) == 1
    message = errors[0].getMessage()
    assert str(second_dir / "dedup-content.idx") in message and "empty content index" in message
    assert crawler.stats.get_value("dedup/content/checkpoint_errors") == 1
    assert crawler.stats.get_value("dedup/content/restored") is None
    kept_aside = list(second_dir.glob("dedup-content.idx.corrupt-*"))
    assert len(kept_aside) == 1 and str(kept_aside[0]) in message
    # The fallback: an empty index, so every original is kept again; near duplicates within the run are still caught.
    # (one page of each original/near-duplicate pair, whichever the crawl met first)
    assert sorted(item["url"].replace("/b/", "/a/") for item in crawler.items) \
        == sorted(site.url(HOST, p) for p in design.originals)
    # And the new checkpoint is whole again.
    assert len(MemoryContentStore.load(second_dir / "dedup-content.idx")) >= len(design.originals)


@pytest.mark.crawl
@pytest.mark.parametrize("damage", ["truncated", "garbage"])
@inlineCallbacks
def test_damaged_bloom_checkpoint_stops_the_crawl_at_start_by_default(site, tmp_path, caplog, damage):
    jobdir = tmp_path / "job"
    yield run_crawl(FollowSpider, settings_for(jobdir), start_url=site.url(HOST, "/"))
    bloom = jobdir / "seen.bloom"
    bloom.write_bytes(damaged(bloom.read_bytes(), damage))
    fetched = sum(site.hits.values())
    caplog.clear()
    with caplog.at_level(logging.INFO), pytest.raises(Exception) as caught:
        yield run_crawl(FollowSpider, settings_for(jobdir), start_url=site.url(HOST, "/"))
    # Scrapy >= 2.14 then fails closing the never-opened engine: its RuntimeError carries ours as context.
    assert isinstance(caught.value, CheckpointError) or isinstance(caught.value.__context__, CheckpointError)
    assert sum(site.hits.values()) == fetched  # nothing fetched again
    messages = [r.getMessage() for r in error_records(caplog)]
    assert len(messages) == 1 and str(bloom) in messages[0] and "DEDUP_BLOOM_ON_CORRUPT" in messages[0]
    assert bloom.exists()  # left for the user to restore


@pytest.mark.crawl
@inlineCallbacks
def test_damaged_bloom_checkpoint_with_on_corrupt_empty_refetches_everything_and_says_so(site, tmp_path, caplog):
    design = site.design
    jobdir = tmp_path / "job"
    yield run_crawl(FollowSpider, settings_for(jobdir), start_url=site.url(HOST, "/"))
    bloom = jobdir / "seen.bloom"
    bloom.write_bytes(damaged(bloom.read_bytes(), "truncated"))
    os.remove(jobdir / "dedup-content.idx")  # so the refetched originals are kept again, not judged
    site.hits.clear()
    caplog.clear()
    with caplog.at_level(logging.INFO):
        crawler = yield run_crawl(FollowSpider, settings_for(jobdir, DEDUP_BLOOM_ON_CORRUPT="empty"),
                                  start_url=site.url(HOST, "/"))
    messages = [r.getMessage() for r in error_records(caplog)]
    assert len(messages) == 1 and "EMPTY" in messages[0]
    assert crawler.stats.get_value("dedup/seen/checkpoint_errors") == 1
    assert len(list(jobdir.glob("seen.bloom.corrupt-*"))) == 1
    assert sorted(path for _, path in site.fetched()) == sorted(design.paths())  # every page once again
    assert len(crawler.items) == len(design.originals)


def _saved_store(tmp_path):
    rng = random.Random(1)
    fingerprinter = ContentFingerprinter(shingle_size=5, bits=64, min_words=10, sketch_size=256)
    store = MemoryContentStore()
    for i in range(20):
        store.check_and_add(f"http://a.test/{i}", fingerprinter.fingerprint(" ".join(textgen.article_words(rng, 200))))
    path = tmp_path / "dedup-content.idx"
    store.save(path)
    return path


@pytest.mark.parametrize("cut", [0, 1, 8, 24, 100, -1])
def test_every_truncation_of_a_content_checkpoint_is_refused(tmp_path, cut):
    path = _saved_store(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[:cut] if cut >= 0 else data[:-1])
    with pytest.raises(Exception) as caught:
        MemoryContentStore().load_into(path)
    assert not isinstance(caught.value, (MemoryError, RecursionError))


def test_a_flipped_byte_anywhere_in_a_content_checkpoint_is_refused(tmp_path):
    path = _saved_store(tmp_path)
    data = path.read_bytes()
    accepted = []
    for position in range(0, len(data), 97):
        bad = bytearray(data)
        bad[position] ^= 0x10
        path.write_bytes(bytes(bad))
        try:
            MemoryContentStore().load_into(path)
        except Exception:
            continue
        accepted.append(position)
    assert accepted == []
