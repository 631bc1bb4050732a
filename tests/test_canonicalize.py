"""Every canonicalization rule of the issue, one by one, with the traps that must stay distinct.

Expected values are written by hand from RFC 3986 / RFC 3987 / UTS #46, never computed by the code.
"""
from __future__ import annotations

import pytest

from scrapy_dedup import Canonicalizer as PublicCanonicalizer
from scrapy_dedup import canonicalize as public_canonicalize
from scrapy_dedup.url.canonical import (
    Canonicalizer,
    CanonicalResult,
    canonicalize,
    looks_like_session_token,
)
from scrapy_dedup.url.policy import SWITCHES, PolicyMap, UrlPolicy

SAFE_ONLY = {name: False for name in SWITCHES}
ALL_ON = {name: True for name in SWITCHES}


def safe(url: str) -> str:
    """Only the safe steps."""
    return canonicalize(url, **SAFE_ONLY)


def test_public_names_are_the_module_ones():
    assert public_canonicalize is canonicalize
    assert PublicCanonicalizer is Canonicalizer


# --------------------------------------------------------------------------- safe steps

@pytest.mark.parametrize("url, expected", [
    ("HTTP://EXAMPLE.COM/", "http://example.com/"),
    ("HtTpS://Example.Com/Path", "https://example.com/Path"),
])
def test_lowercase_scheme_and_host_not_path(url, expected):
    assert safe(url) == expected


def test_path_case_is_kept_and_distinct():
    assert safe("http://example.com/About") == "http://example.com/About"
    assert canonicalize("http://example.com/About") != canonicalize("http://example.com/about")


@pytest.mark.parametrize("url, expected", [
    ("http://faß.de/", "http://xn--fa-hia.de/"),  # non-transitional: ß is kept (IDNA2008)
    ("http://Bücher.DE/", "http://xn--bcher-kva.de/"),
    ("http://例え.jp/", "http://xn--r8jz45g.jp/"),
    ("http://ａｂｃ。com/", "http://abc.com/"),  # UTS #46 maps full-width letters and dots
    ("http://xn--bcher-kva.de/", "http://xn--bcher-kva.de/"),
    ("http://XN--BCHER-KVA.DE/", "http://xn--bcher-kva.de/"),
])
def test_idn_host_to_punycode(url, expected):
    assert safe(url) == expected


def test_fass_and_fasz_stay_distinct():
    assert canonicalize("http://faß.de/") != canonicalize("http://fass.de/")
    assert canonicalize("http://fass.de/") == "http://fass.de/"


@pytest.mark.parametrize("url, expected", [
    ("http://☃.net/", "http://xn--n3h.net/"),  # a symbol IDNA2008 rejects: plain punycode, as browsers do
    ("http://ex_ample.bücher.de/", "http://ex_ample.xn--bcher-kva.de/"),  # underscore label kept
])
def test_idn_fallback_for_labels_idna_rejects(url, expected):
    result = Canonicalizer().canonicalize_with_info(url)
    assert result == CanonicalResult(expected, (), False)


@pytest.mark.parametrize("url, expected", [
    ("http://example.com:80/", "http://example.com/"),
    ("https://example.com:443/", "https://example.com/"),
    ("http://example.com:/", "http://example.com/"),  # empty port
    ("http://example.com:0080/", "http://example.com/"),  # leading zeros: still 80
    ("http://example.com:443/", "http://example.com:443/"),  # not http's default
    ("https://example.com:80/", "https://example.com:80/"),
    ("http://example.com:8080/", "http://example.com:8080/"),
    ("ws://example.com:80/", "ws://example.com/"),
    ("wss://example.com:443/", "wss://example.com/"),
    ("ftp://example.com:21/f", "ftp://example.com/f"),
])
def test_default_and_empty_port(url, expected):
    assert safe(url) == expected


@pytest.mark.parametrize("url, expected", [
    ("http://[::0:1]/", "http://[::1]/"),
    ("http://[2001:DB8:0:0:0:0:0:1]:8080/", "http://[2001:db8::1]:8080/"),
    ("http://[2001:0db8::0001]:80/", "http://[2001:db8::1]/"),
    ("http://[fe80::1%25EN0]/", "http://[fe80::1%25EN0]/"),  # zone ID kept as given (RFC 6874)
])
def test_canonical_ipv6(url, expected):
    assert safe(url) == expected


@pytest.mark.parametrize("url, expected", [
    ("http://example.com/%7euser", "http://example.com/~user"),  # unreserved: decoded
    ("http://example.com/%41%62%2D%2e%5F", "http://example.com/Ab-._"),
    ("http://example.com/a%2fb", "http://example.com/a%2Fb"),  # reserved: kept, hex uppercased
    ("http://example.com/a?x=%3f%23%26%3b%2c%25", "http://example.com/a?x=%3F%23%26%3B%2C%25"),
    ("http://example.com/%e2%82%ac", "http://example.com/%E2%82%AC"),
])
def test_percent_escapes(url, expected):
    assert safe(url) == expected


def test_reserved_escape_and_character_stay_distinct():
    assert canonicalize("http://example.com/a%2Fb") != canonicalize("http://example.com/a/b")
    assert canonicalize("http://example.com/?a=1%26b=2") != canonicalize("http://example.com/?a=1&b=2")


def test_never_decodes_twice():
    # %2541 is an escaped "%" followed by "41": it must not become "%41" and then "A"
    assert safe("http://example.com/%2541") == "http://example.com/%2541"
    # a lone "%" becomes %25, in the same pass, so "%%41b" cannot turn into the escape "%Ab"
    assert safe("http://example.com/%%41b") == "http://example.com/%25Ab"
    assert safe("http://example.com/100%") == "http://example.com/100%25"
    assert safe("http://example.com/%zz") == "http://example.com/%25zz"


@pytest.mark.parametrize("url, expected", [
    ("http://example.com/a/./b/../c", "http://example.com/a/c"),
    ("http://example.com/a/b/..", "http://example.com/a/"),
    ("http://example.com/a/.", "http://example.com/a/"),
    ("http://example.com/../../x", "http://example.com/x"),
    ("http://example.com/a/%2e%2E/b", "http://example.com/b"),  # escaped dot segments too
    ("http://example.com/a/%2e/b", "http://example.com/a/b"),
    ("http://example.com/a/.b/..c", "http://example.com/a/.b/..c"),  # not dot segments
    ("http://example.com/a%2F../b", "http://example.com/a%2F../b"),  # "a%2F.." is one segment
])
def test_dot_segments(url, expected):
    assert safe(url) == expected


@pytest.mark.parametrize("url, expected", [
    ("http://example.com", "http://example.com/"),
    ("http://example.com?a=1", "http://example.com/?a=1"),
    ("http://example.com#!x", "http://example.com/#!x"),
])
def test_empty_path_is_slash(url, expected):
    assert safe(url) == expected


@pytest.mark.parametrize("url, expected", [
    ("http://example.com/résumé", "http://example.com/r%C3%A9sum%C3%A9"),
    ("http://example.com/?q=ü", "http://example.com/?q=%C3%BC"),
    ("http://example.com/a b?c d#e f", "http://example.com/a%20b?c%20d#e%20f"),
    ("http://example.com/a|b{c}^`\"<>", "http://example.com/a%7Cb%7Bc%7D%5E%60%22%3C%3E"),
    ("http://example.com/a[1]?b[]=2", "http://example.com/a%5B1%5D?b%5B%5D=2"),
])
def test_non_ascii_and_disallowed_characters_to_utf8_escapes(url, expected):
    assert safe(url) == expected


def test_no_unicode_normalization_of_paths():
    composed = "http://example.com/caf\u00e9"  # é as one code point
    decomposed = "http://example.com/cafe\u0301"  # e + combining acute
    assert safe(composed) == "http://example.com/caf%C3%A9"
    assert safe(decomposed) == "http://example.com/cafe%CC%81"


def test_userinfo_case_kept_host_lowercased():
    assert safe("http://User:PassWord@Example.COM/") == "http://User:PassWord@example.com/"
    assert safe("http://us%65r@example.com/") == "http://user@example.com/"


def test_plus_and_percent20_are_not_reencoded():
    assert canonicalize("http://example.com/?q=a+b") == "http://example.com/?q=a+b"
    assert canonicalize("http://example.com/?q=a%20b") == "http://example.com/?q=a%20b"
    assert canonicalize("http://example.com/?q=a+b") != canonicalize("http://example.com/?q=a%20b")


def test_backslash_is_a_slash_in_special_schemes_before_the_query():
    assert safe("http://example.com\\a\\b?x=\\") == "http://example.com/a/b?x=%5C"


def test_whitespace_around_and_tabs_newlines_inside():
    assert safe("  \thttp://example.com/a\n/b \r\n") == "http://example.com/a/b"


def test_opaque_urls_keep_everything_but_scheme_case():
    assert canonicalize("MAILTO:Someone@Example.com") == "mailto:Someone@Example.com"
    assert canonicalize("javascript:void(0)") == "javascript:void(0)"


# --------------------------------------------------------------------------- WHATWG merges
# Merges the WHATWG URL Standard makes (what a browser fetches), from its test data
# (web-platform-tests url/resources/urltestdata.json, rows with no base URL; input -> href)
# and from the spec's IPv4 and file-host rules where the data has no row.

@pytest.mark.parametrize("url, expected", [
    ("http://@h/", "http://h/"),
    ("http://:@h/", "http://h/"),
    ("http://u:@h/", "http://u@h/"),
    ("https://test:@test", "https://test@test/"),  # WHATWG row
    ("https://:@test", "https://test/"),  # WHATWG row
    ("http://@www.example.com", "http://www.example.com/"),  # WHATWG row
    ("http://a:@www.example.com", "http://a@www.example.com/"),  # WHATWG row
    ("non-special://test:@test/x", "non-special://test@test/x"),  # WHATWG row: every scheme
    ("non-special://:@test/x", "non-special://test/x"),  # WHATWG row
    ("http://:p@h/", "http://:p@h/"),  # an empty user with a password stays
    ("http://U:P@h/", "http://U:P@h/"),  # case kept
    ("http://u:%41@h/", "http://u:A@h/"),  # the escape is decoded first: the password is not empty
    ("sc://@/", "sc://@/"),  # credentials without a host: invalid in WHATWG, kept as they are
    ("sc://u:@/x", "sc://u:@/x"),
])
def test_empty_credentials_are_dropped(url, expected):
    assert safe(url) == expected


@pytest.mark.parametrize("url, expected", [
    ("http://0x7f.1/", "http://127.0.0.1/"),
    ("http://127.1/", "http://127.0.0.1/"),
    ("http://127.0.1/", "http://127.0.0.1/"),
    ("http://2130706433/", "http://127.0.0.1/"),
    ("http://0177.0.0.1/", "http://127.0.0.1/"),  # a leading 0: octal
    ("http://017700000001/", "http://127.0.0.1/"),
    ("http://0x7F000001/", "http://127.0.0.1/"),
    ("http://0x7f.0.0.0x1/", "http://127.0.0.1/"),
    ("http://127.0.0.1./", "http://127.0.0.1/"),  # a trailing dot
    ("http://%30x7f.1/", "http://127.0.0.1/"),  # escapes in a host are decoded first
    ("http://１２７.０.０.１/", "http://127.0.0.1/"),  # full-width digits: UTS #46 maps them first
    ("https://0x.0x.0", "https://0.0.0.0/"),  # WHATWG row: "0x" alone is zero
    ("http://192.0x00A80001", "http://192.168.0.1/"),  # WHATWG row
    ("http://0x7f.1:80/", "http://127.0.0.1/"),
    ("ws://0x7f.1/", "ws://127.0.0.1/"),
    ("ftp://127.1/", "ftp://127.0.0.1/"),
    ("file://127.1/x", "file://127.0.0.1/x"),
    ("http://127.0.0.1/", "http://127.0.0.1/"),
    ("http://0.0.0.0/", "http://0.0.0.0/"),
    ("http://255.255.255.255/", "http://255.255.255.255/"),
    # invalid as IPv4 in WHATWG (a URL failure there): kept as a name, merged with nothing new
    ("http://1.2.3.256/", "http://1.2.3.256/"),
    ("http://1.2.3.08/", "http://1.2.3.08/"),
    ("http://0x100000000/", "http://0x100000000/"),
    ("http://1.2.3.4.5/", "http://1.2.3.4.5/"),
    ("http://foo.09/", "http://foo.09/"),
    ("http://foo.0x4/", "http://foo.0x4/"),
    # not ending in a number: names, whatever their other labels
    ("http://127.0.0.1.example/", "http://127.0.0.1.example/"),
    ("http://0x7f.1a/", "http://0x7f.1a/"),
    ("http://1.2.3.4a/", "http://1.2.3.4a/"),
    ("http://cafe/", "http://cafe/"),  # hex letters, but no "0x": a name
    ("http://deadbeef.0xg/", "http://deadbeef.0xg/"),
    # other schemes have opaque hosts
    ("foo://0x7f.1/", "foo://0x7f.1/"),
    ("sc://127.1/", "sc://127.1/"),
])
def test_ipv4_address_forms_become_dotted_decimal(url, expected):
    assert safe(url) == expected


@pytest.mark.parametrize("url, expected", [
    ("http:example.com", "http://example.com/"),
    ("http:example.com/", "http://example.com/"),  # WHATWG row
    ("https:example.com/", "https://example.com/"),  # WHATWG row
    ("ftp:example.com/", "ftp://example.com/"),  # WHATWG row
    ("ws:example.com/", "ws://example.com/"),  # WHATWG row
    ("wss:example.com/", "wss://example.com/"),  # WHATWG row
    ("HTTP:Example.COM:80/a?b#c", "http://example.com/a?b#c"),
    ("http:@www.example.com", "http://www.example.com/"),  # WHATWG row
    ("http:a:b@www.example.com", "http://a:b@www.example.com/"),  # WHATWG row
    ("http::b@www.example.com", "http://:b@www.example.com/"),  # WHATWG row
    ("http:a:@www.example.com", "http://a@www.example.com/"),  # WHATWG row
    ("http:example.com\\a", "http://example.com/a"),
    # no host: still unparsable
    ("http:?x", "http:?x"),
    ("http:#x", "http:#x"),
    # other schemes: opaque, as before
    ("mailto:a@example.com", "mailto:a@example.com"),
    ("foo:example.com", "foo:example.com"),
])
def test_special_scheme_without_slashes(url, expected):
    assert safe(url) == expected


@pytest.mark.parametrize("url", [
    # WHATWG reads these as http://example.com/, but scrapy.Request keeps "http:///example.com/",
    # which it cannot download: merging them would let that failed fetch filter the good URL
    "http:/example.com/", "http:///example.com/", "http:////example.com/", "http:/@www.example.com",
])
def test_one_slash_or_three_stay_unparsable(url):
    result = Canonicalizer().canonicalize_with_info(url)
    assert result.unparsable is True and result.url == url


@pytest.mark.parametrize("url, expected", [
    ("file://C:/x", "file:///C:/x"),
    ("file://c:/x", "file:///c:/x"),  # the letter's case is kept
    ("file://C|/", "file:///C:/"),  # WHATWG row
    ("file://C:", "file:///C:"),
    ("file:///C|/x", "file:///C:/x"),
    ("file:///w|/m", "file:///w:/m"),  # WHATWG row
    ("file:///Y:/", "file:///Y:/"),  # WHATWG row
    ("file:///C:/../x", "file:///C:/x"),  # ".." stops at the drive letter
    ("file://C:/a/../../b", "file:///C:/b"),
    ("file:///C:/..", "file:///C:/"),
    ("file:///w|m", "file:///w%7Cm"),  # WHATWG row: no drive letter (not followed by "/")
    ("file:///w||m", "file:///w%7C%7Cm"),  # WHATWG row
    ("file://example.net/C:/", "file://example.net/C:/"),  # WHATWG row: a drive letter after a host
    ("file://1.2.3.4/C:/", "file://1.2.3.4/C:/"),  # WHATWG row
    ("file:///x/C:/../y", "file:///x/y"),  # a drive letter only as the first segment
    ("file:///%43:/../x", "file:///x"),  # an escaped letter is no drive letter
    ("file://localhost/x", "file:///x"),
    ("file://localhost/", "file:///"),
    ("file://LOCALHOST/x", "file:///x"),
    ("file://localhost//a//../..//foo", "file://///foo"),  # WHATWG row
    ("file://localhost////foo", "file://////foo"),  # WHATWG row
    ("file://loC𝐀𝐋𝐇𝐨𝐬𝐭/usr/bin", "file:///usr/bin"),  # WHATWG row: localhost after UTS #46 mapping
    ("http://localhost/x", "http://localhost/x"),  # only file URLs
    ("http://C:/x", "http://c/x"),  # only file URLs: here the host "C" with an empty port, as before
])
def test_file_drive_letters_and_localhost(url, expected):
    assert safe(url) == expected


# --------------------------------------------------------------------------- unparsable input

@pytest.mark.parametrize("url", [
    "", "   ", "not a url", "example.com/path", "/relative/path", "http://", "http:///path",
    "http://exa mple.com/", "http://example.com:99999/", "http://example.com:8o/", "http://[::1/",
    "http://[nonsense]/", "http://a:b:c/", "http:/foo",
])
def test_unparsable_comes_back_stripped_and_flagged(url):
    result = Canonicalizer().canonicalize_with_info(f"  {url} ")
    assert result.unparsable is True
    assert result.url == url.strip()
    assert result.fired == ()


def test_non_string_input_never_raises():
    assert Canonicalizer().canonicalize_with_info(b"HTTP://EXAMPLE.COM").url == "http://example.com/"
    assert Canonicalizer().canonicalize_with_info(None).unparsable is True  # type: ignore[arg-type]


# --------------------------------------------------------------------------- strip_tracking

@pytest.mark.parametrize("param", [
    "utm_source=x", "utm_medium=email", "UTM_Campaign=y", "utm_anything=z", "gclid=abc", "fbclid=abc",
    "msclkid=abc", "dclid=abc", "yclid=1", "gbraid=a", "wbraid=b", "mc_cid=1", "mc_eid=2", "_ga=1.2.3",
    "igshid=abc", "utm%5Fsource=x",
])
def test_strip_tracking_removes_tracking_params(param):
    assert canonicalize(f"http://example.com/p?id=7&{param}") == "http://example.com/p?id=7"
    assert canonicalize(f"http://example.com/p?{param}") == "http://example.com/p"


@pytest.mark.parametrize("param", ["source=x", "ref=home", "session=1", "id=5", "campaign=2", "utm=1", "gclid_x=1"])
def test_strip_tracking_never_touches_generic_words(param):
    assert canonicalize(f"http://example.com/p?{param}") == f"http://example.com/p?{param}"


def test_strip_tracking_user_extension_exact_and_prefix():
    url = "http://example.com/p?a=1&src_id=9&trk_x=1&trk_y=2&trkz=3"
    assert canonicalize(url, tracking_params=["src_id", "trk_*"]) == "http://example.com/p?a=1&trkz=3"


def test_strip_tracking_off_keeps_them():
    assert canonicalize("http://example.com/p?utm_source=x", strip_tracking=False) == \
        "http://example.com/p?utm_source=x"


# --------------------------------------------------------------------------- strip_session

TOKEN32 = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize("url, expected", [
    (f"http://example.com/a;jsessionid={TOKEN32.upper()}", "http://example.com/a"),
    (f"http://example.com/a;jsessionid={TOKEN32}.node01?x=1", "http://example.com/a?x=1"),
    (f"http://example.com/a;JSESSIONID={TOKEN32}/b", "http://example.com/a/b"),
    ("http://example.com/a?PHPSESSID=k3v8m2q9x7c1n4b6z5l0p2r8t1&x=1", "http://example.com/a?x=1"),
    (f"http://example.com/a?sid={TOKEN32}", "http://example.com/a"),
    ("http://example.com/a?ASPSESSIONIDQQGGQGPD=ABCDEFGHIJKLMNOPQRSTUVW1", "http://example.com/a"),
    (f"http://example.com/a?jsessionid={TOKEN32}&page=2", "http://example.com/a?page=2"),
])
def test_strip_session_removes_token_like_values(url, expected):
    assert canonicalize(url) == expected


@pytest.mark.parametrize("url", [
    "http://example.com/a?sid=04/12/05/1736239",  # a story ID, not a session
    "http://example.com/a?sid=12345",
    "http://example.com/a?sid=" + "a" * 32,  # no digit
    "http://example.com/a?sid=" + "1" * 32,  # no letter
    "http://example.com/a?jsessionid=abc123",  # too short
    "http://example.com/a;jsessionid=short1",
    "http://example.com/a?session=" + TOKEN32,  # generic word: not a session parameter name
    "http://example.com/a?id=" + TOKEN32,
])
def test_strip_session_keeps_non_token_values(url):
    assert canonicalize(url) == url


def test_session_token_rule():
    assert looks_like_session_token("A1" * 8)
    assert not looks_like_session_token("A1" * 7)  # 14 < 16
    assert looks_like_session_token(TOKEN32, 32, 32)
    assert not looks_like_session_token(TOKEN32 + "0", 32, 32)
    assert not looks_like_session_token("04/12/05/1736239" * 2)


def test_strip_session_user_extension():
    url = f"http://example.com/a?mysess={TOKEN32}&x=1"
    assert canonicalize(url) == url
    assert canonicalize(url, session_params=["mysess"]) == "http://example.com/a?x=1"


def test_strip_session_off_keeps_them():
    url = f"http://example.com/a;jsessionid={TOKEN32}?sid={TOKEN32}"
    assert canonicalize(url, strip_session=False) == url


def test_session_removal_that_reveals_a_dot_segment_is_resolved():
    url = f"http://example.com/a/..;jsessionid={TOKEN32}/b"
    assert canonicalize(url) == "http://example.com/b"


# --------------------------------------------------------------------------- sort_query

def test_sort_query_by_key_only_keeping_repeated_values_order():
    assert canonicalize("http://example.com/?b=2&a=9&b=1&a=3") == "http://example.com/?a=9&a=3&b=2&b=1"


def test_repeated_keys_in_different_order_stay_distinct():
    assert canonicalize("http://example.com/?a=1&a=2") != canonicalize("http://example.com/?a=2&a=1")


def test_sort_query_keeps_key_only_and_blank_values():
    assert canonicalize("http://example.com/read.php?1423") == "http://example.com/read.php?1423"
    assert canonicalize("http://example.com/?b=&a") == "http://example.com/?a&b="
    assert canonicalize("http://example.com/read.php?1423") != canonicalize("http://example.com/read.php?1424")


def test_sort_query_drops_empty_params_and_empty_query():
    assert canonicalize("http://example.com/?b=1&&a=2&") == "http://example.com/?a=2&b=1"
    assert canonicalize("http://example.com/p?") == "http://example.com/p"
    assert safe("http://example.com/p?") == "http://example.com/p?"  # safe steps keep the delimiter


def test_sort_query_off_keeps_order():
    assert canonicalize("http://example.com/?b=2&a=1", sort_query=False) == "http://example.com/?b=2&a=1"


@pytest.mark.parametrize("a, b", [
    ("http://example.com/list?page=2", "http://example.com/list?page=1"),
    ("http://example.com/c?category=shoes", "http://example.com/c?category=boots"),
])
def test_different_values_stay_distinct(a, b):
    assert canonicalize(a, **ALL_ON) != canonicalize(b, **ALL_ON)


# --------------------------------------------------------------------------- drop_fragment

def test_drop_fragment_but_keep_route_fragments():
    assert canonicalize("http://example.com/a#section") == "http://example.com/a"
    assert canonicalize("http://example.com/a#") == "http://example.com/a"
    assert canonicalize("http://example.com/app#!/a") == "http://example.com/app#!/a"
    assert canonicalize("http://example.com/app#/a") == "http://example.com/app#/a"
    assert canonicalize("http://example.com/app#!/a") != canonicalize("http://example.com/app#!/b")


def test_drop_fragment_off_keeps_and_normalizes_it():
    assert canonicalize("http://example.com/a#Sec%7eTion é", drop_fragment=False) == \
        "http://example.com/a#Sec~Tion%20%C3%A9"


# --------------------------------------------------------------------------- default-off switches

@pytest.mark.parametrize("url, expected", [
    ("http://example.com/a/", "http://example.com/a"),
    ("http://example.com/a//", "http://example.com/a"),
    ("http://example.com/", "http://example.com/"),  # the root keeps its slash
    ("http://example.com/a/?x=1/", "http://example.com/a?x=1/"),  # the path only, never the query
])
def test_strip_trailing_slash(url, expected):
    assert canonicalize(url, strip_trailing_slash=True) == expected
    assert canonicalize(url) == url  # off by default


@pytest.mark.parametrize("url, expected", [
    ("http://www.example.com/", "http://example.com/"),
    ("http://WWW.Example.CO.UK/", "http://example.co.uk/"),
    ("http://www.shop.example.com/", "http://shop.example.com/"),
    ("http://www.www.example.com/", "http://example.com/"),
    ("http://www.co.uk/", "http://www.co.uk/"),  # co.uk is a public suffix, not a registrable domain
    ("http://www.github.io/", "http://www.github.io/"),  # a private public suffix too
    ("http://www.localhost/", "http://www.localhost/"),
    ("http://www2.example.com/", "http://www2.example.com/"),  # www2 is not www
    ("http://wwwexample.com/", "http://wwwexample.com/"),
    ("http://www.10.0.0.1/", "http://www.10.0.0.1/"),
    # TLDs the bundled suffix list does not know: the PSL default rule "*" applies
    ("http://www.shop.test/", "http://shop.test/"),
    ("http://www.intranet.internal/a", "http://intranet.internal/a"),
    ("http://www.test/", "http://www.test/"),  # "test" alone is the suffix
    ("http://10.0.0.1/", "http://10.0.0.1/"),
    ("http://[::1]/", "http://[::1]/"),
    ("http://www.example.com/www./x?www.=1", "http://example.com/www./x?www.=1"),  # the host only
])
def test_strip_www(url, expected):
    assert canonicalize(url, strip_www=True) == expected


def test_www2_and_bare_domain_stay_distinct():
    assert canonicalize("http://www2.example.com/", **ALL_ON) != canonicalize("http://example.com/", **ALL_ON)


@pytest.mark.parametrize("url, expected", [
    ("https://example.com/a", "http://example.com/a"),
    ("https://example.com:443/a", "http://example.com/a"),
    ("https://example.com:8443/a", "http://example.com:8443/a"),
    ("https://example.com:80/a", "http://example.com/a"),  # after the switch, 80 is the default port
    ("http://example.com/a", "http://example.com/a"),
    ("wss://example.com/a", "wss://example.com/a"),
])
def test_ignore_scheme(url, expected):
    assert canonicalize(url, ignore_scheme=True) == expected


@pytest.mark.parametrize("url, expected", [
    ("http://example.com/index.html", "http://example.com/"),
    ("http://example.com/dir/index.htm", "http://example.com/dir/"),
    ("http://example.com/dir/Default.aspx?x=1", "http://example.com/dir/?x=1"),
    ("http://example.com/index.php/", "http://example.com/index.php/"),  # not the last segment
    ("http://example.com/myindex.html", "http://example.com/myindex.html"),
    ("http://example.com/?index.html", "http://example.com/?index.html"),
])
def test_drop_index(url, expected):
    assert canonicalize(url, drop_index=True) == expected


def test_drop_index_with_trailing_slash_reaches_a_fixed_point():
    url = "http://example.com/index.html/index.html/"
    once = canonicalize(url, drop_index=True, strip_trailing_slash=True)
    assert once == "http://example.com/"
    assert canonicalize("http://example.com/dir/index.html", drop_index=True, strip_trailing_slash=True) == \
        "http://example.com/dir"


def test_unknown_switch_and_bad_type_raise():
    with pytest.raises(ValueError, match="strip_wwww"):
        canonicalize("http://example.com/", strip_wwww=True)
    with pytest.raises(ValueError, match="strip_www"):
        canonicalize("http://example.com/", strip_www="yes")


def test_dust_rules_reserved():
    assert canonicalize("http://Example.com", dust_rules=None) == "http://example.com/"
    with pytest.raises(ValueError, match="dust_rules"):
        canonicalize("http://example.com/", dust_rules="rules.json")


# --------------------------------------------------------------------------- Canonicalizer and info

def test_canonicalize_with_info_reports_each_fired_switch():
    c = Canonicalizer(UrlPolicy(**ALL_ON))
    result = c.canonicalize_with_info(
        f"https://www.example.com/d/index.html;jsessionid={TOKEN32}?utm_source=x&b=1&a=2#top")
    assert result.url == "http://example.com/d?a=2&b=1"
    assert set(result.fired) == {"strip_session", "strip_tracking", "sort_query", "drop_fragment",
                                 "drop_index", "strip_trailing_slash", "strip_www", "ignore_scheme"}
    assert result.unparsable is False


def test_canonicalize_with_info_fires_nothing_when_only_safe_steps_change_the_url():
    result = Canonicalizer().canonicalize_with_info("HTTP://Example.com:80/a/../b?a=1&b=2")
    assert result == CanonicalResult("http://example.com/b?a=1&b=2", (), False)


def test_canonicalizer_per_domain_policy_most_specific_wins():
    policies = PolicyMap.from_settings_values(
        {"strip_www": True},
        {"example.com": {"strip_tracking": False}, "shop.example.com": {"strip_tracking": True, "sort_query": False}},
    )
    c = Canonicalizer(policies)
    assert c.canonicalize("http://www.example.com/?utm_source=x") == "http://example.com/?utm_source=x"
    assert c.canonicalize("http://eu.shop.example.com/?utm_source=x&b=1&a=1") == "http://eu.shop.example.com/?b=1&a=1"
    assert c.canonicalize("http://notexample.com/?utm_source=x") == "http://notexample.com/"
    assert c.canonicalize("http://www.other.org/?b=1&a=1") == "http://other.org/?a=1&b=1"


def test_canonicalizer_rejects_a_wrong_policy_type():
    with pytest.raises(TypeError):
        Canonicalizer({"strip_www": True})  # type: ignore[arg-type]


# --------------------------------------------------------------------------- idempotence on the tricky cases

@pytest.mark.parametrize("url", [
    "http://example.com/%%41b", "http://example.com/a/..;jsessionid=" + TOKEN32 + "/b",
    "https://example.com:80/index.html/", "http://www.www.example.com/index.html/index.htm//",
    "http://☃.net/a b", "http://[2001:DB8::1%25eth0]:80/", "http://ex_ample.bücher.de/%7e",
])
def test_idempotent_on_tricky_inputs(url):
    for switches in (SAFE_ONLY, {}, ALL_ON):
        once = canonicalize(url, **switches)
        assert canonicalize(once, **switches) == once


def test_url_core_imports_nothing_from_scrapy():
    import subprocess
    import sys

    code = (
        "import sys; from scrapy_dedup.url.canonical import canonicalize; "
        "canonicalize('http://www.example.com/', strip_www=True); "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('scrapy', 'twisted')]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_docs_and_docstring_examples_hold():
    import doctest
    import re
    from pathlib import Path

    import scrapy_dedup.url.canonical as module

    page = (Path(__file__).resolve().parent.parent / "docs" / "canonicalization.md").read_text(encoding="utf-8")
    section = re.search(r"<!-- url:start -->(.*?)<!-- url:end -->", page, re.S).group(1)
    texts = [re.sub(r"^```.*$", "", section, flags=re.M), module.canonicalize.__doc__]  # fences end examples
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for text in texts:
        test = doctest.DocTestParser().get_doctest(text, {"canonicalize": canonicalize}, "example", None, 0)
        assert test.examples, "no examples found"
        runner.run(test)
    assert runner.failures == 0
