"""BloomSeenSet: membership, growth, false-positive rate on 1,000,000 non-members, checkpoints."""
from __future__ import annotations

import hashlib
import json
import math
import os
import random
import struct

import pytest

from scrapy_dedup.seen.base import bits_per_key, bloom_size, choose_hashes, positions
from scrapy_dedup.seen.bloom import MAGIC, BloomSeenSet, CheckpointError, _Slice

NON_MEMBERS = 1_000_000


def random_keys(n: int, seed: int) -> list[bytes]:
    """``n`` distinct-with-overwhelming-probability 20-byte keys, like SHA-1 fingerprints."""
    blob = random.Random(seed).randbytes(20 * n)
    return [blob[i:i + 20] for i in range(0, 20 * n, 20)]


@pytest.fixture(scope="module")
def non_members() -> list[bytes]:
    return random_keys(NON_MEMBERS, seed=1)


def binomial_bound(rate: float, trials: int, z: float = 4.5) -> float:
    """Upper end of a z-sigma band around ``rate * trials`` (z=4.5: a false alarm about once in 300,000 runs)."""
    return rate * trials + z * math.sqrt(trials * rate * (1 - rate))


def fingerprints(n: int, prefix: str = "u") -> list[bytes]:
    return [hashlib.sha1(f"{prefix}{i}".encode()).digest() for i in range(n)]


def test_add_reports_new_then_seen_and_never_forgets():
    bloom = BloomSeenSet(capacity=5000, error_rate=1e-4)
    keys = fingerprints(5000)
    fresh = [bloom.add(k) for k in keys]
    assert sum(fresh) >= 4995  # a few false positives while filling are allowed (1e-4 * 5000 expected 0.5)
    assert all(k in bloom for k in keys)
    assert not any(bloom.add(k) for k in keys)
    assert len(bloom) == sum(fresh)


def test_keys_of_any_length_are_hashed_first():
    bloom = BloomSeenSet(capacity=100, error_rate=1e-3)
    assert bloom.add(b"a")
    assert not bloom.add(b"a")
    assert b"b" not in bloom
    assert "a" not in bloom  # not bytes: never a member


def test_positions_are_the_double_hashing_progression_modulo_m():
    rng = random.Random(7)
    for _ in range(2000):
        bits = rng.randint(50, 10**6)
        hashes = rng.randint(1, 30)
        step = max(1, (bits - 1) // (hashes - 1)) if hashes > 1 else bits
        h1, h2 = rng.getrandbits(64), rng.getrandbits(64)
        got = positions(h1, h2, bits, hashes, step)
        a, b = h1 % bits, h2 % step + 1
        assert got == [(a + i * b) % bits for i in range(hashes)]
        assert len(set(got)) == hashes or bits < hashes


def test_strided_slices_touch_exactly_the_positions():
    """add() reads and sets bits through strided slices: the same bits as the position list, wrapping or not."""

    rng = random.Random(11)
    wrapped = grouped = 0
    for i in range(300):
        piece = _Slice(capacity=rng.randint(5, 400) * rng.choice([1, 1000]), error_rate=rng.choice([1e-2, 1e-4, 1e-6]),
                       salt=rng.choice([None, i]))
        key = rng.randbytes(20)
        want = piece.positions(key)
        wrapped += len(piece.strides(key)) > piece.hashing.groups
        grouped += piece.hashing.groups > 1
        assert not piece.holds(key)
        piece.put(key)
        assert sorted(piece.bits.search(1)) == sorted(set(want))
        assert piece.holds(key)
        piece.bits[want[-1]] = 0
        assert not piece.holds(key)
    assert wrapped > 30 and 30 < grouped < 270  # every shape was exercised


def test_small_filters_hash_in_more_progressions_large_ones_read_the_digest():
    assert _Slice(10_000_000, 5e-7).hashing.groups == 1 and _Slice(10_000_000, 5e-7).hashing.salt is None
    small = _Slice(1000, 5e-7).hashing
    assert small.groups > 1 and small.salt is not None
    # growth slices hash with a salt of their own: no two slices place a key alike
    bloom = BloomSeenSet(capacity=100, error_rate=1e-3)
    for key in fingerprints(1500):
        bloom.add(key)
    salts = [piece.hashing.salt for piece in bloom.slices]
    assert len(salts) == len(set(salts)) >= 4


@pytest.mark.parametrize("capacity,load", [(100, 10), (1000, 3)])
def test_false_positives_after_growth_stay_under_the_rate_at_small_capacities(capacity, load):
    """Plain double hashing broke the bound here by 5-10 times (its (start, step) pairs are too few).

    Fills ``load`` times the capacity and asks 200,000 new keys: the count must
    stay within the binomial band of the configured rate.
    """
    rate, asked = 1e-4, 200_000
    bloom = BloomSeenSet(capacity=capacity, error_rate=rate)
    for key in random_keys(capacity * load, seed=5):
        bloom.add(key)
    assert len(bloom.slices) >= 2
    false_positives = sum(key in bloom for key in random_keys(asked, seed=6))
    print(f"\ncapacity {capacity} at {rate:g}, {load}x: {false_positives} false positives in {asked:,} "
          f"(the configured rate allows {rate * asked:.0f})")
    assert bloom.expected_false_positive_rate() <= rate
    assert false_positives <= binomial_bound(rate, asked)


def test_a_version_1_checkpoint_is_read_with_its_own_hashing_and_said_so(tmp_path, monkeypatch, caplog):
    from scrapy_dedup.seen import bloom as bloom_module
    from scrapy_dedup.seen.base import KeyHashing

    class VersionOne(BloomSeenSet):
        def _new_slice(self, index):
            new = super()._new_slice(index)
            return _Slice(new.capacity, new.error_rate, new.nbits, new.hashes,
                          hashing=KeyHashing(new.nbits, new.hashes, 1, None))

    old = VersionOne(capacity=200, error_rate=1e-4)
    keys = fingerprints(900)
    for key in keys:
        old.add(key)
    path = tmp_path / "seen.bloom"
    monkeypatch.setattr(bloom_module, "FORMAT_VERSION", 1)
    monkeypatch.setattr(bloom_module, "HASHING", bloom_module.LEGACY_HASHING)
    old.save(path)
    monkeypatch.undo()
    with caplog.at_level("WARNING", logger="scrapy_dedup.seen.bloom"):
        loaded = BloomSeenSet.load(path)
    assert all(key in loaded for key in keys)  # read with the hashing it was written with: nothing forgotten
    assert [(p.hashing.groups, p.hashing.salt) for p in loaded.slices] == [(1, None)] * len(old.slices)
    assert any("older scrapy-dedup" in r.getMessage() and str(path) in r.getMessage() for r in caplog.records)
    grown = len(loaded.slices)
    for key in fingerprints(2000, prefix="more"):
        loaded.add(key)
    assert loaded.slices[-1].hashing.salt == len(loaded.slices) - 1 and len(loaded.slices) > grown
    loaded.save(path)
    again = BloomSeenSet.load(path)
    assert all(key in again for key in keys)
    assert [p.hashing.describe() for p in again.slices] == [p.hashing.describe() for p in loaded.slices]


def test_sizing_is_near_the_optimum():
    # 1.44 * log2(1/p) bits per key is the optimum; we allow 5% for fewer hashes.
    for rate in (1e-2, 1e-3, 1e-6, 1e-9):
        optimum = math.log2(1 / rate) / math.log(2)
        assert bits_per_key(rate, choose_hashes(rate)) <= optimum * 1.05 + 0.01
    bits, hashes = bloom_size(1_000_000, 1e-6)
    assert bits / 8 / 1_000_000 < 3.8  # bytes per key at 1e-6


def test_growth_opens_tightened_slices():
    bloom = BloomSeenSet(capacity=1000, error_rate=1e-3)
    keys = fingerprints(7000)
    for k in keys:
        bloom.add(k)
    sizes = [piece.capacity for piece in bloom.slices]
    rates = [piece.error_rate for piece in bloom.slices]
    assert sizes == [1000, 2000, 4000]  # 7000 keys (minus a few false positives) fill three slices
    assert all(r2 == pytest.approx(r1 / 2) for r1, r2 in zip(rates, rates[1:]))
    assert sum(rates) < 1e-3
    assert all(k in bloom for k in keys)  # no false negatives across slices


@pytest.mark.parametrize("rate,assert_it", [(1e-3, True), (1e-4, True), (1e-6, False)])
def test_false_positive_rate_on_a_million_non_members(rate, assert_it, non_members):
    capacity = 100_000
    bloom = BloomSeenSet(capacity=capacity, error_rate=rate)
    for key in random_keys(capacity, seed=2):
        bloom.add(key)
    assert len(bloom.slices) == 1
    false_positives = sum(key in bloom for key in non_members)
    predicted = bloom.expected_false_positive_rate()
    print(f"\nlocal Bloom at {rate:g}: {false_positives} false positives in {NON_MEMBERS} "
          f"(rate {false_positives / NON_MEMBERS:.3g}, predicted {predicted:.3g}, configured {rate:g})")
    if assert_it:
        # The configured rate is an upper bound; the first slice is sized for rate/2, and the
        # measured count matches the prediction of the sizing formula within the binomial band.
        assert false_positives <= binomial_bound(rate, NON_MEMBERS)
        assert abs(false_positives - predicted * NON_MEMBERS) <= binomial_bound(predicted, NON_MEMBERS) - predicted * NON_MEMBERS
        assert predicted <= rate


def test_false_positive_rate_after_growth_stays_under_the_configured_rate(non_members):
    rate = 1e-3
    bloom = BloomSeenSet(capacity=20_000, error_rate=rate)
    for key in random_keys(60_000, seed=3):  # fills slice 0 (20k) and slice 1 (40k)
        bloom.add(key)
    assert len(bloom.slices) == 2
    false_positives = sum(key in bloom for key in non_members)
    predicted = bloom.expected_false_positive_rate()
    print(f"\nlocal Bloom at {rate:g} after growth to {len(bloom.slices)} slices: {false_positives} "
          f"false positives in {NON_MEMBERS} (predicted {predicted:.3g})")
    assert false_positives <= binomial_bound(rate, NON_MEMBERS)
    assert abs(false_positives - predicted * NON_MEMBERS) <= binomial_bound(predicted, NON_MEMBERS) - predicted * NON_MEMBERS


def test_estimated_rate_from_bits_matches_the_prediction():
    bloom = BloomSeenSet(capacity=50_000, error_rate=1e-3)
    assert bloom.estimated_false_positive_rate() == 0.0
    for key in random_keys(50_000, seed=4):
        bloom.add(key)
    assert bloom.estimated_false_positive_rate() == pytest.approx(bloom.expected_false_positive_rate(), rel=0.1)


# --- checkpoints -----------------------------------------------------------------------------

def test_save_and_load_round_trip(tmp_path):
    bloom = BloomSeenSet(capacity=1000, error_rate=1e-3)
    keys = fingerprints(2500)  # grows to 2 slices
    for key in keys:
        bloom.add(key)
    path = tmp_path / "seen.bloom"
    bloom.save(path)
    assert not bloom.dirty
    assert [p.name for p in tmp_path.iterdir()] == ["seen.bloom"]  # no temporary file left
    again = BloomSeenSet.load(path)
    assert len(again) == len(bloom)
    assert [p.bits for p in again.slices] == [p.bits for p in bloom.slices]
    assert all(k in again for k in keys)
    assert again.add(b"\x01" * 20) and not again.add(b"\x01" * 20)
    assert again.header() != bloom.header()  # the new key counted; header says so


def test_file_starts_with_a_versioned_header(tmp_path):
    path = tmp_path / "seen.bloom"
    BloomSeenSet(capacity=10, error_rate=0.01).save(path)
    data = path.read_bytes()
    assert data.startswith(MAGIC)
    (length,) = struct.unpack_from("<I", data, len(MAGIC))
    header = json.loads(data[len(MAGIC) + 4:len(MAGIC) + 4 + length])
    assert header["version"] == 2 and header["format"] == "scrapy-dedup-bloom"


def test_failed_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "seen.bloom"
    bloom = BloomSeenSet(capacity=100, error_rate=1e-3)
    bloom.add(b"k" * 20)
    bloom.save(path)
    before = path.read_bytes()
    bloom.add(b"j" * 20)

    def no_space(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(OSError):
        bloom.save(path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["seen.bloom"]


def _saved(tmp_path) -> bytes:
    bloom = BloomSeenSet(capacity=2000, error_rate=1e-3)
    for key in fingerprints(1500):
        bloom.add(key)
    path = tmp_path / "seen.bloom"
    bloom.save(path)
    return path.read_bytes()


@pytest.mark.parametrize("damage,reason", [
    (lambda d: d[:len(d) // 2], "truncated"),
    (lambda d: d[:-1], "truncated"),
    (lambda d: d[:10], "bad magic"),
    (lambda d: d + b"\0", "trailing bytes"),
    (lambda d: d[:-200] + bytes([d[-200] ^ 0x10]) + d[-199:], "checksum mismatch"),
    (lambda d: b"\x00" * len(d), "bad magic"),
    (lambda d: d.replace(b'"version": 2', b'"version": 9'), "format version 9"),
    (lambda d: d.replace(b'progressions-v2', b'progressions-v7'), "hashing scheme"),
    (lambda d: d.replace(b'"version": 2', b'"version": 1'), "hashing scheme"),
    (lambda d: b"", "bad magic"),
])
def test_damaged_files_are_refused_with_a_reason(tmp_path, damage, reason):
    data = _saved(tmp_path)
    path = tmp_path / "seen.bloom"
    path.write_bytes(damage(data))
    with pytest.raises(CheckpointError) as info:
        BloomSeenSet.load(path)
    assert reason in str(info.value)
    assert str(path) in str(info.value)


def test_unreadable_file_is_a_checkpoint_error(tmp_path):
    with pytest.raises(CheckpointError, match="cannot be read"):
        BloomSeenSet.load(tmp_path / "missing.bloom")


@pytest.mark.parametrize("capacity,rate", [(0, 1e-3), (10, 0.0), (10, 1.0), ("10", 1e-3)])
def test_bad_sizes_are_refused(capacity, rate):
    with pytest.raises(ValueError):
        BloomSeenSet(capacity=capacity, error_rate=rate)


def test_memory_per_key_at_one_in_a_million():
    bloom = BloomSeenSet(capacity=1_000_000, error_rate=1e-6)
    # first slice sized for 5e-7: about 31.4 bits per key; Scrapy's set costs ~90 bytes per key
    assert bloom.size_bytes() / 1_000_000 < 4.0


def test_an_empty_filter_states_a_rate_of_zero_not_minus_zero():
    bloom = BloomSeenSet(capacity=1_000, error_rate=1e-6)
    assert math.copysign(1.0, bloom.estimated_false_positive_rate()) == 1.0
    assert bloom.describe().endswith("false-positive rate 0")
