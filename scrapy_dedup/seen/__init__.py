"""Seen-key stores ("have I seen this fingerprint?"): local Bloom, Redis exact, Redis Bloom.

Imports nothing from Scrapy.
"""
from scrapy_dedup.seen.base import SeenSet
from scrapy_dedup.seen.bloom import BloomSeenSet, CheckpointError
from scrapy_dedup.seen.redis import BloomLayoutMismatch, RedisBloomSeenSet, RedisSeenSet

__all__ = ["SeenSet", "BloomSeenSet", "CheckpointError", "RedisSeenSet", "RedisBloomSeenSet", "BloomLayoutMismatch"]
