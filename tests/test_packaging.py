"""What the built distribution ships: the PEP 561 ``py.typed`` marker, so that a
project type-checking against scrapy-dedup gets our type hints, not ``Any``; and the sdist and
wheel the test command builds, the wheel installed in a fresh virtualenv and crawling there."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_built_package_ships_the_py_typed_marker(tmp_path):
    # setuptools' build_py step lays out exactly the files a wheel holds (modules and
    # package_data); it needs no wheel package, and runs on a copy of the sources so
    # that the build leaves nothing in the checkout.
    source = tmp_path / "src"
    shutil.copytree(ROOT / "scrapy_dedup", source / "scrapy_dedup",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    out = tmp_path / "lib"
    code = "from setuptools import setup; setup()"
    done = subprocess.run([sys.executable, "-c", code, "-q", "build_py", "--build-lib", str(out)],
                          cwd=source, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (out / "scrapy_dedup" / "py.typed").is_file()
    # the marker sits next to the modules it vouches for
    assert (out / "scrapy_dedup" / "content" / "engine.py").is_file()


#: a crawl run by the installed wheel's Python, with the one ADDONS line and nothing from this checkout:
#: a local site where one page is reached under a tracking-parameter variant (the URL layer) and one
#: page is a copy of another under another URL (the content layer)
CRAWL = r'''
import http.server, json, sys, threading
from pathlib import Path

import scrapy
from scrapy.crawler import CrawlerProcess

import scrapy_dedup

WORDS = " ".join(f"word{i}" for i in range(60))
PAGES = {
    "/index.html": '<a href="/a.html">a</a> <a href="/a.html?utm_source=feed">a again</a> '
                   '<a href="/b.html">b</a> <a href="/copy-of-a.html">copy</a>',
    "/a.html": f"<p>Page a: {WORDS}</p>",
    "/copy-of-a.html": f"<p>Page a: {WORDS}</p>",
    "/b.html": "<p>Page b: " + " ".join(f"other{i}" for i in range(60)) + "</p>",
}


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = PAGES.get(self.path.split("?")[0])
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.end_headers()
        self.wfile.write(f"<html><body>{body or 'not found'}</body></html>".encode())

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
root = f"http://127.0.0.1:{server.server_address[1]}"
items = []


class Site(scrapy.Spider):
    name = "site"
    start_urls = [root + "/index.html"]

    def parse(self, response):
        items.append(response.url)
        yield {"url": response.url}
        yield from response.follow_all(css="a")


process = CrawlerProcess({"ADDONS": {"scrapy_dedup.Addon": 0}, "LOG_LEVEL": "INFO"})
crawler = process.create_crawler(Site)
process.crawl(crawler)
process.start()
stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, float, str))}
Path(sys.argv[1]).write_text(json.dumps({"module": scrapy_dedup.__file__, "version": scrapy_dedup.__version__,
                                         "stats": stats}, default=str))
'''


@pytest.mark.crawl
def test_the_wheel_installs_in_a_fresh_virtualenv_and_crawls_with_the_one_line(tmp_path):
    """The sdist and the wheel build from a copy of the sources (the wheel from the sdist, so the sdist is
    complete); the wheel installs in a new virtualenv (pip's cache may serve the dependencies); a crawl
    there with ``ADDONS = {"scrapy_dedup.Addon": 0}`` filters a URL variant, drops a copied page and
    ends with the report, all from the installed package."""
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".venv", ".git", "__pycache__", "*.egg-info", "build", "dist", "_build", ".pytest_cache", ".hypothesis",
        ".tox", ".scrapy", "output"))
    dist = tmp_path / "dist"
    # no --sdist/--wheel: build makes the sdist, then the wheel from the unpacked sdist
    built = subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist), str(source)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    from scrapy_dedup import __version__

    sdists, wheels = list(dist.glob("*.tar.gz")), list(dist.glob("*.whl"))
    assert [p.name for p in sdists] == [f"scrapy_dedup-{__version__}.tar.gz"]
    assert len(wheels) == 1 and wheels[0].name.startswith(f"scrapy_dedup-{__version__}-py3-none-any")

    venv = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    installed = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                                str(wheels[0])], capture_output=True, text=True, timeout=900)
    assert installed.returncode == 0, installed.stderr[-3000:]
    assert (venv / "bin" / "scrapy-dedup").is_file()  # the console script

    run = tmp_path / "run"
    run.mkdir()
    (run / "crawl.py").write_text(CRAWL, encoding="utf-8")
    crawl = subprocess.run([str(python), "crawl.py", str(run / "out.json")], cwd=run, capture_output=True,
                           text=True, timeout=300, env={"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)})
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    out = json.loads((run / "out.json").read_text(encoding="utf-8"))
    assert Path(out["module"]).resolve().is_relative_to(venv.resolve())  # the wheel's copy, not this checkout
    assert out["version"] == __version__
    stats = out["stats"]
    assert stats["dedup/url/filtered/strip_tracking"] == 1  # a.html?utm_source=feed was not fetched
    assert stats["downloader/response_count"] == 4  # index, a, b, copy-of-a
    assert stats["dedup/content/exact"] == 1 and stats["dedup/items/exact_duplicates"] == 1
    assert stats["item_scraped_count"] == 3  # the copy's item dropped
    assert "scrapy-dedup duplication report" in crawl.stderr
