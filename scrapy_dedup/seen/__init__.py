"""Seen-key stores ("have I seen this fingerprint?"): local Bloom, Redis exact, Redis Bloom.

Imports nothing from Scrapy.
"""
