"""DUST: crawls of generated DUST sites (waste, recall, duplicate items); mining time and memory on a
generated crawl log; canonicalization cost with 100 rules on the host.

    python benchmarks/bench_dust.py --sites-only          # 20 generated sites, held-out seeds 1000..1019
    python benchmarks/bench_dust.py --sites-only --seeds tuning   # the tuning seeds 0..19
    python benchmarks/bench_dust.py --sites-only --quick  # 2 small sites (the smoke test runs this)
    python benchmarks/bench_dust.py --sites-only --seeds 19 --contenders learn --repeat 30 --shuffle-links
                                                          # one contender again and again, in varied crawl orders
    python benchmarks/bench_dust.py --no-sites            # mining: 1,000,000-line log; 100,000 URLs canonicalized
    python benchmarks/bench_dust.py --no-sites --quick    # a few seconds (the smoke test runs this)
    python benchmarks/bench_dust.py --canonicalize-only   # only the canonicalization figure (no log, no mining)

**Generated sites** (``tests/dustgen.py``: real Debian documentation pages under a
randomized grammar of DUST URL forms and traps, with per-URL ground truth). Each
site is crawled, side by side in one run, by a spider that follows every link:

``scrapy``   Scrapy's defaults, no add-on
``addon``    the add-on (``ADDONS``), no DUST rules; its crawl log is written
``mined``    ``scrapy-dedup mine-dust`` on the ``addon`` crawl's log, then a second
             crawl with ``DEDUP_DUST_RULES``
``learn``    one crawl with ``DEDUP_DUST_LEARN = True``

Reported per site and aggregated (median, worst): waste (share of fetches that
brought no new page: another URL of a page already fetched, a redirect hop, an
error), requests per distinct page, page recall (distinct pages fetched / pages
reachable from the home page), duplicate items; per URL form and per trap.

**Seeds.** ``tuning`` = 0..19 may be used while developing the miner and the
learner; ``report`` = 1000..1019 (the default) are held out: look at their
figures only to report them, never to tune against them.

**Mining** (``--no-sites``): the log (seeded, deterministic) looks like a
DEDUP_LOG_FILE of a multi-site crawl: 40 hosts, pages reached through
site-specific DUST (``?id=N`` vs ``/N``, ``print=1``, ``sid=`` session numbers,
``.htm``/``.html``, an alias directory) and through distinct listing pages
(``page=N``, ``category=C``) that must not become rules. About 40% of lines are
DUST variants of a page already in the log. Mining runs in a child process so
its peak memory (ru_maxrss) is its own; the child's baseline (interpreter +
imports) is printed apart.

There is no peer library that mines DUST rules; the canonicalization figure is
ours with 100 active rules on the host against ours with none, on the same URLs
(target: ratio under 1.5).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

HOSTS = 40

#: seeds of the generated sites. TUNING may be looked at while developing the miner and the learner;
#: REPORT is held out: its figures are reported, never tuned against (docs/benchmarks.md).
TUNING_SEEDS = tuple(range(0, 20))
REPORT_SEEDS = tuple(range(1000, 1020))
CONTENDERS = ("scrapy", "addon", "mined", "learn")


def generate_log(path: str, lines: int, seed: int = 2007) -> dict:
    """Write ``lines`` crawl-log lines; returns counts of what was written."""
    rng = random.Random(seed)
    written = variants = 0
    pages_per_host = max(10, lines // HOSTS // 2)
    with open(path, "w", encoding="utf-8") as f:
        while written < lines:
            host = f"site{rng.randrange(HOSTS)}.test"
            page = rng.randrange(pages_per_host)
            fp = random.Random(f"{host}/{page}").getrandbits(64)
            kind = page % 5
            if kind == 0:
                forms = [f"/story?id={page}", f"/story/{page}", f"/story/{page}?print=1",
                         f"/story?id={page}&sid=00{rng.randrange(100, 999)}"]
            elif kind == 1:
                forms = [f"/docs/p{page}.htm", f"/docs/p{page}.html"]
            elif kind == 2:
                forms = [f"/~staff/u{page}", f"/people/staff/u{page}"]
            elif kind == 3:
                forms = [f"/list?page={page}", f"/list?page={page}&sid=00{rng.randrange(100, 999)}"]
            else:
                forms = [f"/shop?category=c{page}", f"/shop?category=c{page}&print=1"]
            form = rng.choice(forms)
            variants += form != forms[0]
            chrome = 0b1001 if "print=1" in form else 0
            record = {"request_url": f"http://{host}{form}", "url": f"http://{host}{form}",
                      "exact_hash": format(fp ^ chrome, "032x"), "simhash": format(fp ^ chrome, "016x"),
                      "words": 400, "kind": "unique"}
            f.write(json.dumps(record) + "\n")
            written += 1
    return {"lines": written, "variants": variants}


def mine_child(path: str) -> None:
    """Child process: mine ``path`` and print timing and peak memory as JSON."""
    from scrapy_dedup.audit.mine_dust import read_log
    from scrapy_dedup.url.mining import DustMiner

    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    miner = DustMiner()
    read_log(miner, path)
    read = time.perf_counter() - started
    result = miner.mine()
    total = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    hosts_ok = sum(1 for rules in result.rules.hosts.values()
                   if {r.kind for r in rules} >= {"drop_param", "query_to_path", "substitute"})
    traps = sum(1 for rules in result.rules.hosts.values() for r in rules
                if r.kind == "drop_param" and r.param in ("page", "category"))
    print(json.dumps({"read_s": read, "total_s": total, "baseline_kib": baseline, "peak_kib": peak,
                      "urls": miner.stats["urls"], "rules": len(result.rules), "hosts_with_rules": hosts_ok,
                      "trap_rules": traps}))


def dust_rules_for(host: str, count: int = 100):
    """``count`` rules of every kind on ``host`` (as many as a busy site could carry)."""
    from scrapy_dedup.url.dust import DustRule, RuleSet

    rules = []
    for i in range(count):
        k = i % 10
        if k < 4:
            rules.append(DustRule("drop_param", param=f"junk{i}", prefix="/" if i % 3 else f"/s{i}/"))
        elif k < 6:
            rules.append(DustRule("default_param", param=f"opt{i}", value="1"))
        elif k < 8:
            rules.append(DustRule("query_to_path", path=f"/item{i}", param="id", value="digits",
                                  to=f"/item{i}/{{value}}"))
        elif k == 8:
            rules.append(DustRule("substitute", anchor="prefix", from_=f"/~alias{i}/", to=f"/real{i}/"))
        else:
            rules.append(DustRule("substitute", anchor="suffix", from_=f".h{i}", to=f".html{i}"))
    rules[-1] = DustRule("drop_segment", shape="(S(<alnum:24>))")
    return RuleSet({host: rules})


def urls_for(host: str, count: int, seed: int = 5) -> list[str]:
    rng = random.Random(seed)
    words = ["news", "story", "item3", "docs", "about", "shop", "list", "a", "b2"]
    params = ["id", "page", "q", "sort", "junk4", "opt5", "lang", "utm_source"]
    urls = []
    for _ in range(count):
        path = "/" + "/".join(rng.choice(words) for _ in range(rng.randint(1, 4)))
        if rng.random() < 0.2:
            path = f"/item{rng.choice((6, 7, 16))}"
        query = "&".join(f"{rng.choice(params)}={rng.randrange(100)}" for _ in range(rng.randint(0, 4)))
        urls.append(f"http://{host}{path}{'?' + query if query else ''}")
    return urls


def time_interleaved(contenders: dict, urls_of: dict, repeat: int,
                     rounds: list[dict[str, float]] | None = None) -> dict[str, float]:
    """Best-of-``repeat`` CPU microseconds per URL, the contenders interleaved in every round (a shared,
    noisy machine then slows them alike instead of skewing the ratio); ``rounds`` receives each
    round's figures (for ratios within one round)."""
    best = {name: float("inf") for name in contenders}
    for _ in range(repeat):
        this_round = {}
        for name, fn in contenders.items():
            urls = urls_of[name]
            gc.collect()
            started = time.process_time()  # CPU time: other processes on a shared machine do not count
            for url in urls:
                fn(url)
            elapsed = time.process_time() - started
            best[name] = min(best[name], elapsed)
            this_round[name] = elapsed / len(urls) * 1e6
        if rounds is not None:
            rounds.append(this_round)
    return {name: t / len(urls_of[name]) * 1e6 for name, t in best.items()}


def parse_seeds(spec: str) -> list[int]:
    """``report``, ``tuning``, or a list of seeds and ranges: ``0-4,7``."""
    if spec == "report":
        return list(REPORT_SEEDS)
    if spec == "tuning":
        return list(TUNING_SEEDS)
    seeds: list[int] = []
    for part in spec.split(","):
        a, _, b = part.partition("-")
        seeds += list(range(int(a), int(b) + 1)) if b else [int(a)]
    return seeds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for the smoke tests")
    parser.add_argument("--lines", type=int, default=None, help="log lines (default 1,000,000; quick 20,000)")
    parser.add_argument("--canonicalize-only", action="store_true",
                        help="skip the log and the mining: only the canonicalization cost with 100 rules")
    parser.add_argument("--sites-only", action="store_true", help="only the crawls of generated DUST sites")
    parser.add_argument("--no-sites", action="store_true", help="skip the crawls of generated DUST sites")
    parser.add_argument("--seeds", default=None,
                        help="generated sites: 'report' (1000..1019, held out; the default), 'tuning' (0..19), "
                             "or seeds and ranges like 0-4,7 (quick: 0,1)")
    parser.add_argument("--docs", type=int, default=None, help="content pages per generated site (default 30)")
    parser.add_argument("--json", metavar="FILE", help="write every figure of the generated sites as JSON")
    parser.add_argument("--keep", metavar="DIR",
                        help="keep each generated site's crawl log, mined rules, `mine-dust -v` output and each "
                             "contender's fetches (fetches-<contender>.txt) in DIR/<seed>/ (to study the miner on "
                             "the tuning seeds)")
    parser.add_argument("--contenders", default=",".join(CONTENDERS),
                        help="generated sites: the contenders to run, comma-separated (mined needs addon)")
    parser.add_argument("--repeat", type=int, default=1, help="generated sites: crawl each site this many times")
    parser.add_argument("--shuffle-links", action="store_true",
                        help="generated sites: the spider follows each page's links in a random order (another "
                             "crawl order in each run, as concurrency and server timing give on a real site)")
    parser.add_argument("--concurrency", type=int, default=8, help="generated sites: CONCURRENT_REQUESTS")
    parser.add_argument("--mine-child", metavar="LOG", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mine_child:
        mine_child(args.mine_child)
        return
    if not args.canonicalize_only and not args.no_sites:
        seeds = parse_seeds(args.seeds or ("0,1" if args.quick else "report"))
        contenders = tuple(c for c in args.contenders.split(",") if c)
        unknown = set(contenders) - set(CONTENDERS)
        if unknown or ("mined" in contenders and "addon" not in contenders):
            parser.error(f"--contenders: one or more of {', '.join(CONTENDERS)} (mined needs addon)")
        bench_sites(seeds * max(1, args.repeat), args.docs or (10 if args.quick else 30), args.json, args.keep,
                    contenders, args.shuffle_links, args.concurrency)
        if args.sites_only:
            return
    lines = args.lines or (20_000 if args.quick else 1_000_000)
    n_urls, repeat = (5_000, 3) if args.quick else (100_000, 7)
    if not args.canonicalize_only:
        bench_mining(lines)
    bench_canonicalize(n_urls, repeat)


# ------------------------------------------------------------------------------------ generated sites

def bench_sites(seeds: list[int], docs: int, json_out: str | None, keep: str | None = None,
                contenders: tuple[str, ...] = CONTENDERS, shuffle_links: bool = False, concurrency: int = 8) -> None:
    """Crawl every generated site with every contender (one reactor, crawls one after the other)."""
    from scrapy.utils.reactor import install_reactor

    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    from twisted.internet import defer, reactor

    from tests import dustgen

    dustgen.qc.ensure_sources(install=True, sources=dustgen.SOURCES)  # apt-get install when root and missing
    try:
        sites = [dustgen.generate(seed, docs=docs) for seed in seeds]
    except dustgen.MissingContent as exc:
        sys.exit(f"bench_dust: {exc}")
    results: list[dict] = []
    failure: list[BaseException] = []

    @defer.inlineCallbacks
    def run_all():
        try:
            for site in sites:
                started = time.perf_counter()
                result = yield crawl_site(site, keep, contenders, shuffle_links, concurrency)
                result["seconds"] = time.perf_counter() - started
                results.append(result)
                print_site(site, result)
        except BaseException as exc:  # reported after the reactor stopped
            failure.append(exc)
        finally:
            reactor.stop()

    reactor.callWhenRunning(run_all)
    reactor.run()
    if failure:
        raise failure[0]
    print_summary(sites, results)
    if json_out:
        with open(json_out, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)


def _spider_class(shuffle_links: bool = False):
    import scrapy

    class DustSiteSpider(scrapy.Spider):
        """Follows every link of the site (in page order, or shuffled); one item per page response."""

        name = "dustgen"

        def parse(self, response):
            yield {"url": response.url}
            hrefs = response.css("a::attr(href)").getall()
            if shuffle_links:
                random.shuffle(hrefs)
            for href in hrefs:
                yield response.follow(href)

    return DustSiteSpider


def crawl_site(site, keep: str | None = None, contenders: tuple[str, ...] = CONTENDERS, shuffle_links: bool = False,
               concurrency: int = 8):
    """Deferred: the contenders' figures on ``site`` (a dict, JSON-ready)."""
    from twisted.internet import defer

    return defer.ensureDeferred(_crawl_site(site, keep, contenders, shuffle_links, concurrency))


async def _crawl_site(site, keep: str | None, contenders: tuple[str, ...] = CONTENDERS, shuffle_links: bool = False,
                      concurrency: int = 8) -> dict:
    from tests import dustgen
    from tests.support.crawl import run_crawl
    from tests.support.localsite import LocalSite

    spider = _spider_class(shuffle_links)
    addon = {"ADDONS": {"scrapy_dedup.Addon": 0}}
    out: dict = {"seed": site.seed, "host": site.host, "scheme": site.scheme, "families": list(site.families),
                 "traps": list(site.traps), "noise_in_main": site.noise_in_main,
                 "reachable": len(site.distinct_pages()),
                 "universe": len(site.universe()), "contenders": {}}
    with tempfile.TemporaryDirectory() as tmp:
        if keep:
            tmp = os.path.join(keep, str(site.seed))
            os.makedirs(tmp, exist_ok=True)
        log = os.path.join(tmp, "crawl.jsonl")
        rules = os.path.join(tmp, "rules.json")
        for stale in (log, rules):  # the crawl log appends; a rules file left from a former run must not count
            if os.path.exists(stale):
                os.remove(stale)

        async def crawl(name: str, settings: dict) -> None:
            if name not in contenders:
                return
            site.reset_log()
            with LocalSite(site.router) as local:
                crawler = await run_crawl(spider, {**settings, "LOG_LEVEL": "ERROR",
                                                   "CONCURRENT_REQUESTS": concurrency},
                                          start_urls=[local.url(site.host)], allowed_domains=[site.host])
                fetched = list(site.log)
            s = dustgen.score(site, fetched, [item["url"] for item in crawler.items])
            if keep:  # each fetch in order, with what it showed: where a contender's waste comes from
                with open(os.path.join(tmp, f"fetches-{name}.txt"), "w", encoding="utf-8") as f:
                    seen_pages: set = set()
                    for path_qs in fetched:
                        t = site.truth(path_qs)
                        mark = "new" if t.kind == "page" and t.page not in seen_pages else "WASTE"
                        if t.kind == "page":
                            seen_pages.add(t.page)
                        f.write(f"{mark}\t{t.kind}\t{t.page}\t{','.join(t.forms)}\t{path_qs}\n")
            stats = crawler.stats.get_stats()
            out["contenders"][name] = {
                "fetches": s.fetches, "distinct": s.distinct, "reachable": s.reachable, "wasted": s.wasted,
                "waste": s.waste, "requests_per_page": s.requests_per_page, "recall": s.recall,
                "redirects": s.redirects, "errors": s.errors, "items": s.items,
                "duplicate_items": s.duplicate_items, "per_form": s.per_form, "per_trap": s.per_trap,
                "dust_stats": {k: v for k, v in stats.items() if k.startswith("dedup/dust")
                               or k == "dedup/url/rule/dust"},
                # a component that raised shows here (the crawl goes on, the figures would hide it)
                "errors_logged": stats.get("log_count/ERROR", 0) + sum(
                    v for k, v in stats.items() if k.startswith("spider_exceptions/")),
            }

        await crawl("scrapy", {})
        await crawl("addon", {**addon, "DEDUP_LOG_FILE": log})
        if "mined" not in contenders:
            await crawl("learn", {**addon, "DEDUP_DUST_LEARN": True})
            out["mine_dust"] = {"returncode": 0, "stderr_tail": []}
            return out
        mined = subprocess.run([sys.executable, "-m", "scrapy_dedup", "mine-dust", log, "-o", rules]
                               + (["-v"] if keep else []), capture_output=True, text=True)
        if keep:
            with open(os.path.join(tmp, "mine-dust.txt"), "w", encoding="utf-8") as f:
                f.write(mined.stderr)
        out["mine_dust"] = {"returncode": mined.returncode, "stderr_tail": mined.stderr.strip().splitlines()[-12:]}
        if mined.returncode == 0 and os.path.exists(rules):
            with open(rules, encoding="utf-8") as f:
                mined_rules = json.load(f)
            out["mine_dust"]["rules"] = [r for host_rules in mined_rules.get("hosts", {}).values()
                                         for r in host_rules]
            await crawl("mined", {**addon, "DEDUP_DUST_RULES": rules})
        await crawl("learn", {**addon, "DEDUP_DUST_LEARN": True})
    return out


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def print_site(site, result: dict) -> None:
    c = result["contenders"]
    print(f"site {site.seed} {site.host} ({site.scheme}, {result['reachable']} pages, {result['universe']} URLs "
          f"linked; {result['seconds']:.0f}s): DUST {', '.join(site.families)}; traps {', '.join(site.traps)}"
          + ("; per-fetch noise in the main text" if site.noise_in_main else ""))
    for name in CONTENDERS:
        if name not in c:
            if name == "mined" and result["mine_dust"]["returncode"]:
                print(f"  {name:7} (not run: mine-dust exited {result['mine_dust']['returncode']})")
            continue
        r = c[name]
        print(f"  {name:7} fetches {r['fetches']:5}  waste {_pct(r['waste']):>4}  "
              f"req/page {r['requests_per_page']:5.2f}  recall {_pct(r['recall']):>4}  "
              f"dup items {r['duplicate_items']:4}"
              + (f"  ERRORS LOGGED {r['errors_logged']}" if r.get("errors_logged") else ""))
    rules = result["mine_dust"].get("rules")
    if rules is not None:
        print(f"  mine-dust: {len(rules)} rule(s): " + "; ".join(_describe_rule(r) for r in rules[:8])
              + (" ..." if len(rules) > 8 else ""))
    sys.stdout.flush()


def _describe_rule(rule: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in rule.items() if k not in ("examples", "support", "violations", "pages"))


def print_summary(sites, results: list[dict]) -> None:
    n = len(results)
    print(f"\nsummary over {n} site(s), seeds {', '.join(str(r['seed']) for r in results)}")
    print("contender | waste median | waste worst | req/page median | req/page worst | recall median | "
          "recall worst | dup items median | dup items worst | fetches / scrapy (median)")
    for name in CONTENDERS:
        rows = [r["contenders"][name] for r in results if name in r["contenders"]]
        if not rows:
            continue
        ratios = [r["contenders"][name]["fetches"] / r["contenders"]["scrapy"]["fetches"] for r in results
                  if name in r["contenders"] and "scrapy" in r["contenders"]] or [float("nan")]
        waste = [x["waste"] for x in rows]
        rpp = [x["requests_per_page"] for x in rows]
        recall = [x["recall"] for x in rows]
        dup = [x["duplicate_items"] for x in rows]
        missing = n - len(rows)
        print(f"{name} | {_pct(statistics.median(waste))} | {_pct(max(waste))} | {statistics.median(rpp):.2f} | "
              f"{max(rpp):.2f} | {_pct(statistics.median(recall))} | {_pct(min(recall))} | "
              f"{statistics.median(dup):.0f} | {max(dup)} | {statistics.median(ratios):.2f}"
              + (f" ({missing} site(s) not run)" if missing else ""))
    crashes = [r for r in results if r["mine_dust"]["returncode"] != 0]
    print(f"mine-dust exit status non-zero on {len(crashes)} of {n} site(s)"
          + (": seeds " + ", ".join(str(r["seed"]) for r in crashes) if crashes else ""))
    print("\nper URL form (all sites): wasted / fetches of URLs carrying the form (a fetch is wasted when its "
          "page was already fetched)")
    forms = sorted({f for r in results for c in r["contenders"].values() for f in c["per_form"]})
    print("form | sites | " + " | ".join(CONTENDERS))
    for form in forms:
        cells = []
        for name in CONTENDERS:
            fetches = sum(r["contenders"][name]["per_form"].get(form, [0, 0])[0] for r in results
                          if name in r["contenders"])
            wasted = sum(r["contenders"][name]["per_form"].get(form, [0, 0])[1] for r in results
                         if name in r["contenders"])
            cells.append(f"{wasted}/{fetches}" + (f" ({_pct(wasted / fetches)})" if fetches else ""))
        n_sites = sum(1 for r in results if any(form in c["per_form"] for c in r["contenders"].values()))
        print(f"{form} | {n_sites} | " + " | ".join(cells))
    print("\nper trap (all sites): trap pages fetched / reachable (a rule that merges a trap loses them)")
    traps = sorted({t for r in results for c in r["contenders"].values() for t in c["per_trap"]})
    print("trap | sites | " + " | ".join(CONTENDERS))
    for trap in traps:
        cells = []
        for name in CONTENDERS:
            pages = sum(r["contenders"][name]["per_trap"].get(trap, [0, 0])[0] for r in results
                        if name in r["contenders"])
            got = sum(r["contenders"][name]["per_trap"].get(trap, [0, 0])[1] for r in results
                      if name in r["contenders"])
            cells.append(f"{got}/{pages}" + (f" ({_pct(got / pages)})" if pages else ""))
        n_sites = sum(1 for r in results if trap in r["traps"])
        print(f"{trap} | {n_sites} | " + " | ".join(cells))


def bench_mining(lines: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "crawl.jsonl")
        started = time.perf_counter()
        counts = generate_log(log, lines)
        size = os.path.getsize(log)
        print(f"log: {counts['lines']:,} lines ({size / 1e6:.0f} MB), {counts['variants']:,} DUST variants, "
              f"{HOSTS} hosts; generated in {time.perf_counter() - started:.1f}s")
        done = subprocess.run([sys.executable, __file__, "--mine-child", log], capture_output=True, text=True,
                              check=True)
        r = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"mining: {r['total_s']:.1f}s total ({r['read_s']:.1f}s reading), "
          f"{r['total_s'] / counts['lines'] * 1e6:.1f} us/line; {r['urls']:,} URLs")
    print(f"mining memory: peak RSS {r['peak_kib'] / 1024:.0f} MiB, baseline {r['baseline_kib'] / 1024:.0f} MiB, "
          f"mining {(r['peak_kib'] - r['baseline_kib']) / 1024:.0f} MiB "
          f"({(r['peak_kib'] - r['baseline_kib']) * 1024 / max(1, r['urls']):.0f} bytes/URL)")
    print(f"rules: {r['rules']} kept; {r['hosts_with_rules']}/{HOSTS} hosts got drop_param + query_to_path + "
          f"substitute; trap rules (page=, category=): {r['trap_rules']}")


def bench_canonicalize(n_urls: int, repeat: int) -> None:
    from scrapy_dedup.url.canonical import Canonicalizer

    host = "busy.test"
    rules = dust_rules_for(host)
    urls = urls_for(host, n_urls)
    plain = Canonicalizer()
    with_rules = Canonicalizer(dust_rules=rules)
    fired = sum(1 for u in urls if "dust" in with_rules.canonicalize_with_info(u).fired)
    other_urls = [u.replace(host, "other.test") for u in urls]
    rounds: list[dict[str, float]] = []
    times = time_interleaved({"plain": plain.canonicalize, "rules": with_rules.canonicalize,
                              "other": with_rules.canonicalize},
                             {"plain": urls, "rules": urls, "other": other_urls}, repeat, rounds)
    per_round = sorted(r["rules"] / r["plain"] for r in rounds)
    us_plain, us_rules, us_other = times["plain"], times["rules"], times["other"]
    kinds = Counter(r.kind for host_rules in rules.hosts.values() for r in host_rules)
    print(f"rules on {host}: " + ", ".join(f"{n} {kind}" for kind, n in kinds.most_common()))
    print(f"canonicalize, no rules:               {us_plain:.2f} us/URL")
    print(f"canonicalize, {len(rules)} rules on the host:   {us_rules:.2f} us/URL ({fired:,} of {len(urls):,} "
          "URLs rewritten)")
    print(f"canonicalize, rules on another host:  {us_other:.2f} us/URL")
    print(f"ratio with {len(rules)} rules / without = {us_rules / us_plain:.2f} (target < 1.5); per round: "
          f"median {statistics.median(per_round):.2f}, range {per_round[0]:.2f}-{per_round[-1]:.2f}")
    print(f"ratio rules elsewhere / without = {us_other / us_plain:.2f}")


if __name__ == "__main__":
    main()
