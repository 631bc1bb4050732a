"""content/keeper.py, ItemKeeper, and url/views.py, is_view: plain Python, every path of the decision."""
from __future__ import annotations

import itertools

import pytest

from scrapy_dedup.content.keeper import Action, ItemKeeper
from scrapy_dedup.url.views import VIEW_PARAMETERS, is_view, names_other_resource


def rank(url: str) -> tuple:
    return (is_view(url), len(url), url)


class Crawl:
    """Drives a keeper as the middleware does; records what passed, was dropped, released."""

    def __init__(self, max_items: int = 100, max_bytes: int = 10**6):
        self.keeper = ItemKeeper(max_items, max_bytes)
        self.passed: list[str] = []
        self.dropped: list[str] = []
        self.released: list[str] = []

    def carry_out(self, outcome) -> None:
        self.dropped += [held.item for held, _, _ in outcome.drop]
        for group in outcome.release:
            self.released += [held.item for held in group.items]

    def page(self, cluster: str, url: str, items: int = 1, first: bool = False, size: int = 1) -> list[Action]:
        self.keeper.page_open(cluster, first)
        actions = []
        for _ in range(items):
            outcome = self.keeper.offer(cluster, url, rank(url), is_view(url), url, None, size)
            self.carry_out(outcome)
            actions.append(outcome.action)
            if outcome.action is Action.PASS:
                self.passed.append(url)
            elif outcome.action is Action.DROP:
                self.dropped.append(url)
        self.carry_out(self.keeper.page_done(cluster))
        return actions


ARTICLE, DIFF, OLD = "/w?title=A", "/w?title=A&diff=2&oldid=1", "/w?title=A&oldid=1"


@pytest.mark.parametrize("order", list(itertools.permutations([ARTICLE, DIFF, OLD])))
def test_the_article_keeps_the_item_in_every_order(order):
    crawl = Crawl()
    for i, url in enumerate(order):
        crawl.page(order[0], url, first=i == 0)
        if url in crawl.passed:
            crawl.carry_out(crawl.keeper.scraped(order[0]))
    assert crawl.passed == [ARTICLE] and not crawl.released
    assert sorted(crawl.dropped) == sorted([DIFF, OLD])
    assert crawl.keeper.held_items == 0


def test_views_alone_are_released_at_the_end_best_ranked_only():
    crawl = Crawl()
    assert crawl.page(DIFF, DIFF, first=True) == [Action.HOLD]
    assert crawl.page(DIFF, OLD) == [Action.HOLD]  # the shorter: the diff's item is superseded
    assert crawl.dropped == [DIFF]
    crawl.carry_out(crawl.keeper.release_all())
    assert crawl.released == [OLD] and crawl.keeper.held_items == 0
    crawl.carry_out(crawl.keeper.release_all())  # nothing twice
    assert crawl.released == [OLD]


def test_a_first_page_without_items_leaves_its_cluster_to_the_next_member():
    crawl = Crawl()
    crawl.page("/", "/", items=0, first=True)
    assert crawl.page("/", "/index.html") == [Action.PASS]
    crawl.carry_out(crawl.keeper.scraped("/"))
    assert crawl.page("/", "/home") == [Action.DROP]


def test_a_page_of_many_items_passes_them_all_and_later_members_wait_on_their_fate():
    crawl = Crawl()
    assert crawl.page("/a", "/a", items=3, first=True) == [Action.PASS] * 3
    assert crawl.page("/a", "/b", items=2) == [Action.HOLD] * 2  # the fallback while /a's are in flight
    crawl.carry_out(crawl.keeper.dropped("/a"))
    crawl.carry_out(crawl.keeper.scraped("/a"))  # one of /a's passed every pipeline
    assert crawl.dropped == ["/b", "/b"] and not crawl.released
    crawl.carry_out(crawl.keeper.dropped("/a"))
    assert crawl.keeper.held_items == 0


def test_when_a_later_pipeline_drops_every_passed_item_the_fallback_is_released():
    crawl = Crawl()
    crawl.page("/a", "/a", items=2, first=True)
    crawl.page("/a", "/b")
    crawl.page("/a", "/c")  # longer than /b: dropped, one fallback per cluster
    assert crawl.dropped == ["/c"]
    crawl.carry_out(crawl.keeper.dropped("/a"))
    assert not crawl.released  # one of /a's items is still in flight
    crawl.carry_out(crawl.keeper.dropped("/a"))
    assert crawl.released == ["/b"]
    crawl.carry_out(crawl.keeper.dropped("/a"))  # /b's dropped too, and nothing is left: the cluster has none
    assert crawl.page("/a", "/d") == [Action.PASS]


def test_a_pipeline_dropping_before_the_page_is_done_does_not_release_early():
    crawl = Crawl()
    keeper = crawl.keeper
    keeper.page_open("/a", True)
    assert keeper.offer("/a", "/a", rank("/a"), False, "i1").action is Action.PASS
    crawl.carry_out(keeper.dropped("/a"))  # dropped while /a still yields
    assert keeper.offer("/a", "/a", rank("/a"), False, "i2").action is Action.PASS
    keeper.page_open("/a", False)
    assert keeper.offer("/a", "/b", rank("/b"), False, "b").action is Action.HOLD
    crawl.carry_out(keeper.page_done("/a"))
    crawl.carry_out(keeper.page_done("/a"))
    assert not crawl.released  # i2 is in flight
    crawl.carry_out(keeper.scraped("/a"))
    assert crawl.dropped == ["b"]


def test_the_bound_releases_the_oldest_group_and_counts_it():
    crawl = Crawl(max_items=2)
    crawl.page("/x?print=1", "/x?print=1", first=True)
    crawl.page("/y?print=1", "/y?print=1", first=True)
    assert not crawl.released
    crawl.page("/z?print=1", "/z?print=1", first=True)
    assert crawl.released == ["/x?print=1"] and crawl.keeper.overflowed == 1
    assert crawl.page("/x?print=1", "/x") == [Action.HOLD]  # released: it stays the cluster's item ...
    crawl.carry_out(crawl.keeper.scraped("/x?print=1"))
    assert crawl.dropped == ["/x"]  # ... once scraped


def test_the_bound_in_bytes():
    crawl = Crawl(max_bytes=100)
    crawl.page("/x?print=1", "/x?print=1", first=True, size=60)
    crawl.page("/y?print=1", "/y?print=1", first=True, size=60)
    assert crawl.released == ["/x?print=1"]
    assert crawl.keeper.held_bytes == 60


def test_a_cluster_with_an_item_drops_at_once_and_keeps_no_state():
    crawl = Crawl()
    crawl.page("/a", "/a", first=True)
    crawl.carry_out(crawl.keeper.scraped("/a"))
    assert crawl.page("/a", "/b") == [Action.DROP]
    assert crawl.keeper._clusters == {} and crawl.keeper._itemless == set()


def test_bounds_are_checked():
    with pytest.raises(ValueError):
        ItemKeeper(-1, 0)


@pytest.mark.parametrize("url,view", [
    ("https://w.test/index.php?title=Harbor", False),
    ("https://w.test/index.php?title=Harbor&diff=next&oldid=12", True),
    ("https://w.test/index.php?title=Harbor&oldid=12", True),
    ("https://w.test/index.php?title=Harbor&printable=yes", True),
    ("https://w.test/index.php?curid=7", True),
    ("https://w.test/index.php?title=Harbor&action=render", True),
    ("https://w.test/index.php?title=Harbor&action=history", False),  # a page of its own
    ("https://w.test/index.php?title=Harbor&action=edit", False),
    ("https://w.test/index.php?title=Harbor&action=edit&section=1", False),
    ("https://d.test/doku.php?id=start&rev=1690000000", True),
    ("https://d.test/doku.php?id=start&do=diff", True),
    ("https://d.test/doku.php?id=start&do=revisions", False),
    ("https://d.test/doku.php?id=start&DO=Diff", True),
    ("https://b.test/?p=12&preview=true", True),
    ("https://b.test/post/?replytocom=4", True),
    ("https://b.test/post/", False),
    ("https://b.test/post/?print", True),
    ("https://g.test/cgit.cgi/docs/tree/a.md?id=b13b61ab3f96dcc7558f08940806ddab61d3fed5", True),  # a commit
    ("https://g.test/cgit.cgi/docs/tree/a.md?id=master", False),  # a branch: what it shows now
    ("https://d.test/doku.php?id=b13b61ab3f96dcc7558f08940806ddab61d3fed5", True),  # (a page named so: held only)
    ("https://d.test/doku.php?id=start", False),  # DokuWiki's page id
    ("https://g.test/gitweb.cgi?p=a.git&a=blob&f=a.md&hb=" + "ab" * 32, True),
    ("http://[::1", False),  # unparsable: no view, no error
])
def test_is_view(url, view):
    assert is_view(url) is view


def test_the_view_table_is_literal_and_unique():
    names = [p.name for p in VIEW_PARAMETERS]
    assert len(names) == len(set(names))
    assert all(p.name == p.name.lower() and p.software and p.shows for p in VIEW_PARAMETERS)
    assert all(p.values is None or all(v == v.lower() for v in p.values) for p in VIEW_PARAMETERS)
    assert all(p.values is None or p.pattern is None for p in VIEW_PARAMETERS)


def test_a_fallback_released_over_the_bound_leaves_the_passing_page_passing():
    keeper = ItemKeeper(max_items=0, max_bytes=10**6)
    keeper.page_open("/a", True)
    assert keeper.offer("/a", "/a", rank("/a"), False, "a1").action is Action.PASS
    keeper.page_open("/a", False)
    outcome = keeper.offer("/a", "/b", rank("/b"), False, "b")  # held as the fallback, released at once
    assert outcome.action is Action.HOLD and [h.item for g in outcome.release for h in g.items] == ["b"]
    assert keeper.offer("/a", "/a", rank("/a"), False, "a2").action is Action.PASS  # /a still yields


def test_a_crawl_closing_before_its_end_releases_what_is_held_and_holds_nothing_after():
    crawl = Crawl()
    assert crawl.page(DIFF, DIFF, first=True) == [Action.HOLD]
    crawl.carry_out(crawl.keeper.release_all(closing=True))
    assert crawl.released == [DIFF] and crawl.keeper.held_items == 0
    # pages still in flight as the crawl closes: nothing held would ever be released, so nothing is held
    assert crawl.page(OLD, OLD, first=True) == [Action.PASS]  # a view, alone in its cluster
    assert crawl.page(DIFF, ARTICLE) == [Action.PASS]  # the fallback behind the released diff's item in flight
    crawl.carry_out(crawl.keeper.scraped(DIFF))
    assert crawl.page(DIFF, "/w?title=A&printable=yes") == [Action.DROP]  # the cluster has its item
    assert crawl.keeper.held_items == 0


@pytest.mark.parametrize("url,other,differ", [
    ("https://w.test/index.php?title=Harbor&action=edit", "https://w.test/index.php?title=Harbor", True),
    ("https://w.test/index.php?title=Harbor&action=history", "https://w.test/index.php?title=Harbor&action=edit",
     True),
    ("https://w.test/index.php?title=Harbor&action=edit&section=2", "https://w.test/index.php?title=Harbor&action=edit",
     True),  # a section's source
    ("https://w.test/index.php?title=Harbor&action=edit&section=2", "https://w.test/index.php?title=Harbor&section=2",
     True),
    ("https://w.test/index.php?title=Harbor&action=edit&section=2", "https://w.test/index.php?title=Harbor&action=Edit"
     "&section=2", False),
    ("https://w.test/index.php?title=Harbor&diff=2&oldid=1", "https://w.test/index.php?title=Harbor", False),  # a view
    ("https://w.test/index.php?title=Harbor&action=render", "https://w.test/index.php?title=Harbor", False),  # a view
    ("https://d.test/doku.php?id=start&do=edit", "https://d.test/doku.php?id=start", True),
    ("https://d.test/doku.php?id=start&do=", "https://d.test/doku.php?id=start", False),  # empty: the page
    ("https://d.test/doku.php?id=start&DO=Edit", "https://d.test/doku.php?id=start&do=edit", False),
    ("https://b.test/post/", "https://b.test/post/?utm_source=x", False),
    ("http://[::1", "https://b.test/", False),
])
def test_names_other_resource(url, other, differ):
    assert names_other_resource(url, other) is differ
    assert names_other_resource(other, url) is differ
