"""How many fetches a filter saved against a plainer one: the crawl-end report's "fetches saved".

A request the crawl's filter refused counts as *saved* when the plainer filter (Scrapy's own
dupefilter, with the fingerprint it would have used) would have let it through: its plain
key had not been met before. Requests both filters refuse (a link found again, a URL that
differs only where the plain key ignores it) save nothing and are not counted.

The plain keys are kept in a :class:`~scrapy_dedup.seen.bloom.BloomSeenSet` that starts
small and grows with the crawl. A false positive there takes a saved fetch for a refused
one, so the count never exceeds the truth; it is also a lower bound of what the plain crawl
would have fetched, which would have followed the saved pages' links as well.

Most requests a crawl checks are links found again under the very URL met before: a
second filter of *raw* keys (method, URL and body as they are, cheap to hash) answers
those without computing the plain key, which costs more (Scrapy's canonicalizes the URL).
A request met before as it is has the plain key it had then, so it saves nothing (a plain
fingerprinter that also hashes headers or meta may give it another: then a saved fetch goes
uncounted, never one too many).

No Scrapy imports here: the caller gives each request's keys.
"""
from __future__ import annotations

from collections.abc import Callable

from scrapy_dedup.seen.bloom import START_CAPACITY, BloomSeenSet

#: the filters start as the crawl's own local one does (0.4 MiB each) and grow; their rate holds after growth
ERROR_RATE = 1e-6


class SavedFetches:
    """Counts the requests a filter refused that a plainer filter would have fetched.

    Call :meth:`check` once for every request the filter was asked about, in order, with the
    request's raw key, a function giving its plain key, and whether the filter refused it.
    """

    def __init__(self, start_capacity: int = START_CAPACITY, error_rate: float = ERROR_RATE):
        self.raw_seen = BloomSeenSet(start_capacity, error_rate)
        self.plain_seen = BloomSeenSet(start_capacity, error_rate)
        #: refused requests the plain filter would have fetched
        self.saved = 0

    def check(self, raw_key: bytes, plain_key: Callable[[], bytes], refused: bool) -> bool:
        """Record one request; True when it is a saved fetch (refused here, new to the plain filter)."""
        if not self.raw_seen.add(raw_key):  # met before as it is: the plain filter has its key already
            return False
        new_to_plain = self.plain_seen.add(plain_key())
        if refused and new_to_plain:
            self.saved += 1
            return True
        return False

    def size_bytes(self) -> int:
        """Memory of the two filters (they grow with the crawl)."""
        return self.raw_seen.size_bytes() + self.plain_seen.size_bytes()
