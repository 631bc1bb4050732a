"""Field benchmark: real web software from Debian 12 packages on loopback, crawled by a link-following spider.

    python benchmarks/bench_field.py --setup              # install (apt, as root) and fill the applications
    python benchmarks/bench_field.py                      # set-up if needed, then crawl every application
    python benchmarks/bench_field.py --apps dokuwiki --pages 30 --depth 2 --json out.json   # a small run

Applications, text and ground truth: see ``benchmarks/field_apps.py`` (MediaWiki 1.39, DokuWiki
2022-07-31a, Fossil 2.21, cgit 1.2; about 200 pages of Python's library reference each, one page in three
saved twice more). Each application is crawled, one after the other, by these contenders, each a real
``scrapy runspider`` process (``benchmarks/field_spider.py``) so its CPU time is its own:

``scrapy``   Scrapy's defaults, no add-on
``addon``    ``ADDONS = {"scrapy_dedup.Addon": 0}``, with ``DEDUP_LOG_FILE`` (the first pass of ``mined``)
``learn``    the add-on with ``DEDUP_DUST_LEARN = True``
``mined``    ``scrapy-dedup mine-dust`` on the ``addon`` crawl's log, then a crawl with ``DEDUP_DUST_RULES``

Figures per application and contender (ground truth: which resource each response renders, read from the
application's own data): fetches; fetch waste (responses that rendered a resource already fetched in the
same crawl); content pages reached, and reached within the first N fetches (N = the largest fetch count at
which Scrapy's defaults have reached at most 2/3 of the content pages, or ``--cap``); content pages with an
item; content pages whose item is kept under the page's own URL; duplicate items of content pages (an item
kept of a view of the page, ``App.view_of``: an old revision, a diff that renders the page whole, counts
as one); items lost of distinct non-content resources (history lists, source views, diffs of the change
alone, listings: fetched with status 200 and HTML, and no item of that resource kept); wall and CPU time
of the crawl process. docs/benchmarks.md says where the line between a view and a distinct resource runs.
The reach within N fetches is read from the order of the full crawl's responses (the same crawl stopped
after N responses).
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from collections import Counter, defaultdict
from pathlib import Path
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import field_apps  # noqa: E402

CONTENDERS = ("scrapy", "addon", "learn", "mined")
ADDON = {"ADDONS": {"scrapy_dedup.Addon": 0}}


def run_crawl(start: str, settings: dict, workdir: Path, name: str, timeout: float) -> dict:
    """One ``scrapy runspider`` process; its wall and CPU time, its records, items and stats."""
    record, items, stats, log = (workdir / f"{name}.{ext}" for ext in ("records.jsonl", "items.jsonl",
                                                                       "stats.json", "log"))
    settings = {"LOG_LEVEL": "INFO", "LOG_FILE": str(log), "TELNETCONSOLE_ENABLED": False,
                "FEEDS": {str(items): {"format": "jsonlines"}}, **settings}
    argv = [sys.executable, "-m", "scrapy", "runspider", str(HERE / "field_spider.py"), "-a", f"start={start}",
            "-a", f"record={record}", "-a", f"stats={stats}"]
    env = {**os.environ, "FIELD_SETTINGS": json.dumps(settings), "PYTHONPATH": str(HERE.parent)}
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise RuntimeError(f"bench_field: the {name} crawl ran longer than {timeout:.0f}s") from None
    except BaseException:  # KeyboardInterrupt included: the crawl this run started does not outlive it
        proc.kill()
        proc.wait()
        raise
    wall = time.perf_counter() - started
    # the child's CPU: its rusage is collected by the wait above (children of this process, one at a time)
    return {"wall": wall, "returncode": proc.returncode, "stderr": stderr.decode(errors="replace")[-2000:],
            "record": record, "items": items, "stats": stats, "log": log}


def read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def path_query(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def score(app: field_apps.App, records: list[dict], items: list[dict]) -> dict:
    """The figures of one crawl, by the application's ground truth."""
    content = app.content_keys()
    key_of: dict[str, tuple[str, str]] = {}
    order: list[str | None] = []  # per response: the content key it reached first, in fetch order
    seen: set[str] = set()
    wasted = redirects = errors = 0
    noncontent: dict[str, str] = {}  # key -> view, for 200 HTML responses of non-content resources
    views: set[str] = set()  # views fetched (old revisions, diffs rendering the page, cgit trees at older commits)
    examples: dict[str, str] = {}
    for rec in records:
        if rec["url"].startswith("data:"):  # the item keeper's release requests: no fetch
            continue
        status = rec["status"]
        if 300 <= status < 400:
            redirects += 1
            order.append(None)
            continue
        body = zlib.decompress(base64.b64decode(rec["body"])).decode("utf-8", "replace")
        view, key = app.resource(rec["url"], status, rec["ctype"], body)
        if status >= 400:
            errors += 1
            key = f"{status}:{key}"
        key_of[rec["url"]] = (view, key)
        if key in seen:
            wasted += 1
        seen.add(key)
        examples.setdefault(key, rec["url"])
        order.append(key if key in content else None)
        page = app.view_of(key) if status < 300 else None
        if page is not None:
            views.add(key)
        elif status < 300 and "html" in rec["ctype"] and key not in content:
            noncontent[key] = view
    items_of: dict[str, list[str]] = defaultdict(list)
    unmapped = 0
    for item in items:
        vk = key_of.get(item["url"])
        if vk is None:
            unmapped += 1
            continue
        items_of[app.view_of(vk[1]) or vk[1]].append(item["url"])  # a view's item is its page's
    reached = content & seen
    with_item = {k for k in reached if items_of.get(k)}
    own = {k for k in with_item if any(path_query(u) in app.own_urls(k) for u in items_of[k])}
    dup_items = sum(len(items_of[k]) - 1 for k in with_item)
    lost = {k: v for k, v in noncontent.items() if not items_of.get(k)}
    reached_by: list[int] = []
    got: set[str] = set()
    for k in order:
        if k:
            got.add(k)
        reached_by.append(len(got))
    return {
        "fetches": len(records), "wasted": wasted, "waste": wasted / max(1, len(records)), "redirects": redirects,
        "errors": errors, "content_pages": len(content), "reached": len(reached), "with_item": len(with_item),
        "own_url": len(own), "duplicate_items": dup_items, "items": len(items), "unmapped_items": unmapped,
        "views": len(views), "noncontent": len(noncontent), "noncontent_lost": len(lost),
        "noncontent_duplicate_items": sum(len(items_of[k]) - 1 for k in noncontent if items_of.get(k)),
        "noncontent_by_view": dict(Counter(v.split(":")[0] for v in noncontent.values()).most_common()),
        "lost_by_view": dict(Counter(v.split(":")[0] for v in lost.values()).most_common()),
        "lost_examples": sorted(examples[k] for k in lost)[:40],
        "no_item_examples": sorted(examples[k] for k in reached - with_item)[:20],
        "not_own_examples": sorted(u for k in with_item - own for u in items_of[k])[:20],
        "reached_by": reached_by,
        "resources": sorted(k for k in seen if not k[:1].isdigit()),  # the 2xx resources fetched
    }


def cap_for(reached_by: list[int], content: int) -> int:
    """The largest fetch count at which ``reached_by`` is at most 2/3 of ``content``."""
    cap = 0
    for n, r in enumerate(reached_by, 1):
        if r * 3 <= content * 2:
            cap = n
    return cap


def crawl_app(app: field_apps.App, contenders: tuple[str, ...], depth: int, concurrency: int, timeout: float,
              keep: Path | None) -> dict:
    servers = field_apps.Servers()
    out: dict = {"app": app.name, "pages": len(app.pages), "depth": depth, "contenders": {}}
    tmp = Path(tempfile.mkdtemp(prefix=f"field-{app.name}-"))
    workdir = keep / app.name if keep else tmp
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        start = app.start(servers)
        base = {"DEPTH_LIMIT": depth, "CONCURRENT_REQUESTS": concurrency}
        log = workdir / "addon-crawl.jsonl"
        rules = workdir / "rules.json"
        for stale in (log, rules):
            stale.unlink(missing_ok=True)
        plan = {"scrapy": base, "addon": {**base, **ADDON, "DEDUP_LOG_FILE": str(log)},
                "learn": {**base, **ADDON, "DEDUP_DUST_LEARN": True},
                "mined": {**base, **ADDON, "DEDUP_DUST_RULES": str(rules)}}
        for name in CONTENDERS:
            if name not in contenders or (name == "mined" and "addon" not in contenders):
                continue
            if name == "mined":
                t0 = time.perf_counter()
                mined = subprocess.run([sys.executable, "-m", "scrapy_dedup", "mine-dust", str(log), "-o",
                                        str(rules)], capture_output=True, text=True, cwd=HERE.parent)
                out["mine_dust"] = {"returncode": mined.returncode, "seconds": time.perf_counter() - t0,
                                    "stderr_tail": mined.stderr.strip().splitlines()[-8:]}
                if mined.returncode or not rules.exists():
                    continue
                out["mine_dust"]["rules"] = [r for rs in json.loads(rules.read_text()).get("hosts", {}).values()
                                             for r in rs]
            before = os.times()
            run = run_crawl(start, plan[name], workdir, name, timeout)
            after = os.times()
            if run["returncode"]:
                raise RuntimeError(f"bench_field: the {name} crawl of {app.name} exited {run['returncode']}:\n"
                                   + run["stderr"])
            figures = score(app, read_jsonl(run["record"]), read_jsonl(run["items"]))
            if not figures["fetches"]:
                raise RuntimeError(f"bench_field: the {name} crawl of {app.name} got no response from {start}; "
                                   f"its log: {run['log']}")
            stats = json.loads(run["stats"].read_text()) if run["stats"].exists() else {}
            figures.update(wall=run["wall"], cpu=(after.children_user - before.children_user)
                           + (after.children_system - before.children_system),
                           errors_logged=stats.get("log_count/ERROR", 0),
                           dedup_stats={k: v for k, v in stats.items() if k.startswith("dedup/")})
            out["contenders"][name] = figures
            print(f"  {app.name} {name}: {figures['fetches']} fetches, {figures['wall']:.0f}s", file=sys.stderr)
    finally:
        servers.stop()
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def _pct(a: float, b: float) -> str:
    return f"{100 * a / b:.1f}%" if b else "-"


def reach_at(figures: dict, cap: int) -> int:
    """Content pages reached within the first ``cap`` fetches (all of them when the crawl made fewer)."""
    reached_by = figures["reached_by"]
    return reached_by[min(cap, len(reached_by)) - 1] if cap and reached_by else 0


def print_app(result: dict, cap: int | None) -> None:
    c = result["contenders"]
    content = next(iter(c.values()))["content_pages"] if c else 0
    if cap is None:
        cap = cap_for(c["scrapy"]["reached_by"], content) if "scrapy" in c else 0
    result["cap"] = cap
    print(f"\n{result['app']}: {result['pages']} imported pages, {content} content pages, depth {result['depth']}; "
          f"cap = {cap} fetches")
    rows = [("fetches", lambda r: str(r["fetches"])),
            ("fetch waste", lambda r: _pct(r["wasted"], r["fetches"])),
            ("redirects / errors", lambda r: f"{r['redirects']} / {r['errors']}"),
            ("content reached", lambda r: f"{r['reached']} ({_pct(r['reached'], content)})"),
            (f"content reached in {cap} fetches", lambda r: f"{reach_at(r, cap)} ({_pct(reach_at(r, cap), content)})"),
            ("content pages with an item", lambda r: f"{r['with_item']} ({_pct(r['with_item'], r['reached'])})"),
            ("  under the page's own URL", lambda r: f"{r['own_url']} ({_pct(r['own_url'], r['reached'])})"),
            ("duplicate items of content",
             lambda r: f"{r['duplicate_items']} ({_pct(r['duplicate_items'], r['reached'])})"),
            ("views of a page or tree (items folded)", lambda r: str(r.get("views", "-"))),
            ("non-content resources", lambda r: str(r["noncontent"])),
            ("  their duplicate items", lambda r: str(r["noncontent_duplicate_items"])),
            ("  their items lost", lambda r: f"{r['noncontent_lost']} ({_pct(r['noncontent_lost'], r['noncontent'])})"),
            ("wall s", lambda r: f"{r['wall']:.0f}"),
            ("CPU s", lambda r: f"{r['cpu']:.0f}")]
    names = [n for n in CONTENDERS if n in c]
    print("| figure | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for label, cell in rows:
        print(f"| {label} | " + " | ".join(cell(c[n]) for n in names) + " |")
    if "scrapy" in c:
        base = c["scrapy"]
        for label, k in (("fetches / scrapy", "fetches"), ("wall / scrapy", "wall"), ("CPU / scrapy", "cpu")):
            print(f"| {label} | " + " | ".join(f"{c[n][k] / base[k]:.2f}" if base[k] else "-" for n in names) + " |")
    for n in names:
        r = c[n]
        if r["lost_by_view"] or r["reached"] - r["own_url"] or r["errors_logged"] or r["unmapped_items"]:
            print(f"  {n}: lost non-content by view {r['lost_by_view']}; content pages without an item "
                  f"{r['reached'] - r['with_item']}, not under own URL {r['with_item'] - r['own_url']}; "
                  f"items with an URL not fetched {r['unmapped_items']}; errors logged {r['errors_logged']}")
    for what, met, figures in acceptance(result):
        print(f"  {'met    ' if met else 'NOT MET'}  {what}: {figures}")
    md = result.get("mine_dust")
    if md:
        rules = md.get("rules")
        print(f"  mine-dust: exit {md['returncode']}, {md['seconds']:.1f}s, "
              + (f"{len(rules)} rule(s): " + "; ".join(
                  " ".join(f"{k}={v}" for k, v in rule.items() if k not in ("examples", "support", "violations",
                                                                            "pages")) for rule in rules[:10])
                 if rules is not None else "no rules file"))
    sys.stdout.flush()


def rescore(result: dict, keep: Path, state: Path) -> None:
    """The figures of a former run computed again from its kept records and items (the same application
    state), its times and stats kept."""
    app = field_apps.make_app(result["app"], state, field_apps.load_pages(result["pages"]))
    for name, old in result["contenders"].items():
        figures = score(app, read_jsonl(keep / app.name / f"{name}.records.jsonl"),
                        read_jsonl(keep / app.name / f"{name}.items.jsonl"))
        figures.update({k: old[k] for k in ("wall", "cpu", "errors_logged", "dedup_stats")})
        result["contenders"][name] = figures


def acceptance(result: dict) -> list[tuple[str, bool, str]]:
    """The field set's acceptance lines of the real-software issue (the add-on at defaults) and of the DUST
    issue (mined rules, one learning crawl), each (what, met, the figures)."""
    c = result["contenders"]
    lines: list[tuple[str, bool, str]] = []
    cap = result.get("cap", 0)
    addon, scrapy = c.get("addon"), c.get("scrapy")
    if addon:
        r = addon["reached"]
        lines += [
            ("add-on: every content page keeps an item", addon["with_item"] == r, f"{addon['with_item']}/{r}"),
            ("add-on: >= 99% under the page's own URL", addon["own_url"] >= 0.99 * r, f"{addon['own_url']}/{r}"),
            ("add-on: no item of a distinct resource lost", addon["noncontent_lost"] == 0,
             f"{addon['noncontent_lost']} lost"),
            ("add-on: duplicate items of content <= 1%", addon["duplicate_items"] <= 0.01 * r,
             f"{addon['duplicate_items']}/{r}")]
    if scrapy:
        for name, share in (("mined", 0.5), ("learn", 0.75)):
            if name in c:
                lines.append((f"{name}: fetch waste <= {share:g} x Scrapy's",
                              c[name]["waste"] <= share * scrapy["waste"],
                              f"{100 * c[name]['waste']:.1f}% vs {100 * scrapy['waste']:.1f}%"))
        for name in ("mined", "learn"):
            if name in c:
                missed = sorted(set(scrapy["resources"]) - set(c[name]["resources"])) if "resources" in scrapy else []
                # a rule that merges two resources leaves one unfetched; so does another crawl order at the depth
                # limit (a URL first met at the limit is not followed): read the examples
                lines.append((f"{name}: fetches every resource Scrapy fetched", not missed,
                              f"{len(missed)} not fetched" + (f", e.g. {', '.join(missed[:3])}" if missed else "")))
        if "learn" in c:
            got = reach_at(c["learn"], cap)
            lines.append((f"learn: 100% of content within {cap} fetches", got == c["learn"]["content_pages"],
                          f"{got}/{c['learn']['content_pages']}"))
    for name in ("mined", "learn"):
        if name in c and addon:
            lines.append((f"{name}: no duplicate item added over the add-on's",
                          c[name]["duplicate_items"] <= addon["duplicate_items"],
                          f"{c[name]['duplicate_items']} vs {addon['duplicate_items']}"))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--apps", default=",".join(field_apps.APPS), help="comma-separated: "
                        + ", ".join(field_apps.APPS))
    parser.add_argument("--contenders", default=",".join(CONTENDERS), help="comma-separated (mined needs addon)")
    parser.add_argument("--pages", type=int, default=60,
                        help="pages imported into each application (200 for the big run; 60 keeps a run of the "
                             "four applications near 12 minutes on two cores)")
    parser.add_argument("--depth", type=int, default=2, help="DEPTH_LIMIT of every crawl")
    parser.add_argument("--concurrency", type=int, default=8, help="CONCURRENT_REQUESTS")
    parser.add_argument("--cap", type=int, default=None, help="fetch cap for the reach figure (default: the "
                        "largest at which Scrapy's defaults reach at most 2/3 of the content pages)")
    parser.add_argument("--state", type=Path, default=field_apps.default_state(),
                        help="where the applications' data lives (kept between runs)")
    parser.add_argument("--setup", action="store_true", help="only install and fill the applications")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per crawl before it counts as failed")
    parser.add_argument("--json", type=Path, help="write every figure as JSON")
    parser.add_argument("--keep", type=Path, help="keep the crawls' records, items, logs and rules under DIR/app/")
    parser.add_argument("--from-json", type=Path, help="print the tables of a former run's --json, crawl nothing; "
                        "with --keep (that run's) the figures are computed again from its records")
    args = parser.parse_args()
    if args.from_json:
        results = json.loads(args.from_json.read_text())
        for result in results:
            if args.keep:
                rescore(result, args.keep, args.state)
            print_app(result, args.cap)
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))
        return
    apps = [a for a in args.apps.split(",") if a]
    if set(apps) - set(field_apps.APPS):
        parser.error(f"--apps: one or more of {', '.join(field_apps.APPS)}")
    contenders = tuple(c for c in args.contenders.split(",") if c)
    if set(contenders) - set(CONTENDERS):
        parser.error(f"--contenders: one or more of {', '.join(CONTENDERS)}")
    field_apps.ensure_packages(apps)
    # a run ended by SIGTERM (a timeout, a CI job cancelled) stops its servers too: the finally clauses run
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results = []
    for app in field_apps.iter_apps(apps, args.state, args.pages):
        t0 = time.perf_counter()
        app.setup()
        print(f"{app.name}: set up in {time.perf_counter() - t0:.1f}s ({app.state})", file=sys.stderr)
        if args.setup:
            continue
        result = crawl_app(app, contenders, args.depth, args.concurrency, args.timeout, args.keep)
        print_app(result, args.cap)
        results.append(result)
    if args.json and not args.setup:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
