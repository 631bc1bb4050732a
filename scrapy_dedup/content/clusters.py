"""Union-find over duplicate pairs: which pages belong together, and which one represents them.

Each duplicate found (``b`` is a copy of ``a``) is a pair; clusters are the
connected components of those pairs. A cluster's representative is its member
seen first (the page a crawl keeps), whatever order the pairs are merged in.
Union by size and path halving keep every operation near O(1).
"""
from __future__ import annotations

import threading
from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

__all__ = ["Clusters"]

Node = TypeVar("Node", bound=Hashable)


class Clusters(Generic[Node]):
    """Connected components of duplicate pairs, representative = first seen. Thread-safe."""

    def __init__(self) -> None:
        self._parent: dict[Node, Node] = {}
        self._size: dict[Node, int] = {}  # root -> members
        self._first: dict[Node, Node] = {}  # root -> earliest member
        self._order: dict[Node, int] = {}  # node -> when first seen
        self._multi = 0  # clusters with >= 2 members
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Number of nodes seen."""
        return len(self._parent)

    def __contains__(self, node: object) -> bool:
        return node in self._parent

    def add(self, node: Node) -> Node:
        """Register ``node`` (a singleton if new); returns its representative."""
        with self._lock:
            self._add(node)
            return self._first[self._find(node)]

    def add_pair(self, a: Node, b: Node) -> Node:
        """Record that ``a`` and ``b`` are duplicates (``a`` first if both are new); returns the representative."""
        with self._lock:
            self._add(a)
            self._add(b)
            ra, rb = self._find(a), self._find(b)
            if ra == rb:
                return self._first[ra]
            if self._size[ra] < self._size[rb]:
                ra, rb = rb, ra
            small, large = self._size[rb], self._size[ra]
            self._multi -= (small >= 2) + (large >= 2) - 1
            self._parent[rb] = ra
            self._size[ra] = small + large
            del self._size[rb]
            first_b = self._first.pop(rb)
            if self._order[first_b] < self._order[self._first[ra]]:
                self._first[ra] = first_b
            return self._first[ra]

    def representative(self, node: Node) -> Node:
        """The first-seen member of ``node``'s cluster (``KeyError`` for an unknown node)."""
        with self._lock:
            return self._first[self._find(node)]

    def size(self, node: Node) -> int:
        """Members in ``node``'s cluster."""
        with self._lock:
            return self._size[self._find(node)]

    def count(self, min_size: int = 2) -> int:
        """Clusters with at least ``min_size`` members (default: clusters of actual duplicates)."""
        with self._lock:
            if min_size == 2:
                return self._multi
            return sum(1 for s in self._size.values() if s >= min_size)

    def largest(self) -> int:
        """Members of the largest cluster (0 when empty)."""
        with self._lock:
            return max(self._size.values(), default=0)

    def sizes(self) -> dict[Node, int]:
        """Representative -> cluster size, for clusters of 2 or more."""
        with self._lock:
            return {self._first[r]: s for r, s in self._size.items() if s >= 2}

    def groups(self, min_size: int = 2) -> dict[Node, list[Node]]:
        """Representative -> members (first-seen order), for clusters of at least ``min_size``."""
        with self._lock:
            members: dict[Node, list[Node]] = {}
            for node in sorted(self._parent, key=self._order.__getitem__):
                members.setdefault(self._find(node), []).append(node)
            return {self._first[r]: m for r, m in members.items() if len(m) >= min_size}

    def __iter__(self) -> Iterator[Node]:
        with self._lock:
            return iter(list(self._parent))

    # -- internals (caller holds the lock) --

    def _add(self, node: Node) -> None:
        if node not in self._parent:
            self._parent[node] = node
            self._size[node] = 1
            self._first[node] = node
            self._order[node] = len(self._order)

    def _find(self, node: Node) -> Node:
        parent = self._parent
        while parent[node] != node:
            parent[node] = parent[parent[node]]  # path halving
            node = parent[node]
        return node
