"""Which member's items a duplicate cluster keeps in ``drop`` mode: the item keeper.

Items arrive page by page, in crawl order; the keeper decides for each item of a judged page
(a member of a cluster, named by the cluster's id) whether it passes on now, is held back, or
is dropped as a duplicate. Two guarantees:

- **The kept item is the page's own.** A member that is a *view* of another page (a diff,
  an old revision, a printable version: the caller says which, with a rank, smaller is
  better) does not pass while its cluster has no item: its items are held until a member
  that is no view arrives (its items pass, the view's are dropped as its duplicates) or
  the crawl ends (released then; a crawl that closes before its end releases them as it starts closing,
  and from then on holds nothing). Of several views only the best-ranked is held.
- **A cluster never ends with no item.** While the items of the member that passed have
  not yet been through every item pipeline (the caller reports :meth:`scraped` /
  :meth:`dropped` for each), a later member's items are held as the cluster's fallback,
  not dropped: they are released when every passed item was dropped by a later pipeline,
  when the page whose items passed yielded none, or at the crawl's end; dropped once one
  item of the cluster is scraped.

The bound: at most ``max_items`` items and about ``max_bytes`` bytes (the caller's size of
each item) held at once by views waiting for their better member, and one member's items per
cluster. Past it the view held longest is released at once (:attr:`overflowed` counts them);
such a released view then stays its cluster's item. A fallback is not released over the bound:
it would be a duplicate of the items in flight it stands in for, and it lives only as long as
they do (Scrapy's concurrency bounds them), so it counts in :attr:`held_items` but never forces
a release. Memory beyond what is held: one entry per cluster with a page
whose items are in flight (gone once one is scraped), and one per cluster whose first page
yielded no item (a crawl's link-only pages), with the URL of the member whose items passed
instead once one has (:meth:`adopted_by`), and the id of each cluster an item of which went through
every pipeline (:meth:`stored_here`: one per kept page, as the content index holds).

Pure Python, no Scrapy: the Scrapy layer (``middlewares.py``) feeds it and carries out
what it returns. Not thread-safe: Scrapy calls it from its one reactor thread.
"""
from __future__ import annotations

import enum
import itertools
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Action", "HeldItem", "Group", "Outcome", "ItemKeeper"]


class Action(enum.Enum):
    PASS = "pass"
    HOLD = "hold"
    DROP = "drop"


@dataclass
class HeldItem:
    """An item held back, with the caller's ``payload`` (what it needs to drop or log it later) and size."""

    item: Any
    payload: Any
    size: int


@dataclass
class Group:
    """The items of one member of a cluster, held or released together."""

    cluster: Hashable
    url: str
    rank: Any
    #: a view waiting for a better member (True: no member's items passed yet), or a fallback behind
    #: items in flight (False)
    waiting: bool
    items: list[HeldItem] = field(default_factory=list)
    seq: int = 0

    @property
    def size(self) -> int:
        return sum(held.size for held in self.items)


@dataclass
class Outcome:
    """What the caller does now: ``action`` for the item offered (None for other calls); ``drop``: held items
    superseded, with the URL (and the caller's payload) of the member whose items passed; ``release``: groups
    to send on now."""

    action: Action | None = None
    drop: list[tuple[HeldItem, str, Any]] = field(default_factory=list)
    release: list[Group] = field(default_factory=list)


@dataclass
class _Cluster:
    passed: str | None = None  # the member whose items passed on (None: none yet, or all dropped since)
    passed_payload: Any = None
    in_flight: int = 0  # items of it passed, not yet scraped nor dropped
    scraped: bool = False  # an item of the cluster went through every pipeline
    open: int = 0  # member pages whose items are still being yielded
    held: Group | None = None
    adopting: bool = False  # its first page yielded no item: the member whose items pass now is remembered


class ItemKeeper:
    """The item keeper of one crawl (see the module doc for its guarantees and bound)."""

    def __init__(self, max_items: int, max_bytes: int):
        if max_items < 0 or max_bytes < 0:
            raise ValueError("the keeper's bounds must be at least 0")
        self.max_items = max_items
        self.max_bytes = max_bytes
        self._clusters: dict[Hashable, _Cluster] = {}
        self._itemless: set[Hashable] = set()  # clusters with no item so far and nothing in flight
        #: clusters whose first page yielded no item -> the URL of the member whose items passed instead
        self._adopted: dict[Hashable, str] = {}
        self._held: dict[Hashable, Group] = {}  # insertion order: the oldest first
        self._held_items = 0
        self._held_bytes = 0
        self._seq = itertools.count()
        #: items released early to keep the bound
        self.overflowed = 0
        #: the crawl is closing (:meth:`release_all` called with ``closing``): no view waits any more
        self.closing = False
        #: clusters an item of which went through every pipeline in this process (:meth:`stored_here`)
        self._stored_here: set[Hashable] = set()

    @property
    def held_items(self) -> int:
        return self._held_items

    @property
    def held_bytes(self) -> int:
        return self._held_bytes

    def _cluster(self, cluster: Hashable, first: bool) -> _Cluster | None:
        """The state of ``cluster``; created for its first member or when it has no item; None when it has one."""
        state = self._clusters.get(cluster)
        if state is None and (first or cluster in self._itemless):
            state = self._clusters[cluster] = _Cluster(adopting=cluster in self._itemless)
            self._itemless.discard(cluster)
        return state

    def has_item(self, cluster: Hashable) -> bool:
        """Whether an item of ``cluster`` passed on (in flight, or through every pipeline)."""
        state = self._clusters.get(cluster)
        return state is None or state.scraped or state.passed is not None

    def stored_here(self, cluster: Hashable) -> bool:
        """Whether an item of ``cluster`` went through every item pipeline in this process: a caller that keeps
        the items of a page fetched again (whether its first fetch's were stored being unknown after a resume)
        knows here that they were."""
        return cluster in self._stored_here

    def adopted_by(self, cluster: Hashable) -> str | None:
        """The member whose items passed for ``cluster`` when its first page had yielded none (else None): a
        caller that keeps the items of a page fetched again can tell that one is a duplicate of it."""
        return self._adopted.get(cluster)

    def page_open(self, cluster: Hashable, first: bool) -> None:
        """A member page of ``cluster`` starts yielding its items (``first``: the cluster's first page)."""
        state = self._cluster(cluster, first)
        if state is not None:
            state.open += 1

    def page_done(self, cluster: Hashable) -> Outcome:
        """The member page opened last with :meth:`page_open` yielded all its items."""
        state = self._clusters.get(cluster)
        if state is None:
            return Outcome()
        state.open = max(0, state.open - 1)
        return self._settle(cluster, state)

    def offer(self, cluster: Hashable, url: str, rank: Any, view: bool, item: Any, payload: Any = None,
              size: int = 0) -> Outcome:
        """An item of the member at ``url`` (``rank``: smaller is better; ``view``: it is a view of another
        page). Call :meth:`page_open` for its page first."""
        state = self._clusters.get(cluster)
        if state is None:  # the cluster has its item
            return Outcome(Action.DROP)
        if state.passed == url:  # another item of the page whose items pass
            state.in_flight += 1
            return Outcome(Action.PASS)
        if state.scraped:
            return Outcome(Action.DROP)
        outcome = Outcome(Action.HOLD)
        if self.closing:  # nothing held now would be released: it passes (a fallback may so be a duplicate)
            outcome.action = Action.PASS
            state.in_flight += 1
            if state.passed is None:
                state.passed, state.passed_payload = url, payload
            return outcome
        if state.passed is None and not view:
            outcome.action = Action.PASS
            state.passed, state.passed_payload = url, payload
            state.in_flight += 1
            if state.adopting:
                self._adopted[cluster] = url
            if state.held is not None:  # a view held so far: now the fallback, should these items be dropped
                state.held.waiting = False
            return outcome
        held = state.held
        if held is not None and held.url != url:
            if held.rank <= rank:
                outcome.action = Action.DROP
                return outcome
            self._unhold(held)  # a better member: the one held is its duplicate
            state.held = None
            outcome.drop += [(h, url, payload) for h in held.items]
        if state.held is None:
            state.held = self._held[cluster] = Group(cluster, url, rank, state.passed is None,
                                                     seq=next(self._seq))
        state.held.items.append(HeldItem(item, payload, size))
        self._held_items += 1
        self._held_bytes += size
        outcome.release += self._overflow()
        return outcome

    def join(self, cluster: Hashable, into: Hashable, url: str, payload: Any = None) -> Outcome:
        """The page of ``into`` (at ``url``, opened with :meth:`page_open`, its items not offered yet) is the
        page the view held for ``cluster`` shows (the content engine judged them apart: an earlier revision,
        a diff rendering the page below its table): that view's items are held for ``into`` from now on, as
        if offered there (dropped as duplicates of ``url`` once ``into`` has its item, or of a better view
        held for it). A no-op unless ``cluster`` holds a view waiting for its better member. ``cluster`` then
        has no item and nothing held: a later member that is no view is kept there."""
        state = self._clusters.get(cluster)
        if cluster == into or state is None or state.held is None or not state.held.waiting:
            return Outcome()
        held = state.held
        self._unhold(held)
        state.held = None
        if not state.open and not state.in_flight:
            del self._clusters[cluster]
            self._itemless.add(cluster)
        outcome = Outcome()
        target = self._clusters.get(into)
        if target is None or target.scraped or (target.held is not None and target.held.rank <= held.rank):
            kept = url if target is None or target.held is None or target.scraped else target.held.url
            outcome.drop += [(h, kept, payload) for h in held.items]
            return outcome
        if target.held is not None:  # a better view than the one held for ``into``
            worse = target.held
            self._unhold(worse)
            outcome.drop += [(h, held.url, held.items[0].payload if held.items else None) for h in worse.items]
        held.cluster, held.waiting, held.seq = into, target.passed is None, next(self._seq)
        target.held = self._held[into] = held
        self._held_items += len(held.items)
        self._held_bytes += held.size
        return outcome

    def scraped(self, cluster: Hashable) -> Outcome:
        """An item of ``cluster`` that passed went through every item pipeline: the cluster has its item."""
        state = self._clusters.get(cluster)
        if state is None:
            return Outcome()
        state.in_flight = max(0, state.in_flight - 1)
        state.scraped = True
        self._stored_here.add(cluster)
        outcome = Outcome()
        if state.held is not None:
            held = state.held
            self._unhold(held)
            state.held = None
            outcome.drop += [(h, state.passed or "", state.passed_payload) for h in held.items]
        if not state.open and not state.in_flight:
            del self._clusters[cluster]
        return outcome

    def dropped(self, cluster: Hashable) -> Outcome:
        """An item of ``cluster`` that passed was dropped by a later pipeline (or failed in one)."""
        state = self._clusters.get(cluster)
        if state is None:
            return Outcome()
        state.in_flight = max(0, state.in_flight - 1)
        return self._settle(cluster, state)

    def release_all(self, closing: bool = False) -> Outcome:
        """The crawl's end: every group still held is released (a cluster with an item has none held).
        ``closing``: the crawl closes before its end (its pages in flight still yield items): from now on
        nothing is held, since nothing would release it: an item that would be passes (a view's, or a
        fallback's, which may then be a duplicate of an item in flight that a later pipeline keeps)."""
        self.closing = self.closing or closing
        outcome = Outcome()
        for cluster in list(self._held):
            state = self._clusters[cluster]
            outcome.release.append(self._release(state))
        return outcome

    # -- internals --

    def _settle(self, cluster: Hashable, state: _Cluster) -> Outcome:
        """No page of the cluster is yielding and nothing is in flight: it has an item, or it gets one."""
        outcome = Outcome()
        if state.open or state.in_flight or state.scraped:
            if state.scraped and not state.open and not state.in_flight:
                del self._clusters[cluster]
            return outcome
        state.passed = state.passed_payload = None  # its items (if any) were all dropped
        held = state.held
        if held is not None and not held.waiting:
            outcome.release.append(self._release(state))
        elif held is None:
            del self._clusters[cluster]
            self._itemless.add(cluster)
        return outcome

    def _release(self, state: _Cluster) -> Group:
        held = state.held
        assert held is not None
        self._unhold(held)
        state.held = None
        if state.passed is None:  # (a fallback released over the bound: the page whose items pass stays it)
            state.passed, state.passed_payload = held.url, held.items[0].payload if held.items else None
            if state.adopting:
                self._adopted[held.cluster] = held.url
        state.in_flight += len(held.items)
        return held

    def _unhold(self, held: Group) -> None:
        self._held.pop(held.cluster, None)
        self._held_items -= len(held.items)
        self._held_bytes -= held.size

    def _overflow(self) -> list[Group]:
        """Release the views held longest while what the views hold passes the bound (fallbacks never)."""
        released: list[Group] = []
        if self._held_items <= self.max_items and self._held_bytes <= self.max_bytes:
            return released  # (the common case, without a look at the groups)
        waiting = [group for group in self._held.values() if group.waiting]  # the oldest first
        items = sum(len(group.items) for group in waiting)
        size = sum(group.size for group in waiting)
        for group in waiting:
            if items <= self.max_items and size <= self.max_bytes:
                break
            items, size = items - len(group.items), size - group.size
            released.append(self._release(self._clusters[group.cluster]))
            self.overflowed += len(group.items)
        return released
