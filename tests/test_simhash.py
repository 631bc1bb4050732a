"""simhash / exact hash / words: the documented definitions, pinned, and their near-duplicate behaviour."""
from __future__ import annotations

import hashlib
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_dedup.content.simhash import exact_hash, hamming, simhash, simhash_words, word_hash, words, \
    words_per_block
from scrapy_dedup.content.text import page_text
from tests.textgen import article_words, edit_words, page

M64 = (1 << 64) - 1


# --- an independent, deliberately plain reading of the module documentation ---

def ref_words(text):
    return re.findall(r"\w+", text.lower())


def ref_word_hash(word):
    return int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "little")


def ref_fmix(h):
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) % 2**64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) % 2**64
    return h ^ (h >> 33)


def ref_simhash(text, k=5, bits=64):
    tokens = ref_words(text)
    if not tokens:
        return 0
    k = min(k, len(tokens))
    states = set()
    for i in range(len(tokens) - k + 1):
        s = ref_word_hash(tokens[i])
        for w in tokens[i + 1 : i + k]:
            s = (s * 0x9E3779B97F4A7C15 + ref_word_hash(w)) % 2**64
        states.add(s)
    halves = [[ref_fmix(s) for s in states]]
    if bits == 128:
        halves.append([ref_fmix(s ^ 0x5851F42D4C957F2D) for s in states])
    fp = 0
    for h, hashes in enumerate(halves):
        for bit in range(64):
            ones = sum((x >> bit) & 1 for x in hashes)
            if 2 * ones > len(hashes):
                fp |= 1 << (64 * h + bit)
    return fp


# --- golden values: they must never change (stored fingerprints and shared Redis indexes depend on them) ---

GOLDEN_TEXT = "The quick brown fox jumps over the lazy dog, then naps for 20 minutes at 3:15 pm."


def test_golden_values():
    assert word_hash("fox") == 0xB773521A1407E112
    assert simhash(GOLDEN_TEXT) == 0xA9C550F82C12003A
    assert simhash(GOLDEN_TEXT, shingle_size=3) == 0xD93990010886094E
    assert simhash(GOLDEN_TEXT, bits=128) == 0x09CE09E18B9C6095A9C550F82C12003A
    assert simhash("hello world") == 0x2DF61084EA882EB5
    assert exact_hash(GOLDEN_TEXT).hex() == "d5cd6d706ee0a5c737c2c64ca9d68e6f"


def test_golden_values_match_the_documented_algorithm():
    assert word_hash("fox") == ref_word_hash("fox")
    assert simhash(GOLDEN_TEXT) == ref_simhash(GOLDEN_TEXT)
    assert simhash(GOLDEN_TEXT, 3) == ref_simhash(GOLDEN_TEXT, 3)
    assert simhash(GOLDEN_TEXT, bits=128) == ref_simhash(GOLDEN_TEXT, bits=128)
    assert exact_hash(GOLDEN_TEXT) == hashlib.blake2b(" ".join(ref_words(GOLDEN_TEXT)).encode(), digest_size=16).digest()


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab cd ef gh, 12.é\nZ"), max_size=120), st.integers(1, 6),
       st.sampled_from([64, 128]))
def test_matches_reference_on_any_text(text, k, bits):
    assert simhash(text, k, bits) == ref_simhash(text, k, bits)


_BLOCK = st.lists(st.sampled_from(list("ab cd_9,.\n\u00a0é") + ["ΑΣ", "Σ", "ς", "İ", "—", "\u2028", "\x85"]),
                  max_size=30).map("".join)


@settings(max_examples=300)
@given(st.lists(_BLOCK, max_size=8))
def test_words_per_block_are_the_words_of_the_blocks_joined(blocks):
    # one tokenization of a page serves each of its texts: the words of " ".join(blocks), cut per block
    # (a newline in a block, never made by page_blocks, included)
    tokens, counts = words_per_block(blocks)
    assert tokens == words(" ".join(blocks)) == ref_words(" ".join(blocks))
    assert counts.tolist() == [len(words(b)) for b in blocks]


def test_words_keep_numbers_prices_and_dates():
    assert words("Only $19.99 on 2024-01-05, at 10:30!") == ["only", "19", "99", "on", "2024", "01", "05", "at", "10", "30"]
    assert words("Grüße AUS Köln") == ["grüße", "aus", "köln"]
    assert words("  ,,, ") == []


def test_exact_hash_ignores_case_punctuation_spacing_not_words():
    assert len(exact_hash("x")) == 16
    assert exact_hash("Hello,   World!") == exact_hash("hello world")
    assert exact_hash("price 19.99") != exact_hash("price 19.98")
    assert exact_hash("a b") != exact_hash("ab")


def test_hamming():
    assert hamming(0, 0) == 0
    assert hamming(0b1011, 0b0001) == 2
    assert hamming(M64, 0) == 64
    assert hamming(1 << 127, 0) == 1


def test_short_and_empty_texts():
    assert simhash("") == 0
    assert simhash(" ... ") == 0
    assert simhash("two words") == ref_simhash("two words")  # one shingle made of all the words
    assert simhash("two words") != simhash("other words")


def test_128_bits_low_half_is_the_64_bit_fingerprint():
    text = " ".join(article_words(random.Random(3), 300))
    assert simhash(text, bits=128) & M64 == simhash(text)
    assert simhash(text, bits=128) >> 64 != simhash(text)


def test_parameters_are_validated():
    with pytest.raises(ValueError):
        simhash("a b c", bits=32)
    with pytest.raises(ValueError):
        simhash("a b c", shingle_size=0)


def test_deterministic_and_independent_of_repeats_order():
    text = " ".join(article_words(random.Random(5), 500))
    assert simhash(text) == simhash(text)
    # one vote per distinct shingle: repeating the whole text changes only the shingles across the seam
    doubled = text + " " + text
    assert hamming(simhash(text), simhash(doubled)) <= 3
    assert simhash_words(words(text)) == simhash(text)


# --- near-duplicate behaviour on realistic pages (64 bits, shingles of 5, threshold 3) ---

def _articles(n, seed):
    rng = random.Random(seed)
    return [article_words(rng, rng.randint(400, 1500)) for _ in range(n)]


def test_chrome_changes_leave_the_fingerprint_unchanged():
    for i, main in enumerate(_articles(20, seed=11)):
        original = page_text(page(main, seed=i))
        variant = page_text(page(main, seed=i, banner="Winter deals: free shipping", csrf="ffee0099",
                                 footer="(c) 2025 Other Owner Ltd, Main Street 1", generated="2025-02-03 04:05"))
        assert simhash(variant) == simhash(original)
        assert exact_hash(variant) == exact_hash(original)


def test_one_and_two_word_edits_stay_close():
    """Small edits move few bits; a share stays within the default threshold (simhash is a sketch)."""
    rng = random.Random(12)
    within = {1: 0, 2: 0}
    articles = _articles(100, seed=12)
    for main in articles:
        base = simhash(" ".join(main))
        for count in (1, 2):
            distance = hamming(base, simhash(" ".join(edit_words(main, rng, count))))
            assert distance <= 16  # random pages are ~32 bits apart
            within[count] += distance <= 3
    # measured: 1-word edits ~83%, 2-word edits ~65% within 3 bits on 400-1500-word pages
    assert within[1] >= 70
    assert within[2] >= 50


def test_distinct_pages_are_far_apart():
    fps = [simhash(page_text(page(main, seed=i))) for i, main in enumerate(_articles(80, seed=13))]
    distances = [hamming(a, b) for i, a in enumerate(fps) for b in fps[i + 1 :]]
    assert min(distances) > 3
    assert 28 <= sum(distances) / len(distances) <= 36  # random-like, about 32


def test_templated_siblings_are_not_near_duplicates():
    """Two products sharing a long template differ in a dozen+ words of main text: not within 3 bits."""
    rng = random.Random(14)
    template = article_words(rng, 150)
    for _ in range(30):
        a = template[:75] + article_words(rng, 15) + template[75:]
        b = template[:75] + article_words(rng, 15) + template[75:]
        assert hamming(simhash(" ".join(a)), simhash(" ".join(b))) > 3
