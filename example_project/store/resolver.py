"""Resolve the example site's ``*.test`` host names to 127.0.0.1.

The example site runs on loopback under host names of the reserved ``.test`` TLD
(RFC 2606: never in public DNS), so the crawl needs no /etc/hosts edit: this
resolver answers them itself and leaves every other name to Scrapy's default
caching resolver. It is enabled in ``settings.py`` through ``TWISTED_DNS_RESOLVER``
(Scrapy >= 2.19) or ``DNS_RESOLVER`` (older Scrapy), whichever the running Scrapy knows.
"""
from __future__ import annotations

from twisted.internet import defer
from scrapy.resolver import CachingThreadedResolver

LOOPBACK_SUFFIXES = (".test",)


class LoopbackResolver(CachingThreadedResolver):
    """Scrapy's default resolver, except that ``*.test`` names are 127.0.0.1."""

    def getHostByName(self, name: str, timeout=()):  # noqa: N802 - Twisted's interface
        if name.lower().rstrip(".").endswith(LOOPBACK_SUFFIXES):
            return defer.succeed("127.0.0.1")
        return super().getHostByName(name, timeout)
