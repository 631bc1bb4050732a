#!/usr/bin/env python
"""Near-duplicate quality and speed: ours against the named peers, on real HTML, in one run.

Corpus: real documentation pages shipped by Debian (sqlite3-doc, git-doc,
python3-doc, postgresql-doc: four templates), with generated duplicates and hard
negatives, and release-notes pages cut from the NEWS files of coreutils, GnuTLS and
GLib (near-identical distinct pages, ``--releases-per-project``; see
``quality_corpus.py``). Every algorithm sees the same pages in
the same (shuffled) crawl order and decides, page by page, "new" or "duplicate
of <kept page>". From those decisions:

* pairwise precision / recall / F1 over the clusters the decisions form
  (union-find of page -> kept page) against the ground-truth groups;
* distinct pages wrongly dropped: pages declared a duplicate of a page from
  another group, split by what they are (a real page, a sibling, a degenerate page,
  a generated duplicate merged into the wrong group);
* recall per duplicate kind: the share of that kind's pages that end in their
  original's cluster;
* pages per second, HTML bytes in, decision out (text extraction included),
  measured apart from the quality pass so that it is fair on a shared machine:
  every contender first decides the whole corpus once (the quality pass, which
  is also its warm-up: imports, lxml, our per-process word-hash cache), then
  ``--rounds`` timed rounds, each contender in every round (interleaved, the
  order rotated per round), each run a *fresh* decider (empty index) over the
  first ``--speed-pages`` pages of the crawl order, timed in CPU time of this
  process (``time.process_time``: not the time spent waiting for a core) after
  a ``gc.collect()``. Reported: the median pages per second over the rounds, the
  ratio of medians and the median of the per-round ratios; plus one row for ours
  with the word-hash cache emptied before each round (a fresh process).

Ours runs twice, each built explicitly from the core (whatever ``DEDUP_BOILERPLATE``'s default is
in a crawl): without boilerplate learning (``ContentDeduplicator`` on ``page_text``) and with it
(``BoilerplateJudge`` on ``page_blocks``: blocks recurring on 4+ unique pages of a host left out);
the speed target compares these two rows by name. Peers: trafilatura's deduplication (its extraction
with a fresh segment cache, its ``Simhash``, 3 bits; when installed), the ``simhash`` package
(``Simhash`` with its default character 4-grams, ``SimhashIndex(k=3)``), datasketch ``MinHash``
(128 permutations, 5-word shingles) + ``MinHashLSH`` (threshold 0.8, candidates verified by estimated Jaccard >= 0.8),
MD5 of the raw HTML, and the textbook simhash written by hand (MD5 per 5-word
shingle, a pure-Python vote, a dict index of 4 bands, threshold 3). Text peers run
twice: on our ``page_text`` (same front end, so the rows compare fingerprints and
indexes) and on a naive extraction (lxml ``text_content()`` without scripts and
styles, what one writes without a main-text extractor).

Usage::

    python benchmarks/bench_quality.py               # full run (~120 originals per template)
    python benchmarks/bench_quality.py --quick       # seconds; tiny generated corpus if docs absent
    python benchmarks/bench_quality.py --per-source 50 --no-install
    python benchmarks/bench_quality.py --per-source 60 --no-install --rounds 5 --speed-pages 600
    python benchmarks/bench_quality.py --per-source 60 --no-install --seed 7,11,12   # one report per seed
"""
from __future__ import annotations

import argparse
import gc
import hashlib
import logging
import statistics
import os
import sys
import time
from collections import Counter, defaultdict
from typing import Callable, Iterable, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import quality_corpus as qc  # noqa: E402
from textbook import textbook_fingerprint, word_shingles  # noqa: E402

# A decider takes (url, html) and returns the url of the kept page it duplicates, or None.
Decider = Callable[[str, bytes], Optional[str]]



# -- text front ends ---------------------------------------------------------------------------
def naive_text(html: bytes) -> str:
    """What one writes without a main-text extractor: all text, minus scripts and styles."""
    import lxml.html
    from lxml import etree

    if not html.strip():
        return ""
    try:
        doc = lxml.html.fromstring(html)
    except (etree.ParserError, ValueError):
        return ""
    for bad in doc.xpath("//script|//style"):
        bad.drop_tree()
    return " ".join(doc.text_content().split())


def our_text(html: bytes) -> str:
    from scrapy_dedup.content.text import page_text

    return page_text(html)




# -- deciders ----------------------------------------------------------------------------------
OURS = "ours, no boilerplate learning"
OURS_LEARNING = "ours + boilerplate learning"


def ours_decider() -> tuple[Decider, str]:
    """The library's ContentDeduplicator with its defaults, no boilerplate learning (HTML -> page_text -> check)."""
    from scrapy_dedup.content.engine import ContentDeduplicator
    from scrapy_dedup.content.text import page_text

    check = ContentDeduplicator.in_memory().check

    def decide(url: str, html: bytes) -> Optional[str]:
        verdict = check(url, page_text(html))
        return verdict.kept_url if verdict.is_duplicate else None

    return decide, OURS


def ours_boilerplate_decider() -> tuple[Decider, str]:
    """Ours with per-host boilerplate learning: the core's BoilerplateJudge (the crawl's decision rule)
    in front of the same deduplicator."""
    from scrapy_dedup.content.boilerplate import BoilerplateJudge, BoilerplateLearner, BoilerplateRule
    from scrapy_dedup.content.engine import ContentDeduplicator
    from scrapy_dedup.content.text import page_blocks_titled

    judge = BoilerplateJudge(ContentDeduplicator.in_memory(), BoilerplateLearner(BoilerplateRule()))

    def decide(url: str, html: bytes) -> Optional[str]:
        blocks, title = page_blocks_titled(html)
        verdict = judge.check(url, blocks, title=title).verdict
        return verdict.kept_url if verdict.is_duplicate else None

    return decide, OURS_LEARNING


def trafilatura_decider(k: int = 3) -> tuple[Decider, str]:
    """trafilatura's own deduplication: ``extract(deduplicate=<fresh LRUCache>)`` drops text segments
    seen more than twice (its boilerplate rule), then its ``Simhash`` of the text, a duplicate within
    ``k`` bits of a kept page (brute-force scan: trafilatura has no index). A text it refuses as a
    repeated document (None) is extracted again without the cache, to be fingerprinted."""
    import numpy as np
    import trafilatura
    from trafilatura.deduplication import LRUCache, Simhash

    logging.getLogger("trafilatura").setLevel(logging.CRITICAL)
    cache = LRUCache(maxsize=4096)
    kept_hashes: list[int] = []
    kept_urls: list[str] = []
    array = np.zeros(0, dtype=np.uint64)

    def decide(url: str, html: bytes) -> Optional[str]:
        nonlocal array
        text = trafilatura.extract(html, deduplicate=cache) if html.strip() else None
        if text is None and html.strip():
            text = trafilatura.extract(html)
        if not text or len(text.split()) < 20:
            return None  # degenerate: never dropped, as ours
        fp = Simhash(text).hash
        if len(array) != len(kept_hashes):
            array = np.array(kept_hashes, dtype=np.uint64)
        if len(array):
            d = np.bitwise_count(array ^ np.uint64(fp))
            best = int(np.argmin(d))
            if d[best] <= k:
                return kept_urls[best]
        kept_hashes.append(fp)
        kept_urls.append(url)
        return None

    return decide, f"trafilatura dedup + Simhash k={k}"


def md5_raw_decider() -> tuple[Decider, str]:
    seen: dict[bytes, str] = {}

    def decide(url: str, html: bytes) -> Optional[str]:
        digest = hashlib.md5(html).digest()
        kept = seen.get(digest)
        if kept is None:
            seen[digest] = url
        return kept

    return decide, "MD5 of raw HTML"


def simhash_pkg_decider(text_fn: Callable[[bytes], str], label: str) -> tuple[Decider, str]:
    from simhash import Simhash, SimhashIndex

    logging.getLogger("simhash").setLevel(logging.ERROR)  # "Big bucket found" warnings
    index = SimhashIndex([], k=3)
    # The package's own tokenizer (lowercase, \w characters, sliding 4-grams), but the features
    # passed as a plain list: its weighted path (features repeated more than 50 times) overflows
    # a uint8 array under NumPy 2 (simhash 2.1.2). The unweighted list gives the same fingerprint.
    tokenize = Simhash(0)._tokenize

    def decide(url: str, html: bytes) -> Optional[str]:
        sh = Simhash(tokenize(text_fn(html)))
        near = index.get_near_dups(sh)
        if near:
            return min(near)  # the package returns an unordered list; any member is a valid answer
        index.add(url, sh)
        return None

    return decide, f"simhash pkg, k=3 [{label}]"


def datasketch_decider(text_fn: Callable[[bytes], str], label: str,
                       threshold: float = 0.8) -> tuple[Decider, str]:
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=threshold, num_perm=128)
    stored: dict[str, MinHash] = {}

    def decide(url: str, html: bytes) -> Optional[str]:
        mh = MinHash(num_perm=128)
        mh.update_batch([s.encode("utf-8") for s in word_shingles(text_fn(html))])
        best, best_j = None, threshold
        for cand in lsh.query(mh):
            j = mh.jaccard(stored[cand])
            if j >= best_j:
                best, best_j = cand, j
        if best is not None:
            return best
        lsh.insert(url, mh)
        stored[url] = mh
        return None

    return decide, f"datasketch MinHashLSH 128p t={threshold} [{label}]"




def textbook_decider(text_fn: Callable[[bytes], str], label: str) -> tuple[Decider, str]:
    """The textbook algorithm by hand: MD5 per 5-word shingle, Python vote, 4-band dict index."""
    bands: list[dict[int, list[tuple[int, str]]]] = [defaultdict(list) for _ in range(4)]

    def decide(url: str, html: bytes) -> Optional[str]:
        fp = textbook_fingerprint(text_fn(html))
        best, best_d = None, 4
        for i in range(4):
            for other, key in bands[i].get((fp >> (16 * i)) & 0xFFFF, ()):
                d = bin(fp ^ other).count("1")
                if d < best_d:
                    best, best_d = key, d
        if best is not None:
            return best
        for i in range(4):
            bands[i][(fp >> (16 * i)) & 0xFFFF].append((fp, url))
        return None

    return decide, f"textbook simhash by hand [{label}]"


# -- scoring -----------------------------------------------------------------------------------
def _find(parent: dict[int, int], x: int) -> int:
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


def pairs(n: int) -> int:
    return n * (n - 1) // 2


def score(pages: list[qc.Page], decisions: list[Optional[str]]) -> dict:
    index = {p.url: i for i, p in enumerate(pages)}
    parent = {i: i for i in range(len(pages))}
    wrong = Counter()
    for i, kept in enumerate(decisions):
        if kept is None:
            continue
        j = index[kept]
        parent[_find(parent, i)] = _find(parent, j)
        if pages[j].group != pages[i].group:
            kind = pages[i].kind
            wrong[kind if kind in qc.HARD_NEGATIVES else "variant"] += 1
    clusters: dict[int, list[int]] = defaultdict(list)
    for i in range(len(pages)):
        clusters[_find(parent, i)].append(i)
    true_pairs = sum(pairs(n) for n in Counter(p.group for p in pages).values())
    pred_pairs = sum(pairs(len(c)) for c in clusters.values())
    hit_pairs = sum(sum(pairs(n) for n in Counter(pages[i].group for i in c).values())
                    for c in clusters.values())
    precision = hit_pairs / pred_pairs if pred_pairs else 1.0
    recall = hit_pairs / true_pairs if true_pairs else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    # recall per duplicate kind: is the duplicate in the cluster of its group's original?
    root_of_original = {p.group: _find(parent, i) for i, p in enumerate(pages) if p.kind in qc.ORIGINAL_KINDS}
    per_kind: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for i, p in enumerate(pages):
        if p.kind in qc.DUP_KINDS and p.group in root_of_original:
            per_kind[p.kind][1] += 1
            per_kind[p.kind][0] += _find(parent, i) == root_of_original[p.group]
    return {"precision": precision, "recall": recall, "f1": f1, "wrong": wrong,
            "per_kind": {k: v[0] / v[1] for k, v in per_kind.items() if v[1]}}


def run(decider: Decider, pages: list[qc.Page]) -> tuple[list[Optional[str]], float]:
    """Decisions for ``pages`` in order, and the CPU seconds they took (this process)."""
    gc.collect()
    t0 = time.process_time()
    decisions = [decider(p.url, p.html) for p in pages]
    return decisions, time.process_time() - t0


# -- main ----------------------------------------------------------------------------------------
Factory = Callable[[], tuple[Decider, str]]


def _clear_word_cache() -> None:
    """Empty our per-process word-hash cache (what a freshly started crawler process has)."""
    from scrapy_dedup.content import simhash

    simhash._WORD_CACHE.clear()


def ours_cold_decider() -> tuple[Decider, str]:
    """Ours, with the word-hash cache emptied when the decider is made (timed rows only)."""
    _clear_word_cache()
    decide, _ = ours_decider()
    return decide, "ours, word-hash cache emptied per round"


def factories(quick: bool, ours_only: bool = False) -> list[Factory]:
    """The main contenders, as makers of fresh deciders (empty index each time)."""
    if ours_only:
        return [ours_decider, ours_boilerplate_decider]
    out: list[Factory] = [
        ours_decider, ours_boilerplate_decider, md5_raw_decider,
        lambda: simhash_pkg_decider(our_text, "page_text"), lambda: simhash_pkg_decider(naive_text, "naive text"),
        lambda: datasketch_decider(our_text, "page_text"), lambda: datasketch_decider(naive_text, "naive text"),
        lambda: textbook_decider(our_text, "page_text"),
    ]
    if not quick:
        out.append(lambda: textbook_decider(naive_text, "naive text"))
    try:
        import trafilatura  # noqa: F401  (in the bench extra; optional elsewhere)
    except ImportError:
        print("note: trafilatura not installed: its row is left out (pip install trafilatura)", file=sys.stderr)
    else:
        out.append(trafilatura_decider)
    return out


def build_deciders(quick: bool, extra: Iterable[tuple[Decider, str]] = (),
                   ours_only: bool = False) -> list[tuple[Decider, str]]:
    out = [make() for make in factories(quick, ours_only)]
    out.extend(extra)
    return out


def time_rounds(makers: list[Factory], pages: list[qc.Page], rounds: int) -> dict[str, list[float]]:
    """CPU seconds of each contender per round: fresh decider over ``pages``, interleaved, order rotated."""
    seconds: dict[str, list[float]] = defaultdict(list)
    for r in range(rounds):
        shift = r % len(makers)
        for make in makers[shift:] + makers[:shift]:
            decider, name = make()
            _, spent = run(decider, pages)
            seconds[name].append(spent)
            del decider
    return seconds


def print_speed(seconds: dict[str, list[float]], pages: int, rounds: int) -> None:
    names = list(seconds)
    ours_name = OURS if OURS in seconds else names[0]  # the 'ours x' columns' reference
    ours = seconds[ours_name]
    print(f"end-to-end speed (HTML in, decision out): {rounds} interleaved rounds x {pages} pages, fresh decider "
          "per run, CPU time (time.process_time), after the quality pass as warm-up")
    print(f"  {'algorithm':<48} {'pages/s median':>14} {'min':>7} {'max':>7} {'ours x (medians)':>16} "
          f"{'ours x (median of rounds)':>25}")
    for name in names:
        runs = seconds[name]
        pps = [pages / s for s in runs]
        ratio_medians = statistics.median(runs) / statistics.median(ours)
        ratio_rounds = statistics.median(t / o for t, o in zip(runs, ours))
        print(f"  {name:<48} {statistics.median(pps):14.1f} {min(pps):7.1f} {max(pps):7.1f} "
              f"{ratio_medians:16.2f} {ratio_rounds:25.2f}")
    print("  ('ours x' = the row's CPU seconds / ours', i.e. how many times faster ours is; per-round ratios pair"
          " runs of the same round)")
    targets = [(n, 4.0) for n in names if n.startswith("textbook")]
    targets += [(n, 1.3) for n in names if n.startswith("simhash pkg")]
    if OURS in seconds and OURS_LEARNING in seconds:
        ratio = statistics.median(o / t for t, o in zip(seconds[OURS_LEARNING], seconds[OURS]))
        print(f"  target {OURS_LEARNING} >= 0.9x the speed of {OURS}: {ratio:.2f}x "
              f"({'met' if ratio >= 0.9 else 'MISSED'})")
    for contender in (ours_name,) + tuple(n for n in names if n.startswith("ours, word-hash")):
        for name, needed in targets:
            ratio = statistics.median(t / o for t, o in zip(seconds[name], seconds[contender]))
            verdict = "met" if ratio >= needed else "MISSED"
            print(f"  target {contender} >= {needed}x {name}: {ratio:.2f}x ({verdict})")


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a few seconds: 3 small originals per template "
                    "(or the tiny generated corpus when the Debian docs are absent)")
    ap.add_argument("--per-source", type=int, default=120, help="originals per template (default 120)")
    ap.add_argument("--seed", default="7", help="corpus seed, or seeds separated by commas: one report each, "
                    "the speed rounds on the first only (tune on some seeds, report on others: docs/benchmarks.md)")
    ap.add_argument("--live-per-source", type=int, default=None,
                    help="originals per template on the live hosts "
                         "(per-fetch chrome; default per-source / 2, 3 in --quick)")
    ap.add_argument("--releases-per-project", type=int, default=None,
                    help="release-notes pages per NEWS file (near-identical distinct pages; default 12, 6 in --quick)")
    ap.add_argument("--no-install", action="store_true", help="never call apt-get for missing docs")
    ap.add_argument("--ours-only", action="store_true", help="only our two rows (without and with boilerplate "
                    "learning): for tuning; the peers' rows do not change with our code")
    ap.add_argument("--ideas", action="store_true", help="also run the exploration rows (bench_ideas.py)")
    ap.add_argument("--rounds", type=int, default=5, help="timed rounds per contender (default 5; 2 in --quick)")
    ap.add_argument("--speed-pages", type=int, default=600,
                    help="pages (the first of the crawl order) per timed run (default 600)")
    args = ap.parse_args(argv)
    seeds = [int(v) for v in str(args.seed).split(",") if v.strip()]
    for n, seed in enumerate(seeds):
        if len(seeds) > 1:
            print(f"\n===== seed {seed} =====")
        report(args, seed, speed=n == 0)
    return 0


def report(args: argparse.Namespace, seed: int, speed: bool) -> None:
    per_source = 3 if args.quick else args.per_source
    live = args.live_per_source if args.live_per_source is not None else (3 if args.quick else per_source // 2)
    releases = args.releases_per_project if args.releases_per_project is not None else (6 if args.quick else 12)
    t0 = time.perf_counter()
    sources = qc.ensure_sources(install=not (args.no_install or args.quick))
    if sources:
        pages = qc.build_corpus(per_source, seed=seed, install=False, sources=tuple(sources),
                                degenerate_copies=2 if args.quick else 4,
                                max_bytes=40_000 if args.quick else qc.MAX_PAGE_BYTES, live_per_source=live,
                                releases_per_project=releases)
        corpus = f"Debian docs: {', '.join(s.package for s in sources)}"
    else:
        pages = qc.tiny_corpus(seed)
        corpus = "tiny generated corpus (Debian docs not installed)"
    kinds = Counter(p.kind for p in pages)
    groups = len({p.group for p in pages})
    mb = sum(len(p.html) for p in pages) / 1e6
    print(f"corpus (seed {seed}): {corpus}; {len(pages)} pages, {mb:.1f} MB HTML, {groups} true groups, "
          f"{kinds['original']} originals, {kinds['sibling']} siblings, {kinds['templated']} templated, "
          f"{kinds['degenerate']} degenerate, {kinds['release']} release notes "
          f"(built in {time.perf_counter() - t0:.1f} s)")

    extra = []
    if args.ideas:
        import bench_ideas

        extra = bench_ideas.deciders(pages)
    rows = []
    for decider, name in build_deciders(args.quick, extra, args.ours_only):
        decisions, seconds = run(decider, pages)
        s = score(pages, decisions)
        s["name"], s["pps"] = name, len(pages) / seconds
        rows.append(s)

    ours = rows[0]
    print()
    print(f"{'algorithm':<48} {'prec':>6} {'recall':>6} {'F1':>6} {'wrong drops (orig/sib/tmpl/degen/rel/var)':>42} "
          f"{'pages/s':>8} {'ours x':>7}   (pages/s: CPU time of the single quality pass, all pages)")
    for r in rows:
        w = r["wrong"]
        drops = (f"{sum(w.values())} ({w['original']}/{w['sibling']}/{w['templated']}/{w['degenerate']}/"
                 f"{w['release']}/{w['variant']})")
        print(f"{r['name']:<48} {r['precision']:6.3f} {r['recall']:6.3f} {r['f1']:6.3f} {drops:>42} "
              f"{r['pps']:8.0f} {ours['pps'] / r['pps']:7.2f}")
    print()
    print("recall per duplicate kind (share of that kind's pages clustered with their original):")
    print(f"{'algorithm':<48} " + " ".join(f"{k[:9]:>9}" for k in qc.DUP_KINDS))
    for r in rows:
        print(f"{r['name']:<48} " + " ".join(f"{r['per_kind'].get(k, float('nan')):9.2f}" for k in qc.DUP_KINDS))
    print()
    print("'ours x' = our pages per second / the row's pages per second (same run, same pages).")
    print()
    if not speed:
        return
    makers = factories(args.quick, args.ours_only)
    if not args.ours_only:
        makers.insert(1, ours_cold_decider)
    speed_pages = pages[: max(1, args.speed_pages)]
    rounds = 2 if args.quick else max(1, args.rounds)
    print_speed(time_rounds(makers, speed_pages, rounds), len(speed_pages), rounds)


if __name__ == "__main__":
    sys.exit(main())
