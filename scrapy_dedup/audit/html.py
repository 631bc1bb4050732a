"""The self-contained HTML audit page of ``scrapy-dedup report --html FILE``.

Safety: every string that came from the dump (URLs, words of pages) goes through
:func:`html.escape` and nothing else is interpolated, so markup in a page is shown
as text. On top of that, the page carries a Content-Security-Policy that forbids
every script (``default-src 'none'``, no ``script-src``), every request (no
images, fonts, frames, forms, ``base``) and every style except the page's own
``<style>`` block, allowed by its SHA-256 hash. The page needs no script: the
expandable parts are ``<details>`` elements and the charts are inline SVG.

Code points UTF-8 cannot hold (a lone surrogate from a ``\ud800`` escape in a record)
are written as the visible escape ``\ud800`` by the file writer
(:class:`~scrapy_dedup.audit.output.OutputFile`); the dump's file name is shown with
bytes that are not UTF-8 as ``\xff`` (:func:`~scrapy_dedup.audit.output.dump_name`).
"""
from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Mapping
from html import escape

from scrapy_dedup.audit.output import dump_name
from scrapy_dedup.audit.pairs import DiffRun
from scrapy_dedup.audit.result import AuditResult

__all__ = ["render_html", "CSS", "content_security_policy"]

#: equal runs longer than this are folded to their first and last CONTEXT words
FOLD_OVER = 24
CONTEXT = 8

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:1200px;
padding:1em 2em;color:#1d2330;background:#fff}
h1{font-size:1.6em;margin:.2em 0}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ccd}
table{border-collapse:collapse}td,th{padding:.2em .8em;text-align:left;vertical-align:top}
table.numbers td.n{text-align:right;font-variant-numeric:tabular-nums;font-weight:600}
table.numbers tr:nth-child(-n+3) td{font-size:1.15em}
.muted{color:#667}.url{font-family:ui-monospace,monospace;font-size:.9em;word-break:break-all}
.pair{border:1px solid #ccd;border-radius:6px;margin:1em 0;padding:.6em 1em}
.pair h3{font-size:1em;margin:.2em 0 .5em}.tag{display:inline-block;border-radius:4px;padding:0 .5em;
background:#eef;margin-right:.5em;font-size:.85em}.tag.siblings{background:#fde2c8}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:1em}.cols>div{font-size:.92em;overflow-wrap:anywhere}
del{background:#ffd7d5;text-decoration:none}ins{background:#ccf2d1;text-decoration:none}
.fold{color:#889;font-style:italic}svg text{font:11px system-ui,sans-serif;fill:#334}
svg rect{fill:#5477c4}details{margin:.3em 0}summary{cursor:pointer}
"""


def content_security_policy(css: str = CSS) -> str:
    digest = base64.b64encode(hashlib.sha256(css.encode("utf-8")).digest()).decode("ascii")
    return ("default-src 'none'; script-src 'none'; object-src 'none'; base-uri 'none'; form-action 'none'; "
            f"frame-src 'none'; img-src 'none'; style-src 'sha256-{digest}'")


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _bar_chart(title: str, data: Mapping, label: str) -> str:
    """A horizontal bar chart in inline SVG (attributes only: the CSP allows no inline style)."""
    if not data:
        return f"<p class='muted'>{_e(title)}: none.</p>"
    items = sorted(data.items())
    top = max(v for _, v in items) or 1
    row, width, left = 18, 520, 90
    height = row * len(items) + 4
    parts = [f"<svg role='img' aria-label='{_e(title)}' width='{left + width + 80}' height='{height}'>"]
    for i, (key, value) in enumerate(items):
        y = i * row + 2
        w = max(1, round(width * value / top))
        parts.append(f"<text x='{left - 6}' y='{y + 12}' text-anchor='end'>{_e(label)} {_e(key)}</text>"
                     f"<rect x='{left}' y='{y}' width='{w}' height='{row - 4}'/>"
                     f"<text x='{left + w + 6}' y='{y + 12}'>{_e(value)}</text>")
    parts.append("</svg>")
    return f"<figure><figcaption>{_e(title)}</figcaption>{''.join(parts)}</figure>"


def _words(words: Iterable[str]) -> str:
    return _e(" ".join(words))


def _diff_columns(runs: Iterable[DiffRun]) -> tuple[str, str]:
    left: list[str] = []
    right: list[str] = []
    for op, a, b in runs:
        if op == "equal":
            if len(a) > FOLD_OVER:
                folded = (f"{_words(a[:CONTEXT])} <span class='fold'>[… {len(a) - 2 * CONTEXT} same "
                          f"words …]</span> {_words(a[-CONTEXT:])}")
            else:
                folded = _words(a)
            left.append(folded)
            right.append(folded)
            continue
        if a:
            left.append(f"<del>{_words(a)}</del>")
        if b:
            right.append(f"<ins>{_words(b)}</ins>")
    return " ".join(left), " ".join(right)


def _numbers_table(result: AuditResult) -> str:
    rows = []
    for label, value, share in result.number_rows():
        share_html = f"<td class='muted'>{_e(share)}</td>" if share else "<td></td>"
        rows.append(f"<tr><td>{_e(label)}</td><td class='n'>{_e(value)}</td>{share_html}</tr>")
    return "<table class='numbers' id='numbers'>" + "".join(rows) + "</table>"


def _clusters(result: AuditResult) -> str:
    if not result.largest_clusters:
        return "<p class='muted'>No duplicate clusters.</p>"
    out = []
    for cluster in result.largest_clusters:
        members = "".join(
            f"<li><span class='url'>{_e(url)}</span> <span class='muted'>({_e(kind)}, distance {_e(d)})</span></li>"
            for url, kind, d in cluster.members)
        more = cluster.size - 1 - len(cluster.members)
        more_html = f"<li class='muted'>… and {more} more</li>" if more > 0 else ""
        out.append(f"<details><summary><b>{_e(cluster.size)} URLs</b> represented by: "
                   f"<span class='url'>{_e(cluster.representative)}</span></summary><ul>{members}{more_html}</ul>"
                   "</details>")
    return "".join(out)


def _boilerplate(blocks: tuple) -> str:
    """The blocks each page's host repeats (learnt boilerplate), left out of the fingerprints compared."""
    if not blocks:
        return ""
    cols = "".join(
        f"<div><ul class='boilerplate'>{''.join(f'<li>{_e(b)}</li>' for b in side)}</ul></div>" if side
        else "<div><p class='muted'>none</p></div>" for side in blocks)
    count = sum(len(side) for side in blocks)
    return (f"<details class='boilerplate'><summary>Blocks treated as boilerplate ({count}): left out of the "
            f"fingerprints</summary><div class='cols'>{cols}</div></details>")


def _pairs(result: AuditResult) -> str:
    if not result.samples:
        return "<p class='muted'>No flagged pairs.</p>"
    out = []
    for i, pair in enumerate(result.samples, 1):
        left, right = _diff_columns(pair.diff)
        cls = "tag siblings" if pair.category == "possible templated siblings" else "tag"
        out.append(
            f"<section class='pair' id='pair-{i}'><h3>#{i} <span class='{cls}'>{_e(pair.category)}</span>"
            f"<span class='tag'>{_e(pair.kind)}</span><span class='tag'>distance {_e(pair.distance)}</span></h3>"
            f"<div class='cols'><div><div class='url'>kept: {_e(pair.url_a)}</div><p>{left}</p></div>"
            f"<div><div class='url'>flagged: {_e(pair.url_b)}</div><p>{right}</p></div></div>"
            f"{_boilerplate(pair.boilerplate)}</section>")
    return "".join(out)


def _mirrors(result: AuditResult) -> str:
    """What causes the mirrors (:mod:`~scrapy_dedup.audit.mirrors`), and the settings and command that remove them."""
    report = result.mirrors
    if report is None:
        return ""
    if not report.pairs:
        lines = "".join(f"<p>{_e(line.strip())}</p>" for line in report.lines())
        return f"<h2>Mirrors</h2><div id='mirrors'>{lines}</div>"
    rows = [("Mirror pairs (duplicates at different URLs)", report.pairs),
            ("Folded by the add-on's default canonicalization", report.by_default),
            ("Folded by settings off by default", report.by_settings),
            ("Folded by DUST rules mined from the dump", report.by_rules),
            ("Opaque aliases (in the mined alias table)", report.by_aliases),
            ("Unexplained", report.unexplained)]
    table = "".join(f"<tr><td>{_e(label)}</td><td class='n'>{_e(n)}</td></tr>" for label, n in rows)
    hosts = ", ".join(report.hosts[:5]) + (f", … ({len(report.hosts)} hosts)" if len(report.hosts) > 5 else "")
    parts = [f"<h2>Mirrors</h2><div id='mirrors'><p class='muted'>On {_e(len(report.hosts))} host(s): "
             f"<span class='url'>{_e(hosts)}</span>.</p><table class='numbers'>{table}</table>"]
    if report.settings:
        items = "".join(f"<li>{_e(s.pairs)} pairs: {_e(s.describe())}</li>" for s in report.settings)
        parts.append(f"<h3>Settings</h3><ul>{items}</ul><pre>{_e(report.policy_line())}</pre>")
    if report.rules:
        items = "".join(f"<tr><td>{_e(r.form)}</td><td class='url'>{_e(r.host)}: {_e(r.description)}</td>"
                        f"<td class='n'>{_e(r.pairs)}</td></tr>" for r in report.rules)
        parts.append(f"<h3>DUST rules</h3><table class='rules'><tr><th>form</th><th>rule</th><th>pairs</th></tr>"
                     f"{items}</table>")
    if report.examples:
        items = "".join(f"<li><span class='url'>{_e(a)}</span> ~ <span class='url'>{_e(b)}</span></li>"
                        for a, b in report.examples)
        parts.append(f"<h3>Unexplained (examples)</h3><ul>{items}</ul>")
    if report.merged:
        rules = "".join(f"<li>{_e(rule)} ({_e(n)} URLs)</li>" for rule, n in report.merged_rules)
        items = "".join(f"<li><span class='url'>{_e(a)}</span> ~ <span class='url'>{_e(b)}</span></li>"
                        for a, b in report.merged_examples)
        parts.append(f"<h3>Warning: distinct pages merged</h3><p id='mirrors-merged'>{_e(report.merged)} URLs of "
                     f"distinct pages get the URL of another page with these settings and rules (a crawl would not "
                     f"fetch them): review the rules file. Rules firing on them:</p><ul>{rules}</ul><ul>{items}</ul>")
    commands = "\n".join((report.command, report.rules_line())) if report.command and report.rules_line() else ""
    if commands:
        parts.append(f"<h3>To remove them</h3><pre>{_e(commands)}</pre>")
    for text in (report.command_note, report.note):
        if text:
            parts.append(f"<p class='muted'>{_e(text)}</p>")
    return "".join(parts) + "</div>"


def render_html(result: AuditResult) -> str:
    """The whole audit page as one string (no external resources)."""
    csp = content_security_policy()
    categories = "".join(f"<tr><td>{_e(name)}</td><td class='n'>{_e(n)}</td></tr>"
                         for name, n in sorted(result.categories.items(), key=lambda kv: -kv[1]))
    bad = ""
    if result.bad_lines.count:
        unit = result.unit  # "line" (JSON Lines) or "record" (WARC)
        items = "".join(f"<li>{_e(r['count'])} × {_e(r['reason'])} "
                        f"({unit}s {_e(', '.join(map(str, r['lines'])))})</li>"
                        for r in result.bad_lines.to_dict()["reasons"])
        bad = f"<h2>Bad {unit}s</h2><p>{_e(result.bad_lines.count)} {unit}s skipped:</p><ul>{items}</ul>"
    distance_label = "distance" if result.config.method == "simhash" else "1-J ≈"
    source = dump_name(result.source)
    return f"""<!DOCTYPE html>
<html lang="en"><head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_e(csp)}">
<meta name="referrer" content="no-referrer">
<title>Duplication audit: {_e(source)}</title>
<style>{CSS}</style>
</head><body>
<h1>Duplication audit</h1>
<p class="muted">Dump <span class="url">{_e(source)}</span>, method {_e(result.config.method)}
({_e(result.method_summary())}), {_e(result.elapsed_text())}.</p>
<h2>Numbers</h2>
{_numbers_table(result)}
{bad}
<h2>Flagged pairs by likely category</h2>
<table class="numbers" id="categories">{categories or "<tr><td class='muted'>none</td></tr>"}</table>
<h2>Distances of flagged pairs</h2>
{_bar_chart("Flagged pairs per distance", result.distance_histogram, distance_label)}
<h2>Cluster sizes</h2>
{_bar_chart("Clusters per size (pages)", result.cluster_sizes, "size")}
{_mirrors(result)}
<h2>Largest clusters</h2>
<p class="muted">{_e(result.representative_text())}.</p>
{_clusters(result)}
<h2>Sample of flagged pairs</h2>
<p class="muted">{_e(len(result.samples))} of {_e(result.flagged_pairs)} flagged pairs, drawn with seed
{_e(result.config.seed)}; words only in the kept page are <del>struck</del>, words only in the flagged page
are <ins>marked</ins>.</p>
{_pairs(result)}
</body></html>
"""
