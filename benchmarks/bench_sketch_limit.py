#!/usr/bin/env python
"""How often the verification rule merges two pages around its absolute limit, by sketch.

The rule's absolute clause accepts a pair with at most ``max_diff`` (10) shingles of
its own on one side; a templated sibling of a short page has a dozen or more on both.
This measures, over random pairs of pages sharing ``--common`` shingles with ``a`` and
``b`` shingles of their own, the share the rule accepts when it is fed:

* ``exact``: the exact shingle sets (the rule's intent: 1 at or under the limit, 0 above);
* ``bottom-256``: today's sketch (:func:`scrapy_dedup.content.sketch.make_sketch`, 1,030 bytes);
* ``odd<m>``: an odd sketch of ``m`` bits (Mitzenmacher, Pagh and Pham 2014) with the
  estimator of the 60-byte prototype (own shingles counted exactly until two share a bit,
  expected cancellations added in whole pairs);
* ``oph<k>``: one-permutation minwise hashing (Li et al. 2012) with ``k`` bins, one bit
  kept per bin (b-bit, Li and Koenig 2010), empty bins densified by rotation
  (Shrivastava 2017); ``J`` from the share of equal bits, own counts from ``J``;
* ``syn<t>``: ``t`` BCH syndromes of 16 bits (PinSketch, ``syndrome_sketch.py``): the
  difference decoded exactly up to ``t`` shingles, decided at its lower bound beyond;
  ``syn<t>+<t1>``: with a second level of ``t1`` syndromes on a 1/8 subsample for
  pages of unequal lengths; ``syn<t>+odd<m>``: with an odd sketch of ``m`` bits estimating
  the difference past ``t`` (long pages: the rule's relative clause).

``a:b@c`` rows take ``c`` common shingles instead of ``--common``.

The prototypes are written here only to measure them; they are not the package's code.

    python benchmarks/bench_sketch_limit.py --pairs 1000
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Callable

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

sys.path.insert(0, HERE)

from syndrome_sketch import SyndromeVerifier  # noqa: E402

from scrapy_dedup.content.sketch import Resemblance, VerifyRule, make_sketch, resemblance  # noqa: E402

M32 = np.uint64(0xFFFFFFFF)
RULE = VerifyRule()
VERIFIERS = (SyndromeVerifier(t=28), SyndromeVerifier(t=20, t1=8, fallback="strata"),
             SyndromeVerifier(t=20, fallback="odd", odd_bits=144), SyndromeVerifier(t=24, fallback="odd", odd_bits=112),
             SyndromeVerifier(t=40, fallback="odd", odd_bits=352))
Decider = Callable[[np.ndarray, np.ndarray], bool]


def exact(a: np.ndarray, b: np.ndarray) -> bool:
    common = len(np.intersect1d(a, b))
    r = Resemblance(common / (len(a) + len(b) - common), float(len(a) - common), float(len(b) - common))
    return RULE.accepts(r, len(a), len(b))


def bottom_k(a: np.ndarray, b: np.ndarray) -> bool:
    sa, sb = make_sketch(a), make_sketch(b)
    return RULE.accepts(resemblance(sa, sb, 256), sa.shingles, sb.shingles)


def odd_sketch(m: int) -> Decider:
    def bits(h: np.ndarray) -> np.ndarray:
        cell = ((h & M32) * np.uint64(m)) >> np.uint64(32)
        return (np.bincount(cell.astype(np.intp), minlength=m) & 1).astype(bool)

    def decide(a: np.ndarray, b: np.ndarray) -> bool:
        na, nb = len(a), len(b)
        z = int(np.count_nonzero(bits(a) ^ bits(b)))
        if z > 0.4 * m:  # past the estimator's range: the prototype used min-hash bits there
            return False
        cancelled = math.log(1 - 2 * z / m) / math.log(1 - 2 / m) - z
        delta = max(z + 2 * math.floor(cancelled / 2), abs(na - nb))
        j = (na + nb - delta) / (na + nb + delta)
        return RULE.accepts(Resemblance(j, (delta + na - nb) / 2, (delta - na + nb) / 2), na, nb)

    return decide


def one_permutation(k: int) -> Decider:
    def bits(h: np.ndarray) -> np.ndarray:
        cell = ((h >> np.uint64(32)) * np.uint64(k)) >> np.uint64(32)
        mins = np.full(k, np.iinfo(np.uint64).max, dtype=np.uint64)
        np.minimum.at(mins, cell.astype(np.intp), h & M32)
        filled = np.nonzero(mins != np.iinfo(np.uint64).max)[0]
        for i in np.nonzero(mins == np.iinfo(np.uint64).max)[0]:  # densify: the next filled bin, rotated
            j = filled[np.searchsorted(filled, i) % len(filled)]
            mins[i] = mins[j] + np.uint64((7 * (int(i) - int(j))) % 2**31)
        with np.errstate(over="ignore"):
            return ((mins * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(63)).astype(bool)

    def decide(a: np.ndarray, b: np.ndarray) -> bool:
        na, nb = len(a), len(b)
        j = max(0.0, 2 * float(np.mean(bits(a) == bits(b))) - 1)
        common = j * (na + nb) / (1 + j)
        return RULE.accepts(Resemblance(j, na - common, nb - common), na, nb)

    return decide


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=1000, help="random pairs per row")
    ap.add_argument("--common", type=int, default=200, help="shingles the two pages share")
    ap.add_argument("--own", default="5:5,10:10,0:40,11:11,12:12,12:13,16:16,12:50,3:60,"
                    "60:60@1000,100:100@1000",
                    help="comma-separated a:b shingles of each page's own, a:b@c with c common ones "
                         "instead of --common (long pages: the rule's relative clause)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    deciders: dict[str, Decider] = {"exact": exact, "bottom-256": bottom_k}
    for m in (384, 1024, 2048):
        deciders[f"odd{m}"] = odd_sketch(m)
    for k in (512, 640):
        deciders[f"oph{k}"] = one_permutation(k)
    for verifier in VERIFIERS:
        deciders[verifier.name] = verifier.near
    rng = np.random.default_rng(args.seed)
    print(f"share of {args.pairs} random pairs accepted ({args.common} common shingles; "
          f"rule max_diff={RULE.max_diff:g}, long_page={RULE.long_page}; bytes: "
          + ", ".join(f"{v.name} {v.nbytes}" for v in VERIFIERS) + ")")
    print(f"{'own a:b':>12s} " + " ".join(f"{name:>10s}" for name in deciders))
    for spec in args.own.split(","):
        own, _, shared_count = spec.partition("@")
        own_a, own_b = (int(x) for x in own.split(":"))
        n_common = int(shared_count) if shared_count else args.common
        accepted = dict.fromkeys(deciders, 0)
        for _ in range(args.pairs):
            shared = rng.integers(0, 2**64, size=n_common, dtype=np.uint64)
            a = np.unique(np.concatenate([shared, rng.integers(0, 2**64, size=own_a, dtype=np.uint64)]))
            b = np.unique(np.concatenate([shared, rng.integers(0, 2**64, size=own_b, dtype=np.uint64)]))
            for name, decide in deciders.items():
                accepted[name] += decide(a, b)
        print(f"{spec:>12s} " + " ".join(f"{accepted[n] / args.pairs:10.3f}" for n in deciders), flush=True)


if __name__ == "__main__":
    main()
