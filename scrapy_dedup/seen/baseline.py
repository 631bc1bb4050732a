"""How many fetches a filter saved against a plainer one: the crawl-end report's "fetches saved".

A request the crawl's filter refused counts as *saved* when the plainer filter (Scrapy's own
dupefilter, with the fingerprint it would have used) would have let it through: its plain
key had not been met before. Requests both filters refuse (a link found again, a URL that
differs only where the plain key ignores it) save nothing and are not counted.

The plain keys are kept in a :class:`~scrapy_dedup.seen.bloom.BloomSeenSet` that starts
small and grows with the crawl. A false positive there takes a saved fetch for a refused
one, so the count never exceeds the truth; it is also a lower bound of what the plain crawl
would have fetched, which would have followed the saved pages' links as well.

No Scrapy imports here: the caller gives each request's two keys.
"""
from __future__ import annotations

from scrapy_dedup.seen.bloom import BloomSeenSet

#: keys the plain keys' filter is sized for before it grows; its rate holds after growth
START_CAPACITY = 10_000
ERROR_RATE = 1e-6


class SavedFetches:
    """Counts the requests a filter refused that a plainer filter would have fetched.

    Call :meth:`check` once for every request the filter was asked about, in order, with the
    request's plain key and whether the filter refused it.
    """

    def __init__(self, start_capacity: int = START_CAPACITY, error_rate: float = ERROR_RATE):
        self.plain_seen = BloomSeenSet(start_capacity, error_rate)
        #: refused requests the plain filter would have fetched
        self.saved = 0

    def check(self, plain_key: bytes, refused: bool) -> bool:
        """Record one request; True when it is a saved fetch (refused here, new to the plain filter)."""
        new_to_plain = self.plain_seen.add(plain_key)
        if refused and new_to_plain:
            self.saved += 1
            return True
        return False

    def size_bytes(self) -> int:
        """Memory of the plain keys' filter (it grows with the crawl)."""
        return self.plain_seen.size_bytes()
