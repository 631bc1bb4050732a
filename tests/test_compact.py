"""The compact per-page containers of the content store: StringList and DigestTable."""
from __future__ import annotations

import hashlib

import pytest

from scrapy_dedup.content.compact import DigestTable, StringList


def digest(i: int) -> bytes:
    return hashlib.blake2b(str(i).encode(), digest_size=16).digest()


def test_string_list_round_trips_any_str():
    items = ["https://a.test/", "", "https://b.test/\u00e9?q=\u4e2d", "lone surrogate \ud800", "x" * 5000]
    strings = StringList(items)
    assert len(strings) == 5 and list(strings) == items and strings[-1] == items[-1]
    with pytest.raises(IndexError):
        strings[5]
    data, lengths = strings.encoded()
    assert list(StringList.from_encoded(data, lengths)) == items
    assert strings.nbytes == len(data) + 8 * 5


def test_digest_table_finds_every_digest_across_growth_and_reload():
    table = DigestTable()
    digests = [digest(i) for i in range(20000)]  # the table doubles several times
    for i, d in enumerate(digests):
        assert table.append(d) == i
    assert all(table.position_of(d) == i for i, d in enumerate(digests))
    assert table.position_of(digest(-1)) is None
    assert table.digest_at(123) == digests[123]
    reloaded = DigestTable.from_bytes(table.to_bytes())
    assert all(reloaded.position_of(d) == i for i, d in enumerate(digests))
    assert reloaded.position_of(digest(-1)) is None


def test_digest_table_collisions_of_the_hash_part():
    """Digests sharing their first 8 bytes (the table hash) are still told apart by the rest."""
    same_head = [b"\x00" * 8 + i.to_bytes(8, "little") for i in range(3000)]
    table = DigestTable()
    for d in same_head[:1500]:
        table.append(d)
    for d in same_head[1500:]:  # inserted one by one after the vectorized rebuilds, and after a reload
        table.append(d)
    assert [table.position_of(d) for d in same_head] == list(range(3000))
    reloaded = DigestTable.from_bytes(table.to_bytes())
    assert [reloaded.position_of(d) for d in same_head] == list(range(3000))
    assert reloaded.position_of(b"\x00" * 8 + (5000).to_bytes(8, "little")) is None


def test_digest_table_first_of_a_repeated_digest_wins_and_widths_are_checked():
    table = DigestTable()
    table.append(digest(1))
    table.append(digest(1))
    assert table.position_of(digest(1)) == 0
    assert DigestTable.from_bytes(table.to_bytes()).position_of(digest(1)) == 0
    with pytest.raises(ValueError):
        table.append(b"short")
    with pytest.raises(ValueError):
        DigestTable.from_bytes(b"x" * 17)
