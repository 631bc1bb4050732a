"""The ``scrapy-dedup`` command (also ``python -m scrapy_dedup``).

Subcommands:

* ``report DUMP``: how duplicated is a scrape dump? Runs the crawl's content
  engine over a JSON Lines dump (:mod:`scrapy_dedup.audit`).
* ``mine-dust LOG``: DUST rules from a crawl log (:mod:`scrapy_dedup.url.mining`).

Exit status: 0 success; 1 ``--fail-above`` exceeded (a quality gate, not an
error); 2 usage or config error, unreadable dump, or a bad line under ``--strict``.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Optional

from scrapy_dedup import __version__

__all__ = ["main", "build_parser"]

EXIT_OK, EXIT_GATE, EXIT_ERROR = 0, 1, 2


def _ratio(value: str) -> float:
    try:
        number = float(value.rstrip("%")) / (100.0 if value.endswith("%") else 1.0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a ratio: {value!r} (use e.g. 0.2 or 20%)") from None
    if not 0.0 <= number <= 1.0:
        raise argparse.ArgumentTypeError(f"ratio must be between 0 and 1, got {value!r}")
    return number


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


def _add_report_parser(sub) -> None:
    p = sub.add_parser(
        "report", help="measure how duplicated a scrape dump is (JSON Lines, optionally .gz)",
        description="Measure exact and near duplicates in a JSON Lines dump (one page per line, with "
                    "'url' and 'html' or 'text'), with the same engine as the crawl.")
    p.add_argument("dump", help="JSON Lines file, optionally gzip-compressed; '-' reads stdin")
    p.add_argument("--config", metavar="FILE", help="YAML, JSON or TOML file of settings (flags override it)")
    g = p.add_argument_group("engine (defaults: the crawl's DEDUP_* defaults)")
    g.add_argument("--method", choices=("simhash", "minhash"), default=None,
                   help="simhash (the crawl's engine, default) or MinHash LSH via datasketch")
    g.add_argument("--shingle-size", type=int, default=None, help="words per shingle (5)")
    g.add_argument("--fingerprint-bits", type=int, default=None, help="simhash bits, 64 or 128 (64)")
    g.add_argument("--hamming-threshold", "-k", type=int, default=None,
                   help="near duplicates differ in at most this many bits (3)")
    g.add_argument("--bands", type=int, default=None, help="index bands; must exceed the threshold (4)")
    g.add_argument("--allow-approximate", action="store_true", default=None,
                   help="accept bands <= threshold (recall becomes probabilistic)")
    g.add_argument("--min-words", type=int, default=None, help="fewer words: degenerate page (20)")
    g.add_argument("--strip-tags", default=None, help="comma-separated elements left out of the text")
    g.add_argument("--strip-selectors", default=None, help="comma-separated CSS selectors left out of the text")
    g.add_argument("--num-perm", type=int, default=None, help="minhash: permutations (128)")
    g.add_argument("--jaccard-threshold", type=float, default=None,
                   help="minhash: estimated Jaccard similarity of near duplicates (0.8)")
    g.add_argument("--lsh-bands", type=int, default=None, help="minhash: LSH bands (with --lsh-rows)")
    g.add_argument("--lsh-rows", type=int, default=None, help="minhash: LSH rows per band (with --lsh-bands)")
    f = p.add_argument_group("input")
    f.add_argument("--url-field", default=None, help="record field of the URL (url)")
    f.add_argument("--html-field", default=None, help="record field of the HTML (html)")
    f.add_argument("--text-field", default=None, help="record field of plain text, used without HTML (text)")
    f.add_argument("--strict", action="store_true", help="stop at the first bad line (exit status 2)")
    o = p.add_argument_group("output")
    o.add_argument("--json", action="store_true", help="print the numbers as JSON instead of text")
    o.add_argument("--clusters", metavar="FILE", help="JSONL: url, cluster, representative, distance, kind")
    o.add_argument("--pairs", metavar="FILE", help="JSONL: url_a (kept), url_b (flagged), distance, kind")
    o.add_argument("--all-pairs", action="store_true",
                   help="--pairs lists every pair within the threshold, not only each page's first match")
    o.add_argument("--html", metavar="FILE", help="self-contained HTML audit page")
    o.add_argument("--sample", type=int, default=None, help="flagged pairs shown in the HTML page (25)")
    o.add_argument("--seed", type=int, default=None, help="seed of the sample (0)")
    o.add_argument("--fail-above", type=_ratio, metavar="RATIO",
                   help="exit status 1 when the redundant share of pages is above RATIO (e.g. 0.2 or 20%%)")
    o.add_argument("--progress", choices=("auto", "always", "never"), default="auto",
                   help="progress bar on stderr (auto: only when stderr is a terminal)")
    p.add_argument("--jobs", "-j", type=_positive_int, default=1,
                   help="worker processes parsing pages (1: in this process)")
    p.set_defaults(handler=_run_report)


def _add_mine_dust_parser(sub) -> None:
    p = sub.add_parser("mine-dust", help="mine DUST rules from a crawl log (DEDUP_LOG_FILE)", add_help=False)
    p.add_argument("args", nargs=argparse.REMAINDER)
    p.set_defaults(handler=_run_mine_dust)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scrapy-dedup",
                                     description="Duplicate URLs and pages of Scrapy crawls: audits and tools.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    _add_report_parser(sub)
    _add_mine_dust_parser(sub)
    return parser


_CONFIG_FLAGS = ("method", "shingle_size", "fingerprint_bits", "hamming_threshold", "bands", "allow_approximate",
                 "min_words", "strip_tags", "strip_selectors", "num_perm", "jaccard_threshold", "lsh_bands",
                 "lsh_rows", "url_field", "html_field", "text_field", "sample", "seed")


def _run_report(args: argparse.Namespace) -> int:
    from scrapy_dedup.audit.config import AuditConfigError, build_config, load_config_file
    from scrapy_dedup.audit.dump import DumpError
    from scrapy_dedup.audit.runner import MissingExtraError, run_report

    try:
        file_values = load_config_file(args.config) if args.config else {}
        cfg = build_config(file_values, {name: getattr(args, name) for name in _CONFIG_FLAGS})
    except AuditConfigError as exc:
        print(f"scrapy-dedup report: config error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    try:
        return run_report(args, cfg)
    except (DumpError, MissingExtraError) as exc:
        print(f"scrapy-dedup report: error: {exc}", file=sys.stderr)
        return EXIT_ERROR


def _run_mine_dust(args: argparse.Namespace) -> int:
    try:
        mining = importlib.import_module("scrapy_dedup.url.mining")
        cli_main = mining.cli_main
    except (ImportError, AttributeError) as exc:
        print("scrapy-dedup mine-dust: not available in this installation "
              f"(scrapy_dedup.url.mining.cli_main could not be loaded: {exc})", file=sys.stderr)
        return EXIT_ERROR
    return int(cli_main(list(args.args)) or 0)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["mine-dust"]:  # everything after the subcommand is the miner's own
        return _run_mine_dust(argparse.Namespace(args=argv[1:]))
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `scrapy-dedup report dump | head`
        return EXIT_OK
