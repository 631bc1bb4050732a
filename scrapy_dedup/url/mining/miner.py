"""The miner's input and output: :class:`DustMiner` reads records (a crawl log, pages), redirects and
contents, mines every host and builds the alias table. This module imports nothing from Scrapy."""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict
from types import SimpleNamespace
from typing import Any

from scrapy_dedup.content.boilerplate import PageWords
from scrapy_dedup.content.clusters import Clusters
from scrapy_dedup.content.engine import ContentDeduplicator
from scrapy_dedup.content.extract import Extraction, extract_text
from scrapy_dedup.content.index import SimhashIndex
from scrapy_dedup.content.judge import PageJudge, same_page_evidence
from scrapy_dedup.content.params import ENGINE_PARAMS
from scrapy_dedup.url.canonical import Canonicalizer, safe_parts
from scrapy_dedup.url.dust import (
    HostRules,
    RuleSet,
    join_key,
    shape_of_segment,
    split_key,
)
from scrapy_dedup.url.policy import SWITCHES, UrlPolicy
from scrapy_dedup.url.mining.config import HASH_FIELDS, MAX_REDIRECT_HOPS, HostReport, MiningConfig, MiningResult
from scrapy_dedup.url.mining.host import _HostMiner, _loadable, _url_order


class DustMiner:
    """Collects (URL, content) pairs and mines per-host DUST rules from them.

    Feed it with :meth:`add_record` (log lines: a crawl log or a WARC file is read into
    it by :func:`scrapy_dedup.audit.mine_dust.read_log`) or :meth:`add_page` (already
    fingerprinted pages, as the online learner does), then call :meth:`mine`. Adding
    after mining is allowed: mining again sees everything added so far.

    A content is named by the hash of its exact key; near-duplicate contents are joined in
    :class:`~scrapy_dedup.content.clusters.Clusters`, whose representative (the content seen
    first) is the content id every URL of the cluster is judged by.
    """

    def __init__(self, config: MiningConfig | None = None):
        self.config = config or MiningConfig()
        self.hosts: dict[str, dict[str, int]] = {}  # host -> {"path?query": content id}
        self.redirects: dict[str, dict[str, str]] = {}  # host -> {redirecting "path?query": its target's}
        self._item_of: dict[int, int] = {}  # content id -> its page at the item-level strictness, when logged
        self._text_of: dict[int, int] = {}  # content id -> the exact hash of its first URL's text, when logged
        self._inexact: set[int] = set()  # content ids whose URLs served other texts (near duplicates joined)
        #: host -> URLs that served the very text of an earlier URL of their page: a host without per-fetch noise
        self._exact_joins: Counter[str] = Counter()
        self._simhash_of: dict[int, int] = {}  # content id -> the simhash of its first page, when logged
        self._cluster_simhash: dict[int, int] = {}  # item-level page -> the simhash of its first page
        #: host -> the most bits two pages of one cluster were apart: how far the judge's same pages vary there
        self._noise_bits: dict[str, int] = {}
        self._refetched: Counter[tuple[str, bool]] = Counter()  # (host, False): URLs recorded again; True: changed
        #: (host, source, from a redirect record) -> times seen to its target; a crawl log writes one redirect twice
        #: (its record and the ``redirect_urls`` of the page it led to): the two ways are counted apart
        self._redirect_seen: Counter[tuple[str, str, bool]] = Counter()
        #: host -> redirecting URLs seen going to two different targets (``Special:Random``): never an alias
        self.unstable: dict[str, set[str]] = {}
        self._contents: Clusters[int] = Clusters()  # content ids, near duplicates joined
        self._simhashes: SimhashIndex | None = None
        self._judge: PageJudge | None = None  # for records with text or html and no verdict
        #: (host, exact hash of a unique page's whole text) -> that page's cluster: a later unique page of the same
        #: text (an undecided one the engine never stored) is that page
        self._unique_texts: dict[tuple[str, str], str] = {}
        #: those pages, joined so: evidence for rules (many URLs of a form), never for a content alias (one pair)
        self._joined_by_text: set[str] = set()
        self._normal_hashes: dict[str, str] = {}  # a kept page's cluster -> its normal_text_hash, when logged
        #: the content engine's parameters at their defaults: what a crawl with the default settings uses
        self._defaults: Any = SimpleNamespace(**{param.key: param.default for param in ENGINE_PARAMS})
        self._boilerplate = bool(self._defaults.boilerplate)
        self.stats: Counter = Counter()
        no_switch: dict[str, Any] = {name: False for name in SWITCHES}
        self._canonicalizer = Canonicalizer(UrlPolicy(**no_switch))

    # --- input ---

    def split_url(self, url: str) -> tuple[str, str, str] | None:
        """(host, path, query) of ``url`` after the canonicalizer's safe steps only (no switch)."""
        return safe_parts(self._canonicalizer, url)

    def add_page(self, url: str, exact_key: Any, simhash: int | None = None, item: Any = None,
                 item_simhash: int | None = None, text_hash: Any = None) -> bool:
        """Record that ``url`` served the content ``exact_key`` (any hashable; ``simhash`` for near matches).

        ``item``: the page at the judge's item-level strictness (the crawl log's ``cluster``), when known:
        two pages of different clusters are distinct even by the lenient judge (a violation that proves a rule
        merges distinct pages, when they are also further apart than the site's same pages ever are: the
        simhashes, ``item_simhash``, of one cluster's pages measure how far apart the judge's same pages are on
        this site). A URL recorded twice measures the site's own noise (``noise(host)``). ``text_hash``: the
        exact hash of the URL's text, when logged: a page whose URLs served other texts (near duplicates the
        judge joined: two revisions of a wiki page) gets no content alias on a host that serves its pages'
        texts exactly (``min_support`` URLs or more served the very text of their page's first URL)."""
        parts = self.split_url(url)
        if parts is None:
            self.stats["unparsable_urls"] += 1
            return False
        host, path, query = parts
        cid = self._content_id(exact_key, simhash)
        urls = self.hosts.get(host)
        if urls is None:
            urls = self.hosts[host] = {}
        key = join_key(path, query)
        if text_hash is not None:
            if cid not in self._text_of:
                self._text_of[cid] = hash(text_hash)
            elif self._text_of[cid] != hash(text_hash):
                self._inexact.add(cid)
            else:
                self._exact_joins[host] += 1
        if item is not None:
            item_id = self._item_of.setdefault(cid, hash(("item", item)))
            if item_simhash is not None:
                self._simhash_of.setdefault(cid, item_simhash)
                first = self._cluster_simhash.setdefault(item_id, item_simhash)
                apart = bin(first ^ item_simhash).count("1")
                if apart > self._noise_bits.get(host, 0):
                    self._noise_bits[host] = apart
        if key in urls:
            self._refetched[host, False] += 1
            if self._contents.representative(urls[key]) != self._contents.representative(cid):
                self._refetched[host, True] += 1
                self.stats["changed_content"] += 1  # fetched twice with different content: keep the first
                return True
        urls[key] = cid
        self.stats["urls"] += 1
        return True

    def noise(self, host: str) -> tuple[int, int]:
        """The site's own noise as the crawl measured it: (URLs recorded again judged another page, URLs
        recorded again)."""
        return self._refetched[host, True], self._refetched[host, False]

    def _content_id(self, exact_key: Any, simhash: int | None) -> int:
        cid = hash(exact_key)
        if cid in self._contents:
            return cid
        self._contents.add(cid)
        if simhash is not None and self.config.hamming > 0:
            if self._simhashes is None:
                k = self.config.hamming
                self._simhashes = SimhashIndex(threshold=k, bands=k + 1, bits=64)
            match = self._simhashes.add_if_new(cid, simhash & 0xFFFFFFFFFFFFFFFF)
            if match is not None:
                self._contents.add_pair(match[0], cid)
                self.stats["near_duplicate_contents"] += 1
        return cid

    def page_judge(self) -> PageJudge:
        """The crawl's page judge with its default parameters (``content/params.py``, the miner's ``min_words``):
        records that bring their text or HTML but no verdict get the verdict a crawl would have given them, in
        order, and its URL-level sameness (the boilerplate rule in front when the defaults learn boilerplate)."""
        if self._judge is None:
            self._judge = PageJudge.from_params(self._defaults, min_words=self.config.min_words, url_sameness=True)
        return self._judge

    def engine(self) -> ContentDeduplicator:
        """The content engine of :meth:`page_judge`."""
        return self.page_judge().engine

    def add_record(self, record: Any, extraction: Extraction | None = None,
                   page_words: PageWords | None = None) -> bool:
        """One log line (a parsed JSON object); returns False (and counts why) when it is unusable.

        ``extraction``: its ``html`` extracted already by this miner's extraction policy (with blocks when the
        defaults learn boilerplate), ``page_words``: those blocks' :class:`PageWords` (the offline audit's, which
        read the page once): then neither is done again, the verdict is the same.

        Sameness, best evidence first: the content engine's ``cluster`` (a crawl log written by this
        version: exact or verified near duplicates share it); else a content hash with an optional
        simhash (older logs, other dumps); else the page's ``text`` or ``html``, judged here by the
        engine. A verdict that is no evidence that the URL serves its kept page (:func:`same_page_evidence`:
        ``"basis": "reduced"``, a match only once boilerplate is removed, of pages whose ``normal_hash``
        differ) makes the page one of its own, counted in ``reduced_verdicts``. ``redirect_urls`` (and a
        ``request_url`` other than ``url``) served the page too.
        """
        if not isinstance(record, dict):
            self.stats["bad_lines"] += 1
            return False
        if record.get("kind") == "redirect":  # {"request_url": from, "url": to}: no content of its own
            source, target = record.get("request_url"), record.get("url")
            if not (isinstance(source, str) and isinstance(target, str) and source and target):
                self.stats["lines_without_url"] += 1
                return False
            return self._add_redirect(source, target, True)
        if record.get("kind") == "degenerate":
            self.stats["degenerate_pages"] += 1
            return False
        words = record.get("words")
        url = record.get("url") or record.get("request_url")
        if not isinstance(url, str) or not url:
            self.stats["lines_without_url"] += 1
            return False
        exact: Any = None
        simhash: int | None = None
        cluster = record.get("cluster")
        if isinstance(cluster, str) and cluster:
            page = record.get("page")  # the crawl's page at the URL strictness, when not its cluster
            if isinstance(page, str) and page:
                self.stats["reduced_verdicts"] += page != cluster
            else:
                page = self._evidence(url, cluster, record.get("kind"), record.get("basis"), record.get("normal_hash"),
                                      record.get("exact_hash"))
            exact = ("cluster", page)
        for name in HASH_FIELDS if exact is None else ():
            value = record.get(name)
            if isinstance(value, (str, int)) and value != "":
                exact = (name, value)
                break
        raw_simhash = record.get("simhash")
        if isinstance(raw_simhash, str):
            try:
                simhash = int(raw_simhash, 16)
            except ValueError:
                simhash = None
        elif isinstance(raw_simhash, int) and not isinstance(raw_simhash, bool):
            simhash = raw_simhash
        item_simhash = simhash
        if exact is not None and exact[0] == "cluster":
            simhash = None  # the engine already decided which pages are one
        if exact is None:
            text = record.get("text")
            html = record.get("html")
            blocks: list[str] | None = None
            title: str | None = None
            if not isinstance(text, str) and extraction is not None:
                text, blocks, title = extraction.text, extraction.blocks, extraction.title
            elif not isinstance(text, str) and isinstance(html, str):
                try:
                    extraction = extract_text(html, self.config.extraction, blocks=self._boilerplate)
                except Exception:  # noqa: BLE001 - hostile markup: the line is skipped, counted
                    self.stats["bad_lines"] += 1
                    return False
                text, blocks, title = extraction.text, extraction.blocks, extraction.title
            if not isinstance(text, str):
                self.stats["lines_without_content"] += 1
                return False
            judge = self.page_judge()
            if judge.boilerplate is not None and blocks is not None:
                page = judge.judge_blocks(url, blocks, title=title, words=page_words)  # as the crawl judges it
            else:
                page = judge.judge_text(url, judge.engine.fingerprint(text))
            verdict = page.verdict
            if verdict.kind == "degenerate" or verdict.cluster is None:
                self.stats["degenerate_pages"] += 1
                return False
            if not page.url_same:
                self.stats["reduced_verdicts"] += 1
            exact, words = ("cluster", page.page("url")), None
            cluster = page.verdict.cluster
        if isinstance(words, int) and not isinstance(words, bool) and words < self.config.min_words:
            self.stats["degenerate_pages"] += 1
            return False
        text_hash = record.get("exact_hash")
        ok = self.add_page(url, exact, simhash, cluster if isinstance(cluster, str) and cluster else None,
                           item_simhash, text_hash if isinstance(text_hash, str) and text_hash else None)
        if not ok:
            return False
        sources = record.get("redirect_urls")
        sources = [u for u in sources if isinstance(u, str)] if isinstance(sources, list) else []
        request_url = record.get("request_url")
        if isinstance(request_url, str) and request_url and request_url != url and request_url not in sources:
            sources.append(request_url)
        for source in sources:
            if source != url:
                self._add_redirect(source, url, False)
        return ok

    def _evidence(self, url: str, cluster: str, kind: Any, basis: Any, normal_hash: Any,
                  text_hash: Any = None) -> str:
        """The content a page's URL serves by its verdict: its ``cluster``, or the page itself (its URL) when
        the verdict is no evidence that the URL serves its kept page (:func:`same_page_evidence`).

        A page kept as unique whose whole text is exactly an earlier kept page's of its host (``text_hash``,
        the log's ``exact_hash``) is that page: the engine never compared the two (with boilerplate learning,
        a page with fewer than ``min_words`` words of its own is kept undecided and not stored: a login form
        linked with every page's name, cgit's list of branches at every commit), and an exact match of the
        whole texts is the URL-level sameness."""
        if kind == "unique" and isinstance(text_hash, str) and text_hash:
            parts = self.split_url(url)
            first = self._unique_texts.setdefault((parts[0] if parts else "", text_hash), cluster)
            if first != cluster:
                self.stats["unique_pages_same_text"] += 1
                self._joined_by_text.add(first)
                return first
        if kind == "unique" and isinstance(normal_hash, str):
            self._normal_hashes[cluster] = normal_hash
        if same_page_evidence(kind, basis, normal_hash, self._normal_hashes.get(cluster)):
            return cluster
        self.stats["reduced_verdicts"] += 1
        return url

    def _add_redirect(self, source: str, target: str, record: bool) -> bool:
        """Evidence that ``source`` redirects to ``target`` (same host only: aliases are per host). At mining,
        a redirecting URL served the page its chain of redirects ends at."""
        a, b = self.split_url(source), self.split_url(target)
        if a is None or b is None or a[0] != b[0]:
            self.stats["redirects_across_hosts"] += 1
            return False
        key, to = join_key(a[1], a[2]), join_key(b[1], b[2])
        known = self.redirects.setdefault(a[0], {}).get(key)
        if known is None:
            self.redirects[a[0]][key] = to
            self.stats["redirects"] += 1
        elif known != to and key not in self.unstable.get(a[0], ()):
            self.unstable.setdefault(a[0], set()).add(key)  # another target each time: no mapping at all
            self.stats["unstable_redirects"] += 1
        self._redirect_seen[a[0], key, record] += known is None or known == to
        return True

    def _stable(self, host: str, source: str, end: str, explained: bool, forms: Counter[str]) -> bool:
        """May the redirect ``source`` -> ``end`` stand for ``source`` (an alias, or evidence of its page)?

        Never when ``source`` was seen going elsewhere too. Otherwise when the evidence repeats: the redirect
        seen twice to one target, or a kept rule explains it, or the target carries a name of the source
        (``?title=Foo`` -> ``/wiki/Foo``: the server maps names), or ``min_support`` redirects of the same
        URL form (``/item.php?id=<n>`` -> each its own page: a scheme). One redirect seen once from a URL
        that names nothing (``Special:Random``, which answers another page each time) stands for nothing."""
        if source in self.unstable.get(host, ()):
            return False
        seen = max(self._redirect_seen[host, source, True], self._redirect_seen[host, source, False])
        return (seen >= 2 or explained or _names_target(source, end)
                or forms[_url_form(source)] >= self.config.min_support)

    def _final(self, host: str, key: str) -> str | None:
        """Where the redirects from ``key`` end (``key`` itself when it does not redirect); None for a loop."""
        redirects = self.redirects.get(host, {})
        seen = {key}
        for _ in range(MAX_REDIRECT_HOPS):
            nxt = redirects.get(key)
            if nxt is None:
                return key
            if nxt in seen:
                return None
            seen.add(nxt)
            key = nxt
        return None

    def _resolve_redirects(self) -> None:
        """A redirecting URL serves the page at the end of its redirects (when that page was fetched)."""
        for host, redirects in self.redirects.items():
            urls = self.hosts.get(host)
            if urls is None:
                continue
            unstable = self.unstable.get(host, set())
            for source in redirects:
                if source in unstable:
                    continue  # no page of its own: it answered several
                end = self._final(host, source)
                if end is not None and end in urls and source not in urls:
                    urls[source] = urls[end]

    # --- mining ---

    def mine(self, existing: RuleSet | None = None, exclude: Iterable[tuple[str, tuple]] = ()) -> MiningResult:
        """Mine every host; ``existing`` rules are applied first and never proposed again; nor are the rules
        ``exclude`` names (``(host, rule.key)``: the online learner's deactivated rules, which would
        otherwise keep the place of the rule that explains the same pairs)."""
        excluded: dict[str, set[tuple]] = {}
        for host, key in exclude:
            excluded.setdefault(host, set()).add(key)
        thresholds = {key: value for key, value in asdict(self.config).items() if key != "extraction"}
        result = MiningResult(RuleSet(meta={"generated_by": "scrapy-dedup mine-dust", "thresholds": thresholds}))
        self._resolve_redirects()
        result.stats.update(self.stats)
        for host in sorted(self.hosts):
            base = list(existing.hosts.get(host, [])) if existing is not None else []
            report = result.hosts[host] = HostReport(host, urls=len(self.hosts[host]))
            miner = _HostMiner(host, self.hosts[host], self._contents, self.config, result, base, report,
                               self._item_of, self.noise(host), self._simhash_of,
                               max(self._noise_bits.get(host, 0), self.config.hamming))
            miner.known |= excluded.get(host, set())
            kept = miner.run()
            kept = _loadable(host, base, kept, result)
            for rule in kept:
                result.rules.add(host, rule)
            aliases = self._aliases(host, HostRules(host, base + kept), report)
            if aliases:
                result.rules.aliases[host] = aliases
        result.rules.recompile()
        result.stats["rules"] = len(result.rules)
        result.stats["aliases"] = result.rules.alias_count()
        return result

    def _content_aliases(self, host: str, urls: dict[str, int], redirects: dict[str, str], rewritten: Any,
                         aliases: dict[str, str], report: HostReport) -> None:
        """A page the rules leave under two keys (an opaque id served as a page, ``/item.php?id=4711``
        beside ``/shoes/blue-runner``): the key fewer URLs reached becomes an alias of the other.

        Under three keys or more, only when each other key is an opaque id of a scheme of the server (a URL
        form ``min_support`` pages or more are under once each, and this page once: ``/?p=<n>`` beside
        ``/content.asp?cid=<n>``; naming nothing of the main key: MediaWiki's ``action=edit&section=new`` of a
        page is a view of that page, another resource), and the other keys name one record (``4711`` in each: a
        soft 404 met once under ``/?p=9999`` and once under ``/content.asp?cid=5000`` is two dead ids, and an
        alias would keep a page published later under either from ever being fetched): otherwise a page behind
        many keys the rules do not fold is a soft 404, an error page or a form the vocabulary misses, and an alias
        table of it would hide a fault."""
        representative = self._contents.representative
        pages: dict[int, dict[str, list]] = {}  # page -> {key: [URLs reaching it, a fetched URL of it]}
        redirecting = []
        inexact: set[int] = set()  # pages some URL of which served another text, on a host without per-fetch noise
        exact_host = self._exact_joins[host] >= self.config.min_support
        # a page the engine never judged (undecided), one only by its exact text, gets no alias: an alias stands
        # on one pair (MediaWiki's create-page and create-section forms of a missing page show one text)
        inexact.update(representative(hash(("cluster", page))) for page in self._joined_by_text
                       if hash(("cluster", page)) in self._contents)
        for raw in sorted(urls, key=_url_order):  # the URL to request: the shortest, whatever the log's order
            cid = urls[raw]
            if exact_host and cid in self._inexact:
                inexact.add(representative(cid))
            if raw in redirects:
                redirecting.append((raw, cid))  # never the URL to request (the redirect evidence above)
                continue
            entry = pages.setdefault(representative(cid), {}).setdefault(rewritten(raw), [0, raw])
            entry[0] += 1
            if raw == rewritten(raw):
                entry[1] = raw  # the URL that is its own key: the one to request
        for raw, cid in redirecting:  # a redirect into a key says it is the page's main one (not an opaque id)
            into = pages.get(representative(cid), {}).get(rewritten(raw))
            if into is not None:
                into[0] += 1
        # an id scheme of the server (``/?p=<n>``, ``/content.asp?cid=<n>``): a URL form min_support pages or more
        # are under once each; a page under two keys of one form (a soft 404's many ids) is no page of a scheme
        forms_of = {page: Counter(_url_form(key) for key in keys) for page, keys in pages.items()}
        once = Counter(form for forms in forms_of.values() for form, n in forms.items() if n == 1)
        for page, keys in pages.items():
            if len(keys) < 2:
                continue
            if page in inexact:
                # two texts the judge joined as near duplicates (a wiki page's two revisions): same enough for
                # one item, not the proof one key stands for the other; only exact copies get an alias
                self.stats["content_aliases_inexact"] += 1
                continue
            # the main key: reached by more URLs, then one without a query, then the shorter
            (_main, (_, target)), *others = sorted(
                keys.items(), key=lambda kv: (-kv[1][0], "?" in kv[0], len(kv[0]), kv[0]))
            if len(others) > 1 and (any(
                    forms_of[page][form] > 1 or once[form] < self.config.min_support or _names_target(other, target)
                    for other, form in ((other, _url_form(other)) for other, _ in others))
                    or not set.intersection(*(_form_values(other) for other, _ in others))):
                continue  # three keys or more, one of them of no id scheme or naming another record: a soft 404,
                # an error page, a view
            for other, _ in others:
                if other not in aliases and len(aliases) < self.config.max_aliases:
                    aliases[other] = target
                    report.content_aliases += 1
                    self.stats["content_aliases"] += 1

    def _aliases(self, host: str, rules: HostRules, report: HostReport) -> dict[str, str]:
        """The host's redirects as an alias table: rewritten source -> the page it ends at, as fetched.

        A redirect no rule explains gives a new key. One a rule explains (source and target have one key)
        is kept too: the key stays (the alias may be ``key -> key``), but a crawl then requests the target
        at once instead of a URL known to redirect (the hop is a fetch for nothing)."""
        redirects = self.redirects.get(host, {})
        report.redirects = len(redirects)
        urls = self.hosts[host]

        def rewritten(key: str) -> str:
            path, query = rules.apply(*split_key(key))
            return join_key(path, query)

        aliases: dict[str, str] = {}
        forms = Counter(_url_form(source) for source in redirects if source not in self.unstable.get(host, ()))
        for source in sorted(redirects):
            end = self._final(host, source)
            if end is None or end == source or end not in urls:  # a loop, or no page known at its end
                continue
            key, target = rewritten(source), rewritten(end)
            if key == target:
                report.redirects_explained += 1
            if not self._stable(host, source, end, key == target, forms):
                report.unstable_redirects += 1
                continue
            if len(aliases) < self.config.max_aliases:
                aliases.setdefault(key, end)
            else:
                self.stats["aliases_over_limit"] += 1
        if self.config.content_aliases:
            self._content_aliases(host, urls, redirects, rewritten, aliases, report)
        # a target whose key is another alias (two redirects rewritten onto each other): not final, left out
        aliases = {k: t for k, t in aliases.items()
                   if (rt := rewritten(t)) == k or rt not in aliases or rewritten(aliases[rt]) == rt}
        report.aliases = len(aliases)
        return aliases


def _url_form(key: str) -> str:
    """A URL's form: its path with token segments as their shapes, its parameter names (``/node/17`` ->
    ``/node/<digits:2>``, ``/item.php?id=4711`` -> ``/item.php?id``)."""
    path, query = split_key(key)
    segments = [shape_of_segment(segment) or segment for segment in path.split("/")]
    names = sorted({part.partition("=")[0] for part in query.split("&")}) if query else []
    return join_key("/".join(segments), "&".join(names))


def _form_values(key: str) -> set[str]:
    """What a URL's form leaves out of it: its query values and token path segments (``/?p=4711``,
    ``/content.asp?cid=4711`` and ``/node/4711`` -> ``{"4711"}``), the record a key of an id scheme names."""
    path, query = split_key(key)
    values = {segment for segment in path.split("/") if shape_of_segment(segment)}
    return values | ({part.partition("=")[2] for part in query.split("&")} if query else set())


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:~\-]*")


def _names_target(source: str, end: str) -> bool:
    """Does the redirect's target carry a name the source gives (a query value or its last path segment, two
    characters or more)? ``/w/index.php?title=Foo`` -> ``/wiki/Foo``, ``/old/a.html`` -> ``/a.html``."""
    path, query = split_key(source)
    names = [segment for segment in path.split("/")[-1:] if segment]
    names += [part.partition("=")[2] for part in query.split("&")] if query else []
    words = {word for name in names for word in _NAME.findall(name) if len(word) >= 2}
    return any(word in end for word in words)
