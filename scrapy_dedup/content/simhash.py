"""Charikar's simhash over word shingles, and the exact hash of the same words.

Definitions (stable: identical across processes, platforms and Python versions,
pinned by golden values in ``tests/test_simhash.py``):

* **Words** (:func:`words`): the text lowercased (``str.lower``), then every
  maximal run of Unicode word characters (``re`` ``\\w+``: letters, digits,
  underscore). Punctuation and whitespace separate words and are otherwise
  ignored. Numbers are words: ``"$19.99 on 2024-01-05"`` gives
  ``["19", "99", "on", "2024", "01", "05"]``, so a changed price or date
  changes the fingerprints.
* **Word hash**: the first 8 bytes of BLAKE2b (``digest_size=8``) of the word's
  UTF-8 bytes, read little-endian, as an unsigned 64-bit integer.
* **Shingle hash** of ``k`` consecutive words ``w1..wk`` with word hashes
  ``h1..hk`` (arithmetic modulo 2**64): ``s = h1; s = s * 0x9E3779B97F4A7C15 + hj``
  for ``j = 2..k``, then the MurmurHash3 64-bit finalizer ``fmix64(s)``. For
  128-bit fingerprints, the high 64 bits come from
  ``fmix64(s ^ 0x5851F42D4C957F2D)``. A text with fewer than ``k`` words has
  one shingle made of all its words; a text without words has fingerprint 0.
* **Vote**: each *distinct* shingle votes once on every bit (Broder's set
  resemblance: a phrase repeated on the page does not outvote the rest);
  fingerprint bit ``i`` is 1 when strictly more than half of the shingles
  have bit ``i`` set.
* **Exact hash** (:func:`exact_hash`): the 16-byte BLAKE2b digest of the words
  joined by single spaces (UTF-8): case, punctuation and whitespace changes do
  not change it; any changed word or number does.

Everything after tokenizing runs in numpy (one vectorized pass per shingle
position, ``unpackbits`` and one vector-matrix product for the vote); word
hashes are cached per process, so a crawl's template vocabulary is hashed once.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from scrapy_dedup._util.mix import fmix64_array as _fmix64

__all__ = ["words", "words_per_block", "word_bytes_per_block", "byte_token_hashes", "byte_token_digests",
           "hashes_of_digests", "simhash", "simhash_words",
           "exact_hash", "exact_hash_words", "hamming", "word_hash", "SUPPORTED_BITS"]

SUPPORTED_BITS = (64, 128)

_WORD = re.compile(r"\w+")
_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)
_HIGH_SALT = np.uint64(0x5851F42D4C957F2D)
_LITTLE_U64 = np.dtype("<u8")

class _WordHashCache(dict):
    """word -> :func:`word_hash`, computed on first sight (``__missing__``), so a lookup of a known
    word stays in C. Values never change, so concurrent threads can only compute one twice."""

    def __missing__(self, word: str) -> int:
        value = self[word] = word_hash(word)
        return value


_WORD_CACHE = _WordHashCache()
_WORD_CACHE_LIMIT = 1 << 18  # ~30 MB at worst; cleared when full (numbers, ids make it grow)
_blake2b = hashlib.blake2b
# ASCII characters that are not word characters (re's \w on str: str.isalnum() or "_") -> space
_ASCII_NON_WORD = {c: " " for c in range(128) if not (chr(c).isalnum() or chr(c) == "_")}
_ASCII_NON_WORD_BYTES = bytes(0x20 if c in _ASCII_NON_WORD else c for c in range(256))
_ASCII_BYTES = bytes(range(128))
# the same, but a newline stays a newline (words_per_block: where one block ends)
_ASCII_NON_WORD_BUT_NEWLINE = {c: s for c, s in _ASCII_NON_WORD.items() if c != 10}
_ASCII_NON_WORD_BUT_NEWLINE_BYTES = bytes(0x20 if c in _ASCII_NON_WORD_BUT_NEWLINE else c for c in range(256))
# ... and ASCII capitals lowercased too: the lowercasing and the cutting of UTF-8 text in one C pass
_LOWER_WORD_BYTES = bytes(c + 32 if 65 <= c <= 90 else _ASCII_NON_WORD_BUT_NEWLINE_BYTES[c] for c in range(256))


def words(text: str) -> list[str]:
    """The words of ``text``: lowercased runs of Unicode word characters (numbers kept)."""
    lowered = text.lower()
    # The same tokens as _WORD.findall(lowered), about twice as fast: every separator becomes a
    # space by C-level translations, then str.split() cuts there. Word characters are never
    # whitespace, so split() cannot cut inside a word.
    if lowered.isascii():
        return lowered.translate(_ASCII_NON_WORD).split()  # str.translate's ASCII fast path
    # Other text: in UTF-8, where no character's bytes occur inside another's, the (few distinct)
    # non-ASCII separators are replaced by spaces, then the ASCII ones by a 256-byte table.
    data = lowered.encode("utf-8", "surrogatepass")
    for char in set(data.translate(None, _ASCII_BYTES).decode("utf-8", "surrogatepass")):
        if not (char.isalnum() or char == "_"):
            data = data.replace(char.encode("utf-8", "surrogatepass"), b" ")
    return data.translate(_ASCII_NON_WORD_BYTES).decode("utf-8", "surrogatepass").split()


def words_per_block(blocks: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """``words(" ".join(blocks))``, and how many of those words each block holds (int64, one per block).

    One tokenization of the page: the blocks joined by newlines (a newline, like a space, is no word
    character and leaves the lowercasing of its neighbours as it is), every other separator made a space
    as :func:`words` does, then the words before each newline counted in numpy. A block holding a
    newline itself (``page_blocks`` never makes one) is counted on its own."""
    tokens, counts = word_bytes_per_block(blocks)
    return [token.decode("utf-8", "surrogatepass") for token in tokens], counts


def word_bytes_per_block(blocks: Sequence[str]) -> tuple[list[bytes], np.ndarray]:
    """:func:`words_per_block` with each word as its UTF-8 bytes (``surrogatepass``): what is hashed
    (:func:`byte_token_hashes`) and joined for the exact hash, without decoding the words. The page is cut
    as bytes: once every separator is a space or a newline, ``bytes.split`` cuts where ``str.split`` does,
    several times faster on text that is not ASCII."""
    if not blocks:
        return [], np.zeros(0, dtype=np.int64)
    text = "\n".join(blocks)
    if not text.isascii():
        # Lowercased and cut as UTF-8 bytes below; first each distinct non-ASCII character becomes the one
        # character it reads as (:func:`_char_form`: its lowercase, or a space for a separator) by
        # str.replace, which is a copy and a scan when the replacement is one character (str.lower() of a
        # text that is not ASCII costs more than the rest of the cutting together; bytes.replace of a
        # multi-byte character, more again). A character's lowercase is its own lowercase again, so the
        # replacements do not meet and their order does not matter. A text holding a character without one
        # form (a capital sigma, lowered by its neighbours; a capital I with a dot, two characters lowered)
        # is lowered whole first: its characters then have one.
        chars = _non_ascii_chars(text)
        if any(_char_form(char) is None for char in chars):
            text = text.lower()
            chars = _non_ascii_chars(text)
        for char in chars:
            form = _char_form(char)
            if form != char:
                text = text.replace(char, form)  # type: ignore[arg-type]  # not None: see above
    data = text.encode("utf-8", "surrogatepass").translate(_LOWER_WORD_BYTES)
    tokens = data.split()  # only spaces and newlines are left between words (every other separator is a space)
    codes = np.frombuffer(data, dtype=np.uint8)
    newlines = np.flatnonzero(codes == 10)
    if len(newlines) != len(blocks) - 1:
        return tokens, np.array([len(words(block)) for block in blocks], dtype=np.int64)
    gap = (codes == 32) | (codes == 10)
    starts = ~gap  # a word starts at a word byte after a gap (a word never holds a space or newline byte)
    starts[1:] &= gap[:-1]
    before = np.cumsum(starts, dtype=np.int64)[newlines]  # words started before each newline
    return tokens, np.diff(np.concatenate(([0], before, [len(tokens)])))


def _non_ascii_chars(text: str) -> set[str]:
    """The distinct non-ASCII characters of ``text`` (its UTF-8 less the ASCII bytes, decoded: in C)."""
    return set(text.encode("utf-8", "surrogatepass").translate(None, _ASCII_BYTES).decode("utf-8", "surrogatepass"))


@lru_cache(maxsize=4096)
def _char_form(char: str) -> str | None:
    """The character ``char`` reads as in :func:`words`: its lowercase, a space when that is no word character;
    None when that is not one character of its own (a capital sigma's lowercase depends on its neighbours,
    the lowercase of a capital I with a dot above is two characters)."""
    lower = char.lower()
    if char == "\u03a3" or len(lower) != 1:
        return None
    return lower if lower.isalnum() or lower == "_" else " "


def word_hash(word: str) -> int:
    """Stable 64-bit hash of one word: BLAKE2b-64 of its UTF-8 bytes, little-endian."""
    return int.from_bytes(_blake2b(word.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


def token_hashes(tokens: Sequence[str]) -> np.ndarray:
    """The :func:`word_hash` of each of ``tokens`` (uint64), through the per-process cache."""
    cache = _WORD_CACHE
    if len(cache) > _WORD_CACHE_LIMIT:
        cache.clear()
    return np.fromiter(map(cache.__getitem__, tokens), dtype=np.uint64, count=len(tokens))


class _ByteWordHashCache(dict):
    """UTF-8 word -> the 8 bytes of its BLAKE2b-64 digest (:func:`word_hash` read little-endian), as
    :class:`_WordHashCache`: kept as bytes, so that a page's hashes are one ``bytes.join`` read by numpy, not a
    Python int converted per word."""

    def __missing__(self, word: bytes) -> bytes:
        value = self[word] = _blake2b(word, digest_size=8).digest()
        return value


_BYTE_WORD_CACHE = _ByteWordHashCache()


def byte_token_hashes(tokens: Sequence[bytes]) -> np.ndarray:
    """:func:`token_hashes` of words given as their UTF-8 bytes (:func:`word_bytes_per_block`)."""
    return hashes_of_digests(byte_token_digests(tokens))


def byte_token_digests(tokens: Sequence[bytes]) -> bytes:
    """The 8 digest bytes of each of ``tokens`` (UTF-8 words) one after the other: what
    :func:`byte_token_hashes` reads (:func:`hashes_of_digests`), and what a part of a page's hashes is kept as."""
    cache = _BYTE_WORD_CACHE
    if len(cache) > _WORD_CACHE_LIMIT:
        cache.clear()
    return b"".join(map(cache.__getitem__, tokens))


def hashes_of_digests(digests: bytes) -> np.ndarray:
    """The word hashes (uint64) of :func:`byte_token_digests`."""
    return np.frombuffer(digests, dtype=_LITTLE_U64).astype(np.uint64)  # a copy: writable, native order


def _shingle_states(hashes: np.ndarray, shingle_size: int) -> np.ndarray:
    """The combined state of each shingle of ``shingle_size`` words, from the words' hashes."""
    k = min(shingle_size, len(hashes))
    count = len(hashes) - k + 1
    state = hashes[:count].copy()
    with np.errstate(over="ignore"):
        for j in range(1, k):
            state *= _MULTIPLIER
            state += hashes[j : j + count]
    return state


def _distinct(values: np.ndarray) -> np.ndarray:
    values = np.sort(values)
    if len(values) > 1:
        keep = np.empty(len(values), dtype=bool)
        keep[0] = True
        np.not_equal(values[1:], values[:-1], out=keep[1:])
        values = values[keep]
    return values


_VOTE_CHUNK = 1024  # rows per float32 product: sums of 0/1 are exact (far below 2**24)


def _vote(hashes: np.ndarray) -> int:
    """Bit i of the result is 1 when more than half of ``hashes`` have bit i set."""
    raw = hashes.astype(_LITTLE_U64, copy=False).view(np.uint8)
    n = len(hashes)
    if n <= _VOTE_CHUNK:
        # column sums as one BLAS vector-matrix product: about twice as fast as an integer
        # reduction along axis 0, and exact (integers below 2**24 in float32)
        counts = np.ones(n, dtype=np.float32) @ np.unpackbits(raw, bitorder="little").reshape(-1, 64).astype(np.float32)
    else:
        # long pages: the same product over blocks of _VOTE_CHUNK rows, so the unpacked bits stay
        # small (a 10,000-shingle page unpacked at once is a 2.5 MB float32 matrix: 3-4x slower)
        ones = np.ones(_VOTE_CHUNK, dtype=np.float32)
        counts = np.zeros(64, dtype=np.float64)  # exact: every block's sums are exact integers
        for start in range(0, n, _VOTE_CHUNK):
            block = np.unpackbits(raw[8 * start : 8 * (start + _VOTE_CHUNK)], bitorder="little").reshape(-1, 64)
            counts += ones[: len(block)] @ block.astype(np.float32)
    majority = np.packbits(counts * 2 > len(hashes), bitorder="little")
    return int.from_bytes(majority.tobytes(), "little")


def _check(shingle_size: int, bits: int) -> None:
    if bits not in SUPPORTED_BITS:
        raise ValueError(f"bits must be 64 or 128, got {bits!r}")
    if not isinstance(shingle_size, int) or shingle_size < 1:
        raise ValueError(f"shingle_size must be a positive integer, got {shingle_size!r}")


def simhash_words(tokens: Sequence[str], shingle_size: int = 5, bits: int = 64) -> int:
    """Simhash of already tokenized ``tokens`` (the output of :func:`words`)."""
    return simhash_and_shingle_hashes(tokens, shingle_size, bits)[0]


def simhash(text: str, shingle_size: int = 5, bits: int = 64) -> int:
    """Charikar simhash of ``text`` over shingles of ``shingle_size`` words (see the module doc)."""
    return simhash_words(words(text), shingle_size, bits)


def exact_hash_words(tokens: Sequence[str]) -> bytes:
    """16-byte BLAKE2b of the words joined by spaces: the exact-duplicate key."""
    return _blake2b(" ".join(tokens).encode("utf-8", "surrogatepass"), digest_size=16).digest()


def exact_hash(text: str) -> bytes:
    """16-byte hash of the normalized words of ``text`` (case, punctuation, spacing ignored)."""
    return exact_hash_words(words(text))


if hasattr(int, "bit_count"):  # Python >= 3.10

    def hamming(a: int, b: int) -> int:
        """Number of differing bits between two fingerprints."""
        return (a ^ b).bit_count()

else:  # pragma: no cover - Python 3.9

    def hamming(a: int, b: int) -> int:
        """Number of differing bits between two fingerprints."""
        return bin(a ^ b).count("1")


def simhash_and_shingle_hashes(tokens: Sequence[str], shingle_size: int = 5, bits: int = 64) -> tuple[int, np.ndarray]:
    """``(simhash_words(tokens, ...), distinct shingle hashes)`` from one pass over the shingles.

    The hashes are the 64-bit ``fmix64`` values that vote (low half of a 128-bit
    fingerprint), distinct, in no particular order: the verification sketch
    (:mod:`scrapy_dedup.content.sketch`) is taken from them, so a page is tokenized and
    its shingles hashed once for both.
    """
    _check(shingle_size, bits)
    if not tokens:
        return 0, np.zeros(0, dtype=np.uint64)
    return simhash_of_word_hashes(token_hashes(tokens), shingle_size, bits)


def simhash_of_word_hashes(hashes: np.ndarray, shingle_size: int = 5, bits: int = 64) -> tuple[int, np.ndarray]:
    """:func:`simhash_and_shingle_hashes` of a text from its words' hashes alone (``token_hashes``; the
    arguments not checked again): what a page's other texts are fingerprinted from when their words are
    the page's words less some blocks' (boilerplate learning)."""
    if not len(hashes):
        return 0, np.zeros(0, dtype=np.uint64)
    with np.errstate(over="ignore"):
        states = _distinct(_shingle_states(hashes, shingle_size))
        mixed = _fmix64(states.copy())
        fp = _vote(mixed)
        if bits == 128:
            states ^= _HIGH_SALT
            fp |= _vote(_fmix64(states)) << 64
    return fp, mixed
