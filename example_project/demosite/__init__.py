"""The example site of scrapy-dedup: a generated shop and blog full of duplicates, with its truth.

``SiteServer`` serves it on loopback; ``DemoSite`` is the router; ``crawl_truth`` /
``load`` give the truth file: every reachable URL and the content it holds.
"""
from .app import BLOG, EU, HOSTS, START_HOSTS, STORE, WWW, DemoSite, PageInfo
from .server import SiteProcess, SiteServer
from .truth import TRUTH_FILE, crawl_truth, demo_url_layer_key, expected_numbers, load, with_port

__all__ = ["BLOG", "EU", "HOSTS", "START_HOSTS", "STORE", "WWW", "DemoSite", "PageInfo", "SiteProcess", "SiteServer",
           "TRUTH_FILE", "crawl_truth", "demo_url_layer_key", "expected_numbers", "load", "with_port"]
