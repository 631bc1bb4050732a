"""Offline report benchmark: `scrapy-dedup report` against the textbook algorithm and datasketch.

One run, three methods, each in its own subprocess over the same generated dump
(so peak memory, ``ru_maxrss``, is each method's own):

* ours: the real command path (:func:`scrapy_dedup.audit.runner.audit_dump`), i.e.
  JSON parsing, ``page_text``, the engine's simhash and index, with ``--jobs 1..N``;
* textbook: what one writes by hand - lxml text without scripts/styles, MD5 per
  5-word shingle, a pure-Python 64-bit vote, a 4-band dict index;
* datasketch: the same hand-written text, ``MinHash(num_perm=128)`` over the
  5-word shingles (``update_batch``), ``MinHashLSH(threshold=0.8)`` query + insert.

The dump: realistic pages of 10-60 KB (three site templates with a long ``<nav>``,
header, footer, inline script and style, article paragraphs, tables and lists)
with exact mirrors under tracking URLs and near copies (a date, one or two words).
Pages per second counts end to end (JSON line in, decision out); CPU ms per
page (user + system, workers included) is printed too, because on a shared
machine the wall clock depends on the other load. Memory per page is
the growth of the peak RSS over the run divided by the pages; ours keeps only
fingerprints, index and URLs.

Memory against datasketch is compared at the same page counts, each method in its
own subprocess: on realistic pages (the first ``--memory-pages`` pages of the dump,
default all of it, one core each) and in an index-only run: ``--index-peer-size``
fingerprints (10% within 3 bits of an earlier one) through the engine's
``ContentDeduplicator.check_fingerprint``, the textbook 4-band dict index, and
datasketch ``MinHashLSH`` over random 128-value signatures (10% sharing ~90% of an
earlier one); then ours and the textbook index alone at ``--index-size`` (generating
a million datasketch signatures alone takes 1 GB). The load average of the machine
is printed with every row (other jobs distort wall-clock figures, not CPU time).

    python benchmarks/bench_report.py                  # full: 100k pages, 1M fingerprints
    python benchmarks/bench_report.py --quick          # seconds: the smoke test
    python benchmarks/bench_report.py --pages 100000 --peer-pages 1000 --curve-pages 10000 --jobs 1,2
    python benchmarks/bench_report.py --dump dump.jsonl --pages 100000 --only memory   # memory rows only
    python benchmarks/bench_report.py --only methods   # the audit's three methods, 10^6 text records
    python benchmarks/bench_report.py --only real      # 3,549 real pages: the audit against datasketch

The ``real`` part: bench_quality.py's corpus (``quality_corpus.build_corpus``, seed 7, 60 originals per
template: real Debian documentation HTML with generated duplicates, 3,549 pages) as a JSON Lines dump,
the report command's path end to end (``ours-report``: ``audit_dump`` with its defaults, boilerplate learning
on, two passes over one parse, then ``mirror_report``, whose DUST miner the audit fed) against datasketch
``MinHash(num_perm=128)`` + ``MinHashLSH(threshold=0.8)`` over the same extraction (``extract_text``), each in
its own subprocess, one core; the pages parsed end to end are printed.

The ``methods`` part runs the audit's own three methods (``--method simhash``,
``minhash``, ``lshbloom``) through the command's path over a generated text dump
whose records say what they are (distinct, exact copy, near copy), each method in
its own subprocess: recall per kind, false flags, pages/s, peak RSS growth per
page and, for lshbloom, the bytes of its filter and exact table per page; all
three at ``--method-peer-pages``, then lshbloom and simhash at ``--method-pages``.
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from textbook import textbook_fingerprint  # noqa: E402
from textbook import word_shingles as shingles  # noqa: E402



# -- the generated dump ----------------------------------------------------------------------------
def _vocabulary(rng: random.Random, n: int = 6000) -> list[str]:
    syllables = ["ka", "lo", "mi", "nu", "pe", "ro", "su", "ti", "va", "ze", "bra", "cle", "dri", "fo", "gu", "ha",
                 "ist", "jo", "kre", "lan", "mor", "nel", "ost", "pra", "qui", "ren", "sta", "tor", "ul", "wen"]
    words = set()
    while len(words) < n:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))))
    return sorted(words)


class SiteTemplate:
    def __init__(self, rng: random.Random, vocab: list[str], name: str):
        nav = "".join(f"<li><a href='/{name}/c/{i}'>{' '.join(rng.choices(vocab, k=3))}</a></li>" for i in range(120))
        foot = "".join(f"<a href='/{name}/f/{i}'>{rng.choice(vocab)}</a> " for i in range(60))
        self.head = (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{name} store</title>"
                     f"<style>{'.c%d{color:#%06x;margin:%dpx}' * 1 % (1, 0x334455, 4) * 80}</style>"
                     f"<script>window.dataLayer=[];{'function f%d(a){return a*%d};' % (1, 7) * 60}</script>"
                     f"</head><body><header><div class='banner'>{name} - {' '.join(rng.choices(vocab, k=12))}"
                     f"</div><form><input name='csrf' value='{{csrf}}'><input name=q></form></header>"
                     f"<nav><ul>{nav}</ul></nav><aside>{' '.join(rng.choices(vocab, k=80))}</aside><main>")
        self.tail = (f"</main><footer>{foot}<p>Copyright {name}</p></footer>"
                     f"<script>track('{name}');</script></body></html>")


def _article(rng: random.Random, vocab: list[str], weights: list[float], size: int) -> list[str]:
    """Paragraph texts totalling about ``size`` bytes of text (``weights``: cumulative)."""
    paras, total = [], 0
    while total < size:
        words = rng.choices(vocab, cum_weights=weights, k=rng.randint(40, 160))
        text = " ".join(words)
        paras.append(text)
        total += len(text) + 8
    return paras


def _render(template: SiteTemplate, paras: list[str], stamp: str, csrf: str) -> str:
    body = [f"<h1>{paras[0][:60]}</h1><p class='meta'>Updated {stamp}</p>"]
    for i, p in enumerate(paras):
        if i % 7 == 3:
            cells = p.split()[:24]
            body.append("<table>" + "".join(f"<tr><td>{' '.join(cells[j:j + 3])}</td><td>{j}</td></tr>"
                                              for j in range(0, len(cells), 3)) + "</table>")
        elif i % 5 == 2:
            body.append("<ul>" + "".join(f"<li>{w}</li>" for w in p.split()[:12]) + "</ul>" + f"<p>{p}</p>")
        else:
            body.append(f"<p>{p}</p>")
    return template.head.replace("{csrf}", csrf) + "".join(body) + template.tail


def generate_dump(path: Path, pages: int, seed: int = 7, min_kb: int = 10, max_kb: int = 60) -> dict:
    """Write ``pages`` JSON lines; about 10% exact mirrors and 10% near copies of earlier pages."""
    rng = random.Random(seed)
    vocab = _vocabulary(rng)
    weights = list(itertools.accumulate(1.0 / (i + 1) ** 0.9 for i in range(len(vocab))))  # Zipf-like, cumulative
    templates = [SiteTemplate(rng, vocab, name) for name in ("alpha", "bravo", "charlie")]
    recent: list = []  # (url, template, paras) of recent unique pages, the duplicates' sources
    counts = {"unique": 0, "exact": 0, "near": 0}
    total_bytes = 0
    with open(path, "w", encoding="utf-8") as f:
        for i in range(pages):
            roll = rng.random()
            if recent and roll < 0.10:
                url, template, paras, html = rng.choice(recent)
                url = f"{url}?utm_source=news&utm_campaign={i}"
                counts["exact"] += 1
            elif recent and roll < 0.20:
                url, template, paras, _ = rng.choice(recent)
                paras = list(paras)
                p = rng.randrange(len(paras))
                words = paras[p].split()
                for _ in range(rng.randint(1, 2)):
                    words[rng.randrange(len(words))] = rng.choice(vocab)
                paras[p] = " ".join(words)
                html = _render(template, paras, f"2024-05-{rng.randint(1, 28):02d}", f"{rng.getrandbits(64):x}")
                url = f"{url}/v{i}"
                counts["near"] += 1
            else:
                template = templates[i % 3]
                size = rng.randint(min_kb, max_kb) * 1024 - 12000  # the template is about 12 KB
                paras = _article(rng, vocab, weights, max(size, 1500))
                url = f"https://{template.tail[-40:].split(chr(39))[1]}.example/item/{i}"
                html = _render(template, paras, f"2024-04-{rng.randint(1, 28):02d}", f"{rng.getrandbits(64):x}")
                recent.append((url, template, paras, html))
                if len(recent) > 200:
                    recent.pop(0)
                counts["unique"] += 1
            line = json.dumps({"url": url, "html": html}) + "\n"
            total_bytes += len(line)
            f.write(line)
    return {"pages": pages, "mean_kb": round(total_bytes / max(pages, 1) / 1024, 1), **counts}


# -- peers (hand-written) --------------------------------------------------------------------------
def real_dump(path: Path, per_source: int, seed: int = 7) -> int:
    """A JSON Lines dump of bench_quality.py's corpus (``quality_corpus.build_corpus``: real Debian documentation
    pages, their generated duplicates and hard negatives, the live hosts), in its crawl order; its page count."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import quality_corpus as qc

    if not qc.ensure_sources(install=False):
        raise SystemExit("bench_report: the Debian documentation packages are not installed (quality_corpus.py)")
    pages = qc.build_corpus(per_source, seed=seed, install=False, live_per_source=per_source // 2)
    with open(path, "w", encoding="utf-8") as f:
        for page in pages:
            f.write(json.dumps({"url": page.url, "html": page.html.decode("utf-8", "replace")}) + "\n")
    return len(pages)


def naive_text(html: str) -> str:
    import lxml.html

    doc = lxml.html.fromstring(html)
    for bad in doc.xpath("//script|//style"):
        bad.drop_tree()
    return " ".join(doc.text_content().split())






class TextbookIndex:
    """4 bands of 16 bits, a dict per band of lists of (fp, key): the textbook near-duplicate index."""

    def __init__(self) -> None:
        self.bands: list[dict] = [defaultdict(list) for _ in range(4)]

    def add_if_new(self, key, fp: int, k: int = 3):
        for i in range(4):
            for other, okey in self.bands[i].get((fp >> (16 * i)) & 0xFFFF, ()):
                if bin(fp ^ other).count("1") <= k:
                    return okey
        for i in range(4):
            self.bands[i][(fp >> (16 * i)) & 0xFFFF].append((fp, key))
        return None


# -- one measured run (in a subprocess) ------------------------------------------------------------
def _rss_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _current_rss_kb() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def _cpu_seconds() -> tuple[float, float]:
    """CPU seconds (user + system) of this process and of its finished children (the --jobs workers)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def measure_pages(method: str, dump: str, limit: int, jobs: int) -> dict:
    import itertools

    flagged = 0
    parsed_again: Optional[int] = 0  # records the mirrors report read again (ours-report)
    if method in ("ours", "ours-report"):
        from scrapy_dedup.audit import runner
        from scrapy_dedup.audit.config import build_config
        from scrapy_dedup.audit.runner import audit_dump

        cfg = build_config()
        if limit:
            limited = Path(tempfile.mkdtemp()) / "limited.jsonl"
            with open(dump, "rb") as src, open(limited, "wb") as dst:
                dst.writelines(itertools.islice(src, limit))
            dump = str(limited)
        warm = Path(tempfile.mkdtemp()) / "warm.jsonl"  # imports and caches before the baseline RSS
        with open(dump, "rb") as src, open(warm, "wb") as dst:
            dst.writelines(itertools.islice(src, 3))
        audit_dump(str(warm), cfg, jobs=1, want_samples=False)
        os.unlink(warm)
        os.rmdir(warm.parent)
        rss0 = _current_rss_kb()
        cpu0 = _cpu_seconds()
        start = time.perf_counter()
        if method == "ours":  # the audit alone
            result, pages, _ = audit_dump(dump, cfg, jobs=jobs, want_samples=False)
        else:  # ours-report: the command's path end to end, the mirrors report (its DUST miner) included
            # (an older version, without mirror_miner, reads the dump again for the mirrors report, uncounted)
            miner = runner.mirror_miner(cfg, dump) if hasattr(runner, "mirror_miner") else None
            fed = {"miner": miner} if miner is not None else {}
            result, pages, _ = audit_dump(dump, cfg, jobs=jobs, want_samples=False, **fed)
            result.mirrors = runner.mirror_report(pages, cfg, dump, result.input_format, *fed.values())
            parsed_again = getattr(result.mirrors, "records_read", None)
        elapsed = time.perf_counter() - start
        n = result.report.total
        flagged = result.report.redundant
        parsed = getattr(result, "pages_parsed", None)  # None: a version that does not count them
        if method == "ours-report":
            parsed = None if parsed is None or parsed_again is None else parsed + parsed_again
        if limit:
            os.unlink(dump)
            os.rmdir(os.path.dirname(dump))
    else:
        if method == "textbook":
            index = TextbookIndex()

            def decide(i: int, html: str) -> bool:
                return index.add_if_new(i, textbook_fingerprint(naive_text(html))) is not None
        elif method in ("datasketch", "datasketch-extract"):
            from datasketch import MinHash, MinHashLSH

            from scrapy_dedup.content.extract import ExtractionPolicy, extract_text

            lsh = MinHashLSH(threshold=0.8, num_perm=128)
            policy = ExtractionPolicy()
            # datasketch-extract: over our extraction (lxml, main text), the same text the audit fingerprints
            text_of = naive_text if method == "datasketch" else (lambda html: extract_text(html, policy).text)

            def decide(i: int, html: str) -> bool:
                m = MinHash(num_perm=128)
                m.update_batch([s.encode("utf-8") for s in set(shingles(text_of(html)))])
                if lsh.query(m):
                    return True
                lsh.insert(i, m)
                return False
        else:
            raise SystemExit(f"unknown method {method}")
        decide(-1, "<p>warm up the imports and caches</p>")
        rss0 = _current_rss_kb()
        cpu0 = _cpu_seconds()
        start = time.perf_counter()
        n = 0
        parsed = None
        with open(dump, encoding="utf-8") as f:
            for line in itertools.islice(f, limit or None):
                record = json.loads(line)
                flagged += decide(n, record["html"])
                n += 1
        elapsed = time.perf_counter() - start
    peak = _rss_kb()
    cpu_main, cpu_workers = _cpu_seconds()
    return {"method": method, "jobs": jobs, "load": round(os.getloadavg()[0], 2), "pages": n,
            "seconds": round(elapsed, 3),
            "pages_per_s": round(n / elapsed, 1) if elapsed else 0.0, "flagged": flagged, "pages_parsed": parsed,
            "cpu_main_s": round(cpu_main - cpu0[0], 2), "cpu_workers_s": round(cpu_workers - cpu0[1], 2),
            "cpu_ms_per_page": round(1000 * (cpu_main - cpu0[0] + cpu_workers - cpu0[1]) / max(n, 1), 2),
            "cores_used": round((cpu_main - cpu0[0] + cpu_workers - cpu0[1]) / elapsed, 2) if elapsed else 0.0,
            "peak_growth_bytes_per_page": round((peak - rss0) * 1024 / max(n, 1), 1)}


# -- the three audit methods on a large text dump (the lshbloom rows) -------------------------------
def generate_text_dump(path: Path, pages: int, seed: int = 11) -> None:
    """Text records (no HTML: the methods, not the parser, are measured): 80% distinct pages, 10% exact copies
    (another URL), 10% near copies (1 or 2 words replaced out of 120 to 180: resemblance about 0.9) of an earlier
    page. The truth is in
    each record's ``truth`` field: ``unique``, ``exact`` or ``near``."""
    rng = random.Random(seed)
    vocab = _vocabulary(rng, 20000)
    weights = [1 / (i + 1) for i in range(len(vocab))]
    originals: list[list[str]] = []
    with open(path, "w", encoding="utf-8") as f:
        for i in range(pages):
            r = rng.random()
            if originals and r < 0.1:
                words, truth = rng.choice(originals), "exact"
            elif originals and r < 0.2:
                words = list(rng.choice(originals))
                for _ in range(rng.randint(1, 2)):
                    words[rng.randrange(len(words))] = rng.choice(vocab)
                truth = "near"
            else:
                words, truth = rng.choices(vocab, weights, k=rng.randint(120, 180)), "unique"
                if len(originals) < 50_000:
                    originals.append(words)
                else:
                    originals[rng.randrange(len(originals))] = words
            f.write(json.dumps({"url": f"https://t.example/{i}", "text": " ".join(words), "truth": truth}) + "\n")


def measure_method(method: str, dump: str, limit: int) -> dict:
    """One audit method through the command's own path over the first ``limit`` records; quality from ``truth``."""
    from scrapy_dedup.audit.config import build_config
    from scrapy_dedup.audit.runner import KIND_CODES, audit_dump

    limited = Path(tempfile.mkdtemp()) / "limited.jsonl"
    truths = []
    with open(dump, "rb") as src, open(limited, "wb") as dst:
        for line in itertools.islice(src, limit):
            dst.write(line)
            truths.append(json.loads(line)["truth"])
    cfg = build_config(overrides={"method": method})
    warm = limited.with_name("warm.jsonl")
    warm.write_bytes(b"".join(itertools.islice(open(limited, "rb"), 3)))
    audit_dump(str(warm), cfg, want_samples=False)
    rss0 = _current_rss_kb()
    cpu0 = _cpu_seconds()
    start = time.perf_counter()
    result, pages, decider = audit_dump(str(limited), cfg, want_samples=False)
    elapsed = time.perf_counter() - start
    peak = _rss_kb()
    cpu = _cpu_seconds()
    codes = {v: k for k, v in KIND_CODES.items()}
    found = defaultdict(int)
    for truth, code in zip(truths, pages.kinds):
        found[(truth, codes[code] != "unique")] += 1
    n = len(truths)
    dups = sum(1 for t in truths if t != "unique")
    out = {"method": method, "pages": n, "load": round(os.getloadavg()[0], 2),
           "pages_per_s": round(n / elapsed, 1), "cpu_ms_per_page": round(1000 * (sum(cpu) - sum(cpu0)) / n, 3),
           "peak_growth_bytes_per_page": round((peak - rss0) * 1024 / n, 1),
           "recall_exact": round(found[("exact", True)] / max(1, found[("exact", True)] + found[("exact", False)]), 4),
           "recall_near": round(found[("near", True)] / max(1, found[("near", True)] + found[("near", False)]), 4),
           "false_flags": found[("unique", True)], "duplicates": dups,
           "named_pairs": result.flagged_pairs}
    if hasattr(decider, "nbytes"):
        out["structure_bytes_per_page"] = round(decider.nbytes / n, 1)
    limited.unlink()
    warm.unlink()
    limited.parent.rmdir()
    return out


def measure_index(method: str, count: int, seed: int = 3) -> dict:
    """Fingerprints only: ``count`` checks, 10% of them within 3 bits of an earlier fingerprint."""
    import numpy as np

    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 2 ** 63, size=count, dtype=np.int64).astype(np.uint64) * np.uint64(2) + np.uint64(1)
    dup = rng.random(count) < 0.10
    src = (rng.random(count) * np.arange(count)).astype(np.int64)
    flips = rng.integers(0, 64, size=(count, 3))
    fps_list = [int(x) for x in fps]
    for i in np.nonzero(dup)[0][1:]:
        fp = fps_list[src[i]]
        for b in flips[i][: 1 + i % 3]:
            fp ^= 1 << int(b)
        fps_list[i] = fp
    exact = [hashlib.blake2b(i.to_bytes(8, "little"), digest_size=16).digest() for i in range(count)]
    del fps, src, flips
    if method == "ours":
        from scrapy_dedup.content.engine import ContentDeduplicator, ContentFingerprint

        engine = ContentDeduplicator.in_memory()
        items = [ContentFingerprint(e, f, 100) for e, f in zip(exact, fps_list)]
        keys = [str(i) for i in range(count)]
        rss0 = _current_rss_kb()
        start = time.perf_counter()
        flagged = sum(engine.check_fingerprint(k, fp).is_duplicate for k, fp in zip(keys, items))
    elif method == "textbook":
        index = TextbookIndex()
        keys = [str(i) for i in range(count)]
        rss0 = _current_rss_kb()
        start = time.perf_counter()
        flagged = sum(index.add_if_new(k, fp) is not None for k, fp in zip(keys, fps_list))
    elif method == "datasketch":
        # Signatures only (no text): 128 random values per page; a near copy shares ~90% of its source's.
        from datasketch import MinHash, MinHashLSH

        template = MinHash(num_perm=128)
        rebuild = {"num_perm": 128, "permutations": template.permutations}
        if getattr(template, "scheme", None) is not None:
            rebuild["scheme"] = template.scheme
        sigs = rng.integers(0, 2 ** 32 - 1, size=(count, 128), dtype=np.uint64)
        for i in np.nonzero(dup)[0][1:]:
            j = int(rng.integers(0, i))
            keep = rng.random(128) < 0.9
            sigs[i, keep] = sigs[j, keep]
        lsh = MinHashLSH(threshold=0.8, num_perm=128)
        rss0 = _current_rss_kb()
        start = time.perf_counter()
        flagged = 0
        for i in range(count):
            m = MinHash(hashvalues=sigs[i], **rebuild)
            if lsh.query(m):
                flagged += 1
            else:
                lsh.insert(i, m)
    else:
        raise SystemExit(f"unknown index method {method}")
    elapsed = time.perf_counter() - start
    peak = _rss_kb()
    return {"method": method, "fingerprints": count, "load": round(os.getloadavg()[0], 2),
            "seconds": round(elapsed, 3),
            "checks_per_s": round(count / elapsed, 1), "flagged": flagged,
            "peak_growth_bytes_per_page": round((peak - rss0) * 1024 / count, 1)}


_SPIN = "import time\nt=time.perf_counter()\nwhile time.perf_counter()-t<{s}: pass\nprint(time.process_time())"


def free_cores(processes: int, seconds: float = 2.0) -> float:
    """How many cores the machine gives us right now: ``processes`` busy loops for ``seconds``, CPU / wall.

    Other jobs on a shared machine take cores; a ``--jobs N`` curve can only be read
    against what was free while it ran (this is measured before and after it).
    """
    procs = [subprocess.Popen([sys.executable, "-c", _SPIN.format(s=seconds)], stdout=subprocess.PIPE, text=True)
             for _ in range(processes)]
    return round(sum(float(p.communicate()[0]) for p in procs) / seconds, 2)


def _sub(args: list[str]) -> dict:
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve())] + args, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"subprocess {args} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pages", type=int, default=100_000, help="pages in the generated dump")
    p.add_argument("--peer-pages", type=int, default=3_000,
                   help="first pages of the dump for the (slow) peers; ours also runs on exactly these")
    p.add_argument("--index-size", type=int, default=1_000_000, help="fingerprints in the index-only run")
    p.add_argument("--index-peer-size", type=int, default=100_000,
                   help="signatures for datasketch in the index-only run (128 x 8 bytes each to generate)")
    p.add_argument("--jobs", default="1,2", help="comma-separated --jobs values for ours (the curve)")
    p.add_argument("--curve-pages", type=int, default=0,
                   help="first pages of the dump for the --jobs curve (0: the whole dump)")
    p.add_argument("--memory-pages", type=int, default=0,
                   help="first pages of the dump for the memory comparison with datasketch (0: the whole dump)")
    p.add_argument("--real-per-source", type=int, default=60,
                   help="real part: originals per template of bench_quality.py's corpus (60: 3,549 pages)")
    p.add_argument("--only", default="speed,memory,curve,index,methods",
                   help="comma-separated parts to run: speed, memory, curve, index, methods, real (real: asked by "
                        "name only; it needs the Debian documentation packages)")
    p.add_argument("--dump", help="reuse this dump instead of generating one")
    p.add_argument("--quick", action="store_true", help="tiny sizes (the smoke test)")
    p.add_argument("--_run", help=argparse.SUPPRESS)
    p.add_argument("--_index", help=argparse.SUPPRESS)
    p.add_argument("--_limit", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--_jobs", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--_method", help=argparse.SUPPRESS)
    p.add_argument("--method-pages", type=int, default=1_000_000,
                   help="methods part: text records audited by lshbloom and simhash")
    p.add_argument("--method-peer-pages", type=int, default=200_000,
                   help="methods part: records audited by all three (minhash via datasketch is the slow one)")
    args = p.parse_args(argv)
    if args._method:
        print(json.dumps(measure_method(args._method, args.dump, args._limit)))
        return 0
    if args._run:
        print(json.dumps(measure_pages(args._run, args.dump, args._limit, args._jobs)))
        return 0
    if args._index:
        print(json.dumps(measure_index(args._index, args.index_size)))
        return 0
    if args.quick:
        args.pages, args.peer_pages, args.index_size, args.index_peer_size, args.jobs = 60, 30, 5_000, 2_000, "1,2"
        args.memory_pages, args.method_pages, args.method_peer_pages = 60, 400, 200
    parts = {x.strip() for x in args.only.split(",") if x.strip()}
    jobs = [int(j) for j in args.jobs.split(",") if j.strip()]
    tmp = tempfile.mkdtemp(prefix="bench-report-")
    dump = args.dump
    if not dump and parts - {"index", "methods", "real"}:
        dump = os.path.join(tmp, "dump.jsonl")
        t = time.perf_counter()
        info = generate_dump(Path(dump), args.pages)
        print(f"generated {dump}: {info} in {time.perf_counter() - t:.0f} s", flush=True)
    summary: dict = {"load_at_start": [round(x, 2) for x in os.getloadavg()]}
    print(f"load average at start: {summary['load_at_start']}", flush=True)
    rows: list = []
    if "speed" in parts:
        peer_n = min(args.peer_pages, args.pages)
        print(f"\n== pages: first {peer_n} pages, one core ==", flush=True)
        for m in ("ours", "textbook", "datasketch"):
            r = _sub(["--_run", m, "--dump", dump, "--_limit", str(peer_n)])
            rows.append(r)
            print(f"{r['method']:<11} {r['pages_per_s']:>9.1f} pages/s  {r['cpu_ms_per_page']:>7.2f} CPU ms/page  "
                  f"{r['peak_growth_bytes_per_page']:>10.1f} B/page peak growth  flagged {r['flagged']:>6}  "
                  f"ours is x{rows[0]['pages_per_s'] / r['pages_per_s']:.2f} by wall clock, "
                  f"x{r['cpu_ms_per_page'] / rows[0]['cpu_ms_per_page']:.2f} by CPU time  (load {r['load']})",
                  flush=True)
        summary.update(pages=rows, speedup_vs_textbook=round(rows[0]["pages_per_s"] / rows[1]["pages_per_s"], 2),
                       cpu_speedup_vs_textbook=round(rows[1]["cpu_ms_per_page"] / rows[0]["cpu_ms_per_page"], 2))
    if "real" in parts:
        real = os.path.join(tmp, "real.jsonl")
        count = real_dump(Path(real), args.real_per_source)
        print(f"\n== real pages: {count} pages of bench_quality.py's corpus (Debian documentation HTML and its "
              f"generated duplicates), the audit end to end with its defaults (boilerplate learning on, the "
              f"mirrors report and its DUST miner included) against datasketch MinHash-LSH over the same "
              f"extraction, one core each ==", flush=True)
        real_rows = [_sub(["--_run", m, "--dump", real]) for m in ("ours-report", "datasketch-extract")]
        for r in real_rows:
            print(f"{r['method']:<19} {r['pages']:>6} pages  {r['pages_per_s']:>7.1f} pages/s  "
                  f"{r['cpu_ms_per_page']:>6.2f} CPU ms/page  flagged {r['flagged']:>5}  "
                  f"pages parsed {r['pages_parsed'] if r['pages_parsed'] is not None else '-'}  (load {r['load']})",
                  flush=True)
        ratio = real_rows[0]["pages_per_s"] / real_rows[1]["pages_per_s"]
        cpu_ratio = real_rows[1]["cpu_ms_per_page"] / real_rows[0]["cpu_ms_per_page"]
        print(f"ours / datasketch pages per second: x{ratio:.2f} by wall clock, x{cpu_ratio:.2f} by CPU time",
              flush=True)
        summary.update(real=real_rows, real_vs_datasketch=round(ratio, 2), real_vs_datasketch_cpu=round(cpu_ratio, 2))
        os.unlink(real)
    if "memory" in parts:
        mem_n = min(args.memory_pages or args.pages, args.pages)
        print(f"\n== memory: first {mem_n} pages, ours vs datasketch, one core each, same pages ==", flush=True)
        mem = [_sub(["--_run", m, "--dump", dump, "--_limit", str(mem_n)]) for m in ("ours", "datasketch")]
        for r in mem:
            print(f"{r['method']:<11} {r['pages']:>8} pages  "
                  f"{r['peak_growth_bytes_per_page']:>9.1f} B/page peak growth  "
                  f"{r['pages_per_s']:>8.1f} pages/s  {r['cpu_ms_per_page']:>6.2f} CPU ms/page  "
                  f"flagged {r['flagged']}  (load {r['load']})", flush=True)
        ratio = mem[0]["peak_growth_bytes_per_page"] / max(mem[1]["peak_growth_bytes_per_page"], 1e-9)
        print(f"ours / datasketch peak growth per page: {ratio:.3f}", flush=True)
        summary.update(memory=mem, memory_vs_datasketch=round(ratio, 3))
    if "curve" in parts:
        curve_n = min(args.curve_pages or args.pages, args.pages)
        print(f"\n== pages: first {curve_n} pages, ours, --jobs curve ==", flush=True)
        curve: list = []
        free_before = free_cores(max(jobs))
        print(f"free cores before ({max(jobs)} busy loops, 2 s): {free_before}", flush=True)
        for j in jobs:
            r = _sub(["--_run", "ours", "--dump", dump, "--_jobs", str(j), "--_limit", str(curve_n)])
            curve.append(r)
            print(f"ours --jobs {j}: {r['pages_per_s']:>9.1f} pages/s  {r['peak_growth_bytes_per_page']:>8.1f} B/page "
                  f"peak growth (main process)  flagged {r['flagged']}  CPU {r['cpu_ms_per_page']} ms/page "
                  f"(main {r['cpu_main_s']} s, workers {r['cpu_workers_s']} s, {r['cores_used']} cores used)  "
                  f"x{r['pages_per_s'] / curve[0]['pages_per_s']:.2f} of --jobs {jobs[0]}  (load {r['load']})",
                  flush=True)
        free_after = free_cores(max(jobs))
        print(f"free cores after: {free_after}", flush=True)
        summary.update(jobs_curve=curve, free_cores=[free_before, free_after])
    if "index" in parts:
        peer = min(args.index_peer_size, args.index_size)
        print(f"\n== index only: {peer} fingerprints each (same count for all three) ==", flush=True)
        index_rows = [_sub(["--_index", m, "--index-size", str(peer)]) for m in ("ours", "textbook", "datasketch")]
        if args.index_size > peer:
            print(f"   then ours and the textbook index at {args.index_size}", flush=True)
            index_rows += [_sub(["--_index", m, "--index-size", str(args.index_size)]) for m in ("ours", "textbook")]
        for r in index_rows:
            print(f"{r['method']:<10} {r['fingerprints']:>8} {r['checks_per_s']:>11.1f} checks/s  "
                  f"{r['peak_growth_bytes_per_page']:>7.1f} B/page peak growth  flagged {r['flagged']}  "
                  f"(load {r['load']})",
                  flush=True)
        ratio = index_rows[0]["peak_growth_bytes_per_page"] / max(index_rows[2]["peak_growth_bytes_per_page"], 1e-9)
        print(f"ours / datasketch peak growth per page at {peer}: {ratio:.3f}", flush=True)
        summary.update(index=index_rows, index_memory_vs_datasketch=round(ratio, 3))
    if "methods" in parts:
        text_dump = os.path.join(tmp, "text.jsonl")
        generate_text_dump(Path(text_dump), args.method_pages)
        print(f"\n== audit methods: text dump of {args.method_pages} records (10% exact, 10% near copies) ==",
              flush=True)
        method_rows = [_sub(["--_method", m, "--dump", text_dump, "--_limit", str(args.method_peer_pages)])
                       for m in ("lshbloom", "simhash", "minhash")]
        if args.method_pages > args.method_peer_pages:
            method_rows += [_sub(["--_method", m, "--dump", text_dump, "--_limit", str(args.method_pages)])
                            for m in ("lshbloom", "simhash")]
        for r in method_rows:
            print(f"{r['method']:<9} {r['pages']:>8} records  {r['pages_per_s']:>8.1f} pages/s  "
                  f"{r['peak_growth_bytes_per_page']:>7.1f} B/page peak growth  "
                  f"{r.get('structure_bytes_per_page', '-')!s:>6} B/page filter+exact table  recall exact "
                  f"{r['recall_exact']:.4f} near {r['recall_near']:.4f}  false flags {r['false_flags']}  "
                  f"named pairs {r['named_pairs']}  (load {r['load']})", flush=True)
        same = [r for r in method_rows if r["pages"] == args.method_peer_pages]
        base = {r["method"]: r for r in same}
        for m in ("simhash", "minhash"):
            if m in base:
                peer_growth = max(base[m]["peak_growth_bytes_per_page"], 1e-9)
                ratio = base["lshbloom"]["peak_growth_bytes_per_page"] / peer_growth
                print(f"lshbloom / {m} peak growth per page at {args.method_peer_pages}: {ratio:.3f}",
                      flush=True)
        summary.update(methods=method_rows)
        os.unlink(text_dump)
    print("\nSUMMARY " + json.dumps(summary))
    if not args.dump and dump:
        os.unlink(dump)
    os.rmdir(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
