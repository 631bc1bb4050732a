"""``python -m demosite serve [--port N]`` or ``python -m demosite truth [--write | --check]``."""
from __future__ import annotations

import argparse
import sys
import time

from .catalog import SEED
from .server import SiteServer
from .truth import TRUTH_FILE, crawl_truth, dumps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demosite", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the example site on 127.0.0.1 until interrupted")
    serve.add_argument("--port", type=int, default=8080, help="port on 127.0.0.1 (0: a free one); default 8080")
    serve.add_argument("--seed", type=int, default=SEED)
    serve.add_argument("--watch-stdin", action="store_true", help="stop when standard input closes (for a parent)")
    truth = sub.add_parser("truth", help="print the truth file (every reachable URL and its content)")
    truth.add_argument("--seed", type=int, default=SEED)
    mode = truth.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help=f"write it to {TRUTH_FILE.name}")
    mode.add_argument("--check", action="store_true", help=f"exit 1 if {TRUTH_FILE.name} is out of date")
    args = parser.parse_args(argv)

    if args.command == "serve":
        with SiteServer(args.port, seed=args.seed) as server:
            print(f"serving the example site on 127.0.0.1:{server.port}; hosts *.test resolve there in the "
                  f"example project (scrapy crawl store -a port={server.port}); Ctrl-C stops", flush=True)
            try:
                if args.watch_stdin:
                    sys.stdin.read()  # returns at end of file: the parent closed the pipe or exited
                else:
                    while True:
                        time.sleep(3600)
            except KeyboardInterrupt:
                pass
            return 0
    text = dumps(crawl_truth(args.seed))
    if args.write:
        TRUTH_FILE.write_text(text, encoding="utf-8")
        print(f"wrote {TRUTH_FILE}")
    elif args.check:
        if not TRUTH_FILE.exists() or TRUTH_FILE.read_text(encoding="utf-8") != text:
            print(f"{TRUTH_FILE} is out of date: run python -m demosite truth --write", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
