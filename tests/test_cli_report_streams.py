"""The real ``scrapy-dedup`` command on awkward inputs and outputs: streams that cannot seek, lone
surrogates in records, file names that are not UTF-8, files that cannot be written.

The contract (docs/audit.md, "Exit status"): 0 ok, 1 only for the ``--fail-above`` gate, 2 for every error,
with one line on stderr naming the file, never a traceback. Each case is a bash script run with the
console entry (``python -m scrapy_dedup``), so FIFOs, pipes and process substitution are real.
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Callable, NamedTuple, Optional

import lxml.html
import pytest

from tests.test_cli_report import body_words, edit_to_distance, html_page, write_dump

ROOT = Path(__file__).resolve().parents[1]
SURROGATE = "\ud800"
KEPT = f"https://shop.test/{SURROGATE}/kept"  # the representative of a cluster
NEAR = f"https://shop.test/item?ref={SURROGATE}"  # flagged near copy of KEPT
# exact copy of KEPT; not ASCII; a longer URL, so that KEPT represents the cluster under the default policy too
EXACT = "https://shop.test/caf\u00e9/copy-of-kept"
PAGES = 6


def make_dump(directory: Path) -> Path:
    words = body_words(7)
    words[5] = f"x{SURROGATE}y"  # a surrogate among the words the --html sample shows
    near = edit_to_distance(words, 2, seed=3)
    lines = [{"url": KEPT, "text": " ".join(words)},
             {"url": NEAR, "text": " ".join(near)},
             {"url": EXACT, "text": " ".join(words)}]
    lines += [{"url": f"https://shop.test/other/{i}", "html": html_page(body_words(50 + i))}
              for i in range(PAGES - len(lines))]
    lines.append({f"link{SURROGATE}": "no url"})  # a bad line: its keys are the text report's hint
    # json.dumps writes a lone surrogate as the escape "\ud800": the ASCII dump a crawl would write
    return write_dump(directory / "dump.jsonl", lines)


class Run(NamedTuple):
    code: int
    stdout: bytes
    stderr: str
    cwd: Path


def run_script(script: str, cwd: Path, env: Optional[dict] = None) -> Run:
    """``script`` in bash, in ``cwd``, with ``$SD`` the console entry; stdout as bytes (checked as UTF-8)."""
    sd = f"{shlex.quote(sys.executable)} -m scrapy_dedup"
    full_env = {k: v for k, v in os.environ.items() if k not in ("SCRAPY_DEDUP_DEBUG", "PYTHONIOENCODING")}
    full_env.update(PYTHONPATH=str(ROOT), SD=sd, **(env or {}))
    proc = subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, env=full_env, timeout=180)
    return Run(proc.returncode, proc.stdout, proc.stderr.decode("utf-8", "replace"), cwd)


# --- checks of a successful run ---------------------------------------------------------------------

def json_stdout(run: Run) -> dict:
    data = json.loads(run.stdout.decode("utf-8"))  # strict: valid UTF-8
    assert data["numbers"]["total"] == PAGES
    return data


def check_json(run: Run) -> None:
    data = json_stdout(run)
    assert data["largest_clusters"][0]["representative"] == KEPT  # the surrogate, read back intact


def check_text(run: Run) -> None:
    text = run.stdout.decode("utf-8")  # strict
    assert text.startswith("Total URLs:") and f" {PAGES}" in text.splitlines()[0]
    assert "records have the fields link\\ud800;" in text  # the bad line's key, as the visible escape


def jsonl_file(name: str) -> Callable[[Run], list]:
    def rows(run: Run) -> list:
        raw = (run.cwd / name).read_bytes().decode("utf-8")  # strict
        return [json.loads(line) for line in raw.splitlines()]
    return rows


def check_clusters(run: Run) -> None:
    rows = jsonl_file("clusters.jsonl")(run)
    assert {r["url"] for r in rows} == {KEPT, NEAR, EXACT}
    assert {r["representative"] for r in rows} == {KEPT}


def check_pairs(run: Run) -> None:
    rows = jsonl_file("pairs.jsonl")(run)
    assert {(r["url_a"], r["url_b"]) for r in rows} == {(KEPT, NEAR), (KEPT, EXACT)}


def html_of(run: Run, name: str = "report.html") -> str:
    page = (run.cwd / name).read_bytes().decode("utf-8")  # strict
    lxml.html.document_fromstring(page)  # parses
    return page


def check_html(run: Run) -> None:
    page = html_of(run)
    # the surrogate of a URL and of a sampled word, as the visible escape
    assert "https://shop.test/\\ud800/kept" in page and "x\\ud800y" in page
    assert "<ins>" in page  # the near pair's own words: the dump was read a second time


def check_pairs_through_fifo(run: Run) -> None:
    assert (run.cwd / "fifo").is_fifo()  # written through, not replaced
    check_pairs(run)


def check_symlink_kept(run: Run) -> None:
    assert (run.cwd / "link.html").is_symlink()
    html_of(run, "real.html")


def check_previous_file_kept(run: Run) -> None:
    error_naming("missing.jsonl", "cannot open dump")(run)
    assert (run.cwd / "report.html").read_text() == "the previous report\n"


def check_stream_html(run: Run) -> None:
    check_text(run)
    check_html(run)


def check_name_html(run: Run) -> None:
    page = html_of(run)
    tree = lxml.html.document_fromstring(page)
    shown = "dump-<b>&\\xff.jsonl"  # the file name's byte 0xff as \xff, the markup as text
    assert tree.findtext(".//title") == f"Duplication audit: {shown}"
    assert "dump-&lt;b&gt;&amp;\\xff.jsonl" in page and "<b>&" not in page


def check_ascii_json(run: Run) -> None:
    run.stdout.decode("ascii")
    check_json(run)


# --- checks of a failed run -------------------------------------------------------------------------

def error_naming(*words: str) -> Callable[[Run], None]:
    """The run ended in one error line (``scrapy-dedup COMMAND: ...``) holding ``words``."""
    def check(run: Run) -> None:
        errors = [line for line in run.stderr.splitlines() if line.startswith("scrapy-dedup ")]
        assert len(errors) == 1, run.stderr
        for word in words:
            assert word in errors[0], run.stderr
    return check


def gate_message(run: Run) -> None:
    assert "is above --fail-above 0.0%" in run.stderr


def fifo(command: str) -> str:
    """``command`` reading the FIFO ``fifo`` that a background ``cat`` of the dump writes (killed after)."""
    return ("mkfifo fifo; { cat dump.jsonl > fifo; } >/dev/null 2>&1 & writer=$!; "
            f"{command}; rc=$?; kill $writer 2>/dev/null; exit $rc")


NON_UTF8 = "'dump-<b>&'$'\\xff''.jsonl'"  # bash quoting: the name holds markup and the byte 0xff
GZIP_GARBAGE = r"printf '\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03garbage-deflate-data' > bad.gz"


class Case(NamedTuple):
    id: str
    script: str
    code: int
    check: Callable[[Run], None]
    env: Optional[dict] = None
    traceback: bool = False


CASES = [
    # streams that cannot seek
    Case("fifo", fifo("$SD report fifo --json"), 0, check_json),
    Case("fifo --html", fifo("$SD report fifo --html report.html"), 0, check_stream_html),
    Case("fifo --jobs 2", fifo("$SD report fifo --json --jobs 2"), 0, check_json),
    Case("pipe into /dev/stdin", "cat dump.jsonl | $SD report /dev/stdin --json", 0, check_json),
    Case("pipe into /dev/stdin --html", "cat dump.jsonl | $SD report /dev/stdin --html report.html", 0,
         check_stream_html),
    Case("gzip pipe on -", "gzip -c dump.jsonl | $SD report - --json", 0, check_json),
    Case("process substitution", "$SD report <(cat dump.jsonl)", 0, check_text),
    Case("process substitution of gzip --html", "gzip -k dump.jsonl; $SD report <(cat dump.jsonl.gz) "
         "--html report.html", 0, check_stream_html),
    # a lone surrogate in the records, in every output
    Case("surrogate in the text report", "$SD report dump.jsonl", 0, check_text),
    Case("surrogate in the text report, strict stdout", "$SD report dump.jsonl", 0, check_text,
         env={"PYTHONIOENCODING": "utf-8:strict"}),
    Case("surrogate --json", "$SD report dump.jsonl --json", 0, check_json),
    Case("surrogate --json on an ASCII stdout", "$SD report dump.jsonl --json", 0, check_ascii_json,
         env={"PYTHONIOENCODING": "ascii"}),
    Case("surrogate --clusters", "$SD report dump.jsonl --clusters clusters.jsonl", 0, check_clusters),
    Case("surrogate --pairs", "$SD report dump.jsonl --pairs pairs.jsonl", 0, check_pairs),
    Case("surrogate --pairs --all-pairs", "$SD report dump.jsonl --pairs pairs.jsonl --all-pairs", 0, check_pairs),
    Case("surrogate --html", "$SD report dump.jsonl --html report.html", 0, check_html),
    # a file name that is not UTF-8
    Case("non-UTF-8 name --html", f"cp dump.jsonl {NON_UTF8}; $SD report {NON_UTF8} --html report.html", 0,
         check_name_html),
    Case("non-UTF-8 name --json", f"cp dump.jsonl {NON_UTF8}; $SD report {NON_UTF8} --json", 0, check_json),
    Case("missing non-UTF-8 name", f"$SD report {NON_UTF8}", 2,
         error_naming("dump-<b>&\\xff.jsonl", "cannot open dump", "No such file")),
    # outputs that cannot be written (under a regular file: fails for root too)
    Case("unwritable --html", "touch file; $SD report dump.jsonl --html file/out.html", 2,
         error_naming("file/out.html", "--html file", "Not a directory")),
    Case("unwritable --pairs", "touch file; $SD report dump.jsonl --pairs file/p.jsonl", 2,
         error_naming("file/p.jsonl", "--pairs file", "Not a directory")),
    Case("unwritable --clusters, with a gate", "touch file; $SD report dump.jsonl --clusters file/c.jsonl "
         "--fail-above 0", 2, error_naming("file/c.jsonl", "--clusters file", "Not a directory")),
    Case("full disk", "$SD report dump.jsonl --html /dev/full", 2,
         error_naming("/dev/full", "--html file", "No space left")),
    # outputs replaced only by a complete new file; FIFOs and devices written through
    Case("input error keeps the previous --html", "echo 'the previous report' > report.html; "
         "$SD report missing.jsonl --html report.html", 2, check_previous_file_kept),
    Case("--html through a symlink", "ln -s real.html link.html; $SD report dump.jsonl --html link.html", 0,
         check_symlink_kept),
    Case("--pairs into a FIFO", "mkfifo fifo; cat fifo > pairs.jsonl 2>/dev/null & reader=$!; "
         "$SD report dump.jsonl --pairs fifo; rc=$?; [ $rc = 0 ] || kill $reader; wait; exit $rc", 0,
         check_pairs_through_fifo),
    # unreadable input
    Case("corrupt gzip", GZIP_GARBAGE + "; $SD report bad.gz", 2, error_naming("bad.gz", "corrupt")),
    Case("directory as dump", "mkdir d; $SD report d", 2, error_naming("d: cannot open dump")),
    # the gate is the only 1
    Case("gate", "$SD report dump.jsonl --fail-above 0", 1, gate_message),
    Case("gate, stdout closed early", "$SD report dump.jsonl --fail-above 0 | true; exit ${PIPESTATUS[0]}", 1,
         gate_message),
    # mine-dust shares main(): an output it cannot write is a 2 with one line
    Case("mine-dust unwritable -o", "touch file; $SD mine-dust dump.jsonl -o file/rules.json", 2,
         error_naming("mine-dust", "file/rules.json", "Not a directory")),
    Case("mine-dust traceback on request", "touch file; $SD mine-dust dump.jsonl -o file/rules.json", 2,
         error_naming("mine-dust", "Not a directory"), env={"SCRAPY_DEDUP_DEBUG": "1"}, traceback=True),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_report_exit_status_and_outputs(case: Case, tmp_path: Path) -> None:
    make_dump(tmp_path)
    run = run_script(case.script, tmp_path, case.env)
    assert run.code == case.code, run.stderr
    assert ("Traceback" in run.stderr) is case.traceback, run.stderr
    case.check(run)
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith("scrapy-dedup-dump-")
                 or p.name.endswith(".tmp")]
    assert not leftovers  # neither the spooled dump nor an output's temporary file


def test_spool_that_cannot_be_written_names_the_directory(tmp_path: Path) -> None:
    """With ``--html``, a dump on a stream is copied to a temporary file first: a directory that cannot
    hold it is an OutputError naming it (exit 2 through the command), and nothing is left behind."""
    from scrapy_dedup.audit.output import OutputError
    from scrapy_dedup.audit.runner import spool_dump

    dump = make_dump(tmp_path)
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match=r"file/spool/scrapy-dedup-dump-\w+\.spool: cannot write the temporary copy"):
        spool_dump(str(dump), directory=str(tmp_path / "file" / "spool"))
    copy = spool_dump(str(dump), directory=str(tmp_path))
    try:
        assert Path(copy).read_bytes() == dump.read_bytes()
    finally:
        os.unlink(copy)
