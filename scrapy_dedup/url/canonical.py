"""URL canonicalization: collapse different strings of one URL before fetch.

The pipeline, in order (see docs/canonicalization.md's switches table):

1. **Safe steps** (always; RFC 3986 section 6.2.2 and RFC 3987): lowercase
   scheme and host; IDN host to punycode with IDNA2008 / UTS #46
   *non-transitional* semantics (``faß.de`` stays ``xn--fa-hia.de``, it is not
   ``fass.de``); drop the scheme's default port and an empty port; canonical
   IPv6 text; uppercase the hex of percent-escapes and decode escapes of
   unreserved characters only (reserved escapes such as ``%2F`` are data);
   never decode twice; a ``%`` that starts no escape becomes ``%25``; non-ASCII
   and characters not allowed in a URL become UTF-8 percent-escapes (no
   Unicode normalization of paths); remove dot segments (``%2e`` ones too);
   empty path to ``/``; keep userinfo case. For http(s), ws(s) and ftp a ``\\``
   before the query is a ``/``, as browsers and ``scrapy.Request`` read it.
   Merges the WHATWG URL Standard makes (what browsers fetch): empty credentials
   dropped (``http://@h/`` and ``http://u:@h/`` are ``http://h/`` and ``http://u@h/``);
   in special schemes and ``file``, a host that ends in a number is an IPv4 address in
   any of its forms (``http://0x7f.1/``, ``http://2130706433/``) and becomes dotted
   decimal; ``http:example.com`` (no slashes, no base URL) is ``http://example.com/``;
   in ``file`` URLs a Windows drive letter is a path segment, never a host
   (``file://C:/x`` is ``file:///C:/x``; ``C|`` is ``C:``; ``..`` stops at it) and
   ``localhost`` is the empty host.
2. **DUST rules** of the host (:mod:`scrapy_dedup.url.dust`, ``dust_rules=``): site-specific
   rewrites mined from crawl logs, applied right after the safe steps.
3. **Optional switches** of the host's :class:`~scrapy_dedup.url.policy.UrlPolicy`,
   each touching only its own component.

It never raises on bad input: what it cannot parse comes back stripped of
surrounding whitespace and is flagged ``unparsable``. A host WHATWG rejects as an
IPv4 address (``1.2.3.256``) is kept as a name, as before: no merge, no change. It is idempotent:
``canonicalize(canonicalize(u)) == canonicalize(u)``.

This module imports nothing from Scrapy.
"""
from __future__ import annotations

import ipaddress
import re
import unicodedata
from functools import lru_cache
from typing import Any, NamedTuple, Union

from scrapy_dedup.url.dust import RuleSet, load_rules
from scrapy_dedup.url.policy import SWITCHES, DomainMap, PolicyMap, UrlPolicy

__all__ = [
    "safe_parts",
    "canonicalize",
    "Canonicalizer",
    "CanonicalResult",
    "TRACKING_PARAMS",
    "SESSION_PARAMS",
    "INDEX_PAGES",
    "looks_like_session_token",
]

# --------------------------------------------------------------------------- tables

#: tracking parameters stripped by ``strip_tracking``: vendor click IDs and campaign tags only,
#: never generic words (``source``, ``ref``, ``id``, ``session`` ...). ``prefix*`` is a prefix.
TRACKING_PARAMS: tuple[str, ...] = (
    "utm_*", "gclid", "gclsrc", "fbclid", "msclkid", "dclid", "yclid", "gbraid", "wbraid",
    "mc_cid", "mc_eid", "_ga", "_gl", "igshid", "ttclid", "twclid", "li_fat_id",
    "_hsenc", "_hsmi", "mkt_tok",
)

#: session parameters stripped by ``strip_session`` (query and ``;name=`` path parameters),
#: only when the value looks like a session token: name -> (minimum length, exact length or 0).
#: The rule (after Heritrix's StripSessionIDs): the value is 16+ (here: the minimum) characters
#: of [A-Za-z0-9_-] (an optional ``.route`` / ``!route`` server suffix allowed) with at least one
#: letter and one digit; ``sid`` needs exactly 32 alphanumerics (with a letter and a digit). So ``sid=04/12/05/1736239``
#: (a story ID) and ``jsessionid=abc`` (too short) stay.
SESSION_PARAMS: dict[str, tuple[int, int]] = {
    "jsessionid": (16, 0),
    "phpsessid": (20, 0),
    "aspsessionid*": (24, 0),
    "asp.net_sessionid": (24, 0),
    "sid": (32, 32),
    "sessionid": (16, 0),
    "session_id": (16, 0),
    "sessid": (16, 0),
    "ytsession": (16, 0),
    "oscsid": (26, 0),
    "zenid": (26, 0),
}
_USER_SESSION_RULE = (16, 0)

#: last path segments dropped by ``drop_index`` (compared case-insensitively)
INDEX_PAGES: frozenset[str] = frozenset({
    "index.html", "index.htm", "index.shtml", "index.php", "index.asp", "index.aspx", "index.jsp",
    "index.cfm", "index.cgi", "index.pl", "default.aspx", "default.asp", "default.htm", "default.html",
})

DEFAULT_PORTS: dict[str, str] = {"http": "80", "https": "443", "ws": "80", "wss": "443", "ftp": "21"}
#: schemes that need a host, and where a backslash is a slash (WHATWG "special" schemes)
_SPECIAL = frozenset(DEFAULT_PORTS)
#: schemes whose hosts WHATWG's host parser reads as IPv4 addresses when they end in a number
#: (the special schemes, file included; an opaque host of any other scheme is just a name)
_IPV4_SCHEMES = _SPECIAL | {"file"}

# --------------------------------------------------------------------------- compiled patterns

_URL_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?\Z", re.S)
_TAB_NEWLINE_RE = re.compile(r"[\t\n\r]")
_C0_AND_SPACE = "".join(map(chr, range(0x21)))
#: a percent-escape (group 1: its hex), or a lone "%" (group 1 is None), in one left-to-right pass
_PCT_RE = re.compile(r"%([0-9A-Fa-f]{2})?")
#: runs of characters that must be escaped in path, query and fragment (RFC 3986 pchar, "/", "?";
#: "#" inside a fragment is left alone); "[" and "]" are not allowed there, so they are escaped
_UNSAFE_RE = re.compile(r"[^A-Za-z0-9\-._~!$&'()*+,;=:@/%?#]+")
_UNSAFE_USERINFO_RE = re.compile(r"[^A-Za-z0-9\-._~!$&'()*+,;=:%]+")
_REG_NAME_RE = re.compile(r"[a-z0-9\-._~!$&'()*+,;=]*\Z")
_IPVFUTURE_RE = re.compile(r"v[0-9a-f]+\.[a-z0-9\-._~!$&'()*+,;=:]+\Z")
_PATH_PARAM_RE = re.compile(r";([^;/=]*)=([^;/]*)")
_TOKEN_RE = re.compile(r"[A-Za-z0-9_\-]+(?:[.!][A-Za-z0-9_\-.]+)?\Z")
_ALNUM_RE = re.compile(r"[A-Za-z0-9]+\Z")
_HAS_LETTER_RE = re.compile(r"[A-Za-z]")
_HAS_DIGIT_RE = re.compile(r"[0-9]")
#: a Windows drive letter (WHATWG: an ASCII letter, then ":" or "|") as a whole host
_DRIVE_HOST_RE = re.compile(r"[A-Za-z][:|]\Z")
#: ... or as the first segment of a file URL's path
_DRIVE_PATH_RE = re.compile(r"/[A-Za-z][:|](?=/|\Z)")

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_HEX = "0123456789abcdefABCDEF"
#: "4a" -> "J", "2f" -> "%2F": every hex pair in every case, precomputed
_PCT_MAP: dict[str | None, str] = {}
for _a in _HEX:
    for _b in _HEX:
        _char = chr(int(_a + _b, 16))
        _PCT_MAP[_a + _b] = _char if _char in _UNRESERVED else "%" + (_a + _b).upper()
_PCT_MAP[None] = "%25"
_BYTE_ESCAPES = tuple(f"%{i:02X}" for i in range(256))
del _a, _b, _char


def _pct_sub(match: re.Match) -> str:
    return _PCT_MAP[match.group(1)]


def _escape_sub(match: re.Match) -> str:
    escapes = _BYTE_ESCAPES
    return "".join([escapes[b] for b in match.group().encode("utf-8", "surrogatepass")])


def _normalize_escapes(text: str, unsafe: re.Pattern = _UNSAFE_RE) -> str:
    """RFC 3986 6.2.2.1-2 on one component: one pass over escapes, then escape what is not allowed."""
    if "%" in text:
        text = _PCT_RE.sub(_pct_sub, text)
    if unsafe.search(text) is not None:
        text = unsafe.sub(_escape_sub, text)
    return text


def _remove_dot_segments(path: str, keep_drive: bool = False) -> str:
    """RFC 3986 5.2.4 for an absolute path (one starting with "/").

    ``keep_drive``: the path of a file URL starts with a drive letter, which ``..`` never removes
    (WHATWG: ``file:///C:/..`` is ``file:///C:/``).
    """
    if keep_drive and _DRIVE_PATH_RE.match(path):  # (a DUST rule may have rewritten the path since)
        return path[:3] + _remove_dot_segments(path[3:]) if len(path) > 3 else path
    segments = path.split("/")
    output: list[str] = []
    for segment in segments[1:]:
        if segment == "..":
            if output:
                output.pop()
        elif segment != ".":
            output.append(segment)
    if segments[-1] in (".", ".."):
        output.append("")
    return "/" + "/".join(output)


def _has_dot_segment(path: str) -> bool:
    if "/." not in path:
        return False
    return any(s == "." or s == ".." for s in path.split("/"))


# --------------------------------------------------------------------------- host

def _idna_host(name: str) -> str:
    """Non-ASCII host to punycode, IDNA2008 + UTS #46 non-transitional; per-label fallback, never raises."""
    import idna

    try:
        return idna.encode(name, uts46=True, transitional=False).decode("ascii")
    except (idna.IDNAError, UnicodeError, ValueError, IndexError):
        pass
    # Labels idna rejects (underscores, symbols, empty labels...): map what UTS #46 maps, then
    # encode each remaining non-ASCII label with plain punycode, as browsers do for such hosts.
    try:
        name = idna.uts46_remap(name, std3_rules=False, transitional=False)
    except (idna.IDNAError, UnicodeError, ValueError, IndexError):
        name = unicodedata.normalize("NFC", name).lower()
    labels = []
    for label in name.split("."):
        if label.isascii():
            labels.append(label.lower())
            continue
        try:
            labels.append(idna.alabel(label).decode("ascii"))
        except (idna.IDNAError, UnicodeError, ValueError, IndexError):
            label = unicodedata.normalize("NFC", label.lower())
            labels.append("xn--" + label.encode("punycode").decode("ascii").lower())
    return ".".join(labels)


def _ipv6_host(text: str) -> str | None:
    """Canonical text of a bracketed IP literal (without the brackets), or None if invalid."""
    if text[:1] in ("v", "V"):
        text = text.lower()
        return text if _IPVFUTURE_RE.match(text) else None
    address, sep, zone = text.partition("%25")  # the zone ID keeps its case (interface names)
    try:
        canonical = ipaddress.IPv6Address(address).compressed
    except ValueError:
        return None
    if sep:
        zone = _normalize_escapes(zone, _UNSAFE_USERINFO_RE)
        if not zone or ":" in zone:
            return None
        return f"{canonical}%25{zone}"
    return canonical


def _reg_name(name: str) -> str | None:
    """Lowercase ASCII (punycode) host, or None if it has characters a host cannot have."""
    if "%" in name:  # as browsers do: decode escapes in a host, then treat it as text
        from urllib.parse import unquote

        name = unquote(name, errors="surrogateescape")
        if "%" in name:
            return None
    if not name.isascii():
        try:
            name = _idna_host(name)
        except Exception:  # noqa: BLE001 - a host we cannot encode is an unparsable URL, never a crash
            return None
    name = name.lower()
    return name if _REG_NAME_RE.match(name) else None


_IPV4_LAST_CHARS = frozenset("0123456789abcdefx.")


def _ipv4_number(part: str) -> int | None:
    """WHATWG's IPv4 number parser: decimal, ``0x`` hex or ``0`` octal; None on failure."""
    if not part:
        return None
    radix = 10
    if part[:2] in ("0x", "0X"):
        part, radix = part[2:], 16
    elif len(part) > 1 and part[0] == "0":
        part, radix = part[1:], 8
    if not part:
        return 0  # "0x" alone is zero
    try:
        return int(part, radix) if part.isascii() and part.isalnum() else None
    except ValueError:
        return None


def _ends_in_number(host: str) -> bool:
    """WHATWG's "ends in a number" checker: is the host's last label (a trailing dot aside) a number?"""
    if host[-1:] not in _IPV4_LAST_CHARS:  # the common case, a name ending in a letter: no split
        return False
    labels = host.split(".")
    if labels[-1] == "":
        if len(labels) == 1:
            return False
        labels.pop()
    last = labels[-1]
    if last.isascii() and last.isdigit():
        return True
    return _ipv4_number(last) is not None


def _ipv4_host(host: str) -> str | None:
    """WHATWG's IPv4 parser (``0x7f.1``, ``127.1``, ``2130706433``, ``0177.0.0.1``) to dotted decimal; None on
    failure."""
    parts = host.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    if len(parts) > 4:
        return None
    numbers = []
    for part in parts:
        number = _ipv4_number(part)
        if number is None:
            return None
        numbers.append(number)
    if any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 256 ** (5 - len(numbers)):
        return None
    address = numbers[-1]
    for i, number in enumerate(numbers[:-1]):
        address += number * 256 ** (3 - i)
    return ".".join(str((address >> shift) & 255) for shift in (24, 16, 8, 0))


class _Authority(NamedTuple):
    userinfo: str  # "" or "user:pass@"
    host: str  # "example.com", "[::1]"
    port: str  # "" or "8080"


@lru_cache(maxsize=16384)
def _authority(scheme: str, netloc: str) -> _Authority | None:
    """Normalized authority, or None if unparsable. Cached: a crawl sees few distinct authorities."""
    userinfo, at, hostport = netloc.rpartition("@")
    if at:
        userinfo = _normalize_escapes(userinfo, _UNSAFE_USERINFO_RE)
    if hostport.startswith("["):
        end = hostport.find("]")
        if end == -1:
            return None
        literal = _ipv6_host(hostport[1:end])
        if literal is None:
            return None
        host = f"[{literal}]"
        rest = hostport[end + 1:]
        if rest and rest[0] != ":":
            return None
        port = rest[1:]
    else:
        name, _, port = hostport.partition(":")
        reg_name = _reg_name(name)
        if reg_name is None:
            return None
        host = reg_name
        if scheme in _IPV4_SCHEMES and host and _ends_in_number(host):
            # WHATWG: such a host is an IPv4 address (or invalid: then it stays a name, unmerged)
            host = _ipv4_host(host) or host
        if scheme == "file" and host == "localhost":
            host = ""  # WHATWG: file://localhost/x is file:///x
    if port:
        if not (port.isascii() and port.isdigit()) or int(port) > 65535:
            return None
        port = str(int(port))
        if DEFAULT_PORTS.get(scheme) == port:
            port = ""
    if not host and scheme in _SPECIAL:
        return None
    if at:
        user, _, password = userinfo.partition(":")
        if not password and host:
            # WHATWG writes no ":" before an empty password and no "@" after empty credentials
            # (credentials without a host are invalid there: such a URL is kept as it is, unmerged)
            userinfo = user
        userinfo = userinfo + "@" if userinfo or not host else ""
    return _Authority(userinfo, host, port)


@lru_cache(maxsize=1)
def _suffix_extractor() -> Any:
    """tldextract with its bundled Public Suffix List snapshot: no network, no cache directory."""
    try:
        import tldextract
    except ImportError:  # pragma: no cover - tldextract comes with Scrapy and with this package
        return None
    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None, include_psl_private_domains=True)


@lru_cache(maxsize=16384)
def _is_registrable(host: str) -> bool:
    """True if ``host`` is itself a registrable domain or under one (not a public suffix, not an IP)."""
    if not host or host.startswith("[") or "." not in host.strip("."):
        return False
    try:
        ipaddress.ip_address(host)
        return False
    except ValueError:
        pass
    extractor = _suffix_extractor()
    if extractor is None:  # pragma: no cover
        return False
    parts = extractor(host)
    if not parts.suffix:
        # A TLD the Public Suffix List does not know (``.test``, ``.internal``, a new gTLD
        # newer than the bundled list): the PSL's default rule "*" makes the last label
        # the public suffix, so any name of two or more labels is registrable.
        return True
    return bool(parts.domain)


@lru_cache(maxsize=16384)
def _strip_www(host: str) -> str:
    while host.startswith("www.") and _is_registrable(host[4:]):
        host = host[4:]
    return host


# --------------------------------------------------------------------------- session tokens

def looks_like_session_token(value: str, min_length: int = 16, exact_length: int = 0) -> bool:
    """Heritrix-style test of a session ID value (see :data:`SESSION_PARAMS`).

    Random tokens mix letters and digits; story IDs, dates and words do not look like this.
    """
    if exact_length:
        if len(value) != exact_length or _ALNUM_RE.match(value) is None:
            return False
        token = value
    else:
        token = value.split(".", 1)[0].split("!", 1)[0]
        if len(token) < min_length or _TOKEN_RE.match(value) is None:
            return False
    return _HAS_LETTER_RE.search(token) is not None and _HAS_DIGIT_RE.search(token) is not None


# --------------------------------------------------------------------------- compiled policy

class _Plan:
    """A :class:`UrlPolicy` compiled for the hot path."""

    __slots__ = (
        "policy", "strip_tracking", "strip_session", "sort_query", "drop_fragment",
        "strip_trailing_slash", "strip_www", "ignore_scheme", "drop_index", "query_work",
        "path_work", "tracking_exact", "tracking_prefixes", "session_exact", "session_prefixes",
        "session_prefix_names", "dust",
    )
    # the switches, copied from the policy (SWITCHES) for the hot path
    strip_tracking: bool
    strip_session: bool
    sort_query: bool
    drop_fragment: bool
    strip_trailing_slash: bool
    strip_www: bool
    ignore_scheme: bool
    drop_index: bool

    def __init__(self, policy: UrlPolicy):
        self.policy = policy
        for name in SWITCHES:
            setattr(self, name, getattr(policy, name))
        self.query_work = policy.strip_tracking or policy.strip_session or policy.sort_query
        self.path_work = policy.strip_trailing_slash or policy.drop_index
        names = TRACKING_PARAMS + policy.tracking_params
        self.tracking_exact = frozenset(n for n in names if not n.endswith("*"))
        self.tracking_prefixes = tuple(sorted({n[:-1] for n in names if n.endswith("*")}))
        rules = dict(SESSION_PARAMS)
        for name in policy.session_params:
            rules.setdefault(name, _USER_SESSION_RULE)
        self.session_exact = {n: r for n, r in rules.items() if not n.endswith("*")}
        self.session_prefixes = tuple((n[:-1], r) for n, r in sorted(rules.items()) if n.endswith("*"))
        self.session_prefix_names = tuple(prefix for prefix, _ in self.session_prefixes)
        # DUST rules (a RuleSet: for_host(host) -> compiled rules or None), set by Canonicalizer
        self.dust: RuleSet | None = None

    def is_session(self, lowered_key: str, value: str) -> bool:
        rule = self.session_exact.get(lowered_key)
        if rule is None:
            if not lowered_key.startswith(self.session_prefix_names):  # the common case: not a session name
                return False
            for prefix, prefix_rule in self.session_prefixes:
                if lowered_key.startswith(prefix):
                    rule = prefix_rule
                    break
            else:
                return False
        return looks_like_session_token(value, *rule)


class CanonicalResult(NamedTuple):
    """The canonical URL, the switches that changed it (in pipeline order), and whether it was unparsable."""

    url: str
    fired: tuple[str, ...]
    unparsable: bool


_NO_FIRED: tuple[str, ...] = ()


class Canonicalizer:
    """A precompiled canonicalizer for one policy, or one policy per domain.

    ``Canonicalizer(UrlPolicy(strip_www=True))`` or ``Canonicalizer(PolicyMap(...))``:
    with a map, the policy of each URL's host is looked up (most specific domain wins,
    cached per host). :meth:`canonicalize_with_info` is the hot-path form that also
    says which switches fired, so counting them costs no second pass.
    """

    def __init__(self, policy: UrlPolicy | PolicyMap | None = None, *, dust_rules: Any = None):
        # dust_rules: a RuleSet, a rules file path, or a list of paths (DustRulesError names the bad one)
        self.dust: RuleSet | None = load_rules(dust_rules)  # an empty RuleSet stays: online learning fills it
        if policy is None:
            policy = UrlPolicy()
        if isinstance(policy, UrlPolicy):
            self.policies: DomainMap[UrlPolicy] = PolicyMap(policy)
        elif isinstance(policy, DomainMap):
            self.policies = policy
        else:
            raise TypeError(f"policy must be a UrlPolicy or a PolicyMap, got {type(policy).__name__}")
        compiled: dict[UrlPolicy, _Plan] = {}
        for p in self.policies.values():
            compiled.setdefault(p, _Plan(p))
        self._single: _Plan | None = compiled[self.policies.default] if not self.policies.per_domain else None
        self._plans: DomainMap[_Plan] = DomainMap(
            compiled[self.policies.default], {d: compiled[p] for d, p in self.policies.per_domain.items()}
        )
        for plan in compiled.values():
            plan.dust = self.dust

    def canonicalize(self, url: str) -> str:
        """The canonical form of ``url``; unparsable URLs come back stripped."""
        return self.canonicalize_with_info(url).url

    __call__ = canonicalize

    def canonicalize_with_info(self, url: str) -> CanonicalResult:
        """The canonical URL, the switches that changed it, and whether it was unparsable. Never raises."""
        if not isinstance(url, str):
            if isinstance(url, (bytes, bytearray)):
                url = bytes(url).decode("utf-8", "replace")
            else:
                return CanonicalResult(str(url), _NO_FIRED, True)
        stripped = url.strip(_C0_AND_SPACE)
        try:
            result = self._canonicalize(stripped)
        except Exception:  # noqa: BLE001 - the contract is "never raises"; flagged instead
            result = None
        if result is None:
            return CanonicalResult(stripped, _NO_FIRED, True)
        if result.fired and self.dust is not None and not _RECHECK_DUST.isdisjoint(result.fired):
            result = self._dust_fixed_point(result)
        return result

    def _dust_fixed_point(self, result: CanonicalResult) -> CanonicalResult:
        """Run again while a path or host switch made a DUST rule applicable (``/a.htm/`` -> ``/a.htm``).

        Keeps ``c(c(u)) == c(u)`` with DUST rules; bounded, and only for URLs where such a switch fired.
        """
        for _ in range(3):
            try:
                again = self._canonicalize(result.url)
            except Exception:  # noqa: BLE001 - never raises
                return result
            if again is None or again.url == result.url:
                return result
            fired = result.fired + tuple(n for n in again.fired if n not in result.fired)
            result = CanonicalResult(again.url, fired, False)
        return result

    # The pipeline. Returns None when the URL cannot be parsed.
    def _canonicalize(self, url: str) -> CanonicalResult | None:
        if "\t" in url or "\n" in url or "\r" in url:
            url = _TAB_NEWLINE_RE.sub("", url)
        match = _URL_RE.match(url)
        if match is None:
            return None
        scheme, netloc, path, query, fragment = match.groups()
        scheme = scheme.lower()
        if netloc is None:
            if scheme in _SPECIAL:
                if "\\" in url and url.find("\\") < len(scheme) + 3:
                    return self._canonicalize(self._backslashes_to_slashes(url, len(scheme) + 1))
                rest = url[len(scheme) + 1:]
                if rest[:1] not in ("/", ""):
                    # WHATWG, with no base URL: "http:example.com" is http://example.com/. One slash
                    # or three stay unparsable: scrapy.Request keeps "http:///example.com/" and cannot
                    # download it, so merging it would let its failed fetch filter the good URL out
                    # ("http:example.com" it refuses outright).
                    return self._canonicalize(url[:len(scheme) + 1] + "//" + rest)
                return None  # "http:/x", "http:": a special scheme needs a host
            # opaque URL (mailto:, data:, javascript:...): only the scheme is normalized
            return CanonicalResult(scheme + url[len(scheme):], _NO_FIRED, False)
        if scheme in _SPECIAL and "\\" in url:
            end = len(url) if query is None and fragment is None else url.find("?" if query is not None else "#")
            if "\\" in url[:end]:
                return self._canonicalize(self._backslashes_to_slashes(url, len(scheme) + 1))

        # --- 1. safe steps
        drive = False
        if scheme == "file":
            netloc, path, drive = self._file_drive_letter(netloc, path)
        authority = _authority(scheme, netloc)
        if authority is None:
            return None
        userinfo, host, port = authority
        if path:
            path = _normalize_escapes(path)
            if _has_dot_segment(path):
                path = _remove_dot_segments(path, drive)
        else:
            path = "/"
        if query:
            query = _normalize_escapes(query)
        if fragment:
            fragment = _normalize_escapes(fragment)

        plan = self._single or self._plans.lookup(host)
        fired: list[str] | None = None

        # --- 2. DUST rules of the host (scrapy_dedup.url.dust): one dict lookup for hosts without rules;
        # on a host with rules, URLs that no rule can match pay one cheap gate (HostRules.changes -> None)
        if plan.dust is not None:
            host_rules = plan.dust.by_host.get(host)
            if host_rules is not None:
                changed = host_rules.changes(path, query or "")
                if changed is not None:
                    new_path, new_query = changed
                    if new_path != path:  # a hand-written rule may bring unescaped text or dot segments
                        path = _normalize_escapes(new_path)
                        if _has_dot_segment(path):
                            path = _remove_dot_segments(path, drive)
                    query = new_query if new_query else (None if query else query)
                    fired = ["dust"]

        # --- 3. optional switches, each on its own component
        if plan.strip_session and ";" in path:
            new_path = _PATH_PARAM_RE.sub(
                lambda m: "" if plan.is_session(m.group(1).lower(), m.group(2)) else m.group(), path)
            if new_path != path:
                path = new_path
                if _has_dot_segment(path):
                    path = _remove_dot_segments(path, drive)
                fired = (fired or []) + ["strip_session"]
        if query is not None and plan.query_work:
            query, query_fired = self._query(plan, query)
            if query_fired:
                if fired is None:
                    fired = query_fired
                else:
                    fired.extend(n for n in query_fired if n not in fired)
        if fragment is not None and plan.drop_fragment and not fragment.startswith(("!", "/")):
            fragment = None
            fired = (fired or []) + ["drop_fragment"]
        if plan.path_work and path != "/":
            path, path_fired = self._path(plan, path)
            if path_fired:
                fired = (fired or []) + path_fired
        if plan.strip_www and host.startswith("www."):
            new_host = _strip_www(host)
            if new_host != host:
                host = new_host
                fired = (fired or []) + ["strip_www"]
        if plan.ignore_scheme and scheme == "https":
            scheme = "http"
            if port == "80":
                port = ""
            fired = (fired or []) + ["ignore_scheme"]

        parts = [scheme, "://", userinfo, host]
        if port:
            parts.append(":" + port)
        parts.append(path)
        if query is not None:
            parts.append("?" + query)
        if fragment is not None:
            parts.append("#" + fragment)
        return CanonicalResult("".join(parts), tuple(fired) if fired else _NO_FIRED, False)

    @staticmethod
    def _file_drive_letter(netloc: str, path: str) -> tuple[str, str, bool]:
        """WHATWG's Windows drive letter quirk: a drive letter is the first path segment, never a host.

        ``file://C:/x`` and ``file://C|/x`` are ``file:///C:/x``; a leading ``/C|`` segment is ``/C:``.
        Returns (netloc, path, whether the path starts with a drive letter). Only the literal
        characters count (``%43:`` is no drive letter), as in WHATWG, so this reads the raw path.
        """
        if _DRIVE_HOST_RE.match(netloc):
            netloc, path = "", "/" + netloc + path
        if _DRIVE_PATH_RE.match(path) is None:
            return netloc, path, False
        if path[2] == "|":
            path = path[:2] + ":" + path[3:]
        return netloc, path, True

    @staticmethod
    def _backslashes_to_slashes(url: str, start: int) -> str:
        """``\\`` is ``/`` before the query in special schemes (as browsers and ``scrapy.Request`` read it)."""
        end = len(url)
        for delimiter in "?#":
            i = url.find(delimiter, start)
            if i != -1:
                end = min(end, i)
        return url[:start] + url[start:end].replace("\\", "/") + url[end:]

    @staticmethod
    def _query(plan: _Plan, query: str) -> tuple[str | None, list[str]]:
        fired: list[str] = []
        params = query.split("&")
        kept: list[tuple[str, str]] = []
        strip_tracking, strip_session, sort_query = plan.strip_tracking, plan.strip_session, plan.sort_query
        tracking_exact, tracking_prefixes = plan.tracking_exact, plan.tracking_prefixes
        for param in params:
            if not param and sort_query:  # "a=1&&b=2", or a bare "?"
                if "sort_query" not in fired:
                    fired.append("sort_query")
                continue
            key, _, value = param.partition("=")
            if strip_tracking or strip_session:
                lowered = key.lower()
                if strip_tracking and (lowered in tracking_exact or lowered.startswith(tracking_prefixes)):
                    if "strip_tracking" not in fired:
                        fired.append("strip_tracking")
                    continue
                if strip_session and plan.is_session(lowered, value):
                    if "strip_session" not in fired:
                        fired.append("strip_session")
                    continue
            kept.append((key, param))
        if sort_query and len(kept) > 1:
            ordered = sorted(kept, key=_first)  # stable: repeated keys keep their values' order
            if ordered != kept:
                kept = ordered
                if "sort_query" not in fired:
                    fired.append("sort_query")
        if not fired:
            return query, fired
        if not kept:
            return None, fired
        return "&".join([param for _, param in kept]), fired

    @staticmethod
    def _path(plan: _Plan, path: str) -> tuple[str, list[str]]:
        fired: list[str] = []
        while True:  # to a fixed point, so the result is idempotent ("/a/index.html/" ...)
            before = path
            if plan.strip_trailing_slash and len(path) > 1 and path.endswith("/"):
                path = path.rstrip("/") or "/"
                if "strip_trailing_slash" not in fired:
                    fired.append("strip_trailing_slash")
            if plan.drop_index:
                segment = path[path.rfind("/") + 1:]
                if segment and segment.lower() in INDEX_PAGES:
                    path = path[: len(path) - len(segment)]
                    if "drop_index" not in fired:
                        fired.append("drop_index")
            if path == before:
                return path, fired


def _first(pair: tuple[str, str]) -> str:
    return pair[0]


#: switches after which a DUST rule of the (new) host may apply again: checked for idempotence
_RECHECK_DUST = frozenset({"strip_session", "strip_trailing_slash", "drop_index", "strip_www"})


# --------------------------------------------------------------------------- function form

_DEFAULT = Canonicalizer(UrlPolicy())


def _hashable(value: Any) -> Any:
    if isinstance(value, (list, set, frozenset, tuple)):
        return tuple(sorted(value)) if isinstance(value, (set, frozenset)) else tuple(value)
    return value


@lru_cache(maxsize=128)
def _canonicalizer_for(items: tuple[tuple[str, Any], ...]) -> Canonicalizer:
    return Canonicalizer(UrlPolicy.from_mapping(dict(items), setting="canonicalize()"))


def canonicalize(url: str, *, dust_rules: Any = None, **switches: Union[bool, list, tuple]) -> str:
    """The canonical form of ``url``; optional steps are keyword switches.

    >>> canonicalize("HTTP://Example.COM:80/a/./b/../c?utm_source=x&b=2&a=1#top")
    'http://example.com/a/c?a=1&b=2'

    Switches (defaults in brackets): ``strip_tracking`` [on], ``strip_session`` [on],
    ``sort_query`` [on], ``drop_fragment`` [on], ``strip_trailing_slash``, ``strip_www``,
    ``ignore_scheme``, ``drop_index`` [off]; ``tracking_params`` / ``session_params`` extend
    the built-in lists. An unknown switch raises ``ValueError``; a bad URL never does.
    ``dust_rules`` is a DUST rules file (from ``scrapy-dedup mine-dust``), a list of them, or a
    :class:`~scrapy_dedup.url.dust.RuleSet`; the rules of the URL's host apply right after the safe
    steps. A file is read once per (path, modification time); on a hot path build a
    ``Canonicalizer(policy, dust_rules=...)`` once instead.
    """
    if dust_rules is not None:
        return _with_dust(url, dust_rules, switches)
    if not switches:
        return _DEFAULT.canonicalize(url)
    key = tuple(sorted((k, _hashable(v)) for k, v in switches.items()))
    return _canonicalizer_for(key).canonicalize(url)


def _with_dust(url: str, dust_rules: Any, switches: dict[str, Any]) -> str:
    import os

    from scrapy_dedup.url.dust import DustRulesError

    policy_key = tuple(sorted((k, _hashable(v)) for k, v in switches.items()))
    try:
        if isinstance(dust_rules, RuleSet):
            policy = UrlPolicy.from_mapping(dict(policy_key), setting="canonicalize()")
            return Canonicalizer(policy, dust_rules=dust_rules).canonicalize(url)
        paths = (dust_rules,) if isinstance(dust_rules, (str, os.PathLike)) else tuple(dust_rules)
        stamps = tuple((os.fspath(p), _mtime(p)) for p in paths)
        return _dust_canonicalizer_for(policy_key, stamps).canonicalize(url)
    except DustRulesError as exc:
        raise DustRulesError(f"dust_rules: {exc}") from None


def _mtime(path: Any) -> float:
    import os

    try:
        return os.stat(path).st_mtime
    except OSError:
        return -1.0


@lru_cache(maxsize=32)
def _dust_canonicalizer_for(items: tuple[tuple[str, Any], ...], stamps: tuple[tuple[str, float], ...]) -> Canonicalizer:
    policy = UrlPolicy.from_mapping(dict(items), setting="canonicalize()")
    return Canonicalizer(policy, dust_rules=[path for path, _ in stamps])


def safe_parts(canonicalizer: Canonicalizer, url: str) -> tuple[str, str, str] | None:
    """(host, path, query) of ``url`` through ``canonicalizer`` (one without switches or rules: the safe
    steps, the form DUST rules and aliases are written in); None for a URL it cannot parse."""
    result = canonicalizer.canonicalize_with_info(url)
    if result.unparsable:
        return None
    rest = result.url.partition("://")[2]
    if not rest:
        return None
    rest = rest.partition("#")[0]
    slash = rest.find("/")
    hostport = rest if slash == -1 else rest[:slash]
    path_query = "/" if slash == -1 else rest[slash:]
    host = hostport.rpartition("@")[2]
    if host.startswith("["):
        host = host[: host.find("]") + 1]
    else:
        host = host.partition(":")[0]
    path, _, query = path_query.partition("?")
    return host, path or "/", query
