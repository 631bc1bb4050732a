import pytest
from pytest_twisted import inlineCallbacks

from tests.support.crawl import LinkSpider, run_crawl
from tests.support.localsite import LocalSite, Page


@pytest.mark.crawl
@inlineCallbacks
def test_local_site_crawl_with_host_names():
    pages = {
        ("shop.test", "/"): Page('<a href="/a">a</a> <a href="http://eu.shop.test:%(port)s/">eu</a>'),
        ("shop.test", "/a"): Page("<p>a</p>"),
        ("eu.shop.test", "/"): Page("<p>eu</p>"),
    }
    with LocalSite(lambda host, path: pages.get((host, path))) as site:
        for page in pages.values():
            page.body = page.body.replace("%(port)s", str(site.port))
        crawler = yield run_crawl(LinkSpider, start_urls=[site.url("shop.test")])
    assert sorted(site.fetched()) == [("eu.shop.test", "/"), ("shop.test", "/"), ("shop.test", "/a")]
    assert crawler.stats.get_value("item_scraped_count") == 3
