"""``python -m scrapy_dedup``: the same as the ``scrapy-dedup`` console script."""
import sys

from scrapy_dedup.cli import main

if __name__ == "__main__":
    sys.exit(main())
