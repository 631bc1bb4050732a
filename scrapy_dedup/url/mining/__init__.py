"""Mine DUST rules from a crawl log (after DustBuster, Bar-Yossef, Keidar, Schonfeld, WWW 2007).

Input: (URL, content) pairs: the crawl log ``DEDUP_LOG_FILE`` writes, any JSON
Lines with ``url`` and a content hash (:data:`HASH_FIELDS`, optional
``simhash``), or the page itself (``text`` or ``html``, fingerprinted with the
crawl's content engine); read from files (JSON Lines or WARC) by
:mod:`scrapy_dedup.audit.mine_dust` for ``scrapy-dedup mine-dust``. The online
learner is :mod:`scrapy_dedup.url.learner`.

How rules are found and kept (docs/dust.md's "How rules are mined and kept" says
it for users): typed **candidates** from pairs of URLs of one host with the same
content (:func:`_candidates`); **validation** of each on every URL of the host
it touches, grouped by rewritten form, into *support* (same content as the
group's reference) and *violations* (the rewrite would merge different pages:
this is what rejects ``page=`` and ``category=``); a rule is **kept** with
support from ``min_support`` distinct pages and a violation rate at most
``max_violation_rate``, where one page behind many URLs (a soft 404, an error
page) gives no support; kept rules rewrite the URL set and mining runs again
(``rounds``), so rules that only show once others apply are found too.

Memory: one dict entry per distinct URL (path and query, interned per host) and
one per distinct content; the JSON records are never kept.

Modules: ``config`` (thresholds, results), ``candidates`` (typed candidates from URL pairs), ``host``
(one host's mining and validation), ``miner`` (:class:`DustMiner`: input, redirects, aliases). This
package imports nothing from Scrapy.
"""
from __future__ import annotations

# moved to content/judge.py (the one definition of "same page"); kept importable from here
from scrapy_dedup.content.judge import REDUCED_BASIS, normal_text_hash, same_page_evidence
from scrapy_dedup.url.canonical import safe_parts as safe_parts  # importable from here too
from scrapy_dedup.url.mining.candidates import _PATHPARAM as _PATHPARAM
from scrapy_dedup.url.mining.candidates import _candidates as _candidates
from scrapy_dedup.url.mining.candidates import _rule_of as _rule_of
from scrapy_dedup.url.mining.candidates import redact_url
from scrapy_dedup.url.mining.config import HASH_FIELDS as HASH_FIELDS
from scrapy_dedup.url.mining.config import MAX_REDIRECT_HOPS as MAX_REDIRECT_HOPS
from scrapy_dedup.url.mining.config import HostReport as HostReport
from scrapy_dedup.url.mining.config import MiningConfig, MiningResult, RuleValidation
from scrapy_dedup.url.mining.host import _HostMiner as _HostMiner
from scrapy_dedup.url.mining.host import _loadable as _loadable
from scrapy_dedup.url.mining.miner import DustMiner

__all__ = ["MiningConfig", "DustMiner", "MiningResult", "RuleValidation", "REDUCED_BASIS", "normal_text_hash",
           "same_page_evidence", "redact_url"]
