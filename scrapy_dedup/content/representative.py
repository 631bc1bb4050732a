"""Which member of a duplicate cluster represents it: the representative policy.

The page kept by a crawl is the one that arrived first, often the worst name for the
cluster (a ``?utm_source=`` link followed before the clean one). The policy decides which
member a report, a tag and the audit name instead; it never decides which page or item
was kept. ``first``: the kept page; ``canonical`` (the default): a member another member
declares as its ``rel="canonical"`` target, then the cleanest URL (the caller's :data:`UrlKey`);
``newest``: the latest timestamp, undated members last. docs/usage.md ("Which URL names a
cluster") has the rules in full.

Every order is total: the last tie-break is the arrival order, which only decides
between members with the same URL (the same page fetched twice). So for
``canonical`` and ``newest`` the representative's URL does not depend on the order
in which the members arrived.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any


__all__ = ["POLICIES", "UrlKey", "Member", "member_key", "rank_members", "choose_representative",
           "vouched_urls", "ClusterRepresentatives", "parse_timestamp", "check_policy"]

POLICIES: tuple[str, ...] = ("first", "canonical", "newest")

#: the sort key of a URL alone, smaller is better: how ``canonical`` (and ``newest`` among equal times)
#: ranks members. Passed by the caller (``scrapy_dedup.url.preference.url_preference``: session or tracking
#: noise, then fewer parameters, shorter, https), so that this module knows nothing of what a URL is made of.
UrlKey = Callable[[str], tuple]


@dataclass(frozen=True)
class Member:
    """One page of a cluster: its URL, its place in arrival order, and what the policies may look at.

    ``timestamp``: seconds since the epoch (``newest``), None when unknown.
    ``declares``: the absolute URL of the page's ``rel="canonical"`` link, None when it has none.
    """

    url: str
    arrival: int
    timestamp: float | None = None
    declares: str | None = None


def check_policy(policy: str) -> str:
    """``policy`` if it is one of :data:`POLICIES`, else ``ValueError`` naming them."""
    if policy not in POLICIES:
        raise ValueError(f"representative policy must be one of {', '.join(map(repr, POLICIES))}, got {policy!r}")
    return policy


def _url_key_for(policy: str, url_key: UrlKey | None) -> UrlKey:
    if url_key is None:
        raise ValueError(f"representative policy {policy!r} ranks the members by their URLs: pass url_key, "
                         "the sort key of a URL (scrapy_dedup.url.preference.url_preference)")
    return url_key


def member_key(policy: str, member: Member, vouched: bool = False, url_key: UrlKey | None = None) -> tuple:
    """The sort key of ``member`` under ``policy`` (smaller is better); ``vouched``: another member declares it;
    ``url_key``: the sort key of a URL (:data:`UrlKey`; needed by every policy but ``first``)."""
    if policy == "first":
        return (member.arrival,)
    if policy == "canonical":
        return (0 if vouched else 1, *_url_key_for(policy, url_key)(member.url), member.arrival)
    if policy == "newest":
        stamp = member.timestamp
        return (0 if stamp is not None else 1, -stamp if stamp is not None else 0.0,
                *_url_key_for(policy, url_key)(member.url), member.arrival)
    raise ValueError(f"unknown representative policy {policy!r}")


def vouched_urls(members: Iterable[Member]) -> set[str]:
    """URLs of members that another member (at another URL) declares as its ``rel="canonical"`` target."""
    members = list(members)
    urls = {m.url for m in members}
    return {m.declares for m in members if m.declares is not None and m.declares != m.url and m.declares in urls}


def rank_members(members: Sequence[Member], policy: str, url_key: UrlKey | None = None) -> list[Member]:
    """``members`` best first under ``policy`` (a total order); ``url_key`` as for :func:`member_key`."""
    check_policy(policy)
    vouched = vouched_urls(members) if policy == "canonical" else set()
    return sorted(members, key=lambda m: member_key(policy, m, m.url in vouched, url_key))


def choose_representative(members: Sequence[Member], policy: str, url_key: UrlKey | None = None) -> Member:
    """The best member of a non-empty cluster under ``policy``."""
    if not members:
        raise ValueError("a cluster has at least one member")
    return rank_members(members, policy, url_key)[0]


@dataclass
class _Best:
    key: tuple
    url: str
    urls: set[str]  # members' URLs, which a declaration may name ("canonical" only)
    declared: set[str]  # rel=canonical targets declared by members of the cluster, other than their own URLs


class ClusterRepresentatives:
    """The best member of each cluster so far, kept as members join: the crawl's bookkeeping.

    Keyed by a stable cluster id (the crawl uses the first-seen member, the kept page).
    Per cluster of two or more pages it holds the best key and URL, and for
    ``canonical`` the members' URLs and declared targets (a declaration may come
    before or after its target joins). What a kept page declares (``canonical``) or
    its timestamp (``newest``) is remembered from the moment it is kept
    (:meth:`note_kept`), for when its first duplicate arrives: ``newest`` holds one
    number per kept page, ``canonical`` one URL per kept page that declares another URL.
    With ``times_are_arrivals`` (the timestamps are fetch times, so a kept page is older
    than its duplicates) ``newest`` keeps nothing per kept page: one without a time
    ranks after every dated duplicate, as the oldest would.
    Arrival is the order of the calls. The result equals :func:`choose_representative`
    over the cluster's members (with the same ``url_key``, needed by every policy but ``first``). Thread-safe.
    """

    def __init__(self, policy: str, *, times_are_arrivals: bool = False, url_key: UrlKey | None = None):
        self.policy = check_policy(policy)
        self.url_key = url_key if policy == "first" else _url_key_for(policy, url_key)
        self.times_are_arrivals = times_are_arrivals
        self._best: dict[Hashable, _Best] = {}
        self._kept: dict[str, Any] = {}  # kept URL -> its declared target (canonical) or timestamp (newest)
        self._arrivals = 0
        self._lock = threading.Lock()

    def note_kept(self, url: str, timestamp: float | None = None, declares: str | None = None) -> None:
        """A page was kept (unique): remember what its cluster will need of it."""
        if self.policy == "canonical" and declares is not None and declares != url:
            value: Any = declares
        elif self.policy == "newest" and timestamp is not None and not self.times_are_arrivals:
            value = timestamp
        else:
            return
        with self._lock:
            self._kept[url] = value

    def join(self, cluster: Hashable, kept_url: str, member: str, timestamp: float | None = None,
             declares: str | None = None, merged: Iterable[Hashable] = (), new_kept: bool = False) -> str:
        """The page at ``member`` joined ``cluster`` (kept page ``kept_url``, in no cluster before when
        ``new_kept``; ``merged``: ids of the clusters it joined); returns the cluster's representative URL."""
        if self.policy == "first":
            return str(cluster)
        with self._lock:
            best = self._best.get(cluster)
            for other in merged:
                absorbed = self._best.pop(other, None) if other != cluster else None
                if absorbed is not None:
                    best = absorbed if best is None else self._merge(best, absorbed)
            if new_kept or best is None:  # the kept page is a member from now on
                noted = self._kept.pop(kept_url, None)
                kept = Member(kept_url, self._arrival(), noted if self.policy == "newest" else None)
                key = member_key(self.policy, kept, best is not None and kept_url in best.declared, self.url_key)
                if best is None:
                    best = _Best(key, kept_url, set(), set())
                else:  # it joins a cluster through a member of that cluster fetched again
                    self._offer(best, key, kept_url)
                if self.policy == "canonical":
                    best.urls.add(kept_url)
                    self._declare(best, noted)
            page = Member(member, self._arrival(), timestamp, declares)
            self._offer(best, member_key(self.policy, page, member in best.declared, self.url_key), member)
            if self.policy == "canonical":
                best.urls.add(member)
                self._declare(best, declares if declares != member else None)
            self._best[cluster] = best
            return best.url

    def representative(self, cluster: Hashable) -> str | None:
        """The representative URL of ``cluster`` so far (None when it has no duplicates, or under ``first``)."""
        with self._lock:
            best = self._best.get(cluster)
            return best.url if best is not None else None

    # -- internals (lock held) --

    def _arrival(self) -> int:
        self._arrivals += 1
        return self._arrivals

    def _declare(self, best: _Best, target: str | None) -> None:
        if target is None or target in best.declared:
            return
        best.declared.add(target)
        if target in best.urls:  # the target is a member already: vouched for from now on
            # its arrival is not at hand; it only breaks ties between equal URLs, so any number will do
            self._offer(best, member_key(self.policy, Member(target, 0), True, self.url_key), target)

    @staticmethod
    def _offer(best: _Best, key: tuple, url: str) -> None:
        if key < best.key:
            best.key, best.url = key, url

    def _merge(self, a: _Best, b: _Best) -> _Best:
        self._offer(a, b.key, b.url)
        a.urls |= b.urls
        for target in b.declared:
            self._declare(a, target)
        return a


def parse_timestamp(value: Any) -> float:
    """A page's time in seconds since the epoch: a number, or an ISO 8601 string (``Z`` or an offset; a
    time without one is read as UTC). ``ValueError`` for anything else."""
    if value is None or isinstance(value, bool):
        raise ValueError(f"not a timestamp: {value!r}")
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            number = float(text)
        except ValueError:
            try:
                moment = datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in "zZ" and text else text)
            except ValueError:
                raise ValueError(f"not a number or an ISO 8601 time: {value!r}") from None
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=timezone.utc)
            number = moment.timestamp()
    else:
        raise ValueError(f"not a timestamp: {type(value).__name__}")
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError(f"not a finite timestamp: {value!r}")
    return number
