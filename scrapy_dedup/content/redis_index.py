"""Former path of :mod:`scrapy_dedup.content.stores.redis_index` (the content stores are one package now:
:mod:`scrapy_dedup.content.stores`, whose :func:`~scrapy_dedup.content.stores.open_redis_store` chooses the layout)."""
from scrapy_dedup.content.stores.redis_index import *  # noqa: F403
