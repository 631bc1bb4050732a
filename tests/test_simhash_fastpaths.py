"""The fast paths of simhash.py against their plain definitions (module doc of simhash.py).

tests/test_simhash.py pins golden values; these tests check that the faster
tokenizer, the word-hash cache and the vote compute exactly the definitions, on
text a regex tokenizer finds hard (Unicode separators, lone surrogates, case
folding that changes lengths) and on vote sizes either side of the float path.
"""
from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_dedup.content import simhash as S

WORD = re.compile(r"\w+")


def ref_words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def ref_vote(hashes: np.ndarray) -> int:
    values = [int(h) for h in hashes]
    return sum(1 << bit for bit in range(64) if 2 * sum((v >> bit) & 1 for v in values) > len(values))


PIECES = ["word", "Ünïcödé", "€", "\xa0", "\u2014", "\u201cq\u201d", "_", "x²", "٣", "\u0301", "İ", "ß", "\ud800",
          "\U0001f600", "\t", "\n", "\x1c", ".", "-", "$19.99", "2024-01-05", " ", "Σίσυφος", "東京", "a_b"]


@pytest.mark.parametrize("text", ["", "   ", "ascii only, with punctuation: (yes)!", "Café crème €5",
                                  "\u0130stanbul \u0130I", "a\ud800b\udfffc", "x\u00b2 y\u0301z \u00bd",
                                  "hello\u00a0world\u2014yes\u3000\u2003end", "snake_case_name __init__",
                                  "\x00nul\x1fctrl\x7fdel"])
def test_words_match_the_regex_definition(text):
    assert S.words(text) == ref_words(text)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.lists(st.sampled_from(PIECES), max_size=30).map("".join),
                 st.text(alphabet=st.characters(max_codepoint=127))))
def test_words_match_the_regex_definition_on_any_text(text):
    assert S.words(text) == ref_words(text)


def test_word_hashes_are_the_definition_and_survive_cache_clearing(monkeypatch):
    tokens = S.words("the same words the same words and a few new ones " * 3 + " ".join(map(str, range(50))))
    expected = [int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "little") for t in tokens]
    assert S.token_hashes(tokens).tolist() == expected
    monkeypatch.setattr(S, "_WORD_CACHE_LIMIT", 10)
    assert S.token_hashes(tokens).tolist() == expected  # clears the cache first
    assert len(S._WORD_CACHE) <= len(set(tokens))
    assert S.token_hashes(tokens).tolist() == expected
    assert S.token_hashes(["\ud800"]).tolist() == [S.word_hash("\ud800")]


@pytest.mark.parametrize("size", [1, 2, 3, 64, 391, 5000])
def test_vote_is_the_bitwise_majority(size):
    rng = np.random.default_rng(size)
    hashes = rng.integers(0, 2**64 - 1, size=size, dtype=np.uint64, endpoint=True)
    hashes[: size // 3] |= np.uint64(0xF0F0F0F0F0F0F0F0)  # skew some bits towards 1
    assert S._vote(hashes) == ref_vote(hashes)


def test_vote_blocked_path_agrees_with_the_one_product_path(monkeypatch):
    rng = np.random.default_rng(7)
    hashes = rng.integers(0, 2**64 - 1, size=999, dtype=np.uint64, endpoint=True)
    float_result = S._vote(hashes)
    monkeypatch.setattr(S, "_VOTE_CHUNK", 10)  # force the blocked sums used for long pages (last block partial)
    assert S._vote(hashes) == float_result == ref_vote(hashes)


def test_ties_are_not_a_majority():
    hashes = np.array([0xFFFFFFFFFFFFFFFF, 0], dtype=np.uint64)
    assert S._vote(hashes) == 0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.lists(st.sampled_from(PIECES), max_size=12).map("".join), st.text(max_size=20)),
                max_size=8))
def test_word_bytes_and_their_hashes_are_the_words_and_their_hashes(blocks):
    """The byte tokenizer of a page's blocks (what PageWords hashes and joins) cuts where the text tokenizer
    does, on any text (Unicode separators and whitespace, lone surrogates, newlines inside a block), and
    hashes each word as word_hash does."""
    tokens, counts = S.word_bytes_per_block(blocks)
    assert [t.decode("utf-8", "surrogatepass") for t in tokens] == ref_words(" ".join(blocks))
    assert counts.tolist() == [len(ref_words(b)) for b in blocks]
    assert S.byte_token_hashes(tokens).tolist() == [S.word_hash(t.decode("utf-8", "surrogatepass")) for t in tokens]


@pytest.mark.parametrize("blocks", [
    ["ASCII Only, with punctuation: (yes)!", "Second BLOCK 42"],
    ["don\u2019t \u00b6 \u2014 \u2192 \u00bbquoted\u00ab", "\u00a9 2024 \u2026"],  # separators of real pages
    ["\u00c9COLE \u00dcber \u00c2ge", "KELVIN \u212a"],  # capitals lowered one character each (K: to ASCII)
    ["\u0130stanbul", "\u0130I"],  # lowered to two characters: the text lowered whole
    ["\u0391\u03a3 \u03a3\u039f\u03a6\u039f\u03a3.", "\u03c3\u03c2 \u03a3"],  # a capital sigma: by its neighbours
    ["a\u2028b", "x\x85y\u00a0z", "tab\tand\x1cseparator"],  # Unicode separators and whitespace
    ["lone \ud800 surrogate", "snake_case __init__"],
    ["a block\nwith a newline", "next"],
])
def test_word_bytes_per_block_table(blocks):
    """Cases of the byte tokenizer, each against the definition (the regex on the lowered text), per block."""
    tokens, counts = S.word_bytes_per_block(blocks)
    assert [t.decode("utf-8", "surrogatepass") for t in tokens] == ref_words(" ".join(blocks))
    assert counts.tolist() == [len(ref_words(b)) for b in blocks]
    start = 0
    for block, count in zip(blocks, counts.tolist()):  # a block's words cut alone are its words on the page
        assert S.word_bytes_per_block([block])[0] == tokens[start:start + count]  # (content/boilerplate.py's
        start += count  # RecentBlocks keeps them by block)
    digests = S.byte_token_digests(tokens)
    assert digests == b"".join(hashlib.blake2b(t, digest_size=8).digest() for t in tokens)
    assert S.hashes_of_digests(digests).tolist() == S.byte_token_hashes(tokens).tolist()
    hashes = S.byte_token_hashes(tokens)
    assert hashes.dtype == np.uint64 and hashes.flags.writeable
    assert hashes.tolist() == [S.word_hash(t.decode("utf-8", "surrogatepass")) for t in tokens]
