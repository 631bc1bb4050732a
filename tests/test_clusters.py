"""Clusters: union-find with first-seen representatives, checked against a plain graph model."""
from __future__ import annotations

import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_dedup.content.clusters import Clusters


def test_star_and_chain_merges():
    c: Clusters[str] = Clusters()
    assert c.add("a") == "a"
    assert c.add_pair("a", "b") == "a"
    assert c.add_pair("c", "d") == "c"
    assert c.count() == 2 and c.largest() == 2
    assert c.add_pair("d", "b") == "a"  # merging keeps the earliest member
    assert c.representative("c") == "a"
    assert c.size("d") == 4
    assert c.count() == 1 and c.largest() == 4
    assert c.sizes() == {"a": 4}
    assert c.groups() == {"a": ["a", "b", "c", "d"]}
    c.add("lonely")
    assert c.count() == 1 and c.count(min_size=1) == 2 and len(c) == 5
    assert c.groups(min_size=1)["lonely"] == ["lonely"]


def test_empty():
    c: Clusters[int] = Clusters()
    assert c.count() == 0 and c.largest() == 0 and c.sizes() == {} and len(c) == 0


def model(pairs):
    """Connected components by repeated merging of sets; representative = first seen."""
    order: dict[int, int] = {}
    comps: list[set[int]] = []
    for a, b in pairs:
        for node in (a, b):
            order.setdefault(node, len(order))
        touching = [s for s in comps if a in s or b in s]
        merged = {a, b}.union(*touching)
        comps = [s for s in comps if s not in touching] + [merged]
    return {min(s, key=order.__getitem__): len(s) for s in comps}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30)), max_size=60))
def test_matches_the_graph_model(pairs):
    c: Clusters[int] = Clusters()
    for a, b in pairs:
        c.add_pair(a, b)
    expected = model(pairs)
    multi = {rep: size for rep, size in expected.items() if size >= 2}
    assert c.sizes() == multi
    assert c.count() == len(multi)
    assert c.largest() == max(expected.values(), default=0)
    for rep in expected:
        assert c.representative(rep) == rep


def test_concurrent_pairs_are_all_merged():
    c: Clusters[int] = Clusters()

    def worker(offset):
        for i in range(2000):
            c.add_pair(0, offset + i)

    threads = [threading.Thread(target=worker, args=(t * 10_000 + 1,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert c.count() == 1 and c.largest() == 8001 and c.representative(30_001) == 0
