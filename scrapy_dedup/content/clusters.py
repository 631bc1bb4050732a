"""Union-find over duplicate pairs: which pages belong together, and which one represents them.

Each duplicate found (``b`` is a copy of ``a``) is a pair; clusters are the
connected components of those pairs. A cluster's representative is its member
seen first (the page a crawl keeps), whatever order the pairs are merged in.
Union by size and path halving keep every operation near O(1).

Compact: each node gets an ``int`` id in first-seen order (one dict entry per
node, the only per-node Python object besides the node itself); parents, sizes
and each root's earliest member are ``int32`` arrays indexed by id. Because ids
are handed out in first-seen order, "earliest member" is simply the smallest id.
"""
from __future__ import annotations

import threading
from array import array
from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

__all__ = ["Clusters"]

_I32_MAX = 2**31 - 1

Node = TypeVar("Node", bound=Hashable)


class Clusters(Generic[Node]):
    """Connected components of duplicate pairs, representative = first seen. Thread-safe."""

    def __init__(self) -> None:
        self._ids: dict[Node, int] = {}  # node -> id, ids in first-seen order
        self._nodes: list[Node] = []  # id -> node
        self._parent = array("i")  # id -> parent id (a root is its own parent)
        self._size = array("i")  # root id -> members (stale for non-roots)
        self._first = array("i")  # root id -> smallest (earliest) member id
        self._multi = 0  # clusters with >= 2 members
        self._largest = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Number of nodes seen."""
        return len(self._nodes)

    def __contains__(self, node: object) -> bool:
        return node in self._ids

    def add(self, node: Node) -> Node:
        """Register ``node`` (a singleton if new); returns its representative."""
        with self._lock:
            i = self._add(node)
            return self._nodes[self._first[self._find(i)]]

    def add_pair(self, a: Node, b: Node) -> Node:
        """Record that ``a`` and ``b`` are duplicates (``a`` first if both are new); returns the representative."""
        with self._lock:
            ra, rb = self._find(self._add(a)), self._find(self._add(b))
            size, first = self._size, self._first
            if ra == rb:
                return self._nodes[first[ra]]
            if size[ra] < size[rb]:
                ra, rb = rb, ra
            small, large = size[rb], size[ra]
            self._multi -= (small >= 2) + (large >= 2) - 1
            self._parent[rb] = ra
            size[ra] = small + large
            if small + large > self._largest:
                self._largest = small + large
            if first[rb] < first[ra]:
                first[ra] = first[rb]
            return self._nodes[first[ra]]

    def representative(self, node: Node) -> Node:
        """The first-seen member of ``node``'s cluster (``KeyError`` for an unknown node)."""
        with self._lock:
            return self._nodes[self._first[self._find(self._ids[node])]]

    def size(self, node: Node) -> int:
        """Members in ``node``'s cluster."""
        with self._lock:
            return self._size[self._find(self._ids[node])]

    def count(self, min_size: int = 2) -> int:
        """Clusters with at least ``min_size`` members (default: clusters of actual duplicates)."""
        with self._lock:
            if min_size == 2:
                return self._multi
            return sum(1 for r in self._roots() if self._size[r] >= min_size)

    def largest(self) -> int:
        """Members of the largest cluster (0 when empty)."""
        with self._lock:
            return self._largest

    def sizes(self) -> dict[Node, int]:
        """Representative -> cluster size, for clusters of 2 or more."""
        with self._lock:
            return {self._nodes[self._first[r]]: self._size[r] for r in self._roots() if self._size[r] >= 2}

    def groups(self, min_size: int = 2) -> dict[Node, list[Node]]:
        """Representative -> members (first-seen order), for clusters of at least ``min_size``."""
        with self._lock:
            members: dict[int, list[Node]] = {}
            for i, node in enumerate(self._nodes):  # ids are the first-seen order
                members.setdefault(self._find(i), []).append(node)
            return {self._nodes[self._first[r]]: m for r, m in members.items() if len(m) >= min_size}

    def __iter__(self) -> Iterator[Node]:
        with self._lock:
            return iter(list(self._nodes))

    # -- internals (caller holds the lock) --

    def _add(self, node: Node) -> int:
        i = self._ids.get(node)
        if i is None:
            i = len(self._nodes)
            if i >= _I32_MAX:
                raise OverflowError("Clusters holds at most 2**31 - 1 nodes")
            self._ids[node] = i
            self._nodes.append(node)
            self._parent.append(i)
            self._size.append(1)
            self._first.append(i)
            if not self._largest:
                self._largest = 1
        return i

    def _find(self, i: int) -> int:
        parent = self._parent
        while parent[i] != i:
            parent[i] = parent[parent[i]]  # path halving
            i = parent[i]
        return i

    def _roots(self) -> Iterator[int]:
        parent = self._parent
        return (i for i in range(len(parent)) if parent[i] == i)
