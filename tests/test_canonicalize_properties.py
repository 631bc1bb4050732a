"""Property tests: never raises, idempotent; on generated valid URLs, equal in meaning (RFC 3986).

The meaning oracle below is a deliberately simple, character-by-character reading of
RFC 3986 sections 2 and 5.2.4 (written for the test, sharing no code with the
canonicalizer): a component means the same if its sequence of characters and
escaped octets is the same once unreserved escapes are read as their characters,
non-ASCII characters as their UTF-8 octets, and dot segments are resolved.
"""
from __future__ import annotations

import ipaddress
import string

import idna
import scrapy
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scrapy_dedup.url.canonical import Canonicalizer
from scrapy_dedup.url.policy import SWITCHES, UrlPolicy

SAFE_ONLY = Canonicalizer(UrlPolicy(**{name: False for name in SWITCHES}))
DEFAULT = Canonicalizer(UrlPolicy())
ALL_ON = Canonicalizer(UrlPolicy(**{name: True for name in SWITCHES}))
ALL = (SAFE_ONLY, DEFAULT, ALL_ON)

# --------------------------------------------------------------------------- arbitrary text

URLISH = "%/.?#&=;:@[]\\ \t+-_~!$'()*,aAzZ09éß☃\u0301\x00\x7f"


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.text())
@example("http://example.com/%%41b")
@example("http://[::1%25]/")
@example("http://a.com/..;jsessionid=0123456789abcdef0123456789abcdef/x")
def test_arbitrary_text_never_raises_and_is_idempotent(text):
    for canonicalizer in ALL:
        result = canonicalizer.canonicalize_with_info(text)
        assert isinstance(result.url, str)
        assert canonicalizer.canonicalize(result.url) == result.url


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["http://", "HTTPS://", "ftp://", "ws://", "file://", "foo://", "http:", "http:\\\\"]),
       st.text(alphabet=URLISH + string.ascii_letters, max_size=60))
def test_url_shaped_text_never_raises_and_is_idempotent(prefix, rest):
    text = prefix + rest
    for canonicalizer in ALL:
        result = canonicalizer.canonicalize_with_info(text)
        once = result.url
        assert canonicalizer.canonicalize(once) == once
        if not result.unparsable:
            assert once.isascii() or not once.startswith(("http", "ftp", "ws"))


# --------------------------------------------------------------------------- generated valid URLs

UNRESERVED = string.ascii_letters + string.digits + "-._~"
SUB_DELIMS = "!$&'()*+,;="
HEX = "0123456789abcdefABCDEF"

escape = st.builds(lambda a, b: "%" + a + b, st.sampled_from(HEX), st.sampled_from(HEX))
non_ascii = st.sampled_from(["é", "ü", "ß", "€", "日", "\u0301", "😀"])
disallowed = st.sampled_from([" x", '"', "<", ">", "^", "`", "{", "|", "}"])  # " x": surrounding whitespace of a URL is stripped (documented), inner is data


def component_chars(extra: str):
    return st.one_of(st.sampled_from(UNRESERVED + SUB_DELIMS + ":@" + extra), escape, non_ascii, disallowed)


segment = st.one_of(
    st.lists(component_chars(""), max_size=8).map("".join),
    st.sampled_from([".", "..", "%2e", "%2E%2e"]),
)
path = st.lists(segment, max_size=6).map(lambda segs: "".join("/" + s for s in segs))
query = st.lists(component_chars("/?"), max_size=12).map("".join)
fragment = st.lists(component_chars("/?"), max_size=8).map("".join)

ascii_label = st.from_regex(r"[a-zA-Z0-9]([a-zA-Z0-9-]{0,8}[a-zA-Z0-9])?", fullmatch=True)
idn_label = st.from_regex(r"[a-z]{0,3}[äöüéß][a-z]{1,3}", fullmatch=True)
reg_name = st.lists(st.one_of(ascii_label, idn_label), min_size=1, max_size=3).map(lambda ls: ".".join(ls) + ".test")
ipv6 = st.ip_addresses(v=6).map(lambda a: "[" + a.exploded.upper() + "]")
host = st.one_of(reg_name, ipv6, st.ip_addresses(v=4).map(str))
port = st.one_of(st.just(""), st.sampled_from([":", ":80", ":443", ":8080"]), st.integers(1, 65535).map(lambda p: f":{p}"))
scheme = st.sampled_from(["http", "https", "HTTP", "Https"])
DEFAULT_PORT = {"http": 80, "https": 443}


@st.composite
def valid_urls(draw):
    parts = {
        "scheme": draw(scheme), "host": draw(host), "port": draw(port), "path": draw(path),
        "query": draw(st.one_of(st.none(), query)), "fragment": draw(st.one_of(st.none(), fragment)),
    }
    url = f"{parts['scheme']}://{parts['host']}{parts['port']}{parts['path']}"
    if parts["query"] is not None:
        url += "?" + parts["query"]
    if parts["fragment"] is not None:
        url += "#" + parts["fragment"]
    return url, parts


def atoms(text: str) -> list:
    """A component as characters and escaped octets; unreserved escapes read as characters."""
    out: list = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "%" and i + 3 <= len(text) and all(c in HEX for c in text[i + 1:i + 3]):
            octet = int(text[i + 1:i + 3], 16)
            out.append(chr(octet) if chr(octet) in UNRESERVED else ("%", octet))
            i += 3
            continue
        if ch == "%":
            out.append(("%", 0x25))  # a "%" that starts no escape can only mean itself
        elif ord(ch) > 127 or ch in ' "<>^`{|}[]\\':
            out.extend(("%", b) for b in ch.encode("utf-8"))
        else:
            out.append(ch)
        i += 1
    return out


def path_meaning(text: str) -> list:
    """Segments of atoms, dot segments resolved as RFC 3986 5.2.4 says."""
    if text == "":
        text = "/"
    segments = [atoms(s) for s in text.split("/")[1:]]
    result: list = []
    for index, seg in enumerate(segments):
        last = index == len(segments) - 1
        if seg == ["."]:
            if last:
                result.append([])
        elif seg == [".", "."]:
            if result:
                result.pop()
            if last:
                result.append([])
        else:
            result.append(seg)
    return result


def split(url: str):
    scheme, _, rest = url.partition("://")
    rest, hash_, frag = rest.partition("#")
    rest, qmark, qry = rest.partition("?")
    slash = rest.find("/")
    authority, pth = (rest, "") if slash == -1 else (rest[:slash], rest[slash:])
    return scheme, authority, pth, (qry if qmark else None), (frag if hash_ else None)


def effective_host_port(scheme: str, authority: str):
    if authority.startswith("["):
        host, _, port = authority[1:].partition("]")
        port = port[1:]
        import ipaddress

        host = ipaddress.IPv6Address(host)
    else:
        host, _, port = authority.partition(":")
    return host, int(port) if port else DEFAULT_PORT[scheme]


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(valid_urls())
def test_safe_steps_keep_the_meaning(generated):
    url, parts = generated
    result = SAFE_ONLY.canonicalize_with_info(url)
    assert result.unparsable is False
    assert result.fired == ()
    canonical = result.url
    assert canonical.isascii()
    assert scrapy.Request(canonical).url  # Scrapy accepts it
    assert SAFE_ONLY.canonicalize(canonical) == canonical

    c_scheme, c_authority, c_path, c_query, c_fragment = split(canonical)
    scheme_lower = parts["scheme"].lower()
    assert c_scheme == scheme_lower
    c_host, c_port = effective_host_port(c_scheme, c_authority)
    o_host, o_port = effective_host_port(scheme_lower, parts["host"] + (parts["port"] if parts["port"] != ":" else ""))
    assert c_port == o_port
    if isinstance(o_host, str):
        assert c_host == c_host.lower()
        if o_host.isascii():
            assert c_host == o_host.lower()
        else:
            assert idna.decode(c_host) == o_host.lower()
    else:
        assert c_host == o_host
    assert path_meaning(c_path) == path_meaning(parts["path"])
    assert c_path.startswith("/")
    assert (c_query is None) == (parts["query"] is None)
    if c_query is not None:
        assert atoms(c_query) == atoms(parts["query"])
    assert (c_fragment is None) == (parts["fragment"] is None)
    if c_fragment is not None:
        assert atoms(c_fragment) == atoms(parts["fragment"])


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(valid_urls())
def test_switches_keep_urls_valid_and_idempotent(generated):
    url, _ = generated
    for canonicalizer in (DEFAULT, ALL_ON):
        result = canonicalizer.canonicalize_with_info(url)
        assert result.unparsable is False
        assert scrapy.Request(result.url).url
        assert canonicalizer.canonicalize(result.url) == result.url
        assert set(result.fired) <= set(SWITCHES)


# --------------------------------------------------------------------------- WHATWG merges: IPv4, credentials, file, no slashes

@st.composite
def ipv4_forms(draw):
    """An IPv4 address in one of WHATWG's forms: 1 to 4 parts, each decimal, 0x hex or 0 octal."""
    address = draw(st.integers(0, 2**32 - 1))
    count = draw(st.integers(1, 4))
    octets = address.to_bytes(4, "big")
    numbers = list(octets[:count - 1]) + [int.from_bytes(octets[count - 1:], "big")]
    parts = []
    for number in numbers:
        form = draw(st.sampled_from(["dec", "hex", "HEX", "oct"]))
        if form == "dec":
            parts.append(str(number))
        elif form == "oct":
            parts.append("0" + format(number, "o"))
        else:
            digits = format(number, "x")
            parts.append(("0x" if form == "hex" else "0X") + (digits.upper() if draw(st.booleans()) else digits))
    host = ".".join(parts) + draw(st.sampled_from(["", "."]))
    return host, str(ipaddress.IPv4Address(address))


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(ipv4_forms(), st.sampled_from(["http", "https", "ws", "wss", "ftp", "file"]))
def test_every_ipv4_form_is_the_address_it_denotes(form, scheme):
    host, dotted = form
    url = f"{scheme}://{host}/p"
    result = SAFE_ONLY.canonicalize_with_info(url)
    assert result.url == f"{scheme}://{dotted}/p", url
    assert SAFE_ONLY.canonicalize(result.url) == result.url


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(ipv4_forms(), st.sampled_from(["foo", "sc", "git"]))
def test_other_schemes_keep_an_ipv4_looking_host_as_a_name(form, scheme):
    host, _ = form
    assert SAFE_ONLY.canonicalize(f"{scheme}://{host}/p") == f"{scheme}://{host.lower()}/p"


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(reg_name)
def test_a_name_is_never_read_as_an_address(name):
    # generated names end in ".test": not a number, so never an IPv4 address
    assert SAFE_ONLY.canonicalize(f"http://{name}/").startswith(f"http://{idna.encode(name, uts46=True).decode()}/")


NUMERIC_HOSTISH = "0123456789xXabcdefABCDEF.:@|/\\%"


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["http://", "https:", "http:", "ws:", "file://", "file:///", "FILE://", "foo://", "ftp://u:@"]),
       st.text(alphabet=NUMERIC_HOSTISH + "uvlocahstCZ:..", max_size=30),
       st.sampled_from(["", "/", "/a/../..", "/./x", "?q", "#f", "/C:/../x"]))
def test_the_new_steps_never_raise_and_are_idempotent(prefix, middle, suffix):
    text = prefix + middle + suffix
    for canonicalizer in ALL:
        once = canonicalizer.canonicalize_with_info(text).url
        assert canonicalizer.canonicalize(once) == once, text


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["", ":", "u", "u:", ":p", "u:p", "U:", "%75:", "u::"]), host)
def test_credentials_keep_what_they_say(userinfo, host_text):
    """Only an empty user and an empty password are dropped; what remains is the same text."""
    canonical = SAFE_ONLY.canonicalize(f"http://{userinfo}@{host_text}/")
    user, _, password = userinfo.partition(":")
    kept = user.replace("%75", "u") + (":" + password if password else "")
    prefix = "http://" + (kept + "@" if kept else "")
    assert canonical.startswith(prefix)
    assert "@" not in canonical[len(prefix):]
