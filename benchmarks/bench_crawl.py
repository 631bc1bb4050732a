#!/usr/bin/env python
"""Crawl overhead of scrapy-dedup: the example site crawled by the example spider,
with Scrapy's defaults and with the add-on, in one run.

    python benchmarks/bench_crawl.py            # 5 interleaved rounds
    python benchmarks/bench_crawl.py --rounds 9
    python benchmarks/bench_crawl.py --quick    # 1 round, for the smoke test
    python benchmarks/bench_crawl.py --jobdir   # both crawls with JOBDIR (Scrapy's disk queue and
                                                # requests.seen; the add-on's Bloom checkpoint and frontier journal)

Each crawl is ``example_project/run_demo.py`` in its own process (the site is
served by a further child process, so its CPU is not counted), writing its final
stats with ``--stats-json``. Two CPU figures per crawl:

* **process**: ``run_demo/crawl_cpu_seconds``, the CPU time of the crawling
  process from the creation of the ``CrawlerProcess`` to the end (start-up
  included: importing and building the components, e.g. numpy for the add-on,
  allocating the Bloom filter).
* **crawl**: ``run_demo/spider_cpu_seconds``, CPU time from ``spider_opened``
  to ``spider_closed``: the per-page work without the one-off start-up, which
  a 500-page crawl would otherwise spread over few pages (the add-on also
  fetches fewer pages than plain Scrapy, so its fixed costs weigh more per page).

Rounds alternate plain / add-on so that a noisy neighbour affects both alike.
Three estimates of the ratio add-on / plain (target: at most 1.10) are printed,
because on a shared machine one crawl's CPU time varies by 20-30% from round
to round: the ratio of the medians, the ratio of the minima (other processes
only ever add CPU time, through caches and frequency, so the fastest round is
the least disturbed one), and the median of the per-round ratios (each round's
two crawls run back to back, under about the same load).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "example_project" / "run_demo.py"


def crawl(dedup: bool, workdir: Path, round_no: int, jobdir: bool = False) -> dict:
    kind = "dedup" if dedup else "plain"
    stats_file = workdir / f"stats-{kind}-{round_no}.json"
    args = [sys.executable, str(DEMO), "--stats-json", str(stats_file), "-s", "LOG_LEVEL=WARNING"]
    if jobdir:
        args += ["-s", f"JOBDIR={workdir / f'job-{kind}-{round_no}'}"]
    if dedup:
        # the audit and crawl logs are part of the add-on's work in the demo; keep them, in a scratch dir
        args += ["-s", f"DEDUP_AUDIT_FILE={workdir / 'audit.jsonl'}", "-s", f"DEDUP_LOG_FILE={workdir / 'log.jsonl'}"]
    else:
        args.append("--no-dedup")
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stats = json.loads(stats_file.read_text())
    fetched = stats.get("response_received_count", 0)
    cpu = stats["run_demo/crawl_cpu_seconds"]
    spider_cpu = stats.get("run_demo/spider_cpu_seconds", float("nan"))
    return {
        "fetched": fetched,
        "items": stats.get("item_scraped_count", 0),
        "cpu": cpu,
        "cpu_per_page_ms": 1000.0 * cpu / fetched if fetched else float("nan"),
        "spider_cpu": spider_cpu,
        "spider_cpu_per_page_ms": 1000.0 * spider_cpu / fetched if fetched else float("nan"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="one round (smoke test)")
    parser.add_argument("--jobdir", action="store_true", help="both crawls with a JOBDIR of their own")
    args = parser.parse_args(argv)
    rounds = 1 if args.quick else args.rounds
    results: dict[str, list[dict]] = {"plain": [], "addon": []}
    with tempfile.TemporaryDirectory(prefix="bench-crawl-") as tmp:
        for r in range(rounds):
            order = (False, True) if r % 2 == 0 else (True, False)
            for dedup in order:
                results["addon" if dedup else "plain"].append(crawl(dedup, Path(tmp), r, args.jobdir))
    summary = {}
    print(f"{'crawl':<8}{'pages fetched':>15}{'items kept':>12}{'process CPU s':>15}{'ms/page':>9}"
          f"{'crawl CPU s':>13}{'ms/page':>9}   (medians of {rounds} round(s))")
    for name, runs in results.items():
        row = {
            "fetched": runs[0]["fetched"],
            "items": runs[0]["items"],
            "cpu": statistics.median(r["cpu"] for r in runs),
            "cpu_per_page_ms": statistics.median(r["cpu_per_page_ms"] for r in runs),
            "spider_cpu": statistics.median(r["spider_cpu"] for r in runs),
            "spider_cpu_per_page_ms": statistics.median(r["spider_cpu_per_page_ms"] for r in runs),
            "cpu_per_page_ms_all": [round(r["cpu_per_page_ms"], 3) for r in runs],
            "spider_cpu_per_page_ms_all": [round(r["spider_cpu_per_page_ms"], 3) for r in runs],
        }
        summary[name] = row
        print(f"{name:<8}{row['fetched']:>15}{row['items']:>12}{row['cpu']:>15.2f}{row['cpu_per_page_ms']:>9.2f}"
              f"{row['spider_cpu']:>13.2f}{row['spider_cpu_per_page_ms']:>9.2f}")
    plain, addon = summary["plain"], summary["addon"]
    ratio = addon["cpu_per_page_ms"] / plain["cpu_per_page_ms"]
    spider_ratio = addon["spider_cpu_per_page_ms"] / plain["spider_cpu_per_page_ms"]
    ratio_min = min(addon["cpu_per_page_ms_all"]) / min(plain["cpu_per_page_ms_all"])
    spider_ratio_min = min(addon["spider_cpu_per_page_ms_all"]) / min(plain["spider_cpu_per_page_ms_all"])
    ratio_paired = statistics.median(
        a["cpu_per_page_ms"] / p["cpu_per_page_ms"] for a, p in zip(results["addon"], results["plain"]))
    spider_ratio_paired = statistics.median(
        a["spider_cpu_per_page_ms"] / p["spider_cpu_per_page_ms"] for a, p in zip(results["addon"], results["plain"]))
    whole = addon["cpu"] / plain["cpu"]
    print("\nCPU per fetched page, add-on / plain (target <= 1.10):  of medians  of minima  per-round median")
    print(f"  whole process (start-up included):                 {ratio:10.3f} {ratio_min:10.3f} {ratio_paired:17.3f}")
    print(f"  spider_opened .. spider_closed:                    {spider_ratio:10.3f} {spider_ratio_min:10.3f} "
          f"{spider_ratio_paired:17.3f}")
    print(f"CPU of the whole crawl, add-on / plain: {whole:.3f} "
          f"(the add-on fetches {plain['fetched'] - addon['fetched']} fewer pages)")
    print(json.dumps({"rounds": rounds, "jobdir": args.jobdir, "summary": summary, "ratio_per_page": ratio,
                      "ratio_per_page_spider": spider_ratio, "ratio_per_page_min": ratio_min,
                      "ratio_per_page_spider_min": spider_ratio_min, "ratio_per_page_paired": ratio_paired,
                      "ratio_per_page_spider_paired": spider_ratio_paired, "ratio_whole": whole}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
