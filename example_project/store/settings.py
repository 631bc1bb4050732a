"""Settings of the example project: plain Scrapy first, then scrapy-dedup, each line explained.

The crawl target is the bundled example site (``demosite``): a shop on
``shop.test`` with a ``www.`` alias and an EU mirror on ``eu.shop.test``, and a blog on
``blog.test``, all served on loopback by ``run_demo.py``. Its pages are full of
duplicates of every kind; ``demosite/truth.json`` says which.
"""
from pathlib import Path

from scrapy.settings import default_settings as _scrapy_defaults

BOT_NAME = "store"
SPIDER_MODULES = ["store.spiders"]
NEWSPIDER_MODULE = "store.spiders"

# --- plain Scrapy -------------------------------------------------------------
ROBOTSTXT_OBEY = False  # the example site is ours (and has no robots.txt)
CONCURRENT_REQUESTS = 16
CONCURRENT_REQUESTS_PER_DOMAIN = 16
DOWNLOAD_DELAY = 0
COOKIES_ENABLED = False
TELNETCONSOLE_ENABLED = False
REMOTE_CONTROL_ENABLED = False  # Scrapy 2.19's job control server: not needed here
LOG_LEVEL = "INFO"
FEED_EXPORT_ENCODING = "utf-8"

# The site's host names end in .test (reserved, never in public DNS): resolve them
# to 127.0.0.1. Scrapy 2.19 renamed DNS_RESOLVER to TWISTED_DNS_RESOLVER (and warns on
# the old name); older versions only know DNS_RESOLVER, so set whichever this Scrapy has.
if hasattr(_scrapy_defaults, "TWISTED_DNS_RESOLVER"):
    TWISTED_DNS_RESOLVER = "store.resolver.LoopbackResolver"
else:  # pragma: no cover - Scrapy < 2.19
    DNS_RESOLVER = "store.resolver.LoopbackResolver"

# --- scrapy-dedup -------------------------------------------------------------
# One line enables it all: the canonical request fingerprinter, the Bloom
# dupefilter, response fingerprinting, the near-duplicate pipeline and the
# crawl-end duplication report. A DUPEFILTER_CLASS set here would win over the
# add-on's; a REQUEST_FINGERPRINTER_CLASS set here would be kept as the canonical
# fingerprinter's fallback; DEDUP_ENABLED = False turns it all off.
ADDONS = {"scrapy_dedup.Addon": 0}

# URL layer: canonicalization before a request is scheduled. Always on: the safe
# RFC 3986 steps. On by default: strip tracking parameters (utm_*, gclid, ...),
# strip session IDs (;jsessionid=, PHPSESSID=, when the value looks like a token),
# sort the query, drop the fragment. The risky switches are off by default and
# turned on per site, where we know they hold.
#
# The default policy for every host: on this site "/help/shipping/" and
# "/help/shipping" are one page, so the trailing slash can go.
DEDUP_URL_POLICY = {"strip_trailing_slash": True}
# Per-domain policies override the default; a domain covers its subdomains
# (shop.test covers www.shop.test and eu.shop.test), the most specific one wins.
DEDUP_URL_POLICIES = {
    # www.shop.test serves the same store as shop.test, and the shop would serve
    # http and https alike, so both variants are one URL.
    "shop.test": {"strip_www": True, "ignore_scheme": True},
    # On the blog the slash matters: /2024/ is the year's archive, /2024 the
    # year's statistics, two different pages. Keep it.
    "blog.test": {"strip_trailing_slash": False},
}

# Content layer: after the fetch, each page's main text (the page without nav,
# header, footer, aside, scripts, styles and forms) gets an exact hash and a
# 64-bit simhash; a later page with the same text, or a text within
# DEDUP_HAMMING_THRESHOLD bits, is a duplicate of the first one.
DEDUP_CONTENT_ACTION = "drop"  # "tag" keeps the item and adds {cluster, kept_url, ...}; "log" only measures
# Bits of 64 within which two pages are near duplicates. On this site a one-token
# edit (an old price, one changed word) of a 330-650-word page moves the fingerprint
# 1 to 6 bits, and templated sibling products lie 10 bits or more apart: the default
# of 3 finds 7 of the 12 near duplicates and merges no distinct pages; 6 (with
# DEDUP_BANDS = 7) would find all 12 here, at the price of more candidates per page
# and less margin against distinct pages on a large crawl.
DEDUP_HAMMING_THRESHOLD = 3
DEDUP_BANDS = 4  # > threshold, so the banded index finds every fingerprint within the threshold
DEDUP_MIN_WORDS = 20  # "Access denied" pages are below it: counted as degenerate, never deduplicated
# The site prints "Page generated at <time> by web node <n>" outside the stripped
# tags, different on every fetch: without this, every re-fetch is a near duplicate
# instead of an exact one.
DEDUP_STRIP_SELECTORS = [".generated-at"]
# Per-domain content overrides: the EU mirror adds a VAT notice above the page;
# strip it there (and only there) so its product pages match the main store's
# exactly. The override replaces the global list for that host, so repeat it.
DEDUP_CONTENT_POLICIES = {
    "eu.shop.test": {"strip_selectors": [".generated-at", ".vat-notice"]},
}

# Audit trail, written under example_project/output/ (git-ignored): one JSON line
# per duplicate found (url, kept_url, distance, kind, cluster), to check the
# drops before trusting them; and one JSON line per fetched page (URLs, hashes,
# word count), the crawl log that `scrapy-dedup mine-dust` learns URL rules from.
DEMO_OUTPUT_DIR = Path(__file__).resolve().parent.parent / "output"
DEMO_OUTPUT_DIR.mkdir(exist_ok=True)
DEDUP_AUDIT_FILE = str(DEMO_OUTPUT_DIR / "audit.jsonl")
DEDUP_LOG_FILE = str(DEMO_OUTPUT_DIR / "crawl-log.jsonl")
