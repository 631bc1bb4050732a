"""Offline duplication audit of a scrape dump (``scrapy-dedup report``), and the files of ``mine-dust``.

Built on the crawl's own content engine (:mod:`scrapy_dedup.content`), so the
numbers of an offline audit and of a crawl agree. Imports nothing from Scrapy.

* :mod:`.records` - the types the readers share: an opened input, a page record, a bad line, ``DumpError``
* :mod:`.dump`    - opens an input and tells JSON Lines (optionally gzip) from WARC; JSON Lines with bad-line accounting
* :mod:`.warc`    - WARC (``.warc``, ``.warc.gz``) reader: pages, skipped responses, revisits, damaged records
* :mod:`.config`  - ``--config`` file (YAML, JSON or TOML) merged with flags, validated
* :mod:`.methods` - the simhash engine and the ``--method minhash`` alternative (datasketch MinHash LSH)
* :mod:`.runner`  - streaming, optionally multi-process, fingerprinting and checking
* :mod:`.result`  - what an audit found, as text and JSON
* :mod:`.html`    - the self-contained HTML audit page
* :mod:`.mine_dust` - ``mine-dust``: crawl logs and WARC files read into the DUST miner, the rules written
"""
