"""Defaults lose nothing on near-identical siblings, and a page that is only its host's template is kept.

The release-notes pages are real text: the GNU coreutils, GnuTLS and GLib NEWS files that Debian ships
(coreutils is essential: always there), cut at successive releases and rendered through one site template
(benchmarks/quality_corpus.py: ``release_pages``). Each page shares most of its paragraphs with the next
release's; each has one generated duplicate (an edit, a number, a "generated at" line, ...)."""
from __future__ import annotations

import os
import random
import sys

import pytest

from scrapy_dedup.content.boilerplate import BoilerplateJudge, BoilerplateLearner, BoilerplateRule
from scrapy_dedup.content.engine import ContentDeduplicator
from scrapy_dedup.content.extract import ExtractionPolicy, extract_text
from scrapy_dedup.url.views import page_key
from tests.contentsite import words

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
import quality_corpus as qc  # noqa: E402


def _default_judge() -> BoilerplateJudge:
    return BoilerplateJudge(ContentDeduplicator.in_memory(), BoilerplateLearner(BoilerplateRule()))


def _judge_all(judge: BoilerplateJudge, pages: list[tuple[str, bytes]]) -> list:
    out = []
    for url, html in pages:
        extraction = extract_text(html, ExtractionPolicy(), blocks=True)
        out.append(judge.check(url, extraction.blocks or [], title=extraction.title))
    return out


def test_the_release_notes_material_is_there():
    assert len(qc.news_releases(qc.NEWS_SOURCES[0])) >= 40  # coreutils: an essential package


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_release_notes_siblings_are_never_dropped_at_defaults(seed):
    pages = qc.release_pages(12, seed, 0)
    assert sum(p.kind == "release" for p in pages) >= 12
    random.Random(seed).shuffle(pages)
    group = {p.url: p.group for p in pages}
    judgements = _judge_all(_default_judge(), [(p.url, p.html) for p in pages])
    lost = [(p.url, j.verdict.kept_url) for p, j in zip(pages, judgements)
            if j.verdict.is_duplicate and group[j.verdict.kept_url] != p.group]
    assert lost == []
    # the same page, edited, is still found: the later of each pair a duplicate of the earlier
    first: dict[int, str] = {}
    found = pairs = 0
    for p, j in zip(pages, judgements):
        if p.group in first:
            pairs += 1
            found += j.verdict.kept_url == first[p.group]
        first.setdefault(p.group, p.url)
    assert found >= 0.8 * pairs, (found, pairs)


CHROME = "".join(f"<div>Site wide chrome line number {k} with a few words of navigation text</div>"
                 for k in range(6))


def _site_page(title: str, own: str) -> bytes:
    return f"<html><head><title>{title}</title></head><body>{CHROME}<div>{own}</div></body></html>".encode()


def test_a_page_that_is_only_its_hosts_template_is_undecidable_kept_counted_and_named():
    rng = random.Random(5)
    words = "alpha beta gamma delta kappa lambda sigma omega river stone cloud field".split()
    judge = _default_judge()
    pages = [(f"https://t.test/a/{i}", _site_page(f"A{i}", " ".join(rng.choice(words) for _ in range(60))))
             for i in range(14)]  # past the warm-up: the six chrome lines are boilerplate
    # three pages with no text of their own (an extraction that left their text out): the same chrome
    pages += [(f"https://t.test/empty/{i}", _site_page(f"E{i}", "")) for i in range(3)]
    judgements = _judge_all(judge, pages)
    assert all(not j.verdict.is_duplicate for j in judgements)
    assert [j.undecidable for j in judgements[-3:]] == [True] * 3
    report = judge.engine.report()
    assert report.undecidable == 3 and report.unique == 17
    assert report.undecidable_named == tuple(url for url, _ in pages[-3:])
    assert report.to_stats()["dedup/content/undecidable"] == 3
    text = report.to_text()
    assert "Undecidable pages:" in text and "https://t.test/empty/2" in text


_SHARED = " ".join(words(4343, 600))


def _named_page(title: str, heading: str, under: str = "", section: str = "", header: str = "Logo",
                edit: str = "") -> bytes:
    """A page whose text is ``_SHARED`` (with ``edit`` appended: a near duplicate of the others) under a site
    ``<header>`` heading, its first heading, a line under it and a section heading."""
    return (f"<html><head><title>{title}</title></head><body><header><h1>{header}</h1></header><main>"
            f"<h1>{heading}</h1>" + (f"<div>{under}</div>" if under else "") + f"<p>{_SHARED} {edit}</p>"
            + (f"<h3>{section}</h3>" if section else "") + "<p>Nothing was found.</p></main></body></html>").encode()


@pytest.mark.parametrize("first, second, same", [
    # a heading or the line under the first heading names another subject: a sibling listing
    (dict(title="Media", heading="Media Manager", section="Files in [root]"),
     dict(title="Media", heading="Media Manager", section="Search in [root]"), False),
    (dict(title="Related changes", heading="Related changes", under="&larr; Harbor"),
     dict(title="Related changes", heading="Related changes", under="&larr; Lighthouse"), False),
    (dict(title="Timeline", heading="25 events by user field occurring around 2026-12-03 10:55:07."),
     dict(title="Timeline", heading="26 events occurring around c45b2e096d9d82b1."), False),
    # a heading with words added in its place, under URLs that are no view of one page: what it shows is named
    (dict(title="Timeline", heading="1 check-in"), dict(title="Timeline", heading='1 check-in related to "trunk"'),
     False),
    (dict(title="Harbor", heading="Harbor"), dict(title="Harbor", heading="Harbor: Difference between revisions"),
     False),
    # the same page, edited or viewed: a number changed, a section or words added, a per-fetch line, the chrome
    (dict(title="Notes", heading="Changes in release 3.2"), dict(title="Notes", heading="Changes in release 3.3"), True),
    (dict(title="Notes", heading="Notes"), dict(title="Notes", heading="Notes", section="See also"), True),
    (dict(title="Harbor", heading="Harbor"), dict(title="Harbor: Difference between revisions", heading="Harbor"),
     True),
    (dict(title="Harbor", heading="Harbor", under="Served at 12:00 by node-7 in 31 ms"),
     dict(title="Harbor", heading="Harbor", under="Served at 14:05 by node-3 in 8 ms"), True),
    (dict(title="Harbor", heading="Harbor", header="Spring sale"), dict(title="Harbor", heading="Harbor",
                                                                        header="Winter sale"), True),
])
def test_headings_and_the_line_under_the_first_tell_a_sibling_from_the_same_page(first, second, same):
    judge = _default_judge()
    pages = [("https://w.test/a", _named_page(**first)), ("https://w.test/b", _named_page(**second, edit="lambda"))]
    judgements = _judge_all(judge, pages)
    assert judgements[0].verdict.kind == "unique"
    assert judgements[1].verdict.is_duplicate is same, judgements[1].verdict
    # the texts are near duplicates: without the pages' names the second is its first's duplicate
    unnamed = _default_judge()
    for url, html in pages:
        unnamed.check(url, extract_text(html, ExtractionPolicy(), blocks=True).blocks or [])
    assert unnamed.engine.report().near == 1


@pytest.mark.parametrize("first, second, same", [
    ("https://w.test/index.php?title=Harbor", "https://w.test/index.php?title=Harbor&diff=2&oldid=1", True),
    ("https://w.test/index.php?title=Harbor&diff=2&oldid=1", "https://w.test/index.php/Harbor", True),
    ("https://w.test/index.php?title=Harbor", "https://w.test/index.php?title=Lighthouse&diff=2&oldid=1", False),
    ("https://w.test/timeline", "https://w.test/timeline?r=trunk", False),
])
def test_a_heading_with_words_added_is_the_same_page_only_under_a_view_of_it(first, second, same):
    """A diff headed "X: Difference between revisions" is a view of X by its URL (url/views.py page_key, the
    crawl's): the same page, whichever comes first; a heading grown under another page's URL names what that page
    shows."""
    judge = BoilerplateJudge(ContentDeduplicator.in_memory(), BoilerplateLearner(BoilerplateRule()),
                             page_of_key=page_key)
    article = _named_page(title="Harbor", heading="Harbor")
    diff = _named_page(title="Harbor", heading="Harbor: Difference between revisions", edit="lambda")
    pages = [(url, diff if "diff=" in url or "r=" in url else article) for url in (first, second)]
    judgements = _judge_all(judge, pages)
    assert judgements[0].verdict.kind == "unique"
    assert judgements[1].verdict.is_duplicate is same, judgements[1].verdict


def test_a_page_whose_text_stayed_in_the_store_is_told_by_its_name_though_it_was_a_duplicate():
    """Fossil: a ticket's page, its /info/ page (the same ticket with its history: a duplicate of the ticket by its
    whole text, judged while its text less boilerplate was stored under its own URL), then the ticket's history
    (another title), whose text less boilerplate matches the /info/ page's entry: told apart by the names."""
    chrome = "".join(f"<div>Site chrome line {k} with some words of navigation text here</div>" for k in range(8))

    def page(title: str, *paragraphs: str) -> bytes:
        body = "".join(f"<p>{text}</p>" for text in paragraphs)
        return f"<html><head><title>{title}</title></head><body><main>{chrome}{body}</main></body></html>".encode()

    fields, description, history = (" ".join(words(seed, n)) for seed, n in ((1, 50), (2, 300), (3, 50)))
    pages = [("https://f.test/tktview/1", page("P: View Ticket", fields, description))]
    pages += [(f"https://f.test/w/{i}", page(f"W{i}", " ".join(words(100 + i, 120)))) for i in range(12)]
    pages += [("https://f.test/info/1", page("P: View Ticket", fields, description, history)),
              ("https://f.test/tkthistory/1", page("P: History Of Ticket 1", description, history))]
    info, tkthistory = _judge_all(_default_judge(), pages)[-2:]
    assert info.verdict.kept_url == "https://f.test/tktview/1" and info.reduced_match  # the ticket's duplicate
    assert tkthistory.verdict.kind == "unique"


def test_a_line_under_the_heading_that_the_host_repeats_names_no_page():
    """A live site's rotating "related articles" line placed right under the heading (drawn from one pool, so
    boilerplate once the host has enough pages): a re-fetch with another line is still the same page."""
    pool = [f"Related article {name}" for name in ("Harbor lights", "Bridge tolls", "Tower clocks")]
    judge = _default_judge()
    others = [(f"https://w.test/o/{i}", _named_page(f"Other {i}", f"Other {i}", under=pool[i % 3])
               .replace(_SHARED.encode(), " ".join(words(5000 + i, 300)).encode())) for i in range(15)]
    pages = others + [("https://w.test/a", _named_page("Harbor", "Harbor", under=pool[0])),
                      ("https://w.test/a?fetch=2", _named_page("Harbor", "Harbor", under=pool[1], edit="lambda"))]
    judgements = _judge_all(judge, pages)
    assert [j.verdict.kind for j in judgements[:-1]] == ["unique"] * 16
    assert judgements[-1].verdict.kept_url == "https://w.test/a"


@pytest.mark.parametrize("body, kept", [
    # the text in <h3>/<blockquote> before a closing <p> (sqlite's oldnews.html): all of it replaced
    ("<div class='nav'>Home About Download</div><h3>2008-07-16</h3><blockquote>{text}</blockquote>"
     "<h3>2008-05-12</h3><blockquote>{text}</blockquote><p>This page last modified on 2022-08-10</p>",
     "Home About Download"),
    # the text in one <div> after the navigation and a script, then a closing <p> (sqlite's lang_keywords.html)
    ("<div class='nav'>Home About Download</div><script>var x = '{text}';</script>"
     "<div class='fancy'><h3>Keywords</h3><div>{text}</div><div>{text}</div></div>"
     "<p>This page last modified on 2022-11-26</p>", "Home About Download"),
    # the usual shape, cut from the first <h1>/<p> as before
    ("<div class='nav'>Home About Download</div><h1>Title</h1><p>{text}</p><p>{text}</p>", "Home About Download"),
])
def test_a_generated_sibling_holds_none_of_its_pages_text(body, kept):
    """The benchmark's ``sibling`` is its page's template around another page's paragraphs: a distinct page.
    A body whose text sits in tags the cut did not look for kept the page's whole text (a "sibling" that
    was the page with one paragraph added, counted as a distinct page lost when it was merged)."""
    text = "Release notes paragraph with many words about the changes made in this version " * 4
    html = f"<html><head><title>News</title></head><body>{body.format(text=text)}</body></html>".encode()
    sibling = qc.make_sibling(html, ["Donor paragraph from another page of the same site " * 6])
    words = extract_text(sibling, ExtractionPolicy(), blocks=True).text
    assert "Release notes paragraph" not in words and "Donor paragraph" in words and kept in words
