"""The page judge (content/judge.py): one factory for the engine, one definition of "same page" at two strictnesses."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from scrapy_dedup.content.engine import MemoryContentStore
from scrapy_dedup.content.judge import PageJudge, build_engine, memory_store
from scrapy_dedup.content.params import ENGINE_PARAMS
from tests.contentsite import words

DEFAULTS = SimpleNamespace(**{p.key: p.default for p in ENGINE_PARAMS})
HOST = "http://docs.test"


def _judge(**kwargs) -> PageJudge:
    return PageJudge.from_params(DEFAULTS, url_sameness=True, **kwargs)


def _learn_template(judge: PageJudge, template: list[str]) -> None:
    """Pages of one host sharing ``template`` until its blocks are boilerplate."""
    for n in range(12):
        assert judge.judge_blocks(f"{HOST}/learn/{n}", template + [" ".join(words(7000 + n, 120))]).verdict.kind \
            == "unique"


TEMPLATE = ["Documentation of the project", " ".join(words(8000, 30)), "Contents Index Search"]


def test_the_factory_builds_the_engine_of_the_parameters():
    engine = build_engine(DEFAULTS)
    store = engine.store
    assert isinstance(store, MemoryContentStore)
    assert (store.threshold, store.bits, store.sketch_size) == (DEFAULTS.hamming_threshold, DEFAULTS.fingerprint_bits,
                                                                DEFAULTS.sketch_size)
    assert engine.fingerprinter.min_words == DEFAULTS.min_words
    assert build_engine(DEFAULTS, min_words=50).fingerprinter.min_words == 50
    given = memory_store(DEFAULTS)
    assert build_engine(DEFAULTS, given).store is given
    assert PageJudge.from_params(DEFAULTS).boilerplate is not None  # boilerplate learning is on by default
    assert PageJudge.from_params(DEFAULTS, boilerplate=False).boilerplate is None


def test_a_match_less_boilerplate_of_whole_texts_alike_is_one_page_at_url_strictness():
    """A page re-fetched under another URL whose main text differs in one word of per-fetch noise (no normal
    form maps a word away): its whole text is a near duplicate of the kept page's by the engine's rule."""
    judge = _judge()
    _learn_template(judge, TEMPLATE)
    body = " ".join(words(9000, 150))
    kept = judge.judge_blocks(f"{HOST}/page", TEMPLATE + [body, "Hello, visitor!"])
    assert kept.verdict.kind == "unique" and kept.page("url") == f"{HOST}/page"
    again = judge.judge_blocks(f"{HOST}/page?sid=1", TEMPLATE + [body, "Welcome, visitor!"])
    assert again.verdict.is_duplicate and again.page("item") == f"{HOST}/page"
    assert again.page("url") == f"{HOST}/page" and again.url_same and again.basis is None


def test_pages_of_another_index_less_boilerplate_are_pages_of_their_own_and_alike_ones_are_one():
    """Two listing pages showing the same posts under other headings: one cluster for an item drop, two pages
    at URL strictness; a second URL of the other listing joins the other listing, not the kept page."""
    judge = _judge()
    index_a = ["All posts of the blog", " ".join(words(8100, 25))]
    index_b = ["Posts tagged howto", " ".join(words(8200, 25))]
    for n in range(12):  # both indexes' headings become boilerplate
        for index, name in ((index_a, "all"), (index_b, "tag")):
            judge.judge_blocks(f"{HOST}/{name}/{n}", index + [" ".join(words(7000 + n * 2 + (name == "tag"), 60))])
    posts = [" ".join(words(6000, 40)), " ".join(words(6001, 40))]
    kept = judge.judge_blocks(f"{HOST}/all/20", index_a + posts)
    assert kept.verdict.kind == "unique"
    other = judge.judge_blocks(f"{HOST}/tag/5", index_b + posts)
    assert other.verdict.kind == "near" and other.reduced_match
    assert other.page("item") == f"{HOST}/all/20"
    assert other.page("url") == f"{HOST}/tag/5" and not other.url_same and other.basis == "reduced"
    again = judge.judge_blocks(f"{HOST}/tag/5?sid=2", index_b + posts)
    assert again.page("item") == f"{HOST}/all/20" and again.page("url") == f"{HOST}/tag/5"


def test_without_url_sameness_a_match_less_boilerplate_is_a_page_of_its_own():
    judge = PageJudge.from_params(DEFAULTS)
    _learn_template(judge, TEMPLATE)
    body = " ".join(words(9000, 150))
    judge.judge_blocks(f"{HOST}/page", TEMPLATE + [body, "Hello, visitor!"])
    again = judge.judge_blocks(f"{HOST}/page?sid=1", TEMPLATE + [body, "Welcome, visitor!"])
    assert again.page("item") == f"{HOST}/page" and again.page("url") == f"{HOST}/page?sid=1"


def test_past_the_bound_the_kept_pages_compare_by_their_normal_hash():
    """The whole fingerprints are held for the last ``kept_whole_pages`` pages; an older kept page is compared
    by its normal hash only: a re-fetch that differs in a word is then a page of its own (never a merge on
    less evidence), one that differs only in numbers is still its page."""
    judge = _judge(kept_whole_pages=1)
    _learn_template(judge, TEMPLATE)
    body = " ".join(words(9000, 150))
    judge.judge_blocks(f"{HOST}/page", TEMPLATE + [body, "Hello, visitor 1!"])
    judge.judge_blocks(f"{HOST}/other", TEMPLATE + [" ".join(words(9100, 150))])  # takes the one slot
    numbers = judge.judge_blocks(f"{HOST}/page?sid=1", TEMPLATE + [body, "Hello, visitor 2!"])
    word = judge.judge_blocks(f"{HOST}/page?sid=2", TEMPLATE + [body, "Welcome, visitor 3!"])
    assert numbers.reduced_match and word.reduced_match  # matched on the texts less boilerplate
    assert numbers.page("url") == f"{HOST}/page"
    assert word.page("url") == f"{HOST}/page?sid=2"
    # with the whole fingerprint held, the same page
    judge = _judge(kept_whole_pages=2)
    _learn_template(judge, TEMPLATE)
    judge.judge_blocks(f"{HOST}/page", TEMPLATE + [body, "Hello, visitor 1!"])
    judge.judge_blocks(f"{HOST}/other", TEMPLATE + [" ".join(words(9100, 150))])
    assert judge.judge_blocks(f"{HOST}/page?sid=2", TEMPLATE + [body, "Welcome, visitor 3!"]).page("url") \
        == f"{HOST}/page"


def test_strictness_is_checked():
    judge = PageJudge.from_params(DEFAULTS, boilerplate=False)
    page = judge.judge_text(f"{HOST}/a", judge.engine.fingerprint(" ".join(words(1, 100))))
    with pytest.raises(ValueError, match="strictness"):
        page.page("host")  # type: ignore[arg-type]
