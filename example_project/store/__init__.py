"""The example Scrapy project of scrapy-dedup: one spider crawling the bundled shop and blog."""
