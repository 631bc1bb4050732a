"""content/keeper.py, ItemKeeper, and url/views.py, is_view: plain Python, every path of the decision."""
from __future__ import annotations

import itertools

import pytest

from scrapy_dedup.content.keeper import Action, ItemKeeper
from scrapy_dedup.content.paragraphs import page_blocks_held, strictly_nested
from scrapy_dedup.url.views import VIEW_PARAMETERS, is_view, names_other_resource, names_other_selection, page_key


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


def test_a_fallback_is_not_released_over_the_bound():
    """A fallback stands in for items in flight: released, it would be their duplicate (a crawl under Scrapy 2.13
    kept a diff's item released over the bound and its article's, held behind it, released too)."""
    keeper = ItemKeeper(max_items=0, max_bytes=0)
    keeper.page_open("/a", True)
    assert keeper.offer("/a", "/a", rank("/a"), False, "a1").action is Action.PASS
    keeper.page_open("/a", False)
    outcome = keeper.offer("/a", "/b", rank("/b"), False, "b", size=10)  # held as the fallback, over both bounds
    assert outcome.action is Action.HOLD and outcome.release == [] and keeper.overflowed == 0
    assert keeper.held_items == 1 and keeper.held_bytes == 10  # counted all the same
    assert keeper.offer("/a", "/a", rank("/a"), False, "a2").action is Action.PASS  # /a still yields
    keeper.page_done("/a")
    keeper.page_done("/a")
    assert [held.item for held, _, _ in keeper.scraped("/a").drop] == ["b"]  # /a's item stored: b its duplicate


def test_a_view_released_over_the_bound_stays_the_item_and_the_article_behind_it_waits():
    crawl = Crawl(max_items=0)
    crawl.page("/x", "/x?print=1", first=True)  # a view, released at once
    assert crawl.released == ["/x?print=1"] and crawl.keeper.overflowed == 1
    assert crawl.page("/x", "/x") == [Action.HOLD]  # the release is in flight: the article is its fallback
    assert crawl.released == ["/x?print=1"] and crawl.keeper.overflowed == 1
    crawl.carry_out(crawl.keeper.scraped("/x"))
    assert crawl.dropped == ["/x"] and crawl.keeper.held_items == 0


def test_the_bound_releases_views_past_fallbacks_held_before_them():
    crawl = Crawl(max_items=1)
    crawl.page("/a", "/a", first=True)  # passes; in flight
    crawl.page("/a", "/b")  # its fallback, held first
    crawl.page("/x?print=1", "/x?print=1", first=True)  # within the bound: 1 view
    assert not crawl.released
    crawl.page("/y?print=1", "/y?print=1", first=True)  # 2 views: the older view goes, not the older fallback
    assert crawl.released == ["/x?print=1"] and crawl.keeper.overflowed == 1


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


@pytest.mark.parametrize("url,other,differ", [
    ("https://w.test/index.php?title=Special:RecentChanges&limit=100",
     "https://w.test/index.php?title=Special:RecentChanges&limit=250", True),
    ("https://w.test/index.php?limit=100&title=Special:RecentChanges",  # the same script, parameters in any order
     "https://w.test/index.php?title=Special:RecentChanges&limit=250", True),
    ("https://w.test/list?page=2", "https://w.test/list?page=3", True),
    ("https://w.test/index.php?title=Special:RecentChanges&limit=100",  # a parameter added: the page renamed
     "https://w.test/index.php/Special:RecentChanges", False),
    ("https://w.test/index.php?title=A&limit=100", "https://w.test/index.php?title=B&limit=100", False),  # other pages
    ("https://w.test/list?page=2", "https://w.test/other?page=3", False),  # another script
    ("https://w.test/list?page=2", "https://w.test/list?page=2", False),
    ("https://w.test/list?page=2", "https://w.test/list?page=2&sort=asc", False),
    ("https://w.test/p?utm_source=a", "https://w.test/p?utm_source=b", False),  # tracking: known to change nothing
    ("https://w.test/index.php?title=A&oldid=1", "https://w.test/index.php?title=A&oldid=2", False),  # views
    ("https://g.test/tree/a.md?id=" + "a" * 40, "https://g.test/tree/a.md?id=" + "b" * 40, False),  # views
    ("http://[::1", "https://w.test/list?page=2", False),
])
def test_names_other_selection(url, other, differ):
    assert names_other_selection(url, other) is differ
    assert names_other_selection(other, url) is differ


def test_strictly_nested_pages_hold_every_block_of_the_other_and_more():
    entries = [f"10:{i:02d} Page {i} diff hist" for i in range(5)]
    shorter, longer = page_blocks_held(["Recent changes", *entries[:4]]), page_blocks_held(["Recent changes", *entries])
    assert strictly_nested(shorter, longer) and strictly_nested(longer, shorter)
    assert not strictly_nested(longer, page_blocks_held(["Recent changes", *entries]))  # the same blocks
    assert not strictly_nested(longer, page_blocks_held(["Recent changes", "10:00 Page 0 diff hist edited", *entries[1:]]))
    # entries that differ only in numbers are one block in normal form, counted as often as the page holds it
    tickets = [f"Ticket {i} opened" for i in range(5)]
    assert strictly_nested(page_blocks_held(tickets[:4]), page_blocks_held(tickets))
    # a per-fetch number is no difference (the normal form): still the same blocks
    assert not strictly_nested(page_blocks_held(["Served in 12 ms", "Text"]), page_blocks_held(["Served in 9 ms", "Text"]))
    assert not strictly_nested(page_blocks_held([]), page_blocks_held([]))


def test_views_held_in_clusters_of_their_own_join_their_article_when_it_arrives():
    """An old revision and a diff the content engine kept apart (each its own cluster) are held; the article (a
    third cluster) arrives: joined to it, their items are its fallback, then dropped once its item is stored."""
    crawl = Crawl()
    assert crawl.page(DIFF, DIFF, first=True) == [Action.HOLD]
    assert crawl.page(OLD, OLD, first=True) == [Action.HOLD]
    crawl.keeper.page_open(ARTICLE, True)
    for view in (DIFF, OLD):
        crawl.carry_out(crawl.keeper.join(view, ARTICLE, ARTICLE))
    assert crawl.dropped == [DIFF]  # the worse-ranked view: one group held per cluster
    outcome = crawl.keeper.offer(ARTICLE, ARTICLE, rank(ARTICLE), False, ARTICLE)
    assert outcome.action is Action.PASS
    crawl.carry_out(crawl.keeper.page_done(ARTICLE))
    assert crawl.keeper.held_items == 1  # the revision's: the fallback while the article's item is in flight
    crawl.carry_out(crawl.keeper.scraped(ARTICLE))
    assert sorted(crawl.dropped) == [DIFF, OLD] and crawl.keeper.held_items == 0
    crawl.carry_out(crawl.keeper.release_all())
    assert not crawl.released
    # the views' clusters have no item: a later member that is no view keeps its own
    assert crawl.page(OLD, "/w?title=A_copy") == [Action.PASS]


def test_a_joined_view_is_the_articles_fallback_when_its_item_is_dropped():
    crawl = Crawl()
    crawl.page(OLD, OLD, first=True)
    crawl.keeper.page_open(ARTICLE, True)
    crawl.carry_out(crawl.keeper.join(OLD, ARTICLE, ARTICLE))
    crawl.keeper.offer(ARTICLE, ARTICLE, rank(ARTICLE), False, ARTICLE)
    crawl.carry_out(crawl.keeper.page_done(ARTICLE))
    crawl.carry_out(crawl.keeper.dropped(ARTICLE))  # a later pipeline dropped the article's item
    assert crawl.released == [OLD]  # the cluster never ends with no item


def test_join_is_a_no_op_unless_a_view_waits():
    crawl = Crawl()
    crawl.page(ARTICLE, ARTICLE, first=True)
    assert crawl.keeper.join(ARTICLE, OLD, OLD).drop == [] and crawl.keeper.join(OLD, ARTICLE, ARTICLE).drop == []
    assert crawl.passed == [ARTICLE] and crawl.keeper.held_items == 0


@pytest.mark.parametrize("url, key", [
    ("http://h/index.php?title=Py_token&curid=53&diff=0&oldid=99", "http://h/index.php/Py_token"),
    ("http://h/index.php?title=Py_token&oldid=79", "http://h/index.php/Py_token"),
    ("http://h/index.php/Py_token", "http://h/index.php/Py_token"),
    ("http://H/index.php?title=Py_token&action=edit", "http://h/index.php?title=Py_token&action=edit"),
    ("http://h/index.php?title=Main_Page&direction=prev&oldid=102", "http://h/index.php/Main_Page"),
    ("http://h/doku.php?id=wiki:a&rev=1700000000&do=diff", "http://h/doku.php?id=wiki%3Aa"),
    ("http://h/doku.php?id=wiki:a", "http://h/doku.php?id=wiki%3Aa"),
    ("http://h/cgit/r/tree/X.md?id=" + "ab" * 20, "http://h/cgit/r/tree/X.md"),
    ("http://h/page?title=A", "http://h/page?title=A"),  # not a .php script: the parameter stays
])
def test_page_key(url, key):
    assert page_key(url) == key
