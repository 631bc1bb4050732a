"""URL core: canonicalization, per-domain policies, DUST rules. Imports nothing from Scrapy."""
