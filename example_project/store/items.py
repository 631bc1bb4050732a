"""What the example spider stores for each page."""
import scrapy


class PageItem(scrapy.Item):
    """One page: its URL, its title and the text of its ``<main>`` block (not the raw HTML).

    scrapy-dedup fingerprints the *response* (through its spider middleware), so the
    item needs no HTML field; set ``DEDUP_CONTENT_FIELD`` only for spiders that yield
    the page's HTML or text in an item instead.
    """

    url = scrapy.Field()
    title = scrapy.Field()
    main = scrapy.Field()
    # only with `-a html=1`: the page's HTML, for DEDUP_CONTENT_FIELD = "html"
    html = scrapy.Field()
    # filled by scrapy-dedup when DEDUP_CONTENT_ACTION = "tag" (DEDUP_TAG_FIELD)
    dedup = scrapy.Field()
