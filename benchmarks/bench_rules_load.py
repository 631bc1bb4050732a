"""Loading a DEDUP_DUST_RULES file: seconds against the number of rules (is it linear?).

    python benchmarks/bench_rules_load.py                    # 4,000 to 128,000 rules (15 MB: the 16 MiB limit)
    python benchmarks/bench_rules_load.py --rules 64000      # one size
    python benchmarks/bench_rules_load.py --quick            # seconds; the smoke test runs this

Each file is written by :meth:`RuleSet.save` from generated rules on one host,
the mix a large mined file has: mostly ``drop_param`` under ``/`` and under
narrower prefixes, plus ``default_param``, ``drop_segment`` and ``substitute``
rules (support counts and one example each, as the miner writes them; about 58
bytes a rule). The time is :func:`scrapy_dedup.url.dust.load_rules` on the
path, the whole of what ``DEDUP_DUST_RULES`` costs at start (read, validate,
compile), in CPU seconds of this process (a shared machine's load stretches
wall time, not CPU time), best of ``--repeat``; the ratio column is the time per rule against
the smallest size's (about 1 where loading is linear).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scrapy_dedup.url.dust import DustRule, RuleSet, load_rules  # noqa: E402


def generated_rules(count: int) -> list[DustRule]:
    rules = []
    for i in range(count):
        kind = i % 10
        if kind < 6:
            rules.append(DustRule("drop_param", param=f"p{i}", support=3, support_pages=3))
        elif kind < 8:
            rules.append(DustRule("drop_param", param=f"q{i}", prefix=f"/s{i % 97}/", support=3, support_pages=3))
        elif kind == 8:
            rules.append(DustRule("default_param", param=f"d{i}", value="1", support=3, support_pages=3))
        else:
            rules.append(DustRule("substitute", from_=f"/old{i}/", to=f"/new{i}/", anchor="prefix",
                                  support=3, support_pages=3))
    return rules


def write_file(path: str, count: int) -> int:
    RuleSet({"big.example": generated_rules(count)}).save(path)
    return os.path.getsize(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rules", type=int, nargs="+", default=[4000, 16_000, 64_000, 128_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.rules, args.repeat = [1000, 4000], 1
    print(f"bench_rules_load: load_rules on one host's generated rules, best of {args.repeat}")
    print(f"{'rules':>8} {'MB':>6} {'CPU s':>8} {'us/rule':>8} {'x first':>8}")
    first = None
    with tempfile.TemporaryDirectory() as tmp:
        for count in args.rules:
            path = os.path.join(tmp, f"rules-{count}.json")
            size = write_file(path, count)
            best = min(_timed(path) for _ in range(args.repeat))
            per_rule = best / count
            first = first or per_rule
            print(f"{count:8,} {size / 1e6:6.1f} {best:8.2f} {per_rule * 1e6:8.1f} {per_rule / first:8.2f}", flush=True)
    return 0


def _timed(path: str) -> float:
    began = time.process_time()
    rules = load_rules(path)
    elapsed = time.process_time() - began
    assert rules is not None and len(rules)
    return elapsed


if __name__ == "__main__":
    sys.exit(main())
