"""DUST forms of documentation sites: path-shaped query values, directory/index/extension aliases, session path
parameters, redirects and the alias table; sameness as the content engine decides it.

Table tests (input URL, expected canonical URL, and the traps that must stay apart), then one miner test per
kind of evidence, then the alias table's file form.
"""
from __future__ import annotations

import json
import random

import pytest

from scrapy_dedup.audit.mine_dust import mine_logs, read_log
from scrapy_dedup.cli import mine_dust_main as cli_main
from scrapy_dedup.url.canonical import Canonicalizer
from scrapy_dedup.url.dust import MAX_ALIASES, DustRule, DustRulesError, RuleSet
from scrapy_dedup.url.mining import DustMiner, MiningConfig

H = "docs.test"

QUERYPATH = DustRule("query_to_path", path="/view.php", param="doc", value="path", to="/{value}")
WIKI = DustRule("query_to_path", path="/w/index.php", param="title", value="path", to="/wiki/{value}")
INDEX = DustRule("substitute", anchor="suffix", from_="/index.html", to="/")
DIRFILE = DustRule("substitute", anchor="suffix", from_="/", to=".html")
SLASH = DustRule("substitute", anchor="suffix", from_="/", to="")
JSESSION = DustRule("drop_pathparam", param="jsessionid")
SPATH = DustRule("drop_segment", shape="<alnum:24>", lead="s")  # /s/<token>/: the token after a fixed segment
ALIASES = {"/item.php?id=4711": "/shoes/blue-runner", "/": "/wiki/Main_Page"}


def canonical(rules: RuleSet, path: str) -> str:
    return Canonicalizer(dust_rules=rules).canonicalize(f"http://{H}{path}").partition(H)[2]


@pytest.mark.parametrize("rule, url, expected", [
    (QUERYPATH, "/view.php?doc=guide/intro.html", "/guide/intro.html"),
    (QUERYPATH, "/view.php?doc=guide/", "/guide/"),
    (QUERYPATH, "/view.php?doc=intro.html&lang=de", "/intro.html?lang=de"),
    (QUERYPATH, "/view.php?doc=../etc/passwd", "/view.php?doc=../etc/passwd"),  # never a dot segment
    (QUERYPATH, "/view.php?doc=a/./b", "/view.php?doc=a/./b"),
    (QUERYPATH, "/view.php?doc=/abs", "/view.php?doc=/abs"),  # never a leading "/"
    (QUERYPATH, "/view.php?doc=a//b", "/view.php?doc=a//b"),
    (QUERYPATH, "/view.php?doc=a%2Fb", "/view.php?doc=a%2Fb"),  # escapes never enter the path
    (QUERYPATH, "/other.php?doc=guide/intro.html", "/other.php?doc=guide/intro.html"),
    (WIKI, "/w/index.php?title=Main_Page", "/wiki/Main_Page"),
    (WIKI, "/w/index.php?title=Category:Guide", "/wiki/Category:Guide"),
    (INDEX, "/guide/index.html", "/guide/"),
    (INDEX, "/index.html", "/"),
    (INDEX, "/guide/index.htm", "/guide/index.htm"),
    (DIRFILE, "/guide/intro/", "/guide/intro.html"),
    (DIRFILE, "/", "/"),  # the whole path is never a suffix
    (SLASH, "/guide/intro/", "/guide/intro"),
    (JSESSION, "/guide/intro.html;jsessionid=a1b2c3d4e5f6", "/guide/intro.html"),
    (JSESSION, "/guide;jsessionid=a1b2/intro.html", "/guide/intro.html"),
    (JSESSION, "/guide/intro.html;jsessionid=x;v=2", "/guide/intro.html;v=2"),  # other parameters stay
    (JSESSION, "/guide/intro.html;jsessionidx=1", "/guide/intro.html;jsessionidx=1"),  # a whole name
    (SPATH, "/s/a1b2c3d4e5f6g7h8i9j0k1l2/guide/intro.html", "/guide/intro.html"),
    (SPATH, "/s/a1b2c3d4e5f6g7h8i9j0k1l2/", "/"),
    (SPATH, "/en/s/a1b2c3d4e5f6g7h8i9j0k1l2/guide/", "/en/guide/"),
    (SPATH, "/s/a1b2c3d4e5f6g7h8i9j0k1l2", "/s/a1b2c3d4e5f6g7h8i9j0k1l2"),  # never the last segment
    (SPATH, "/s/a1b2c3d4e5f6g7h8i9j0k1/guide/", "/s/a1b2c3d4e5f6g7h8i9j0k1/guide/"),  # another length
    (SPATH, "/ss/a1b2c3d4e5f6g7h8i9j0k1l2/guide/", "/ss/a1b2c3d4e5f6g7h8i9j0k1l2/guide/"),  # a whole segment
    (SPATH, "/a1b2c3d4e5f6g7h8i9j0k1l2/guide/", "/a1b2c3d4e5f6g7h8i9j0k1l2/guide/"),  # only after its lead
])
def test_rule_table(rule, url, expected):
    assert canonical(RuleSet({H: [rule]}), url) == expected


@pytest.mark.parametrize("rules, apart", [
    # pagination, parts, sort facets and languages are other pages: no new rule kind merges them
    ([QUERYPATH, INDEX, JSESSION], ["/list?page=2", "/list", "/list?page=3"]),
    ([QUERYPATH, INDEX, JSESSION], ["/guide/intro.html?part=2", "/guide/intro.html"]),
    ([QUERYPATH, INDEX, JSESSION], ["/view.php?doc=intro.html&sort=title", "/view.php?doc=intro.html"]),
    ([QUERYPATH, INDEX, JSESSION], ["/de/guide/intro.html", "/guide/intro.html"]),
    ([QUERYPATH, INDEX], ["/view.php?doc=guide/a.html", "/view.php?doc=guide/b.html"]),
    ([DIRFILE], ["/guide/", "/guide/index.html"]),
    ([SPATH], ["/s/guide/a.html", "/guide/a.html", "/s/a1b2c3d4e5f6g7h8i9j0k1l2"]),
])
def test_traps_stay_apart(rules, apart):
    ruleset = RuleSet({H: list(rules)})
    assert len({canonical(ruleset, url) for url in apart}) == len(apart)


def test_alias_table_is_looked_up_after_the_rules_and_stays_idempotent():
    rules = RuleSet({H: [DustRule("drop_param", param="sid"), DustRule("substitute", anchor="prefix",
                                                                      from_="/wiki/", to="/index.php/")]},
                    aliases={H: ALIASES})
    assert canonical(rules, "/item.php?id=4711&sid=77") == "/shoes/blue-runner"
    assert canonical(rules, "/item.php?id=4712") == "/item.php?id=4712"
    # the key of an alias is its target through the rules; the URL to request is the target as fetched
    assert canonical(rules, "/") == canonical(rules, "/wiki/Main_Page") == "/index.php/Main_Page"
    assert rules.for_host(H).alias_of("/", "") == ("/wiki/Main_Page", "")
    assert rules.for_host(H).alias_of("/wiki/Main_Page", "") is None
    # a redirect a rule explains: the key stays, the alias only names the URL to request for it
    explained = RuleSet({H: [INDEX]}, aliases={H: {"/guide/": "/guide/index.html"}})
    assert canonical(explained, "/guide/index.html") == canonical(explained, "/guide/") == "/guide/"
    assert explained.for_host(H).alias_of("/guide/", "") == ("/guide/index.html", "")
    itself = RuleSet({H: [INDEX]}, aliases={H: {"/guide/": "/guide/"}})  # /guide/index.html redirects to /guide/
    assert canonical(itself, "/guide/index.html") == "/guide/"
    assert itself.for_host(H).alias_of("/guide/index.html", "") == ("/guide/", "")
    for url in ("/", "/item.php?id=4711", "/shoes/blue-runner"):
        once = canonical(rules, url)
        assert canonical(rules, once) == once


def test_an_alias_reached_through_a_rule_is_requested_at_its_target():
    """Generated site 14: ``/node/3842?language=en`` (a default locale, then an opaque id that redirects) got
    the alias's key but no alias target, so the second crawl fetched the redirect hop. The rules' second
    pass looked the alias table up already (its result was the target's key, then no alias of it)."""
    rules = RuleSet({H: [DustRule("default_param", param="language", value="en"),
                         DustRule("drop_param", param="trk")]},
                    aliases={H: {"/node/3842": "/recipes/intro.html", "/node/7": "/recipes/b.html?trk=top"}})
    host = rules.for_host(H)
    assert host.alias_of("/node/3842", "language=en") == ("/recipes/intro.html", "")
    assert host.alias_of("/node/3842", "trk=rss&language=en") == ("/recipes/intro.html", "")
    assert host.alias_of("/node/7", "trk=share") == ("/recipes/b.html", "trk=top")
    assert host.alias_of("/node/3842", "language=de") is None  # another key: not the alias
    assert canonical(rules, "/node/3842?language=en") == "/recipes/intro.html"
    assert canonical(rules, "/node/7?trk=share") == "/recipes/b.html"


def test_alias_table_round_trips_through_the_rules_file(tmp_path):
    rules = RuleSet({H: [INDEX]}, meta={"generated_by": "test"}, aliases={H: ALIASES, "other.test": {"/a": "/b"}})
    path = tmp_path / "rules.json"
    rules.save(path)
    text = path.read_text()
    assert '      "/item.php?id=4711": "/shoes/blue-runner"' in text.splitlines()  # one alias per line
    loaded = RuleSet.load(path)
    assert loaded.aliases == rules.aliases and loaded.alias_count() == 3
    assert [r.key for r in loaded.hosts[H]] == [INDEX.key]
    assert canonical(loaded, "/item.php?id=4711") == "/shoes/blue-runner"
    assert RuleSet.from_json(json.loads(loaded.dumps())).to_json() == loaded.to_json()
    merged = loaded.merged(RuleSet(aliases={H: {"/item.php?id=4711": "/elsewhere", "/c": "/d"}}))
    assert merged.aliases[H]["/item.php?id=4711"] == "/shoes/blue-runner" and merged.aliases[H]["/c"] == "/d"


@pytest.mark.parametrize("aliases, message", [
    ({H: {"/a": "/b", "/b": "/c"}}, "must not be an alias itself"),  # a chain
    ({H: {"/a": "/guide/index.html", "/guide/": "/x"}}, "must not be an alias itself"),  # through the rules
    ({H: {"a": "/b"}}, "is not a path"),
    ({H: {"/a": "/b#top"}}, "is not a path"),
    ({H: {"/a": 3}}, "is not a path"),
    ({"Docs.Test": {"/a": "/b"}}, "is not a host name"),
    ({H: ["/a", "/b"]}, "must be an object"),
    ({H: {f"/a{i}": "/b" for i in range(MAX_ALIASES + 1)}}, f"at most {MAX_ALIASES}"),
])
def test_bad_alias_tables_are_refused_naming_the_entry(aliases, message):
    data = {"format": "scrapy-dedup-dust/1", "hosts": {H: [INDEX.to_json()]}, "aliases": aliases}
    with pytest.raises(DustRulesError, match=message):
        RuleSet.from_json(data, "rules.json")


# --------------------------------------------------------------------------------------- the miner

def _fp(rng: random.Random) -> str:
    return format(rng.getrandbits(64), "016x")


def _write(tmp_path, lines, name="crawl.jsonl") -> str:
    path = tmp_path / name
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return str(path)


def _page(path: str, cluster: str | None, rng: random.Random, kind: str = "unique") -> dict:
    record = {"request_url": f"http://{H}{path}", "url": f"http://{H}{path}", "exact_hash": _fp(rng) * 2,
              "simhash": _fp(rng), "words": 300, "kind": kind}
    if cluster is not None:
        record["cluster"] = f"http://{H}{cluster}"
    return record


def _kinds(result) -> set[tuple[str, str]]:
    return {(r.kind, r.param or r.from_ or r.shape) for r in result.rules.hosts.get(H, [])}


def test_the_engines_clusters_are_the_sameness(tmp_path):
    """Print views with other chrome and pages with per-fetch noise: their exact hashes and simhashes differ
    (here: random), but the crawl's engine put them in one cluster. Before the crawl log carried the
    cluster, the miner judged by the hashes only and found no rule."""
    rng = random.Random(1)
    lines = []
    for i in range(6):
        lines.append(_page(f"/guide/p{i}.html", f"/guide/p{i}.html", rng))
        lines.append(_page(f"/guide/p{i}.html?print=1", f"/guide/p{i}.html", rng, "near"))
    assert ("drop_param", "print") in _kinds(mine_logs([_write(tmp_path, lines)]))
    # an old log without the cluster: the hashes decide, as before (here they differ: no rule)
    for line in lines:
        del line["cluster"]
    assert ("drop_param", "print") not in _kinds(mine_logs([_write(tmp_path, lines, "old.jsonl")]))


def test_text_records_are_judged_by_the_engine_in_order(tmp_path):
    """A dump with the pages' text: per-fetch noise in the main text ("rendered for visitor N at ...") makes
    every fetch's exact hash differ; the engine (verification included) still calls them one page."""
    rng = random.Random(2)
    vocabulary = [f"w{i}" for i in range(3000)]
    lines = []
    for i in range(5):
        text = " ".join(rng.choice(vocabulary) for _ in range(400))
        for j, path in enumerate((f"/guide/p{i}.html", f"/guide/p{i}.html?ref=nav", f"/guide/p{i}.html?ref=top")):
            noise = f"rendered for visitor {rng.randrange(10**6)} at 12:{rng.randrange(60):02d}:{j:02d}"
            lines.append({"url": f"http://{H}{path}", "text": f"{text[:1200]} {noise} {text[1200:]}"})
    miner = DustMiner()
    read_log(miner, _write(tmp_path, lines))
    assert ("drop_param", "ref") in _kinds(miner.mine())


def test_path_in_a_query_value_and_mediawiki_titles(tmp_path):
    rng = random.Random(3)
    lines = []
    for name in ("intro", "setup", "usage", "faq"):
        lines.append(_page(f"/guide/{name}.html", f"/guide/{name}.html", rng))
        lines.append(_page(f"/view.php?doc=guide/{name}.html", f"/guide/{name}.html", rng, "near"))
        lines.append(_page(f"/wiki/{name.title()}_Page", f"/wiki/{name.title()}_Page", rng))
        lines.append(_page(f"/w/index.php?title={name.title()}_Page", f"/wiki/{name.title()}_Page", rng, "near"))
    rules = mine_logs([_write(tmp_path, lines)]).rules
    assert canonical(rules, "/view.php?doc=guide/other.html") == "/guide/other.html"
    assert canonical(rules, "/w/index.php?title=Other") == "/wiki/Other"


def test_directory_index_and_extension_aliases(tmp_path):
    rng = random.Random(4)
    lines = []
    for sec in ("guide", "howto", "tools"):
        lines.append(_page(f"/{sec}/", f"/{sec}/", rng))
        lines.append(_page(f"/{sec}/index.html", f"/{sec}/", rng, "exact"))
    for name in ("intro", "setup", "usage"):
        lines.append(_page(f"/guide/{name}.html", f"/guide/{name}.html", rng))
        lines.append(_page(f"/guide/{name}/", f"/guide/{name}.html", rng, "exact"))
    rules = mine_logs([_write(tmp_path, lines)]).rules
    assert canonical(rules, "/admin/index.html") == canonical(rules, "/admin/")
    assert canonical(rules, "/guide/other/") == canonical(rules, "/guide/other.html")
    assert canonical(rules, "/guide/") != canonical(rules, "/guide/intro.html")  # an index is not its pages


def test_session_path_parameters_are_dropped_by_name_not_by_token(tmp_path):
    rng = random.Random(5)
    lines = []
    for i in range(5):
        token = "".join(rng.choice("abcdef0123456789") for _ in range(24))
        lines.append(_page(f"/guide/p{i}.html", f"/guide/p{i}.html", rng))
        lines.append(_page(f"/guide/p{i}.html;jsessionid={token}", f"/guide/p{i}.html", rng, "exact"))
    result = mine_logs([_write(tmp_path, lines)])
    assert _kinds(result) == {("drop_pathparam", "jsessionid")}
    assert canonical(result.rules, "/other.html;jsessionid=ffff") == "/other.html"


def test_a_page_behind_many_urls_still_gives_support(tmp_path):
    """Tracking and session forms reach one documentation page through dozens of URLs: before, a page
    behind more than 20 URLs was taken for a soft 404 and gave no support."""
    rng = random.Random(6)
    lines = []
    for i in range(4):
        lines.append(_page(f"/p{i}.html", f"/p{i}.html", rng))
        for j in range(15):
            lines.append(_page(f"/p{i}.html?sid=s{rng.randrange(10**9)}", f"/p{i}.html", rng, "exact"))
            lines.append(_page(f"/p{i}.html?ref=r{j}", f"/p{i}.html", rng, "exact"))
    kinds = _kinds(mine_logs([_write(tmp_path, lines)]))
    assert ("drop_param", "sid") in kinds and ("drop_param", "ref") in kinds


def test_redirects_become_rules_where_a_rule_explains_them_else_aliases(tmp_path):
    rng = random.Random(7)
    lines = []
    for i, slug in enumerate(("blue-runner", "red-trail", "green-walker", "black-court")):
        lines.append(_page(f"/shoes/{slug}", f"/shoes/{slug}", rng))
        # an opaque id: only the redirect says it is this page
        lines.append({"request_url": f"http://{H}/item.php?id={4711 + i}", "url": f"http://{H}/shoes/{slug}",
                      "kind": "redirect", "status": 301})
        # an old prefix that redirects: a rule explains these
        lines.append({"request_url": f"http://{H}/old/shoes/{slug}", "url": f"http://{H}/shoes/{slug}",
                      "kind": "redirect", "status": 301})
    lines.append({"request_url": f"http://{H}/loop", "url": f"http://{H}/loop2", "kind": "redirect"})
    lines.append({"request_url": f"http://{H}/loop2", "url": f"http://{H}/loop", "kind": "redirect"})
    lines.append({"request_url": f"http://{H}/gone", "url": "http://elsewhere.test/x", "kind": "redirect"})
    result = mine_logs([_write(tmp_path, lines)])
    assert ("substitute", "/old/") in _kinds(result)
    slugs = ("blue-runner", "red-trail", "green-walker", "black-court")
    assert result.rules.aliases[H] == {**{f"/item.php?id={4711 + i}": f"/shoes/{slug}" for i, slug in enumerate(slugs)},
                                       **{f"/shoes/{slug}": f"/shoes/{slug}" for slug in slugs}}
    report = result.hosts[H]
    # the old URLs: a rule explains them; their aliases only say to request the page itself, not the old URL
    assert (report.redirects, report.redirects_explained, report.aliases) == (10, 4, 8)
    assert result.stats["redirects_across_hosts"] == 1
    # the redirect_urls of a page record are the same evidence
    page = _page("/shoes/new-one", "/shoes/new-one", rng)
    page["redirect_urls"] = [f"http://{H}/item.php?id=9"]
    # seen once, from a URL whose name is not in its target, and alone of its form: no evidence it is stable
    assert H not in mine_logs([_write(tmp_path, [page], "one.jsonl")]).rules.aliases
    # seen twice to the same target (two crawls' logs): stable
    assert mine_logs([_write(tmp_path, [page], "one.jsonl"), _write(tmp_path, [page], "two.jsonl")]
                     ).rules.aliases[H] == {"/item.php?id=9": "/shoes/new-one"}


def test_an_unstable_redirect_is_no_alias_and_no_evidence(tmp_path):
    """``Special:Random`` answers a redirect to another page each time: it names no page, so it gets no alias
    (seen twice with two targets, or once: nothing says it is stable), while a redirect whose target carries
    the source's name (``?title=Foo`` -> ``/wiki/Foo``) is aliased from one sighting."""
    rng = random.Random(8)
    lines = [_page(f"/wiki/P{i}", f"/wiki/P{i}", rng) for i in range(4)]
    lines.append({"request_url": f"http://{H}/wiki/Special:Random", "url": f"http://{H}/wiki/P1", "kind": "redirect"})
    lines.append({"request_url": f"http://{H}/w/index.php?title=P2", "url": f"http://{H}/wiki/P2",
                  "kind": "redirect"})
    once = mine_logs([_write(tmp_path, lines, "once.jsonl")])
    assert once.rules.aliases[H] == {"/w/index.php?title=P2": "/wiki/P2"}
    assert once.hosts[H].unstable_redirects == 1
    again = [{"request_url": f"http://{H}/wiki/Special:Random", "url": f"http://{H}/wiki/P3", "kind": "redirect"}]
    twice = mine_logs([_write(tmp_path, lines, "once.jsonl"), _write(tmp_path, again, "again.jsonl")])
    assert "/wiki/Special:Random" not in twice.rules.aliases[H]
    assert twice.stats["unstable_redirects"] == 1


def test_verbose_says_per_host_what_was_considered_and_why_nothing_was_kept(tmp_path, capsys):
    rng = random.Random(8)
    lines = [_page(f"/a{i}", f"/a{i}", rng) for i in range(5)]  # no two URLs of one page
    lines += [_page(f"/b{i}?x=1", f"/b{i}", rng, "exact") for i in range(2)] + \
        [_page(f"/b{i}", f"/b{i}", rng) for i in range(2)]
    lines.append({**_page("/c", "/c", rng), "url": "http://lone.test/c", "request_url": "http://lone.test/c",
                  "cluster": "http://lone.test/c"})
    assert cli_main([_write(tmp_path, lines), "-v"]) == 0
    err = capsys.readouterr().err
    assert "lone.test: 1 URL(s), 0 page(s) reached by two URLs or more" in err
    assert "no candidate: no two URLs of this host served the same page" in err
    assert f"{H}: 9 URL(s), 2 page(s) reached by two URLs or more" in err
    assert "skip ?x under /: seen on 2 page(s) < min_support" in err


def test_mining_config_bounds_the_alias_table():
    with pytest.raises(ValueError, match="max_aliases"):
        MiningConfig(max_aliases=MAX_ALIASES + 1)


def test_a_page_the_rules_leave_under_two_keys_gets_an_alias_and_three_keys_do_not(tmp_path):
    """``/item.php?id=4711`` served as a page beside ``/shoes/blue-runner``: no rule relates them, the engine's
    cluster does. A page behind three unrelated keys (a soft 404, an error page) gets no alias."""
    rng = random.Random(9)
    lines = []
    for i, slug in enumerate(("blue-runner", "red-trail", "green-walker")):
        lines.append(_page(f"/shoes/{slug}", f"/shoes/{slug}", rng))
        lines.append(_page(f"/shoes/{slug}?ref=nav", f"/shoes/{slug}", rng, "exact"))
        lines.append(_page(f"/item.php?id={4711 + i}", f"/shoes/{slug}", rng, "near"))
    lines.append(_page("/notfound", "/notfound", rng))
    lines += [_page(p, "/notfound", rng, "exact") for p in ("/x.php?q=1", "/gone/thing")]
    result = mine_logs([_write(tmp_path, lines)])
    assert ("drop_param", "ref") in _kinds(result)
    assert result.rules.aliases[H] == {f"/item.php?id={4711 + i}": f"/shoes/{slug}"
                                       for i, slug in enumerate(("blue-runner", "red-trail", "green-walker"))}
    assert result.hosts[H].content_aliases == 3
    assert not mine_logs([_write(tmp_path, lines, "b.jsonl")], MiningConfig(content_aliases=False)).rules.aliases


def test_the_miner_never_writes_substitutions_that_undo_each_other():
    """Held-out site 1001: an old prefix that redirects and a default-locale prefix made the miner keep
    '/docs-old/' -> '/en/' in one round and '/en/' -> '/docs-old/' in a later one; the crawl then refused
    the rules file at start-up. The later one is dropped, and said so."""
    from scrapy_dedup.url.mining import MiningResult, RuleValidation, _loadable

    first = DustRule("substitute", anchor="prefix", from_="/docs-old/", to="/en/")
    undo = DustRule("substitute", anchor="prefix", from_="/en/", to="/docs-old/")
    keep = DustRule("drop_param", param="sid")
    result = MiningResult(RuleSet())
    result.validations.append(RuleValidation(H, undo, 5, 5, 0, True, "violation rate 0.0%"))
    assert _loadable(H, [], [first, keep, undo], result) == [first, keep]
    assert result.stats["rules_dropped_cycle"] == 1
    assert not result.validations[0].kept and "cycle" in result.validations[0].reason
    RuleSet({H: [first, keep]}).dumps()  # loadable
    with pytest.raises(DustRulesError, match="undo each other"):
        RuleSet.from_json(RuleSet({H: [first, keep, undo]}).to_json())


def test_one_wiki_title_rule_for_titles_of_every_shape(tmp_path):
    """Generated site 9: MediaWiki titles of three shapes (``Git``, ``Main_Page``, ``Special:AllPages``) were
    three candidates, each short of support, and no rule was kept. One rule now, at the widest shape seen,
    with the support of all three; and no second target for the same parameter."""
    rng = random.Random(10)
    lines = []
    for title in ("Git", "Main_Page", "Special:AllPages", "Help:Contents"):
        lines.append(_page(f"/wiki/{title}", f"/wiki/{title}", rng))
        lines.append(_page(f"/w/index.php?title={title}", f"/wiki/{title}", rng, "exact"))
    rules = mine_logs([_write(tmp_path, lines)]).rules
    assert [(r.kind, r.value, r.to) for r in rules.hosts[H]] == [("query_to_path", "path", "/wiki/{value}")]
    assert canonical(rules, "/w/index.php?title=Special:Search") == "/wiki/Special:Search"


def test_a_candidate_is_judged_with_the_rules_kept_before_it(tmp_path):
    """Generated site 9: with paths case-insensitive (kept first), ``/w/index.php?title=Git`` -> ``/wiki/Git``
    was compared with ``/wiki/Git``, which the URL set no longer held (it was ``/wiki/git``): no support."""
    rng = random.Random(11)
    lines = []
    for title in ("Git", "Main_Page", "Rebase", "Merge"):
        lines.append(_page(f"/wiki/{title}", f"/wiki/{title}", rng))
        lines.append(_page(f"/WIKI/{title.upper()}", f"/wiki/{title}", rng, "exact"))
        lines.append(_page(f"/w/index.php?title={title}", f"/wiki/{title}", rng, "exact"))
    rules = mine_logs([_write(tmp_path, lines)]).rules
    assert {r.kind for r in rules.hosts[H]} == {"case_insensitive", "query_to_path"}
    assert canonical(rules, "/w/index.php?title=Other") == canonical(rules, "/wiki/Other")


def test_one_target_per_path_piece_and_no_rule_the_kept_ones_explain(tmp_path):
    """Generated sites 44 and 88: a locale prefix, a view prefix, their composition and an old prefix on a
    case-insensitive server. All substitutions were judged on one URL set, so '/en/' -> '/', '/en/' -> '/Old/'
    and '/en/' -> '/print/' were all kept (the crawl used whichever came last), with '/en/print/' -> '/en/'
    beside them; on site 44 '/recipes/' -> '/old/Recipes/' was kept though the case rule and '/old/' -> '/'
    lead it back to itself (a rewrite to itself counted as support)."""
    rng = random.Random(12)
    lines = []
    for i in range(6):
        page = f"/guide/p{i}.html"
        lines.append(_page(page, page, rng))
        lines += [_page(prefix + page, page, rng, "exact") for prefix in ("/en", "/print", "/en/print", "/Old")]
        lines.append(_page(page.upper(), page, rng, "exact"))
        lines.append(_page("/Old" + page.upper(), page, rng, "exact"))
    rules = mine_logs([_write(tmp_path, lines)]).rules.hosts[H]
    assert {(r.from_, r.to) for r in rules if r.kind == "substitute"} == {("/en/", "/"), ("/print/", "/"),
                                                                          ("/old/", "/")}
    ruleset = RuleSet({H: rules})
    assert {canonical(ruleset, p + "/guide/x.html") for p in ("", "/en", "/print", "/en/print", "/OLD")} == \
        {"/guide/x.html"}


def test_a_session_token_after_a_fixed_segment_is_dropped_with_it(tmp_path):
    """``/s/<token>/guide/p0.html`` is ``/guide/p0.html`` (generated sites 82 and 88): a token segment alone
    left ``/s/`` behind, so the miner kept one prefix substitution per token seen, literal tokens a later
    crawl (new sessions) never meets. One rule now, for any token of the shape."""
    rng = random.Random(13)
    lines = []
    tokens = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(24)) for _ in range(3)]
    for i in range(6):
        page = f"/guide/p{i}.html"
        lines.append(_page(page, page, rng))
        lines += [_page(f"/s/{token}{page}", page, rng, "exact") for token in tokens[: 1 + i % 3]]
    rules = mine_logs([_write(tmp_path, lines)]).rules
    assert [(r.kind, r.lead) for r in rules.hosts[H]] == [("drop_segment", "s")]
    assert canonical(rules, "/s/zzzzyyyyxxxxwwww00001111/howto/new.html") == "/howto/new.html"
    text = rules.dumps()
    assert '"lead": "s"' in text and RuleSet.from_json(json.loads(text)).hosts == rules.hosts


def test_a_default_locale_is_a_default_value_not_a_drop_where_no_translation_was_seen(tmp_path):
    """Generated site 12: ``?locale=en`` is the page, ``?locale=de`` its translation. Dropping ``locale`` under
    ``/`` was refused (it merges the translations); it was then tried, and kept, under ``/all/``, where no
    translation happened to be fetched, which would merge the next crawl's ``/all/...?locale=de``; and
    the default value was never tried."""
    rng = random.Random(14)
    lines = []
    for i in range(5):
        page = f"/docs/p{i}.html"
        lines += [_page(page, page, rng), _page(page + "?locale=en", page, rng, "exact"),
                  _page(page + "?locale=de", page + "?locale=de", rng)]
    for i in range(3):
        page = f"/all/p{i}.html"
        lines += [_page(page, page, rng), _page(page + "?locale=en", page, rng, "exact")]
    rules = mine_logs([_write(tmp_path, lines)]).rules
    assert [(r.kind, r.param, r.value, r.prefix) for r in rules.hosts[H]] == [
        ("default_param", "locale", "en", "/")]
    assert canonical(rules, "/all/new.html?locale=de") == "/all/new.html?locale=de"
    assert canonical(rules, "/all/new.html?locale=en") == "/all/new.html"


def test_an_opaque_id_served_as_a_page_is_the_alias_not_the_page_a_redirect_leads_to(tmp_path):
    """Generated site 54: ``/d/4928`` served as a page, ``/howto/x.html`` the same page, reached also by a
    redirect from ``/docs-old/howto/x.html``. The two keys tied (one fetched URL each), the shorter, the
    opaque id, was taken for the main key, and the alias of the other was already the redirect's: no alias
    for ``/d/4928``, fetched again by the next crawl. A redirect into a key now counts for it."""
    rng = random.Random(15)
    lines = []
    for i, name in enumerate(("intro", "setup", "usage", "faq")):
        page = f"/howto/{name}.html"
        lines += [_page(f"/d/{4928 + i}", page, rng, "exact"), _page(page, page, rng)]
        lines.append({"kind": "redirect", "request_url": f"http://{H}/docs-old{page}", "status": 301,
                      "url": f"http://{H}{page}"})
    result = mine_logs([_write(tmp_path, lines)])
    assert ("substitute", "/docs-old/") in _kinds(result)
    host = result.rules.for_host(H)
    assert [host.alias_of(f"/d/{4928 + i}", "") for i in range(4)] == [
        (f"/howto/{name}.html", "") for name in ("intro", "setup", "usage", "faq")]


def test_a_page_number_seen_only_beside_a_session_is_not_dropped(tmp_path):
    """Generated site 324: ``?pagenum=1`` is the list itself (the support of dropping ``pagenum``), while page
    2 and page 3 were only ever fetched with a session (``?pagenum=2&sid=...``). Dropped, ``pagenum`` left
    each page under its own session's URL, so no two pages collided in the evidence, and the drop was kept
    beside the drop of ``sid``: together they give page 2, page 3 and the list one URL. A value every URL of
    a page carries, whatever rides along, names the page."""
    rng = random.Random(16)
    lines = []
    for section in ("news", "blog", "docs"):
        lines += [_page(f"/{section}/", f"/{section}/", rng), _page(f"/{section}/?pagenum=1", f"/{section}/", rng)]
        for n in (2, 3):
            page = f"/{section}/?pagenum={n}&sid={rng.getrandbits(40):010x}"
            lines += [_page(page, page, rng),
                      _page(f"/{section}/?pagenum={n}&sid={rng.getrandbits(40):010x}", page, rng, "exact")]
    for i in range(4):
        page = f"/story/{i}.html"
        lines += [_page(page, page, rng), _page(f"{page}?sid={rng.getrandbits(40):010x}", page, rng, "exact")]
    result = mine_logs([_write(tmp_path, lines)])
    rules = result.rules
    assert ("drop_param", "pagenum") not in _kinds(result)
    assert ("drop_param", "sid") in _kinds(result)
    pages = {canonical(rules, f"/news/?pagenum={n}&sid=feedc0ffee") for n in (2, 3)} | {canonical(rules, "/news/")}
    assert len(pages) == 3
    assert canonical(rules, "/news/?pagenum=1") == "/news/"


def test_a_visitors_session_token_is_never_a_rules_literal(tmp_path):
    """Generated site 6208: each page rendered for one visitor links its directory form with that visitor's
    ``;JSESSIONID=<token>``. The miner took the pair ``/x.html`` ~ ``/x/;JSESSIONID=<token>`` as they were and
    wrote ``.html -> /;JSESSIONID=<one token>`` (and a ``query_to_path`` from ``/page.asp;JSESSIONID=<token>``):
    rules that hold for one visitor only, whose trial cost the second crawl half its fetches. The path
    parameter is dropped by name; the other candidates come from the paths without it."""
    rng = random.Random(17)
    tokens = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(24)) for _ in range(2)]
    lines = []
    for name in ("intro", "setup", "usage", "faq", "api", "tools"):  # met as a file and as one visitor's directory
        lines.append(_page(f"/guide/{name}.html", f"/guide/{name}.html", rng))
        lines.append(_page(f"/guide/{name}/;JSESSIONID={tokens[0]}", f"/guide/{name}.html", rng, "near"))
        lines.append(_page(f"/page.asp;JSESSIONID={tokens[0]}?f=guide/{name}.html", f"/guide/{name}.html",
                           rng, "near"))
    for name in ("git", "make", "tar", "sed"):  # met with and without another visitor's session
        lines.append(_page(f"/ref/{name}/", f"/ref/{name}/", rng))
        lines.append(_page(f"/ref/{name}/;JSESSIONID={tokens[1]}", f"/ref/{name}/", rng, "near"))
        lines.append(_page(f"/page.asp?f=ref/{name}/", f"/ref/{name}/", rng, "near"))
    result = mine_logs([_write(tmp_path, lines)])
    literals = json.dumps([{k: v for k, v in r.to_json().items() if k != "examples"} for r in result.rules.hosts[H]])
    assert not any(token in literals for token in tokens), literals
    assert ("drop_pathparam", "JSESSIONID") in _kinds(result)
    rules = result.rules
    assert canonical(rules, "/guide/other/;JSESSIONID=abcdef0123456789abcdef01") == "/guide/other.html"
    assert canonical(rules, "/page.asp;JSESSIONID=abcdef0123456789abcdef01?f=guide/other.html") == \
        "/guide/other.html"


def test_a_page_under_several_id_schemes_gets_an_alias_from_each(tmp_path):
    """Generated site 6213: each page is served at its canonical URL, as a permalink ``/?p=<n>`` and as an
    opaque ``/content.asp?cid=<n>``. Three keys: no alias was written (a page under three keys or more was
    taken for a soft 404), and the second crawl fetched every page three times. Each key beyond the main one
    is of an id scheme (every key of its form shows a page of its own, on 3 pages or more): aliased. A page
    behind keys of a form that shows one page for several (a soft 404) still gets none."""
    rng = random.Random(18)
    lines = []
    slugs = ("blue-runner", "red-trail", "green-walker", "grey-hiker")
    for i, slug in enumerate(slugs):
        lines.append(_page(f"/shoes/{slug}/", f"/shoes/{slug}/", rng))
        lines.append(_page(f"/shoes/{slug}/", f"/shoes/{slug}/", rng, "exact"))  # linked twice: the main key
        lines.append(_page(f"/?p={4711 + i}", f"/shoes/{slug}/", rng, "near"))
        lines.append(_page(f"/content.asp?cid={4711 + i}", f"/shoes/{slug}/", rng, "near"))
    lines.append(_page("/notfound", "/notfound", rng))
    lines += [_page(p, "/notfound", rng, "exact") for p in ("/?p=9998", "/?p=9999", "/content.asp?cid=9999")]
    result = mine_logs([_write(tmp_path, lines)])
    aliases = result.rules.aliases[H]
    for i, slug in enumerate(slugs):
        assert aliases[f"/?p={4711 + i}"] == aliases[f"/content.asp?cid={4711 + i}"] == f"/shoes/{slug}/"
    assert not any(alias.endswith("999") or alias.endswith("9998") for alias in aliases), aliases


def _three_key_pages(rng: random.Random) -> list[dict]:
    """Four pages each under its slug, a permalink ``/?p=<n>`` and an opaque ``/content.asp?cid=<n>``."""
    lines = []
    for i, slug in enumerate(("blue-runner", "red-trail", "green-walker", "grey-hiker")):
        lines.append(_page(f"/shoes/{slug}/", f"/shoes/{slug}/", rng))
        lines.append(_page(f"/shoes/{slug}/", f"/shoes/{slug}/", rng, "exact"))  # linked twice: the main key
        lines.append(_page(f"/?p={4711 + i}", f"/shoes/{slug}/", rng, "near"))
        lines.append(_page(f"/content.asp?cid={4711 + i}", f"/shoes/{slug}/", rng, "near"))
    return lines


def test_a_soft_404_met_once_under_each_id_scheme_gets_no_alias(tmp_path):
    """A soft 404 (status 200, one text) reached from one dead link of each id scheme: ``/?p=9999`` and
    ``/content.asp?cid=5000``, each form common on the host and met once on that page. The aliases sent
    both dead ids to ``/notfound``: a record published later under either would never be fetched. The keys
    of a page of the schemes name one record (``4711`` in each); these two name two."""
    rng = random.Random(18)
    lines = _three_key_pages(rng)
    lines.append(_page("/notfound", "/notfound", rng))
    lines += [_page(p, "/notfound", rng, "exact") for p in ("/?p=9999", "/content.asp?cid=5000")]
    aliases = mine_logs([_write(tmp_path, lines)]).rules.aliases[H]
    assert "/notfound" not in aliases.values(), aliases
    assert aliases["/?p=4711"] == aliases["/content.asp?cid=4711"] == "/shoes/blue-runner/"


def test_a_view_naming_its_page_is_no_key_of_an_id_scheme(tmp_path):
    """MediaWiki links a missing talk page as ``action=edit&redlink=1`` and its "add topic" as
    ``action=edit&section=new``: one edit form under two keys of forms common on the wiki, each once per
    page, and both naming ``title=Talk:X``. They are views of the page (another resource), not its ids: no
    alias (the keys name the main key ``/wiki/Talk:X``)."""
    rng = random.Random(19)
    lines = []
    for name in ("Alpha", "Beta_test", "Gamma", "Delta_page"):
        talk = f"Talk:{name}"
        lines.append(_page(f"/wiki/{talk}", f"/wiki/{talk}", rng))
        lines.append(_page(f"/wiki/{talk}", f"/wiki/{talk}", rng, "exact"))
        lines.append(_page(f"/w/index.php?title={talk}&action=edit&section=new", f"/wiki/{talk}", rng, "near"))
        lines.append(_page(f"/w/index.php?title={talk}&action=edit&redlink=1", f"/wiki/{talk}", rng, "near"))
    result = mine_logs([_write(tmp_path, lines)])
    assert not result.rules.aliases.get(H), result.rules.aliases


def test_no_visitors_session_in_the_rules_file_or_the_verbose_output(tmp_path, capsys):
    """A crawl's URLs carry its visitor's session (on an authenticated crawl, a live credential): the rules
    file's ``examples`` showed ``/guide/api.html;JSESSIONID=<the token>``, and ``-v`` a context candidate
    ``drop ?page= when ?sid=<the token>``. Examples show ``<token>`` instead; a token is never a context."""
    rng = random.Random(17)
    token, sid = "9f8e7d6c5b4a39281706f5e4", "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6"
    lines = []
    for name in ("intro", "setup", "usage", "faq", "api", "tools"):
        lines.append(_page(f"/guide/{name}.html", f"/guide/{name}.html", rng))
        lines.append(_page(f"/guide/{name}.html;JSESSIONID={token}", f"/guide/{name}.html", rng, "near"))
        lines.append(_page(f"/shop/{name}", f"/shop/{name}", rng))
        lines += [_page(f"/shop/{name}?sid={sid}&page={n}", f"/shop/{name}", rng, "near") for n in (1, 2)]
    rules_file = tmp_path / "rules.json"
    assert cli_main([_write(tmp_path, lines), "-v", "-o", str(rules_file)]) == 0
    err, text = capsys.readouterr().err, rules_file.read_text()
    assert token not in text and sid not in text and token not in err and sid not in err
    rules = RuleSet.load(str(rules_file))
    by_kind = {rule.kind: rule for rule in rules.hosts[H]}
    assert ["/guide/api.html;JSESSIONID=<token>", "/guide/api.html"] in \
        [list(pair) for pair in by_kind["drop_pathparam"].examples]
    # the rules themselves are those of the URLs as they were
    assert canonical(rules, f"/guide/faq.html;JSESSIONID={token}") == "/guide/faq.html"
    assert canonical(rules, f"/shop/faq?sid={sid}&page=2") == "/shop/faq"
