"""Former path of :mod:`scrapy_dedup.content.stores.redis_sharded` (the content stores are one package now:
:mod:`scrapy_dedup.content.stores`)."""
from scrapy_dedup.content.stores.redis_sharded import *  # noqa: F403
