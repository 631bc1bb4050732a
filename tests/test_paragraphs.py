"""Paragraph-level exact dedup (content/paragraphs.py): what counts, the order, per-host shares, the text left."""
from __future__ import annotations

from hashlib import blake2b

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scrapy_dedup.content.boilerplate import normalize_block
from scrapy_dedup.content.paragraphs import (
    BlockCounts,
    ExactBlockSet,
    ParagraphDeduplicator,
    block_digests,
    text_blocks,
)
from scrapy_dedup.content.text import page_blocks
from scrapy_dedup.seen import BloomSeenSet

LONG_A = "The quick brown fox jumps over the lazy dog near the river bank."
LONG_B = "Every paragraph of this page is long enough to be deduplicated."
LONG_C = "A third paragraph, of its own, appears on one page and nowhere else."


def new(min_chars: int = 20, seen=None) -> ParagraphDeduplicator:
    return ParagraphDeduplicator(seen if seen is not None else ExactBlockSet(), min_chars)


def test_the_digest_is_of_the_boilerplate_learners_normal_form():
    """One normalization in the project: the block's digest is BLAKE2b of normalize_block's output."""
    blocks = ["Updated 2026-01-05 by Ann, at 12:00 UTC", "Home"]
    digests = block_digests(blocks, min_chars=10)
    assert digests[0] == blake2b(normalize_block(blocks[0]).encode(), digest_size=20).digest()
    assert digests[1] is None  # "home": 4 characters


@pytest.mark.parametrize("a, b, same", [
    ("Updated 2026-01-05 at 12:00, see the notes.", "updated 2025-12-31 at 09:41; see the notes", True),
    ("Updated 2026-01-05 at 12:00, see the notes.", "updated 2025-12-31 at 09:41 -- see the notes", False),  # spaces
    ("Prices start at 10 EUR for the small box!", "PRICES START AT 99 EUR FOR THE SMALL BOX", True),
    ("Prices start at 10 EUR for the small box!", "Prices start at 10 EUR for the large box!", False),
])
def test_blocks_alike_once_normalized_are_one_block(a, b, same):
    assert (block_digests([a], 10)[0] == block_digests([b], 10)[0]) is same


@pytest.mark.parametrize("block, min_chars, counted", [
    ("Home", 5, False),
    ("Next", 4, True),  # the threshold is inclusive
    ("Read more...", 10, False),  # "read more": 9 characters once punctuation is gone
    ("Read more about it", 10, True),
    ("-" * 60, 10, False),  # punctuation only: nothing left once normalized
])
def test_the_length_threshold_is_on_the_normal_form(block, min_chars, counted):
    assert (block_digests([block], min_chars)[0] is not None) is counted


@pytest.mark.parametrize("pages, repeated", [
    # first occurrence kept, later ones repeats; across pages and hosts
    ([("a", [LONG_A, LONG_B]), ("a", [LONG_B, LONG_C])], [(False, False), (True, False)]),
    ([("a", [LONG_A]), ("b", [LONG_A])], [(False,), (True,)]),
    # a block repeated inside one page: a repeat from its second occurrence on
    ([("a", [LONG_A, LONG_B, LONG_A, LONG_A])], [(False, False, True, True)]),
    # short blocks are never repeats, however often they occur
    ([("a", ["Home", LONG_A, "Home"]), ("a", ["Home", LONG_A])], [(False, False, False), (False, True)]),
    ([("a", [])], [()]),
])
def test_which_blocks_are_repeats(pages, repeated):
    dedup = new()
    assert [dedup.check(host, blocks).repeated for host, blocks in pages] == repeated


def test_counts_per_host_and_share():
    dedup = new()
    dedup.check("a.test", [LONG_A, LONG_B, "Home"])  # 2 new, 1 short
    dedup.check("a.test", [LONG_A, LONG_C])  # 1 repeat, 1 new
    dedup.check("b.test", [LONG_A, LONG_B, LONG_B, "Next"])  # 3 repeats, 1 short
    assert dedup.host_counts("a.test") == BlockCounts(blocks=4, duplicates=1, short=1)
    assert dedup.host_counts("b.test") == BlockCounts(blocks=3, duplicates=3, short=1)
    assert dedup.total == BlockCounts(blocks=7, duplicates=4, short=2)
    assert dedup.host_counts("a.test").duplicate_share == pytest.approx(1 / 4)
    assert dedup.host_counts("b.test").duplicate_share == 1.0
    assert dedup.host_counts("c.test").duplicate_share == 0.0  # never seen: no division by zero
    assert [host for host, _ in dedup.by_host()] == ["b.test", "a.test"]  # most repeats first


def test_the_text_less_repeats_keeps_order_and_short_blocks():
    dedup = new()
    dedup.check("a", [LONG_A])
    check = dedup.check("a", ["Intro", LONG_A, LONG_B, "Home", LONG_B])
    assert check.text == f"Intro {LONG_B} Home"
    assert check.counts == BlockCounts(blocks=3, duplicates=2, short=2)


def test_a_page_of_repeats_only_has_its_short_blocks_left():
    dedup = new()
    dedup.check("a", [LONG_A, LONG_B])
    assert dedup.check("a", ["Menu", LONG_B, LONG_A]).text == "Menu"


def test_html_blocks_as_the_crawl_cuts_them():
    page1 = f"<html><body><p>{LONG_A}</p><ul><li>Home</li></ul><div>{LONG_B}</div></body></html>"
    page2 = f"<html><body><h1>Title</h1><p>{LONG_B}</p><p>{LONG_C}</p><footer>{LONG_A}</footer></body></html>"
    dedup = new()
    dedup.check("x", page_blocks(page1))
    check = dedup.check("x", page_blocks(page2))
    assert check.blocks == ("Title", LONG_B, LONG_C)  # the footer is stripped from the main text
    assert check.text == f"Title {LONG_C}"


def test_bloom_and_exact_sets_agree_on_a_small_corpus():
    words = "alpha bravo charlie delta echo foxtrot golf".split()
    pages = [[f"paragraph {words[i % 7]} of the shared corpus, long enough" for i in range(p, p + 5)]
             for p in range(20)]
    exact, bloom = new(seen=ExactBlockSet()), new(seen=BloomSeenSet(1000, 1e-6))
    assert [exact.check("h", b).repeated for b in pages] == [bloom.check("h", b).repeated for b in pages]
    assert exact.total == bloom.total == BlockCounts(blocks=100, duplicates=93, short=0)


def test_a_failing_seen_set_counts_nothing():
    class Down(ExactBlockSet):
        def add_many(self, keys):
            raise ConnectionError("down")

    dedup = new(seen=Down())
    with pytest.raises(ConnectionError):
        dedup.check("a", [LONG_A])
    assert dedup.total == BlockCounts() and dedup.hosts == {}


@pytest.mark.parametrize("text, blocks", [
    ("one line\n\n  two   words \r\nthree", ["one line", "two words", "three"]),
    ("", []),
    ("\n \n", []),
])
def test_text_blocks_are_lines(text, blocks):
    assert text_blocks(text) == blocks


@pytest.mark.parametrize("bad", [0, -1, True, 2.5])
def test_min_chars_is_checked(bad):
    with pytest.raises(ValueError, match="min_chars"):
        ParagraphDeduplicator(ExactBlockSet(), bad)


_block = st.sampled_from([LONG_A, LONG_B, LONG_C, LONG_A.upper(), "Home", "Next page", LONG_B + " Again!"])


@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.lists(_block, max_size=6)), max_size=12))
def test_every_distinct_block_is_kept_exactly_once(pages):
    dedup = new()
    kept: list[str] = []
    for host, blocks in pages:
        check = dedup.check(host, blocks)
        assert check.text == " ".join(b for b, r in zip(blocks, check.repeated) if not r)
        kept += [normalize_block(b) for b, r in zip(blocks, check.repeated) if not r and len(normalize_block(b)) >= 20]
    every = [normalize_block(b) for _, blocks in pages for b in blocks if len(normalize_block(b)) >= 20]
    assert sorted(kept) == sorted(set(every))
    assert dedup.total.blocks == len(every) and dedup.total.duplicates == len(every) - len(set(every))
    assert sum(c.blocks for c in dedup.hosts.values()) == dedup.total.blocks
