"""Content core: page text, simhash, banded index, clusters. Imports nothing from Scrapy."""
