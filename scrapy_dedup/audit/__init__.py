"""Offline duplication audit of a scrape dump (``scrapy-dedup report``).

Built on the crawl's own content engine (:mod:`scrapy_dedup.content`), so the
numbers of an offline audit and of a crawl agree. Imports nothing from Scrapy.

* :mod:`.dump`   - JSON Lines (optionally gzip) reader with bad-line accounting; tells JSON Lines from WARC
* :mod:`.warc`   - WARC (``.warc``, ``.warc.gz``) reader: pages, skipped responses, revisits, damaged records
* :mod:`.config` - ``--config`` file (YAML, JSON or TOML) merged with flags, validated
* :mod:`.runner` - streaming, optionally multi-process, fingerprinting and checking
* :mod:`.minhash` - the ``--method minhash`` alternative (datasketch MinHash LSH)
* :mod:`.html`   - the self-contained HTML audit page
"""
