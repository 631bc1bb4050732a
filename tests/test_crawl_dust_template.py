"""A view that is all template, linked with every page's name (real local site, real Scrapy crawls).

MediaWiki's login form ``index.php?title=Special:UserLogin&returnto=<page>`` is linked from every page with that
page's name, and shows the same form whatever the name. Its text is the wiki's template and a dozen words of its
own, so with boilerplate learning (the default) the content engine keeps it undecided (fewer than ``min_words``
words of its own) and never stores it: every fetch of it is logged as a unique page of its own, and before this
test's change ``mine-dust`` saw no two URLs of one page there, so no context rule. Its whole texts are one exact
text: that is the URL-level sameness, and the rule is mined (its query forms paired with one another, though the
page's shortest URLs are path forms that show the same form).
"""
from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import pytest
import scrapy
from pytest_twisted import inlineCallbacks

from scrapy_dedup.cli import mine_dust_main
from scrapy_dedup.url.dust import RuleSet
from tests import dustsite
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite, Page

HOST = "mw.test"
ADDON = {"ADDONS": {"scrapy_dedup.Addon": 0}, "CONCURRENT_REQUESTS": 4}
PAGES = [f"Page{i}" for i in range(30)]
#: special pages that show the login form to a reader who is not logged in: the form's shortest URLs
LOGIN_PATHS = [f"/index.php/Special:{name}" for name in ("UserLogin", "Watchlist", "Preferences", "MyTalk",
                                                         "Upload", "Notifications", "BotPasswords", "ChangeEmail")]
TEMPLATE = ("Field wiki navigation main page recent changes random page help about the wiki tools what links here "
            "related changes special pages printable version permanent link page information privacy policy "
            "about field wiki disclaimers content is available under the licence unless otherwise noted")


def _html(title: str, text: str, links: list[str]) -> Page:
    anchors = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    return Page(f"<html><head><title>{title} - Field wiki</title></head><body><main><h1>{title}</h1><p>{text}</p>"
                f"<p>{TEMPLATE}</p></main><aside><ul>{anchors}</ul></aside></body></html>")


def _login_url(page: str) -> str:
    return f"/index.php?title=Special:UserLogin&returnto={page}"


def router(host: str, path_qs: str) -> Page | None:
    parts = urlsplit(path_qs)
    if host != HOST:
        return None
    query = parse_qs(parts.query)
    if parts.path in LOGIN_PATHS or (parts.path == "/index.php" and query.get("title") == ["Special:UserLogin"]):
        return _html("Log in", "Username Password Keep me logged in",
                     ["/index.php/Page0"])
    if parts.path.startswith("/index.php/") and parts.path[11:] in PAGES and not parts.query:
        page = parts.path[11:]
        i = PAGES.index(page)
        links = [f"/index.php/{PAGES[(i + 1) % len(PAGES)]}", f"/index.php/{PAGES[(i + 7) % len(PAGES)]}",
                 _login_url(page)] + (LOGIN_PATHS + ["/index.php?title=Special:UserLogin"] if i == 0 else [])
        return _html(page, dustsite.text_of(page), links)
    return None


class SiteSpider(scrapy.Spider):
    name = "template_view"

    def parse(self, response):
        yield {"url": response.url}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)


def _login_query_fetches(site: LocalSite) -> int:
    return sum(n for (_, path), n in site.hits.items() if path.startswith("/index.php?title=Special:UserLogin"))


@pytest.mark.crawl
@inlineCallbacks
def test_a_login_form_that_is_all_template_gets_its_context_rule(tmp_path):
    log, rules_file = tmp_path / "crawl.jsonl", tmp_path / "rules.json"
    with LocalSite(router) as site:
        yield run_crawl(SiteSpider, {**ADDON, "DEDUP_LOG_FILE": str(log)}, start_urls=[site.url(HOST, "/index.php/Page0")])
        assert _login_query_fetches(site) == len(PAGES) + 1  # one per page's name, and the form alone
    # the form's undecided fetches: logged as unique pages of their own, with the form's exact text
    records = [json.loads(line) for line in log.read_text().splitlines()]
    forms = [r for r in records if r.get("kind") != "redirect" and "Special:" in r["url"]]
    assert len(forms) == len(PAGES) + 1 + len(LOGIN_PATHS)
    undecided = [r for r in forms if r["kind"] == "unique" and r["cluster"] == r["url"]]
    assert len(undecided) >= 3 and len({r["exact_hash"] for r in forms}) == 1
    assert mine_dust_main([str(log), "-o", str(rules_file)]) == 0
    rules = RuleSet.load(rules_file)
    assert [(r.kind, r.param, r.when) for r in rules.hosts.get(HOST, [])] == [
        ("drop_param_when", "returnto", "title=Special:UserLogin")], rules.dumps()
    with LocalSite(router) as site:
        yield run_crawl(SiteSpider, {**ADDON, "DEDUP_DUST_RULES": str(rules_file)},
                        start_urls=[site.url(HOST, "/index.php/Page0")])
        login = _login_query_fetches(site)
        pages = {path for (_, path) in site.hits if path.startswith("/index.php/Page")}
    assert pages == {f"/index.php/{p}" for p in PAGES}  # every article fetched
    assert login <= len(PAGES) // 4, login  # the form once, and the rule's explorations
