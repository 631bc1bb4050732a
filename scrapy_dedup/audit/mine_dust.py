"""The work of ``scrapy-dedup mine-dust``: crawl logs and WARC files read into the DUST miner, the rules written.

The command line is parsed in :mod:`scrapy_dedup.cli`. The miner
(:mod:`scrapy_dedup.url.mining`) takes records and knows nothing of files: reading
them is done here, with the audit's own input readers (:func:`~.dump.open_input` tells
JSON Lines from WARC; :func:`~.warc.crawl_log_records` turns a WARC file's pages,
revisits and redirects into crawl-log records).
"""
from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any, BinaryIO, TextIO

from scrapy_dedup.audit.dump import open_input, read_lines
from scrapy_dedup.audit.records import DumpError
from scrapy_dedup.audit.warc import crawl_log_records
from scrapy_dedup.url.dust import RuleSet
from scrapy_dedup.url.mining import DustMiner, MiningConfig, MiningResult

__all__ = ["read_log", "mine_logs", "run_mine_dust"]


def read_log(miner: DustMiner, path: str) -> None:
    """Stream one crawl log (``-`` for stdin) into ``miner``; bad lines are counted, never fatal.

    JSON Lines, gzip-compressed or not, or a WARC file (``.warc``, ``.warc.gz``): told
    by the content, not the name. A WARC gives one record per page, revisit and
    redirect (``stats["lines"]``), its pages extracted by the miner's extraction policy.
    An input that cannot be opened or read raises ``DumpError`` with the reason.
    """
    with open_input(path, what="log") as source:
        if source.format == "warc":
            records = crawl_log_records(source, miner.stats, miner.config.extraction)
        else:
            records = _json_records(source.stream)
        for record in records:
            miner.stats["lines"] += 1
            miner.add_record(record)


def _json_records(stream: BinaryIO) -> Iterator[Any]:
    """The parsed lines of a JSON Lines log; None for a line that is not JSON (the miner counts it as bad)."""
    for _, raw in read_lines(stream):
        try:
            yield json.loads(raw.decode("utf-8", "replace"))
        except ValueError:
            yield None


def mine_logs(paths: Sequence[str], config: MiningConfig | None = None,
              existing: RuleSet | None = None) -> MiningResult:
    """Read every log of ``paths`` and mine them together."""
    miner = DustMiner(config)
    for path in paths:
        read_log(miner, path)
    return miner.mine(existing)


def run_mine_dust(args: Any, config: MiningConfig) -> int:
    """The ``mine-dust`` subcommand: read the logs, mine, print the summary, write the rules; 0, or 2 on bad input."""
    existing = None
    if args.merge:
        try:
            existing = RuleSet.load(args.merge)
        except ValueError as exc:
            print(f"scrapy-dedup mine-dust: {exc}", file=sys.stderr)
            return 2
    started = time.perf_counter()
    miner = DustMiner(config)
    for path in args.logs:
        try:
            read_log(miner, path)
        except OSError as exc:
            print(f"scrapy-dedup mine-dust: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        except DumpError as exc:  # says what is wrong: cannot open, truncated gzip, ...
            print(f"scrapy-dedup mine-dust: {path}: {exc}", file=sys.stderr)
            return 2
    result = miner.mine(existing)
    rules = existing.merged(result.rules) if existing is not None else result.rules
    rules.meta = {**result.rules.meta, "logs": list(args.logs), "lines": result.stats["lines"]}
    _summary(result, time.perf_counter() - started, args.verbose, sys.stderr)
    if args.output:
        rules.save(args.output)
        print(f"wrote {len(rules)} rule(s) for {len(rules.hosts)} host(s) to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(rules.dumps() + "\n")
    return 0


def _summary(result: MiningResult, seconds: float, verbose: bool, out: TextIO) -> None:
    s = result.stats
    print(f"read {s['lines']} line(s), {s['urls']} URL(s) in {seconds:.1f}s; skipped: {s['bad_lines']} bad, "
          f"{s['degenerate_pages']} degenerate, {s['lines_without_url'] + s['lines_without_content']} incomplete",
          file=out)
    if s["redirects"]:
        print(f"redirects: {s['redirects']}; {s['aliases']} alias(es) for the redirects no rule explains"
              + (f" ({s['aliases_over_limit']} over the limit left out)" if s["aliases_over_limit"] else ""),
              file=out)
    if verbose:  # per host: what was seen, every candidate examined and why it was kept or refused
        by_host: dict[str, list] = {}
        for validation in result.validations:
            by_host.setdefault(validation.host, []).append(validation)
        for host, report in result.hosts.items():
            for line in report.lines():
                print(line, file=out)
            for validation in by_host.get(host, []):
                print("  " + validation.line(), file=out)
        return
    for validation in result.validations:
        if validation.kept:
            print("  " + validation.line(), file=out)
    rejected = len(result.rejected())
    if rejected:
        print(f"  ({rejected} candidate(s) rejected; -v lists them with the reason, per host)", file=out)
