"""Private utilities shared by the core packages (no Scrapy imports)."""
