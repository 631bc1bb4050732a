"""The ``scrapy-dedup`` command (also ``python -m scrapy_dedup``).

Subcommands:

* ``report DUMP``: how duplicated is a scrape dump? Runs the crawl's content
  engine over a JSON Lines dump or a WARC file (:mod:`scrapy_dedup.audit`).
* ``mine-dust LOG``: DUST rules from a crawl log or a WARC file (:mod:`scrapy_dedup.url.mining`,
  read and written by :mod:`scrapy_dedup.audit.mine_dust`).

Here the command lines are parsed; the work is done in :mod:`scrapy_dedup.audit`.

Exit status: 0 success; 1 ``--fail-above`` exceeded (a quality gate, and nothing
else: CI must be able to tell "too redundant" from "broken"); 2 every error: usage or
config error, a dump that cannot be read, an output file that cannot be written, a bad
line under ``--strict``, and any unexpected exception. An error is one line on stderr
naming the file and the problem, never a traceback (``SCRAPY_DEDUP_DEBUG=1`` adds it).
"""
from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, Optional

from scrapy_dedup import __version__
from scrapy_dedup.audit.config import METHODS

__all__ = ["main", "build_parser", "build_mine_dust_parser", "mine_dust_main"]

EXIT_OK, EXIT_GATE, EXIT_ERROR = 0, 1, 2
#: set (to anything but "" or "0") to print the traceback of an unexpected error after its one-line message
DEBUG_ENV = "SCRAPY_DEDUP_DEBUG"


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


def _add_report_parser(sub: Any) -> None:
    p = sub.add_parser(
        "report", help="measure how duplicated a scrape dump is (JSON Lines or WARC, optionally .gz)",
        description="Measure exact and near duplicates in a JSON Lines dump (one page per line, with "
                    "'url' and 'html' or 'text') or a WARC file (.warc, .warc.gz), with the same engine "
                    "as the crawl.")
    p.add_argument("dump", help="JSON Lines or WARC file, optionally gzip-compressed (told by its content); "
                                "'-' reads stdin")
    p.add_argument("--config", metavar="FILE", help="YAML, JSON or TOML file of settings (flags override it)")
    g = p.add_argument_group("engine (defaults: the crawl's DEDUP_* defaults)")
    g.add_argument("--method", choices=METHODS, default=None,
                   help="simhash (the crawl's engine, default), minhash (MinHash LSH via datasketch) or "
                        "lshbloom (LSH bands in a Bloom filter: memory set by --lshbloom-memory-mb)")
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
    g.add_argument("--paragraphs", action="store_true", default=None,
                   help="also count repeated blocks (paragraph-level exact dedup): the block-level ratio beside "
                        "the page-level one")
    g.add_argument("--paragraphs-min-chars", type=int, default=None,
                   help="--paragraphs: blocks shorter than this once normalized are not counted (40)")
    g.add_argument("--paragraphs-bloom", action="store_true", default=None,
                   help="--paragraphs: keep the blocks' seen set in a Bloom filter (less memory, false repeats "
                        "at most 1e-6) instead of an exact set")
    g.add_argument("--num-perm", type=int, default=None, help="minhash: permutations (128)")
    g.add_argument("--jaccard-threshold", type=float, default=None,
                   help="minhash: estimated Jaccard similarity of near duplicates (0.8)")
    g.add_argument("--lsh-bands", type=int, default=None, help="minhash: LSH bands (with --lsh-rows)")
    g.add_argument("--lsh-rows", type=int, default=None, help="minhash: LSH rows per band (with --lsh-bands)")
    g.add_argument("--lshbloom-bands", type=int, default=None, help="lshbloom: bands (32)")
    g.add_argument("--lshbloom-rows", type=int, default=None, help="lshbloom: rows per band (8)")
    g.add_argument("--lshbloom-error-rate", type=float, default=None,
                   help="lshbloom: share of new pages wrongly flagged, at most (0.0001)")
    g.add_argument("--lshbloom-memory-mb", type=int, default=None,
                   help="lshbloom: megabytes of the Bloom filter, at most; a dump that can be read twice is "
                        "counted first and the filter sized for it (1024)")
    f = p.add_argument_group("input")
    f.add_argument("--url-field", default=None, help="record field of the URL (url)")
    f.add_argument("--html-field", default=None, help="record field of the HTML (html)")
    f.add_argument("--text-field", default=None, help="record field of plain text, used without HTML (text)")
    f.add_argument("--timestamp-field", default=None,
                   help="JSON Lines record field of the page's time (seconds or ISO 8601), for --representative "
                        "newest")
    f.add_argument("--strict", action="store_true", help="stop at the first bad line or record (exit status 2)")
    o = p.add_argument_group("output")
    o.add_argument("--json", action="store_true", help="print the numbers as JSON instead of text")
    o.add_argument("--clusters", metavar="FILE", help="JSONL: url, cluster, representative, distance, kind")
    o.add_argument("--pairs", metavar="FILE", help="JSONL: url_a (kept), url_b (flagged), distance, kind")
    o.add_argument("--all-pairs", action="store_true",
                   help="--pairs lists every pair within the threshold, not only each page's first match")
    o.add_argument("--html", metavar="FILE", help="self-contained HTML audit page")
    o.add_argument("--representative", choices=("first", "canonical", "newest"), default=None,
                   help="the member each cluster is named by in the outputs: first (the first in the dump), "
                        "canonical (default: no session or tracking parameters, fewest parameters, shortest, "
                        "https) or newest (latest --timestamp-field; a WARC's WARC-Date; else the dump's order)")
    o.add_argument("--sample", type=int, default=None, help="flagged pairs shown in the HTML page (25)")
    o.add_argument("--seed", type=int, default=None, help="seed of the sample (0)")
    o.add_argument("--fail-above", type=_ratio, metavar="RATIO",
                   help="exit status 1 when the redundant share of pages is above RATIO (e.g. 0.2 or 20%%)")
    o.add_argument("--progress", choices=("auto", "always", "never"), default="auto",
                   help="progress bar on stderr (auto: only when stderr is a terminal)")
    p.add_argument("--jobs", "-j", type=_positive_int, default=1,
                   help="worker processes parsing pages (1: in this process)")
    p.set_defaults(handler=_run_report)


def _add_mine_dust_parser(sub: Any) -> None:
    """``mine-dust`` in the list of subcommands; its arguments are :func:`build_mine_dust_parser`'s."""
    p = sub.add_parser("mine-dust", help="mine DUST rules from a crawl log (DEDUP_LOG_FILE)", add_help=False)
    p.add_argument("args", nargs=argparse.REMAINDER)
    p.set_defaults(handler=lambda args: mine_dust_main(args.args))


def build_mine_dust_parser() -> argparse.ArgumentParser:
    """The arguments of ``scrapy-dedup mine-dust``, with :class:`~scrapy_dedup.url.mining.MiningConfig`'s defaults."""
    from scrapy_dedup.url.mining import MiningConfig

    d = MiningConfig()
    p = argparse.ArgumentParser(
        prog="scrapy-dedup mine-dust",
        description="Mine per-host DUST rules (different URLs, same content) from crawl logs: the "
                    "DEDUP_LOG_FILE format, any JSON Lines with 'url' and a content hash, 'text' or 'html', "
                    "or WARC files (.warc, .warc.gz: pages, revisits and redirects).")
    p.add_argument("logs", nargs="+", metavar="LOG",
                   help="JSON Lines crawl log(s) or WARC file(s), gzip-compressed or not; '-' is stdin")
    p.add_argument("-o", "--output", metavar="RULES.json", help="write the rules file here (default: stdout)")
    p.add_argument("--merge", metavar="RULES.json",
                   help="start from this rules file: its rules are applied first and kept in the output")
    p.add_argument("--min-support", type=int, default=d.min_support,
                   help=f"distinct pages that must agree with a rule ({d.min_support})")
    p.add_argument("--max-violation-rate", type=float, default=d.max_violation_rate,
                   help=f"reject a rule above this share of pairs it would wrongly merge ({d.max_violation_rate})")
    p.add_argument("--max-cluster-urls", type=int, default=d.max_cluster_urls,
                   help=f"a page behind more URLs than this is a soft 404 / error page: no support "
                        f"({d.max_cluster_urls})")
    p.add_argument("--hamming", type=int, default=d.hamming,
                   help=f"near duplicates: simhash within this many bits; 0 = exact only ({d.hamming})")
    p.add_argument("--min-words", type=int, default=d.min_words,
                   help=f"ignore pages with fewer words ({d.min_words})")
    p.add_argument("--max-aliases", type=int, default=d.max_aliases,
                   help=f"per host, redirects no rule explains kept in the alias table; 0 = none ({d.max_aliases})")
    p.add_argument("--no-content-aliases", dest="content_aliases", action="store_false",
                   help="no alias for a page the rules leave under exactly two keys (only redirects give aliases)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="per host: what was seen, every candidate examined and why it was kept or refused")
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scrapy-dedup",
                                     description="Duplicate URLs and pages of Scrapy crawls: audits and tools.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    _add_report_parser(sub)
    _add_mine_dust_parser(sub)
    return parser


def _run_report(args: argparse.Namespace) -> int:
    from scrapy_dedup.audit.config import KEYS, AuditConfigError, build_config, load_config_file
    from scrapy_dedup.audit.dump import DumpError
    from scrapy_dedup.audit.output import OutputError, dump_name
    from scrapy_dedup.audit.methods import MissingExtraError
    from scrapy_dedup.audit.runner import run_report

    try:
        file_values = load_config_file(args.config) if args.config else {}
        # the flags named as config keys override the file (None: not given)
        cfg = build_config(file_values, {name: value for name, value in vars(args).items() if name in KEYS})
    except AuditConfigError as exc:
        _error("report", f"config error: {exc}")
        return EXIT_ERROR
    try:
        return run_report(args, cfg)
    except DumpError as exc:  # its message says what is wrong; the file is the dump
        _error("report", f"{dump_name(args.dump)}: {exc}")
    except (OutputError, MissingExtraError) as exc:  # these name their file or package
        _error("report", f"error: {exc}")
    return EXIT_ERROR


def mine_dust_main(argv: Sequence[str]) -> int:
    """``scrapy-dedup mine-dust LOG [LOG...] -o rules.json``; exit 0 on success, 2 on bad input."""
    from dataclasses import fields

    from scrapy_dedup.audit.mine_dust import run_mine_dust
    from scrapy_dedup.url.mining import MiningConfig

    try:
        args = build_mine_dust_parser().parse_args(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0) if exc.code in (0, None) else EXIT_ERROR
    try:
        config = MiningConfig(**{f.name: getattr(args, f.name) for f in fields(MiningConfig) if hasattr(args, f.name)})
    except ValueError as exc:
        print(f"scrapy-dedup mine-dust: {exc}", file=sys.stderr)
        return EXIT_ERROR
    return run_mine_dust(args, config)


def _error(command: str, message: str) -> None:
    """The one line (or a line and its hints) an error ends with, on stderr, whatever its code points."""
    from scrapy_dedup.audit.output import write_line

    try:
        write_line(f"scrapy-dedup {command}: {message}", sys.stderr)
    except (OSError, ValueError):  # stderr closed: the exit status still tells
        pass


def _guarded(command: str, run: Callable[[], int]) -> int:
    """Run a subcommand: its own exit status, or 2 and one line on stderr for anything that escapes it.

    Exit status 1 is the ``--fail-above`` gate's alone, and a traceback's exit status is 1,
    so no exception may leave ``main``: CI would read a crash as "too redundant".
    """
    from scrapy_dedup.audit.output import display_path, silence_stdout

    try:
        return run()
    except KeyboardInterrupt:
        _error(command, "interrupted")
        return 130
    except BrokenPipeError:  # `scrapy-dedup mine-dust log | head`: the reader left, nothing is wrong
        silence_stdout()
        return EXIT_OK
    except Exception as exc:
        if isinstance(exc, OSError) and exc.filename is not None:  # names its file: not our bug
            _error(command, f"error: {display_path(exc.filename)}: {exc.strerror or exc}")
        else:
            _error(command, f"internal error: {type(exc).__name__}: {exc} "
                            f"(set {DEBUG_ENV}=1 to see the traceback)")
        if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
            traceback.print_exc()
        return EXIT_ERROR


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the console script; returns the exit status (0, 1 for the gate, 2 for any error)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["mine-dust"]:  # everything after the subcommand is the miner's own
        return _guarded("mine-dust", lambda: mine_dust_main(argv[1:]))
    parser = build_parser()
    args = parser.parse_args(argv)
    return _guarded(args.command, lambda: args.handler(args))
