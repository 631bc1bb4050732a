"""The one extraction path (content/extract.py): policy defaults, overrides, the max_bytes cut."""
import pytest
from lxml import html as lxml_html

from scrapy_dedup.content.extract import POLICY_KEYS, Extraction, ExtractionPolicy, extract_text
from scrapy_dedup.content.params import BY_KEY, ParamError

PAGE = "<html><body><nav>menu words</nav><div class='ad'>buy now</div><p>the main text here</p></body></html>"


def test_defaults_are_the_engine_defaults():
    policy = ExtractionPolicy()
    for key in POLICY_KEYS:
        assert getattr(policy, key) == BY_KEY[key].default


def test_from_values_takes_only_policy_keys():
    policy = ExtractionPolicy.from_values({"min_words": 7, "max_bytes": 5000, "shingle_size": 3})
    assert (policy.min_words, policy.max_bytes) == (7, 5000)


@pytest.mark.parametrize("overrides, expected", [
    ({"MIN_WORDS": "9"}, {"min_words": 9}),
    ({"strip_selectors": ".ad, .promo"}, {"strip_selectors": (".ad", ".promo")}),
    ({"max_bytes": 4096, "strip_tags": ["nav"]}, {"max_bytes": 4096, "strip_tags": ("nav",)}),
])
def test_overridden_converts(overrides, expected):
    policy = ExtractionPolicy().overridden(overrides)
    for key, value in expected.items():
        assert getattr(policy, key) == value


@pytest.mark.parametrize("overrides, named", [
    ({"min_words": 0}, "site['min_words']"),
    ({"max_bytes": "lots"}, "site['max_bytes']"),
    ({"shingle_size": 3}, "unknown key 'shingle_size'"),
])
def test_overridden_refuses_naming_the_key(overrides, named):
    with pytest.raises(ParamError, match=named.replace("[", r"\[").replace("]", r"\]")):
        ExtractionPolicy().overridden(overrides, "site")


@pytest.mark.parametrize("source", [PAGE, PAGE.encode(), lxml_html.fromstring(PAGE)])
def test_every_source_gives_the_same_text(source):
    policy = ExtractionPolicy(strip_selectors=(".ad",))
    result = extract_text(source, policy)
    assert result.text == "the main text here"
    assert not result.truncated


def test_cut_at_max_bytes_and_said():
    body = ("<p>" + "word " * 600 + "</p>").encode()
    result = extract_text(body, ExtractionPolicy(max_bytes=1024))
    assert result.truncated
    assert len(result.text.split()) < 600


def test_a_tree_is_not_cut():
    tree = lxml_html.fromstring("<p>" + "word " * 600 + "</p>")
    result = extract_text(tree, ExtractionPolicy(max_bytes=1024))
    assert not result.truncated and len(result.text.split()) == 600


def test_a_bad_selector_is_refused_when_the_policy_is_made_not_per_page():
    from scrapy_dedup.audit.config import AuditConfigError, build_config

    with pytest.raises(ParamError, match=r"site\['strip_selectors'\]: invalid CSS selector 'div\[\['"):
        ExtractionPolicy().overridden({"strip_selectors": ["div[["]}, "site")
    with pytest.raises(AuditConfigError, match="strip_selectors: invalid CSS selector"):
        build_config(overrides={"strip_selectors": "p, div[["})


@pytest.mark.parametrize("html", [
    "<html><head><title>T</title></head><body><p>one two</p><div>three <b>fo</b>ur</div><p></p></body></html>",
    "<p>caf\u00e9 \u2014 na\u00efve</p><p>ascii only</p><ul><li>\u6771\u4eac</li><li>x</li></ul>",  # widths mixed
    "<p>   </p>",  # no block
    "",
])
def test_an_extraction_with_blocks_joins_them_to_its_text_when_read(html):
    # with blocks, the text is joined from them when first read (the audit reads only the blocks): the same text
    # as an extraction without blocks, the blocks and the title as given
    policy = ExtractionPolicy()
    with_blocks = extract_text(html, policy, blocks=True)
    assert with_blocks.given_text is None
    assert with_blocks.text == " ".join(with_blocks.blocks or []) == extract_text(html, policy).text
    assert with_blocks.text is with_blocks.text  # joined once
    assert Extraction("given", False, ["not", "joined"]).text == "given"
