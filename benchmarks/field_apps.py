"""Real web software for the field benchmark (``bench_field.py``): installed from Debian 12 packages,
filled with real text by each application's own tools, served on loopback, and read back for ground truth.

Applications (Debian package and version):

``mediawiki``  MediaWiki 1.39 (``mediawiki``, sqlite through ``php-sqlite3``), served by PHP's built-in
               server; pages imported with ``maintenance/importTextFiles.php``
``dokuwiki``   DokuWiki 2022-07-31a (``dokuwiki``), PHP's built-in server; pages, old revisions and change
               logs written as DokuWiki's data files, then ``bin/indexer.php``
``fossil``     Fossil 2.21 (``fossil``): a bug tracker, wiki and timeline in one repository served by
               ``fossil server``; wiki pages by ``fossil wiki create/commit``, tickets by ``fossil ticket add``
``cgit``       cgit 1.2 (``cgit``), a git web viewer (CGI behind Python's CGI server); one git repository
               whose files are the pages, one commit per saved revision

Text: Python's library reference (``python3.11-doc``): ``--pages`` of its pages (60 by default, 200 for the
big run), headings and paragraphs, with the links between them; one page in three is saved twice more (so
history lists, old revisions and diffs exist). Every application gets the same pages, and its start page
(MediaWiki's Main Page, DokuWiki's start, Fossil's Home, cgit's tree) links every page, as a wiki's table of
contents does: depth 1 reaches every content page, depth 2 their views (history, source, revisions...).

Ground truth: every fetched response is mapped to the resource it renders, read from the application's own
data: MediaWiki's page configuration (``wgPageName``, ``wgRevisionId``, ``wgCurRevisionId``, ``wgAction``,
the diff's revision ids), DokuWiki's ``JSINFO`` (page id, action) and the ``rev`` it shows, git's blob and
commit ids for cgit, fossil's artifact ids. A content page is one of the imported pages shown at its current
revision (for fossil also each ticket). A view of a content page (``App.VIEWS_OF_PAGES``, ``App.view_of``)
shows that page itself: an earlier revision (the same page, edited: one sentence rewritten and a note added
per revision) and, on MediaWiki, a diff, which renders the newer revision whole below its table; its item is
the page's. Every other response is a distinct non-content resource (history list, source view, a diff of
the change alone, listing, special page); where the application's data does not name it, the
resource is the view's name and a hash of the page's title and the application's content area, scripts,
styles and the area's controls left out (``App.controls``: two listings showing the same entries are one
resource, whatever their filter toggles say or whatever URL their footer echoes). A login or account form is one
resource whatever page it returns to (MediaWiki's ``returnto=``, Fossil's ``g=``; Fossil draws a captcha per
request). Views that show one resource are one: MediaWiki's permanent link to the current revision and a
diff of a revision with itself; Fossil's ``/info/`` page of a ticket and its plain-text view; cgit's commit
page and its diff against the parent (also limited to the one file the commit changed). cgit's repository
tree at an earlier commit is a view of the tree, as an earlier revision of a page is of the page (the same
listing, edited).

The state lives in one directory (``--state``, default ``$XDG_CACHE_HOME/scrapy-dedup-field``); set-up is
idempotent (a stamp per application) and stops what it starts by process group id.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

PYDOC = Path("/usr/share/doc/python3.11/html/library")
#: Debian packages each application needs (installed by ``ensure_packages`` when missing and run as root)
PACKAGES = {
    "mediawiki": ("mediawiki", "php-sqlite3", "php-cli"),
    "dokuwiki": ("dokuwiki", "php-cli"),
    "fossil": ("fossil",),
    "cgit": ("cgit", "git"),
}
TEXT_PACKAGE = "python3.11-doc"
APPS = tuple(PACKAGES)
SETUP_VERSION = 5  # raise when what set-up builds changes: the applications are rebuilt


def default_state() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "scrapy-dedup-field"


# ------------------------------------------------------------------------------------------ packages

def _installed(pkg: str) -> bool:
    done = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
    return done.returncode == 0 and "install ok installed" in done.stdout


def ensure_packages(apps: list[str]) -> None:
    """apt-get install what ``apps`` and the text need; exits naming the package when that is not possible."""
    wanted = [TEXT_PACKAGE] + [p for app in apps for p in PACKAGES[app]]
    missing = sorted({p for p in wanted if not _installed(p)})
    if not missing:
        return
    print(f">> installing Debian packages: {' '.join(missing)}", file=sys.stderr)
    if os.geteuid() != 0:
        sys.exit(f"field set-up: missing Debian package(s) {', '.join(missing)}; install them as root "
                 f"(apt-get install --no-install-recommends {' '.join(missing)})")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], env=env, timeout=600)
    done = subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing], env=env,
                          timeout=1200)
    still = [p for p in missing if not _installed(p)]
    if done.returncode or still:
        sys.exit(f"field set-up: could not install Debian package(s) {', '.join(still or missing)}")


# ------------------------------------------------------------------------------------------ the text

@dataclass
class Page:
    name: str                 # the page's name in every application (letters, digits, underscores)
    title: str
    blocks: list[tuple[str, str]]      # ("h", heading) or ("p", paragraph)
    links: list[str] = field(default_factory=list)  # names of other pages it links to
    revisions: int = 1        # 3 for one page in three: saved twice more


def load_pages(count: int) -> list[Page]:
    """``count`` pages of Python's library reference (sorted by file name, the smallest and largest left
    out), their headings and paragraphs, and their links to each other."""
    import lxml.html

    files = sorted(p for p in PYDOC.glob("*.html") if 6_000 < p.stat().st_size < 120_000)
    if len(files) < count:
        sys.exit(f"field set-up: {TEXT_PACKAGE} has {len(files)} usable pages under {PYDOC}, {count} asked")
    step = len(files) / count
    chosen = [files[int(i * step)] for i in range(count)]
    # one underscore between words, none at the end: MediaWiki and DokuWiki normalize names so (__future__)
    names: dict[str, str] = {}
    for f in chosen:
        name = "Py_" + re.sub(r"[^A-Za-z0-9]+", "_", f.stem).strip("_")
        names[f.name] = name if name not in names.values() else f"{name}_{len(names)}"
    pages = []
    for i, f in enumerate(chosen):
        tree = lxml.html.fromstring(f.read_bytes())
        body = tree.xpath('//div[@role="main"]') or [tree]
        h1 = body[0].xpath(".//h1")
        title = " ".join((h1[0].text_content() if h1 else f.stem).replace("¶", "").split())
        blocks: list[tuple[str, str]] = []
        for el in body[0].xpath(".//h2|.//h3|.//p"):
            text = " ".join(el.text_content().replace("¶", "").split())
            if len(text) < 3:
                continue
            blocks.append(("p" if el.tag == "p" else "h", text))
            if len(blocks) >= 40:
                break
        links = []
        for href in body[0].xpath(".//a/@href"):
            target = names.get(href.split("#")[0])
            if target and target != names[f.name] and target not in links:
                links.append(target)
        pages.append(Page(names[f.name], title, blocks, links[:12], 3 if i % 3 == 0 else 1))
    # every page is linked from the one before it, so a link-following crawl can reach each of them
    for a, b in zip(pages, pages[1:]):
        if b.name not in a.links:
            a.links.append(b.name)
    return pages


def revision_blocks(page: Page, rev: int) -> list[tuple[str, str]]:
    """The page's text at revision ``rev`` (1-based): each later revision rewrites one paragraph and adds a
    closing note, as an editor would."""
    blocks = list(page.blocks)
    for r in range(2, rev + 1):
        paras = [i for i, (kind, _) in enumerate(blocks) if kind == "p"]
        if paras:
            i = paras[(r * 7) % len(paras)]
            blocks[i] = ("p", blocks[i][1] + f" (Revised in edit {r - 1}: wording clarified.)")
        blocks.append(("p", f"Editor's note {r - 1}: see also the related pages listed below."))
    return blocks


# ------------------------------------------------------------------------------------------ processes

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Servers:
    """The server processes this run started; ``stop()`` ends each by its process group id."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def start(self, argv: list[str], **kw) -> subprocess.Popen:
        proc = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.DEVNULL,
                                stderr=kw.pop("stderr", subprocess.DEVNULL), **kw)
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)  # the group this run created for the server
                except ProcessLookupError:
                    pass
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        self.procs.clear()


def wait_http(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                if r.status == 200 and r.read():
                    return
                raise RuntimeError(f"status {r.status}, or an empty body")
        except Exception as exc:  # noqa: BLE001 - a server still starting answers with anything
            if time.monotonic() > deadline:
                raise RuntimeError(f"field: {url} did not answer within {timeout:.0f}s ({exc})") from exc
            time.sleep(0.3)


def _run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=kw.pop("timeout", 300), **kw)
    if done.returncode:
        raise RuntimeError(f"field set-up: {' '.join(argv[:4])} ... exited {done.returncode}: "
                           f"{(done.stderr or done.stdout)[-800:]}")
    return done


#: clock times and ages ("10:42", "15 min.", "3 hours ago"): a listing shows them, and they change from one
#: fetch to the next without the listing changing
_CLOCK = re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?\b|\b\d+\s*(?:seconds?|secs?|minutes?|mins?|hours?|days?)\b\.?"
                    r"(?:\s+ago)?", re.I)


def _norm_text(text: str) -> str:
    return " ".join(_CLOCK.sub(" ", text).split())


def region_hash(html: str, xpath: str, title: bool = True, controls: tuple[str, ...] = ()) -> str:
    """Hash of the page's title and the text of the application's content area (whitespace normalized), less
    the elements ``controls`` selects (xpaths: a listing's filter controls, a footer that echoes the URL)."""
    import lxml.html
    from lxml import etree

    try:
        tree = lxml.html.fromstring(html)
    except Exception:  # noqa: BLE001 - empty or broken bodies hash as themselves
        return hashlib.sha1(html.encode("utf-8", "replace")).hexdigest()[:12]
    etree.strip_elements(tree, "script", "style", with_tail=False)  # code, and per-request tokens in it
    for path in controls:
        for node in tree.xpath(path):
            node.drop_tree()  # (its tail, the text after it, stays)
    nodes = (tree.xpath("//title") if title else []) + (tree.xpath(xpath) or [tree])
    text = _norm_text(" ".join(n.text_content() for n in nodes))
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


# ------------------------------------------------------------------------------------------ applications

class App:
    name = ""
    #: xpath of the application's content area (ground truth of listings; not the dedup's extraction)
    region = "//body"
    #: xpaths of what in the content area is no part of the resource it shows: a listing's controls (filter
    #: toggles whose labels follow the filter applied: "Hide my edits" / "Show my edits") and text that echoes
    #: the address the page was requested under. Two URLs of one listing showing the same entries are one
    #: resource (the rule above), whatever their controls say.
    controls: tuple[str, ...] = ()

    def __init__(self, state: Path, pages: list[Page]) -> None:
        self.state = state / self.name
        self.pages = pages
        self.port = 0

    # set-up ---------------------------------------------------------------------------------------
    def stamp(self) -> Path:
        return self.state / "ready.json"

    def ready(self) -> bool:
        try:
            stamp = json.loads(self.stamp().read_text())
            return stamp["pages"] == [p.name for p in self.pages] and stamp["version"] == SETUP_VERSION
        except (OSError, ValueError, KeyError):
            return False

    def setup(self) -> None:
        if self.ready():
            return
        if self.state.exists():
            shutil.rmtree(self.state)
        self.state.mkdir(parents=True)
        self.build()
        self.stamp().write_text(json.dumps({"pages": [p.name for p in self.pages], "version": SETUP_VERSION}))

    def build(self) -> None:
        raise NotImplementedError

    def start(self, servers: Servers) -> str:
        """Start the server; returns the start URL."""
        raise NotImplementedError

    # ground truth ---------------------------------------------------------------------------------
    def content_keys(self) -> set[str]:
        return {f"page:{p.name}" for p in self.pages}

    def resource(self, url: str, status: int, ctype: str, body: str) -> tuple[str, str]:
        """(view, resource key) of one response."""
        raise NotImplementedError

    def own_urls(self, key: str) -> set[str]:
        """The URLs under which the application itself shows a content page (path and query)."""
        raise NotImplementedError

    #: kinds of resource key (``kind:page:...``) that show a content page itself, as it was or with
    #: something above it: an earlier revision (the same page, edited: in this set each later revision
    #: rewrites one sentence and adds a closing note) and, where the application renders the whole
    #: revision below its diff, a diff. Their item is the page's (see :meth:`view_of`).
    VIEWS_OF_PAGES: tuple[str, ...] = ("oldrev",)

    def view_of(self, key: str) -> str | None:
        """The content page whose view ``key`` is (its item folds into the page's: counted neither lost nor
        as a resource of its own; an item kept of it besides the page's is a duplicate item of the page), or
        None for a content page or a distinct resource (history list, source view, a diff of the change
        alone, listing...)."""
        kind, _, rest = key.partition(":")
        name = rest.split(":", 1)[0]
        # an imported page only: its revisions are the edits above (a start page's earlier revision, the
        # installer's welcome text, is another text)
        if kind not in self.VIEWS_OF_PAGES or name.lower() not in self._imported():
            return None
        page = next((k for k in self.content_keys() if k.lower() == f"page:{name}".lower()), None)
        return page

    def _imported(self) -> set[str]:
        return {p.name.lower() for p in self.pages}

    def listing(self, view: str, body: str, title: bool = True) -> tuple[str, str]:
        """A resource the application names by no id: its view and what its content area shows (with the
        page's title unless the view is the same whatever page it was opened from). Two views that show the
        same title and content area are one resource (Fossil's ``/dir`` is its ``/tree?type=flat``, its
        ``/reportlist`` its ``/ticket``): the key does not hold the view's name."""
        return view, f"listing:{region_hash(body, self.region, title, self.controls)}"


def _php_server(servers: Servers, docroot: str, port: int, env: dict, router: str | None = None,
                prepend: str | None = None, log: Path | None = None) -> None:
    argv = ["php", "-d", "opcache.enable_cli=1", "-d", "memory_limit=512M"]
    if prepend:
        argv += ["-d", f"auto_prepend_file={prepend}"]
    argv += ["-S", f"127.0.0.1:{port}", "-t", docroot] + ([router] if router else [])
    stderr = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - closed with the process
    servers.start(argv, env={**os.environ, "PHP_CLI_SERVER_WORKERS": "4", **env}, stderr=stderr)


class MediaWiki(App):
    name = "mediawiki"
    region = '//div[@id="bodyContent"]'
    #: the changes lists' options form (filter links, "Show new changes starting from <time>") and the
    #: footer "Retrieved from <the URL requested>"
    controls = ('//fieldset[contains(concat(" ", @class, " "), " rcoptions ")]',
                '//div[contains(concat(" ", @class, " "), " printfooter ")]')
    IP = "/usr/share/mediawiki"
    DOCROOT = "/var/lib/mediawiki"
    #: MediaWiki renders the diff's newer revision, whole, below the diff table
    VIEWS_OF_PAGES = ("oldrev", "diff")

    def conf(self) -> Path:
        return self.state / "LocalSettings.php"

    def build(self) -> None:
        db = self.state / "db"
        db.mkdir()
        _run(["php", f"{self.IP}/maintenance/install.php", "--dbtype", "sqlite", "--dbpath", str(db),
              "--dbname", "fieldwiki", "--server", "http://127.0.0.1", "--scriptpath", "",
              "--confpath", str(self.state), "--pass", "field-bench-admin-1", "Field Wiki", "Admin"],
             timeout=600)
        with open(self.conf(), "a", encoding="utf-8") as f:
            # the port changes from run to run: MediaWiki detects its server from the request
            f.write("\n$wgServer = WebRequest::detectServer();\n$wgEnableUploads = false;\n"
                    "$wgMainCacheType = CACHE_NONE;\n$wgParserCacheType = CACHE_DB;\n")
        src = self.state / "import"
        for rev in (1, 2, 3):
            d = src / f"r{rev}"
            d.mkdir(parents=True)
            for page in self.pages:
                if rev <= page.revisions:
                    (d / page.name).write_text(self.markup(page, rev), encoding="utf-8")
            files = sorted(str(p) for p in d.iterdir())
            if files:
                _run(["php", f"{self.IP}/maintenance/importTextFiles.php", "--conf", str(self.conf()),
                      "--overwrite", "--rc", "-s", f"revision {rev}", *files],
                     env={**os.environ, "MW_CONFIG_FILE": str(self.conf())}, timeout=900)
        main = src / "Main_Page"
        main.write_text("Python's library reference, imported for a crawl benchmark.\n\n"
                        + "\n".join(f"* [[{p.name}|{p.title}]]" for p in self.pages) + "\n",
                        encoding="utf-8")
        _run(["php", f"{self.IP}/maintenance/importTextFiles.php", "--conf", str(self.conf()), "--overwrite",
              str(main)], env={**os.environ, "MW_CONFIG_FILE": str(self.conf())})

    @staticmethod
    def markup(page: Page, rev: int) -> str:
        out = []
        for kind, text in revision_blocks(page, rev):
            text = text.replace("[", "&#91;").replace("]", "&#93;").replace("{", "&#123;").replace("|", "&#124;")
            out.append(f"== {text} ==" if kind == "h" else text)
        out.append("== Related pages ==")
        out += [f"* [[{name}]]" for name in page.links]
        return "\n\n".join(out) + "\n"

    def start(self, servers: Servers) -> str:
        self.port = free_port()
        _php_server(servers, self.DOCROOT, self.port, {"MW_CONFIG_FILE": str(self.conf())},
                    log=self.state / "server.log")
        base = f"http://127.0.0.1:{self.port}"
        wait_http(base + "/index.php/Main_Page", timeout=120)
        return base + "/index.php/Main_Page"

    def content_keys(self) -> set[str]:
        return {f"page:{p.name}" for p in self.pages} | {"page:Main_Page"}

    _CONF = re.compile(r'"(wg[A-Za-z]+)":("(?:[^"\\]|\\.)*"|-?\d+|true|false|null)')

    def resource(self, url: str, status: int, ctype: str, body: str) -> tuple[str, str]:
        if "html" not in ctype:
            q = dict(parse_qsl(urlsplit(url).query))
            return "raw", f"raw:{q.get('title', urlsplit(url).path)}:{q.get('action', '')}:{q.get('oldid', '')}"
        conf = {}
        for k, v in self._CONF.findall(body[:200_000]):
            if k not in conf:
                conf[k] = json.loads(v)
        page = conf.get("wgPageName", "")
        action = conf.get("wgAction", "")
        special = conf.get("wgCanonicalSpecialPageName")
        if special in ("Userlogin", "CreateAccount"):  # one form, whatever page it returns to
            return "login", f"login:{special}"
        if special:
            return self.listing(f"special-{special}", body)
        old, new = conf.get("wgDiffOldId"), conf.get("wgDiffNewId")
        if (old is not None or new is not None) and old != new:
            return "diff", f"diff:{page}:{old}:{new}"
        if action == "view":  # a diff of a revision with itself shows that revision only
            if not conf.get("wgArticleId"):
                return "missing", f"missing:{page}"
            if conf.get("wgRevisionId") != conf.get("wgCurRevisionId"):
                return "oldrev", f"oldrev:{page}:{conf.get('wgRevisionId')}"
            return "page", f"page:{page}"
        if action in ("edit", "submit"):  # a section's source is another resource than the page's
            return self.listing("source", body)
        return self.listing(f"action-{action}", body)

    def own_urls(self, key: str) -> set[str]:
        name = key.split(":", 1)[1]
        return {f"/index.php/{name}", f"/index.php?title={name}"}


class DokuWiki(App):
    name = "dokuwiki"
    region = '//div[contains(concat(" ", @class, " "), " page ")]'
    DOCROOT = "/usr/share/dokuwiki"

    def build(self) -> None:
        conf = self.state / "conf"
        data = self.state / "data"
        conf.mkdir()
        shutil.copytree("/var/lib/dokuwiki/data", data, symlinks=False)
        for sub in ("pages", "attic", "meta", "index", "cache"):
            shutil.rmtree(data / sub, ignore_errors=True)
            (data / sub).mkdir()
        (conf / "local.php").write_text(
            "<?php\n$conf['title'] = 'Field Wiki';\n$conf['lang'] = 'en';\n$conf['useacl'] = 0;\n"
            f"$conf['savedir'] = '{data}';\n$conf['userewrite'] = 0;\n$conf['updatecheck'] = 0;\n"
            # an edit view would lock the page for the next crawl (another session): no locks
            "$conf['locktime'] = 0;\n")
        (conf / "acl.auth.php").write_text("# acl\n*\t@ALL\t1\n")
        (conf / "users.auth.php").write_text("# users\n")
        (self.state / "prepend.php").write_text(f"<?php if(!defined('DOKU_CONF')) define('DOKU_CONF', '{conf}/');\n")
        t0 = 1_700_000_000
        changes_all = []
        for i, page in enumerate(self.pages + [Page("start", "Start", [], [p.name for p in self.pages])]):
            pid = page.name.lower()
            meta_lines = []
            prev_size = 0
            for rev in range(1, page.revisions + 1):
                ts = t0 + i * 10 + rev
                text = self.markup(page, rev)
                gz = data / "attic" / f"{pid}.{ts}.txt.gz"
                with gzip.open(gz, "wt", encoding="utf-8") as f:
                    f.write(text)
                size = len(text.encode())
                line = "\t".join([str(ts), "127.0.0.1", "C" if rev == 1 else "E", pid, "", f"revision {rev}", "",
                                  str(size - prev_size)])
                prev_size = size
                meta_lines.append(line)
                changes_all.append((ts, line))
                if rev == page.revisions:
                    path = data / "pages" / f"{pid}.txt"
                    path.write_text(text, encoding="utf-8")
                    os.utime(path, (ts, ts))
            (data / "meta" / f"{pid}.changes").write_text("\n".join(meta_lines) + "\n")
        changes_all.sort()
        (data / "meta" / "_dokuwiki.changes").write_text("\n".join(line for _, line in changes_all) + "\n")
        _run(["php", "-d", f"auto_prepend_file={self.state / 'prepend.php'}", f"{self.DOCROOT}/bin/indexer.php",
              "-q"], timeout=900)

    @staticmethod
    def markup(page: Page, rev: int) -> str:
        out = [f"====== {page.title} ======"]
        for kind, text in revision_blocks(page, rev):
            text = text.replace("[[", "[ [").replace("{{", "{ {").replace("//", "/ /").replace("**", "* *")
            text = text.replace("__", "_ _").replace("''", "' '")
            out.append(f"===== {text} =====" if kind == "h" else text)
        out.append("===== Related pages =====")
        out += [f"  * [[{name.lower()}]]" for name in page.links]
        return "\n\n".join(out) + "\n"

    def start(self, servers: Servers) -> str:
        self.port = free_port()
        _php_server(servers, self.DOCROOT, self.port, {}, prepend=str(self.state / "prepend.php"),
                    log=self.state / "server.log")
        url = f"http://127.0.0.1:{self.port}/doku.php?id=start"
        wait_http(url, timeout=120)
        return url

    def content_keys(self) -> set[str]:
        return {f"page:{p.name.lower()}" for p in self.pages} | {"page:start"}

    _JSINFO = re.compile(r"JSINFO = (\{.*?\});")

    def current_rev(self, pid: str) -> int | None:
        path = self.state / "data" / "pages" / f"{pid.replace(':', '/')}.txt"
        return int(path.stat().st_mtime) if path.exists() else None

    def resource(self, url: str, status: int, ctype: str, body: str) -> tuple[str, str]:
        parts = urlsplit(url)
        q = dict(parse_qsl(parts.query))
        if "html" not in ctype:
            return "raw", f"raw:{parts.path}:{q.get('id', '')}:{q.get('do', '')}:{q.get('rev', '')}"
        m = self._JSINFO.search(body)
        info = json.loads(m.group(1)) if m else {}
        pid, act = info.get("id") or q.get("id", ""), info.get("ACT") or ""
        if act == "show":
            current = self.current_rev(pid)
            if current is None:
                return "missing", f"missing:{pid}"
            rev = q.get("rev") or ""
            if rev and rev.isdigit() and int(rev) != current:
                return "oldrev", f"oldrev:{pid}:{rev}"
            return "page", f"page:{pid}"
        if act in ("edit", "source"):
            return self.listing("source", body)
        if act in ("login", "register", "resendpwd"):  # one form, whatever page it returns to
            return "login", f"login:{act}"
        if act in ("recent", "index", "media", "search", "profile", "register", "resendpwd",
                   "sitemap", "backlink"):
            # site-wide views: the id= they are opened with names the page to return to, in the title only
            return self.listing(f"do-{act}", body, title=False)
        return self.listing(f"do-{act or q.get('do', '')}", body)

    def own_urls(self, key: str) -> set[str]:
        pid = key.split(":", 1)[1]
        return {f"/doku.php?id={pid}"} | ({"/doku.php", "/"} if pid == "start" else set())


class Fossil(App):
    name = "fossil"
    region = '//div[contains(concat(" ", @class, " "), " content ")]'

    def repo(self) -> Path:
        return self.state / "field.fossil"

    def build(self) -> None:
        repo = str(self.repo())
        env = {**os.environ, "USER": "field", "HOME": str(self.state)}
        _run(["fossil", "new", "--admin-user", "field", repo], env=env)
        # anonymous readers see wiki, tickets, timeline and hyperlinks (a public project's usual settings)
        _run(["fossil", "user", "capabilities", "nobody", "ghjorz", "-R", repo], env=env)
        _run(["fossil", "settings", "auto-hyperlink", "0", "-R", repo], env=env)
        _run(["fossil", "sqlite3", "-R", repo], env=env,
             input="REPLACE INTO config(name,value,mtime) VALUES('index-page','/wiki?name=Home',now());\n")
        tickets = []
        for page in self.pages[::5]:  # one ticket per five pages: a documentation bug report
            blocks = [t for kind, t in page.blocks if kind == "p"][:3]
            done = _run(["fossil", "ticket", "add", "title", f"Docs: {page.title}", "status", "Open", "type",
                         "Documentation", "comment", "\n\n".join(blocks) or page.title, "-R", repo], env=env)
            m = re.search(r"([0-9a-f]{40})", done.stdout)
            if m:
                tickets.append(m.group(1))
        (self.state / "tickets.json").write_text(json.dumps(tickets))
        src = self.state / "src"
        src.mkdir()
        home = Page("Home", "Home", [("p", "Python's library reference, imported for a crawl benchmark.")],
                    [p.name for p in self.pages])
        ticket_list = "\n## Open documentation tickets\n\n" + "".join(f"* [{t[:10]}](/tktview/{t[:10]})\n"
                                                                     for t in tickets)
        for page in self.pages + [home]:
            for rev in range(1, page.revisions + 1):
                f = src / f"{page.name}.{rev}.md"
                f.write_text(self.markup(page, rev) + (ticket_list if page is home else ""), encoding="utf-8")
                _run(["fossil", "wiki", "create" if rev == 1 else "commit", page.name, str(f), "-R", repo,
                      "--mimetype", "text/x-markdown"], env=env)

    @staticmethod
    def markup(page: Page, rev: int) -> str:
        out = [f"# {page.title}"]
        for kind, text in revision_blocks(page, rev):
            text = re.sub(r"([\\`*_\[\]<>#])", r"\\\1", text)
            out.append(f"## {text}" if kind == "h" else text)
        out.append("## Related pages")
        out += [f"* [{name}](/wiki?name={name})" for name in page.links]
        return "\n\n".join(out) + "\n"

    def start(self, servers: Servers) -> str:
        self.port = free_port()
        servers.start(["fossil", "server", "--localhost", "--port", str(self.port), str(self.repo())],
                      env={**os.environ, "HOME": str(self.state)})
        url = f"http://127.0.0.1:{self.port}/wiki?name=Home"
        wait_http(url, timeout=60)
        return url

    def tickets(self) -> list[str]:
        return json.loads((self.state / "tickets.json").read_text())

    def content_keys(self) -> set[str]:
        return ({f"page:{p.name}" for p in self.pages} | {"page:Home"}
                | {f"ticket:{t[:10]}" for t in self.tickets()})

    def resource(self, url: str, status: int, ctype: str, body: str) -> tuple[str, str]:
        parts = urlsplit(url)
        q = dict(parse_qsl(parts.query, keep_blank_values=True))
        segments = unquote(parts.path).strip("/").split("/")
        view = segments[0] or "index"
        if "html" not in ctype:
            return "raw", f"raw:{parts.path}?{parts.query}"
        if view == "login":  # one form, whatever page it leads to (and a captcha drawn per request)
            return "login", "login"
        names = {p.name for p in self.pages} | {"Home"}
        if view in ("wiki", "home", "index") and len(segments) == 1:
            name = q.get("name") or ("Home" if view in ("home", "index") else "")
            if name in names and set(q) <= {"name"}:  # the page at its current version
                return "page", f"page:{name}"
            return self.listing("wiki", body)
        if view in ("tktview", "info"):  # fossil shows a ticket under /info/ID too ("View Ticket")
            ident = (q.get("name") or (segments[1] if len(segments) > 1 else "")).lower()
            match = [t for t in self.tickets() if len(ident) >= 4 and t.startswith(ident)]
            if len(match) == 1 and set(q) <= {"name", "plaintext"}:
                return "page", f"ticket:{match[0][:10]}"
        return self.listing(view, body)

    def own_urls(self, key: str) -> set[str]:
        kind, ident = key.split(":", 1)
        if kind == "ticket":
            return {f"/tktview/{ident}", f"/tktview?name={ident}"}
        return {f"/wiki?name={ident}"} | ({"/", "/home", "/index"} if ident == "Home" else set())


#: Python's CGI server, run without fork: forked, it would switch a root server's CGI to the user nobody,
#: who cannot read a state directory under root's home
CGI_SERVER = """
import sys
from http.server import CGIHTTPRequestHandler, ThreadingHTTPServer
class Handler(CGIHTTPRequestHandler):
    have_fork = False
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


class Cgit(App):
    name = "cgit"
    region = '//div[@id="cgit"]//div[@class="content"]'
    #: the log's "Commit message (Expand)" / "(Collapse)" toggle in its table's header
    controls = ("//th//a",)
    ROOT = "/cgi-bin/cgit.cgi"

    def build(self) -> None:
        work = self.state / "work"
        work.mkdir()
        env = {**os.environ, "GIT_AUTHOR_NAME": "Field", "GIT_AUTHOR_EMAIL": "field@example.org",
               "GIT_COMMITTER_NAME": "Field", "GIT_COMMITTER_EMAIL": "field@example.org", "HOME": str(self.state)}
        _run(["git", "init", "-q", "-b", "master", str(work)], env=env)
        for rev in (1, 2, 3):
            for page in self.pages:
                if rev <= page.revisions:
                    (work / f"{page.name}.md").write_text(Fossil.markup(page, rev).replace("/wiki?name=", "")
                                                          .replace(")", ".md)"), encoding="utf-8")
                    if rev > 1:  # one commit per saved revision of a page
                        _run(["git", "-C", str(work), "add", "-A"], env=env)
                        _run(["git", "-C", str(work), "commit", "-q", "-m", f"{page.name}: revision {rev}"],
                             env=env)
            if rev == 1:
                (work / "README.md").write_text("Python's library reference, imported for a crawl benchmark.\n")
                _run(["git", "-C", str(work), "add", "-A"], env=env)
                _run(["git", "-C", str(work), "commit", "-q", "-m", "Import the library reference"], env=env)
        _run(["git", "clone", "-q", "--bare", str(work), str(self.state / "docs.git")], env=env)
        www = self.state / "www"
        (www / "cgi-bin").mkdir(parents=True)
        shutil.copy("/usr/lib/cgit/cgit.cgi", www / "cgi-bin" / "cgit.cgi")
        for asset in ("cgit.css", "cgit.png"):
            if os.path.exists(f"/usr/share/cgit/{asset}"):
                shutil.copy(f"/usr/share/cgit/{asset}", www / asset)
        (self.state / "cgitrc").write_text(
            "css=/cgit.css\nlogo=/cgit.png\ncache-size=0\nvirtual-root=/cgi-bin/cgit.cgi/\n"
            "root-title=Field git\nenable-commit-graph=0\nmax-stats=\n"
            f"repo.url=docs\nrepo.path={self.state / 'docs.git'}\nrepo.desc=Python library reference\n")

    def git(self, *args: str) -> str:
        return subprocess.run(["git", "--git-dir", str(self.state / "docs.git"), *args], capture_output=True,
                              text=True).stdout.strip()

    def start(self, servers: Servers) -> str:
        self.port = free_port()
        servers.start([sys.executable, "-c", CGI_SERVER, str(self.port)],
                      cwd=str(self.state / "www"),
                      env={**os.environ, "CGIT_CONFIG": str(self.state / "cgitrc"), "PYTHONWARNINGS": "ignore"})
        url = f"http://127.0.0.1:{self.port}{self.ROOT}/docs/"
        wait_http(url, timeout=60)
        return url

    def blob(self, rev: str, path: str) -> str:
        key = (rev, path)
        if not hasattr(self, "_blobs"):
            self._blobs: dict[tuple[str, str], str] = {}
        if key not in self._blobs:
            self._blobs[key] = self.git("rev-parse", f"{rev}:{path}") if path else ""
        return self._blobs[key]

    def resource(self, url: str, status: int, ctype: str, body: str) -> tuple[str, str]:
        parts = urlsplit(url)
        q = dict(parse_qsl(parts.query))
        path = unquote(parts.path)
        rest = path[len(self.ROOT):].strip("/").split("/") if path.startswith(self.ROOT) else [path]
        if len(rest) < 2 or rest[0] != "docs":
            return self.listing("root", body) if "html" in ctype else ("raw", f"raw:{path}")
        view, file = rest[1], "/".join(rest[2:])
        rev = q.get("id") or q.get("h") or "master"
        if view in ("tree", "plain", "blob") and file:
            blob = self.blob(rev, file)
            if not blob or blob.startswith(f"{rev}:"):
                return self.listing(f"{view}-missing", body)
            if "html" not in ctype:
                return "raw", f"raw:{blob}"
            if view == "tree" and blob == self.blob("master", file) and file.endswith(".md") and file != "README.md":
                return "page", f"page:{file[:-3]}"
            if view == "tree" and file.endswith(".md") and file != "README.md":  # the page at another commit
                return "oldrev", f"oldrev:{file[:-3]}:{blob}"
            return "oldrev", f"{view}:{blob}"
        if "html" not in ctype:
            return "raw", f"raw:{path}?{parts.query}"
        if view == "tree" and not file and set(q) <= {"id", "h"}:
            # the repository's tree at a commit: the tree, or an earlier revision of it (a view of the tree, as
            # an earlier revision of a page is of the page: the same listing, edited)
            tree = self.git("rev-parse", f"{rev}^{{tree}}")
            if tree and tree != f"{rev}^{{tree}}":
                return ("tree", f"tree:{tree}") if tree == self.current_tree() else ("treerev", f"treerev:{tree}")
        if view in ("commit", "diff", "patch") and set(q) <= {"id", "id2", "h"}:
            # a commit's page and its diff show the one change (the diff without the message): one resource; so
            # does its diff limited to a path when that path is the only one the commit changed
            commit = self.git("rev-parse", q.get("id") or "master")
            whole = not file or self.git("diff-tree", "--no-commit-id", "--name-only", "-r", commit) == file
            if whole and (not q.get("id2") or self.git("rev-parse", q["id2"]) == self.git("rev-parse", f"{commit}^")):
                return "commit", f"commit:{commit}"
        return self.listing(view, body)

    def own_urls(self, key: str) -> set[str]:
        name = key.split(":", 1)[1]
        return {f"{self.ROOT}/docs/tree/{name}.md"}

    def current_tree(self) -> str:
        if not hasattr(self, "_current_tree"):
            self._current_tree = self.git("rev-parse", "master^{tree}")
        return self._current_tree

    def view_of(self, key: str) -> str | None:
        if key.startswith("treerev:"):  # the repository's tree at an earlier commit: a view of its tree
            return f"tree:{self.current_tree()}"
        return super().view_of(key)


APP_CLASSES: dict[str, type[App]] = {"mediawiki": MediaWiki, "dokuwiki": DokuWiki, "fossil": Fossil, "cgit": Cgit}


def make_app(name: str, state: Path, pages: list[Page]) -> App:
    return APP_CLASSES[name](state, pages)


def iter_apps(names: list[str], state: Path, count: int) -> Iterator[App]:
    pages = load_pages(count)
    for name in names:
        yield make_app(name, state, pages)
