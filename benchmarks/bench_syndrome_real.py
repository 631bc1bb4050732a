#!/usr/bin/env python
"""The syndrome sketches (``syndrome_sketch.py``) on the real candidate pairs of the quality corpus.

Runs the quality benchmark's corpus (``bench_quality.py``'s, same flags) through our
deduplicator with its defaults (and with boilerplate learning, ``--boilerplate``); every
time the store verifies a candidate pair by its bottom-256 sketch, the two pages' full
shingle-hash sets are looked up and the pair is also decided by the exact sets and by each
syndrome sketch. Reported: how many verifications, how many decisions differ from
bottom-256's and from the exact sets', and the CPU time of one syndrome verification.
Then (``--score``) the whole corpus again with each syndrome sketch deciding in place of
bottom-256: precision, recall, F1, wrong drops and recall per duplicate kind, scored as
``bench_quality.py`` scores them.

    python benchmarks/bench_syndrome_real.py --score all
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Callable, Optional

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import bench_quality as bq  # noqa: E402
import quality_corpus as qc  # noqa: E402

from scrapy_dedup.content import engine  # noqa: E402
from scrapy_dedup.content.sketch import Resemblance, Sketch, VerifyRule, make_sketch  # noqa: E402

from bench_sketch_limit import VERIFIERS as _VERIFIERS  # noqa: E402

VERIFIERS = {v.name: v for v in _VERIFIERS}
PAIRS: list[tuple[np.ndarray, np.ndarray]] = []  # the first real pairs, for the CPU timing
HASHES: dict[tuple[bytes, int], np.ndarray] = {}  # a sketch's (values, count) -> the page's shingle hashes


def _recording_make_sketch(shingle_hashes: np.ndarray, size: int = 256) -> Sketch:
    sketch = make_sketch(shingle_hashes, size)
    HASHES[(sketch.values, sketch.shingles)] = np.asarray(shingle_hashes, dtype=np.uint64).copy()
    return sketch


def _exact(a: np.ndarray, b: np.ndarray, rule: VerifyRule) -> bool:
    common = len(np.intersect1d(a, b))
    union = len(a) + len(b) - common
    r = Resemblance(common / union if union else 1.0, float(len(a) - common), float(len(b) - common))
    return rule.accepts(r, len(a), len(b))


class RecordingRule(VerifyRule):
    """Today's rule, deciding by ``decide_by`` ("bottom-256" or a verifier's name) and recording every pair."""

    def __init__(self, decide_by: str, log: list[dict]):
        super().__init__()
        object.__setattr__(self, "decide_by", decide_by)
        object.__setattr__(self, "log", log)

    def near(self, a: Sketch, b: Sketch, size: int) -> bool:
        today = super().near(a, b, size)
        ha, hb = HASHES.get((a.values, a.shingles)), HASHES.get((b.values, b.shingles))
        if ha is None or hb is None:
            self.log.append({"missing": True})
            return today
        if len(PAIRS) < 300:
            PAIRS.append((ha, hb))
        row: dict = {"bottom-256": today, "exact": _exact(ha, hb, self), "na": len(ha), "nb": len(hb),
                     "d": len(np.setxor1d(ha, hb))}
        for name, verifier in VERIFIERS.items():
            row[name] = verifier.near(ha, hb)
        self.log.append(row)
        return row[self.decide_by]


def deciders(decide_by: str, log: list[dict], boilerplate: bool) -> Callable[[str, bytes], Optional[str]]:
    from scrapy_dedup.content.boilerplate import BoilerplateJudge, BoilerplateLearner
    from scrapy_dedup.content.text import page_blocks, page_text

    dedup = engine.ContentDeduplicator.in_memory(verify=RecordingRule(decide_by, log))
    if boilerplate:
        judge = BoilerplateJudge(dedup, BoilerplateLearner())

        def decide(url: str, html: bytes) -> Optional[str]:
            verdict = judge.check(url, page_blocks(html)).verdict
            return verdict.kept_url if verdict.is_duplicate else None
    else:
        def decide(url: str, html: bytes) -> Optional[str]:
            verdict = dedup.check(url, page_text(html))
            return verdict.kept_url if verdict.is_duplicate else None

    return decide


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-source", type=int, default=120, help="originals per template (bench_quality's default)")
    ap.add_argument("--live-per-source", type=int, default=None, help="default per-source / 2")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--boilerplate", action="store_true", help="ours + boilerplate learning instead of ours")
    ap.add_argument("--score", default="", help="comma-separated sketches (or 'all') to score the corpus with, "
                    "each deciding in place of bottom-256")
    ap.add_argument("--no-pairs", action="store_true", help="skip the bottom-256 pass (pair agreement, CPU)")
    args = ap.parse_args()
    live = args.live_per_source if args.live_per_source is not None else args.per_source // 2
    sources = qc.ensure_sources(install=False)
    if sources:
        pages = qc.build_corpus(args.per_source, seed=args.seed, install=False, sources=tuple(sources),
                                live_per_source=live)
    else:
        pages = qc.tiny_corpus(args.seed)
    print(f"corpus (seed {args.seed}): {len(pages)} pages; "
          f"{'ours + boilerplate learning' if args.boilerplate else 'ours'}")
    engine.make_sketch = _recording_make_sketch  # type: ignore[assignment]  # record every page's hashes
    scored = list(VERIFIERS) if args.score == "all" else [n for n in args.score.split(",") if n]
    unknown = set(scored) - set(VERIFIERS)
    if unknown:
        ap.error(f"unknown sketches {sorted(unknown)}; known: {', '.join(VERIFIERS)}")
    names = ([] if args.no_pairs else ["bottom-256"]) + scored
    for decide_by in names:
        log: list[dict] = []
        HASHES.clear()
        decisions, _ = bq.run(deciders(decide_by, log, args.boilerplate), pages)
        s = bq.score(pages, decisions)
        rows = [r for r in log if "missing" not in r]
        w = s["wrong"]
        print(f"\ndeciding by {decide_by}: {len(log)} verifications ({len(log) - len(rows)} without hashes); "
              f"F1 {s['f1']:.3f} prec {s['precision']:.3f} recall {s['recall']:.3f}; wrong drops "
              f"{sum(w.values())} (orig/sib/tmpl/degen/var {w['original']}/{w['sibling']}/{w['templated']}/"
              f"{w['degenerate']}/{w['variant']})")
        print("  recall per kind: " + " ".join(f"{k}={s['per_kind'].get(k, float('nan')):.2f}"
                                             for k in qc.DUP_KINDS))
        if decide_by != "bottom-256":
            continue
        print(f"  pairs: accepted by bottom-256 {sum(r['bottom-256'] for r in rows)}, by the exact sets "
              f"{sum(r['exact'] for r in rows)}; |difference| <= 28: {sum(r['d'] <= 28 for r in rows)}, "
              f"both pages >= 256 shingles: {sum(min(r['na'], r['nb']) >= 256 for r in rows)}")
        print(f"  {'sketch':<12} {'bytes':>5} {'!= bottom-256':>14} {'(merges/splits)':>16} {'!= exact':>9}")
        for name in ("exact", *VERIFIERS):
            diff = [r for r in rows if r[name] != r["bottom-256"]]
            merges = sum(r[name] for r in diff)
            nbytes = VERIFIERS[name].nbytes if name in VERIFIERS else 0
            print(f"  {name:<12} {nbytes:>5} {len(diff):>14} {f'{merges}/{len(diff) - merges}':>16} "
                  f"{sum(r[name] != r['exact'] for r in rows):>9}")
        if PAIRS:
            rule = VerifyRule()
            sketches256 = [(make_sketch(a), make_sketch(b)) for a, b in PAIRS]
            t0 = time.process_time()
            for sa, sb in sketches256:
                rule.near(sa, sb, 256)
            per = (time.process_time() - t0) / len(sketches256)
            print(f"  CPU per verification, bottom-256: {per * 1e3:.2f} ms (the same pairs, for scale)")
            for name, verifier in VERIFIERS.items():
                sketches = [(verifier.sketch(a), verifier.sketch(b)) for a, b in PAIRS]
                t0 = time.process_time()
                for sa, sb in sketches:
                    verifier.decide(sa, sb)
                per = (time.process_time() - t0) / len(sketches)
                print(f"  CPU per verification, {name}: {per * 1e3:.2f} ms "
                      f"(the first {len(PAIRS)} real pairs, sketches made beforehand)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
