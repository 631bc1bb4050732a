"""Every ``DEDUP_*`` setting: its default, its validation, and its documentation.

The table :data:`SETTINGS` is the single source: components read their
settings once, at start-up, through :func:`read_settings`, which validates
every value and raises :class:`DedupConfigError` naming the setting (and the
key, for dict settings) on a bad one. The settings reference's table (docs/settings.md) is generated
from it (``python -m scrapy_dedup.settings docs/settings.md``) and a test keeps the two in sync.

This module does not import Scrapy: it accepts any object with ``get(name)``
(a Scrapy ``Settings`` or a plain dict).
"""
from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from scrapy_dedup.content.params import DEFAULT_STRIP_TAGS  # noqa: F401 - re-exported (a public name)
from scrapy_dedup.content.params import ENGINE_PARAMS, ParamError, check_engine, number, raising


class DedupConfigError(ParamError):
    """A ``DEDUP_*`` setting has a value that cannot work; raised at start-up.

    ``errors`` holds one line per error (several when :func:`read_settings` found several);
    the message is those lines, one per line.
    """

    def __init__(self, message: str):
        super().__init__(message)
        self.errors: tuple[str, ...] = (message,)

    @classmethod
    def of(cls, errors: Iterable[str]) -> "DedupConfigError":
        """One error listing ``errors``, one line each (the first line alone when there is one)."""
        lines = tuple(errors)
        if len(lines) == 1:
            return cls(lines[0])
        error = cls(f"{len(lines)} configuration errors:\n" + "\n".join(f"  {line}" for line in lines))
        error.errors = lines
        return error


def load_setting_object(value: Any, setting: str) -> Any:
    """The class (or other object) a setting names by import path, or holds itself; a start-up error
    naming the setting when it cannot be loaded (Scrapy's own error names only the path)."""
    from scrapy.utils.misc import load_object  # accepts the object itself as well as its path

    try:
        return load_object(value)
    except (ImportError, AttributeError, NameError, ValueError, TypeError) as exc:
        raise DedupConfigError(f"{setting}: cannot load {value!r}: {exc}") from None


def unallocatable_bloom(capacity_setting: str, capacity: int, error_rate_setting: str,
                        error_rate: float) -> DedupConfigError:
    """The start-up error of a local Bloom filter (allocated whole at start) too large for this machine: a
    ``MemoryError`` or an ``OverflowError`` while it was built, told with the settings and the bytes needed."""
    from scrapy_dedup.seen.base import bloom_size

    return DedupConfigError(
        f"{capacity_setting} ({capacity}) at {error_rate_setting} ({error_rate}) needs a Bloom filter of "
        f"{bloom_size(capacity, error_rate)[0] // 8:,} bytes, more than can be allocated: lower the capacity "
        "(the filter grows past it)")


# --- converters: (value, setting name) -> normalized value, or DedupConfigError ---

Converter = Callable[[Any, str], Any]


def to_bool(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on", "0", "false", "no", "off", ""):
        return value.strip().lower() in ("1", "true", "yes", "on")
    raise DedupConfigError(f"{name} must be True or False, got {value!r}")


def _raising(convert: Converter) -> Converter:
    """A core converter (raising ParamError) that raises DedupConfigError, as every setting's converter does."""
    return raising(convert, DedupConfigError)


def _number(kind: type, **bounds: Any) -> Converter:
    return _raising(number(kind, **bounds))


def _choice(*choices: str) -> Converter:
    def convert(value: Any, name: str) -> str:
        if isinstance(value, str) and value.strip().lower() in choices:
            return value.strip().lower()
        raise DedupConfigError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")

    return convert


def _log_level(value: Any, name: str) -> str:
    levels = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
    if isinstance(value, int) and not isinstance(value, bool):
        by_number = {10: "DEBUG", 20: "INFO", 30: "WARNING", 40: "ERROR", 50: "CRITICAL"}
        if value in by_number:
            return by_number[value]
    if isinstance(value, str) and value.strip().upper() in levels:
        return value.strip().upper()
    raise DedupConfigError(f"{name} must be one of {', '.join(levels)} (or its number), got {value!r}")


def to_optional_str(value: Any, name: str) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):  # " " names no file or field
        return None
    if isinstance(value, str):
        return value
    # pathlib.Path and friends
    if hasattr(value, "__fspath__"):
        return str(value.__fspath__())
    raise DedupConfigError(f"{name} must be a string, got {value!r}")


def to_optional_class(value: Any, name: str) -> Any:
    """An import path, or the class itself (Scrapy accepts both for its ``*_CLASS`` settings)."""
    if isinstance(value, type):
        return value
    return to_optional_str(value, name)


def to_str(value: Any, name: str) -> str:
    result = to_optional_str(value, name)
    if result is None:
        raise DedupConfigError(f"{name} must be a non-empty string")
    return result


def to_dict(value: Any, name: str) -> dict:
    if value is None or value == "":
        return {}
    if isinstance(value, str):  # from the command line: -s DEDUP_X='{"a": 1}'
        try:
            value = json.loads(value)
        except ValueError:
            raise DedupConfigError(f"{name} must be a dict (or a JSON object string), got {value!r}") from None
    if hasattr(value, "copy_to_dict"):  # scrapy BaseSettings
        value = value.copy_to_dict()
    if not isinstance(value, Mapping):
        raise DedupConfigError(f"{name} must be a dict, got {type(value).__name__}")
    return dict(value)


def to_optional_str_or_list(value: Any, name: str) -> tuple[str, ...]:
    """A path or a list of paths."""
    if value is None or value == "":
        return ()
    if isinstance(value, str) or hasattr(value, "__fspath__"):
        return (to_str(value, name),)
    if isinstance(value, (list, tuple)):
        return tuple(to_str(v, name) for v in value)
    raise DedupConfigError(f"{name} must be a path or a list of paths, got {value!r}")


def _redis_url(value: Any, name: str) -> str:
    """A Redis URL redis-py reads as written; every message shows it masked (it may hold a password)."""
    from scrapy_dedup._util.redis_conn import validate_url

    try:
        return validate_url(value, name)
    except ValueError as exc:
        raise DedupConfigError(str(exc)) from None


def _key_template(value: Any, name: str) -> str:
    """A Redis key, ``%(spider)s`` replaced by the spider's name; any other ``%`` directive is refused now
    (it would fail when the store opens, with a KeyError or a TypeError naming nothing)."""
    template = to_str(value, name)
    try:
        template % {"spider": "spider"}
    except (KeyError, ValueError, TypeError) as exc:
        raise DedupConfigError(f"{name} must be a key template using only %(spider)s (write a literal % as %%), "
                               f"got {template!r} ({type(exc).__name__}: {exc})") from None
    return template


def _redis_params(value: Any, name: str) -> dict:
    """A dict of client parameters; a string that is not JSON is not shown (it may hold a password)."""
    if isinstance(value, str) and value.strip():
        try:
            json.loads(value)
        except ValueError as exc:
            raise DedupConfigError(f"{name} must be a dict (or a JSON object string); the string given is not "
                                   f"JSON ({exc.__class__.__name__} at character {getattr(exc, 'pos', '?')}; "
                                   "not shown, it may hold a password)") from None
    params = to_dict(value, name)
    for key in params:
        if not isinstance(key, str):  # the client's keyword arguments
            raise DedupConfigError(f"{name}: keys must be the Redis client's parameter names, got {key!r}")
    return params


def _url_policy(value: Any, name: str) -> Any:
    from scrapy_dedup.url.policy import UrlPolicy

    try:
        return UrlPolicy.from_mapping(to_dict(value, name), setting=name)
    except DedupConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise DedupConfigError(str(exc)) from None


def _per_domain(validate_one: Converter) -> Converter:
    """dict: domain -> overrides, each checked by ``validate_one`` (raw dicts are kept)."""

    def convert(value: Any, name: str) -> dict[str, dict]:
        result: dict[str, dict] = {}
        for domain, overrides in to_dict(value, name).items():
            if not isinstance(domain, str) or not domain.strip(".").strip():
                raise DedupConfigError(f"{name}: keys must be domain names, got {domain!r}")
            if not _could_be_host(domain.strip()):  # it would match no URL: its policy silently never applied
                raise DedupConfigError(f"{name}: key {domain!r} is not a domain name; write the host alone, "
                                       "without scheme, port, path or wildcard ('example.com' covers its subdomains)")
            key = f"{name}[{domain!r}]"
            validate_one(overrides, key)
            result[domain.strip().strip(".").lower()] = to_dict(overrides, key)
        return result

    return convert


def _could_be_host(domain: str) -> bool:
    """Whether ``domain`` may be the host of a URL: a name, or an IP address (IPv6 bracketed or not)."""
    import ipaddress

    literal = domain[1:-1] if domain.startswith("[") and domain.endswith("]") else domain
    if ":" in literal:  # only an IPv6 address holds a colon; else it is a port or a scheme
        try:
            ipaddress.IPv6Address(literal)
        except ValueError:
            return False
        return True
    return not any(c in literal for c in "/?#@*[]") and not any(c.isspace() for c in literal)


def _raw_url_policy(value: Any, name: str) -> dict:
    _url_policy(value, name)
    return to_dict(value, name)


def _content_overrides(value: Any, name: str) -> dict:
    overrides = to_dict(value, name)
    for key, item in overrides.items():
        setting = CONTENT_OVERRIDABLE.get(str(key).upper())
        if setting is None:
            allowed = ", ".join(sorted(k.lower() for k in CONTENT_OVERRIDABLE))
            raise DedupConfigError(f"{name}: unknown key {key!r}; allowed keys: {allowed}")
        setting.convert(item, f"{name}[{key!r}]")
    return overrides


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    convert: Converter
    doc: str
    group: str

    @property
    def attr(self) -> str:
        return self.name[len("DEDUP_"):].lower()


def _s(name: str, default: Any, convert: Converter, group: str, doc: str) -> Setting:
    return Setting(name, default, convert, " ".join(doc.split()), group)


SETTINGS: tuple[Setting, ...] = (
    _s("DEDUP_ENABLED", True, to_bool, "general",
       "Master switch of the add-on: False leaves every component out."),
    # --- URL layer ---
    _s("DEDUP_URL_POLICY", {}, _raw_url_policy, "url",
       "Default URL policy: dict of canonicalization switches (see the switches table) and extra "
       "`tracking_params` / `session_params`."),
    _s("DEDUP_URL_POLICIES", {}, _per_domain(_raw_url_policy), "url",
       "Per-domain URL policies: domain -> switches overriding `DEDUP_URL_POLICY` for that host and "
       "its subdomains; the most specific domain wins."),
    _s("DEDUP_FALLBACK_REQUEST_FINGERPRINTER_CLASS", None, to_optional_class, "url",
       "A fingerprinter that `CanonicalRequestFingerprinter` wraps: it is given the request with its "
       "canonical URL. The add-on sets it to the `REQUEST_FINGERPRINTER_CLASS` it finds (a project's or "
       "another add-on's) unless you set it. None: Scrapy's fingerprint shape (method, URL, body; SHA-1) "
       "computed directly."),
    _s("DEDUP_DUST_RULES", (), to_optional_str_or_list, "url",
       "DUST rules file(s) from `scrapy-dedup mine-dust`, applied per host right after the safe steps."),
    _s("DEDUP_DUST_LEARN", False, to_bool, "url",
       "Learn DUST rules during the crawl (needs `scrapy_dedup.dust_learning.DustLearningMiddleware`): "
       "validated rules are activated for later requests of their host and logged."),
    _s("DEDUP_DUST_LEARN_EVERY", 25, _number(int, minimum=1), "url",
       "With `DEDUP_DUST_LEARN`: mine the pages fetched so far at least every this many pages (sooner when "
       "pages met again under other URLs, the evidence rules need, reach the miner's support)."),
    _s("DEDUP_DUST_EXPLORE", 0.05, _number(float, minimum=0, maximum=1), "url",
       "With `DEDUP_DUST_LEARN` or `DEDUP_DUST_RULES`: of the distinct URLs an active learned or loaded rule "
       "(or a loaded alias) collapses, the first and then this share are still fetched (each URL at most once), "
       "to catch its violations (a violating rule or alias is withdrawn)."),
    _s("DEDUP_DUST_RULES_OUT", None, to_optional_str, "url",
       "With `DEDUP_DUST_LEARN`: write the DUST rules in force at crawl end (loaded and learned) to this "
       "file, for the next crawl."),
    # --- seen-URL stores ---
    _s("DEDUP_BLOOM_CAPACITY", None, _number(int, minimum=1, optional=True), "seen",
       "URLs the Bloom filter is sized for. The local filter (`BloomDupeFilter`) grows past it, its error rate "
       "still bounded; unset, it starts at 100,000 URLs (0.4 MiB at 1e-6) and grows with the crawl: set it to "
       "the crawl's size when you know it (fewer, larger slices: 10,000,000 URLs take 37.4 MiB at 1e-6). The Redis "
       "Bloom filter (`RedisBloomDupeFilter`) is allocated whole at this size (unset: 10,000,000 URLs); past "
       "it, its rate rises. Both log their memory at start and at close."),
    _s("DEDUP_BLOOM_ERROR_RATE", 1e-6, _number(float, minimum=0, maximum=0.1, exclusive_min=True), "seen",
       "Target false-positive rate: the share of new URLs wrongly skipped as seen."),
    _s("DEDUP_CHECKPOINT_SECONDS", 300.0, _number(float, minimum=0), "seen",
       "Seconds between checkpoints of local state into JOBDIR (0: only at close)."),
    _s("DEDUP_BLOOM_ON_CORRUPT", "fail", _choice("fail", "empty"), "seen",
       "What `BloomDupeFilter` does when its JOBDIR checkpoint is truncated or corrupt: `fail` (refuse "
       "to start: an empty filter would refetch the whole crawl) or `empty` (start empty, keep the bad "
       "file as `seen.bloom.corrupt-<time>`, or in place when it cannot be renamed: the next checkpoint replaces "
       "it; logged and counted in `dedup/seen/checkpoint_errors`)."),
    _s("DEDUP_ACCEPT_NEW_GENERATION", False, to_bool, "seen",
       "A JOBDIR or a Redis seen set records what wrote its fingerprints (scrapy-dedup's and w3lib's versions, "
       "the URL policies, the DUST rules, the fingerprinter chain); a crawl that resumes it with any of them "
       "changed refuses to start, naming what changed. True records the new generation and goes on: the "
       "pages the old one fetched may be fetched again (docs/reliability.md, \"Fingerprint generations\")."),
    _s("DEDUP_REDIS_URL", "redis://localhost:6379/0", _redis_url, "redis",
       "Redis server of the shared stores: redis://, rediss:// or unix://. Unset, scrapy-redis's `REDIS_URL`, "
       "then `REDIS_HOST`/`REDIS_PORT`, is used (with the `db` of the client parameters, as scrapy-redis does). "
       "The password is masked in logs; "
       "percent-escape `/ ? # @` in it (`urllib.parse.quote(password, safe='')`)."),
    _s("DEDUP_REDIS_KEY", "dedup:%(spider)s:seen", _key_template, "redis",
       "Key of the shared seen set; `%(spider)s` is the spider name, so all processes of a spider share it."),
    _s("DEDUP_REDIS_PERSIST", True, to_bool, "redis",
       "Keep the Redis keys after the crawl (False: delete them at close: the Redis dupefilter's keys and, with "
       "`DEDUP_CONTENT_BACKEND = 'redis'`, the content state that `DEDUP_REDIS_FLUSH_ON_START` lists). Every "
       "process closing with it deletes them: with several processes on one crawl, leave it True."),
    _s("DEDUP_REDIS_FLUSH_ON_START", False, to_bool, "redis",
       "Delete the crawl's Redis state when it opens (start fresh): the Redis dupefilter's keys "
       "(`DEDUP_REDIS_KEY`) and, with `DEDUP_CONTENT_BACKEND = 'redis'`, the content index's "
       "(`DEDUP_REDIS_INDEX_KEY`: its pages, the boilerplate tables, the paragraph seen set), on every node "
       "of a cluster. Every process started with it deletes them: set it on the first one only. Not the "
       "scrapy-redis queue (`SCHEDULER_FLUSH_ON_START`)."),
    _s("DEDUP_REDIS_TTL", None, _number(int, minimum=1, maximum=10**15, optional=True), "redis",
       "Optional expiry, in seconds, of the whole Redis key, refreshed while the crawl runs (at most 10**15: "
       "Redis refuses an expiry past its clock's range)."),
    _s("DEDUP_REDIS_PARAMS", {}, _redis_params, "redis",
       "Keyword arguments for the Redis client (`redis_cls` picks the class, e.g. `redis.cluster.RedisCluster`); "
       "unset, scrapy-redis's `REDIS_PARAMS` is used. `socket_timeout`, `socket_connect_timeout` and `retry` "
       "given here replace the ones derived from `DEDUP_REDIS_ON_ERROR` (one attempt per call, bounded by the "
       "outage budget)."),
    _s("DEDUP_REDIS_BLOOM_SHARDS", 1, _number(int, minimum=1, maximum=4096), "redis",
       "Fewest Redis keys the Redis Bloom filter is split over (one hash slot each, for Redis Cluster); it "
       "may use up to 8 more, whichever count wastes least of Redis's allocation (3 at the default capacity): "
       "the start-up line says how many."),
    _s("DEDUP_REDIS_ON_ERROR", "retry", _choice("retry", "fail_open"), "redis",
       "What the Redis dupefilters do while Redis is unreachable, hung, or refuses writes (full, read-only, "
       "failing snapshots): `retry` (wait, retrying with exponential "
       "backoff for up to `DEDUP_REDIS_RETRY_SECONDS` per outage, then close the spider with reason "
       "`dedup_redis_unavailable`) or `fail_open` (treat requests as unseen, counted in "
       "`dedup/redis/fail_open`). One log line per outage; see docs/reliability.md. Outages of a running crawl "
       "only: Redis unreachable at start fails the start under either (`DEDUP_REDIS_STARTUP_SECONDS`)."),
    _s("DEDUP_REDIS_RETRY_SECONDS", 60.0, _number(float, minimum=0), "redis",
       "Longest wait, in seconds, for Redis to come back in one outage: of `DEDUP_REDIS_ON_ERROR = 'retry'` "
       "(the dupefilters), and of the Redis queue `AckPriorityQueue` under either policy (it has no request to "
       "give without Redis); then the spider is closed with reason `dedup_redis_unavailable`. Each call's socket "
       "timeouts default to a third of it (at least 1 s, at most 30 s, 10 s to connect); under `fail_open` to 1 s."),
    _s("DEDUP_REDIS_STARTUP_SECONDS", 5.0, _number(float, minimum=0.1, maximum=365 * 86_400), "redis",
       "Longest wait, in seconds, for a Redis that cannot be reached when the crawl starts (every Redis "
       "component: the content index, the dupefilters, `AckScheduler` and `AckPriorityQueue`; under either "
       "`DEDUP_REDIS_ON_ERROR`): then the start fails before anything is fetched, with one ERROR line naming the "
       "server (no password) and the setting its URL came from; `scrapy crawl` exits with status 1."),
    _s("DEDUP_REDIS_INDEX_KEY", "dedup:%(spider)s:content", _key_template, "redis",
       "Key prefix of the shared content index (`DEDUP_CONTENT_BACKEND = 'redis'`). On a Redis Cluster the index "
       "is sharded over the slots unless the prefix names its own hash tag (`{...}`: one slot, one script per page)."),
    # --- content layer ---
    _s("DEDUP_CONTENT_BACKEND", "memory", _choice("memory", "redis"), "content",
       "Where the content index lives: `memory` (one process, checkpointed to JOBDIR) or `redis` (shared). With the "
       "add-on, unset, it is `redis` where the crawl's seen set is in Redis (scrapy-redis's `SCHEDULER`, whose "
       "dupefilter is then `RedisDupeFilter`, or a Redis `DUPEFILTER_CLASS`); `memory` there is refused at start-up."),
    _s("DEDUP_CONTENT_ACTION", "drop", _choice("drop", "tag", "log"), "content",
       "What the pipeline does with an item of a duplicate page: `drop`, `tag` (keep, add cluster, "
       "kept URL and representative) or `log` (measure only)."),
    _s("DEDUP_DUPLICATE_LOG_LEVEL", "DEBUG", _log_level, "content",
       "Level of the one line logged per duplicate item (dropped, tagged or logged): URL, kept URL, kind, "
       "distance, and the representative when it is not the kept URL; never the item's content."),
    _s("DEDUP_HOLD_MAX_ITEMS", 10_000, _number(int, minimum=0), "content",
       "In `drop` mode, most items held back at once: items of a view (a diff, an old revision, a printable "
       "version) waiting for the page it shows, and fallbacks of a cluster whose kept item has not yet passed "
       "every pipeline (docs/items.md). Past it the views held longest are released at once (a fallback never: "
       "it would duplicate the items in flight it stands in for)."),
    _s("DEDUP_HOLD_MAX_BYTES", 64 * 1024 * 1024, _number(int, minimum=0), "content",
       "In `drop` mode, most bytes of items held back at once (each item's size estimated from its fields); "
       "past it the views held longest are released at once."),
    _s("DEDUP_TAG_FIELD", "dedup", to_str, "content",
       "Item field that `tag` mode fills with {cluster, kept_url, representative, distance, kind}: `cluster` "
       "names the cluster by its first page (the same for all its items), `kept_url` is the page this one "
       "matched, `representative` the member `DEDUP_REPRESENTATIVE` prefers so far."),
    _s("DEDUP_REPRESENTATIVE", "canonical", _choice("first", "canonical", "newest"), "content",
       "Which member names a duplicate cluster in the report, the log lines, tags and the audit file: `first` "
       "(the page that arrived first), `canonical` (a URL other members declare as `rel=\"canonical\"`, then "
       "no session or tracking parameters, fewest parameters, shortest, https) or `newest` (latest "
       "`DEDUP_TIMESTAMP_FIELD`, else the latest fetched). Never changes which pages or items are kept: in "
       "`drop` mode the first page's item has already left."),
    _s("DEDUP_TIMESTAMP_FIELD", None, to_optional_str, "content",
       "With `DEDUP_REPRESENTATIVE = 'newest'` and `DEDUP_CONTENT_FIELD`: the item field holding the page's "
       "time (seconds since the epoch, or ISO 8601; an item without a readable one ranks last, counted in "
       "`dedup/content/undated_items`); unset, or for responses, the fetch time is used."),
    _s("DEDUP_CONTENT_FIELD", None, to_optional_str, "content",
       "Fingerprint this item field (HTML or text) instead of the response."),
    _s("DEDUP_DROP_DUPLICATE_RESPONSES", False, to_bool, "content",
       "Drop a duplicate response before the spider parses it (its links are not followed either)."),
    # the content engine's parameters: defined once, in the core (content/params.py), shared with the audit
    *(_s(f"DEDUP_{p.key.upper()}", p.default, _raising(p.convert), "content", p.doc) for p in ENGINE_PARAMS),
    _s("DEDUP_CONTENT_POLICIES", {}, _per_domain(_content_overrides), "content",
       "Per-domain content overrides: domain -> {strip_selectors, strip_tags, min_words, max_bytes, "
       "boilerplate, paragraphs}."),
    _s("DEDUP_PARAGRAPHS_FIELD", None, to_optional_str, "content",
       "With `DEDUP_PARAGRAPHS`: the item field filled with the page's main text less its repeated blocks "
       "(blocks joined by a space); unset, items are left as they are."),
    _s("DEDUP_PARAGRAPHS_CAPACITY", None, _number(int, minimum=1, optional=True), "content",
       "Blocks the paragraph seen set is sized for. The local Bloom filter grows past it, its error rate still "
       "bounded; unset, it starts at 100,000 blocks (0.4 MiB at 1e-6) and grows with the crawl: set it to the "
       "crawl's block count when you know it (fewer, larger slices: 10,000,000 blocks take 37.4 MiB at 1e-6, "
       "and as much in `JOBDIR`). With `DEDUP_CONTENT_BACKEND = 'redis'`, a Redis Bloom filter allocated whole "
       "at this size (unset: 10,000,000 blocks), shared (key `<DEDUP_REDIS_INDEX_KEY>:paragraphs`; past it, its "
       "false-positive rate rises: one WARNING then, and past 10 times its error rate it sets no more bits, a "
       "block not in it counting as new). Both log their memory at start. A local filter resumed from `JOBDIR` "
       "keeps the capacity and error rate it was saved with (a WARNING names them)."),
    _s("DEDUP_PARAGRAPHS_ERROR_RATE", 1e-6, _number(float, minimum=0, maximum=0.1, exclusive_min=True), "content",
       "False-positive rate of the paragraph seen set: the share of new blocks wrongly taken for repeats."),
    _s("DEDUP_AUDIT_FILE", None, to_optional_str, "report",
       "JSON Lines file: one line per duplicate found (url, kept_url, distance, kind, cluster, representative)."),
    _s("DEDUP_LOG_FILE", None, to_optional_str, "report",
       "JSON Lines crawl log: one line per fetched page (URLs, hashes, word count, verdict and cluster) and per "
       "redirect, read by `mine-dust`."),
    _s("DEDUP_CANARY_SIZE", 50, _number(int, minimum=2), "report",
       "Warn when one duplicate cluster or index bucket grows past this size (boilerplate canary)."),
)

BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}

#: settings that DEDUP_CONTENT_POLICIES may override per domain
CONTENT_OVERRIDABLE: dict[str, Setting] = {
    name: BY_NAME[f"DEDUP_{name}"]
    for name in ("STRIP_TAGS", "STRIP_SELECTORS", "MIN_WORDS", "MAX_BYTES", "BOILERPLATE", "PARAGRAPHS")
}


class DedupSettings(Mapping):
    """The validated ``DEDUP_*`` values, read once; attributes drop the prefix.

    ``cfg.bloom_capacity`` is ``cfg["DEDUP_BLOOM_CAPACITY"]``.
    """

    __slots__ = ("_values", "sources")

    def __init__(self, values: Mapping[str, Any], sources: Mapping[str, str] | None = None):
        object.__setattr__(self, "_values", dict(values))
        #: where a value came from when it was not its own setting (``DEDUP_REDIS_URL`` -> ``"REDIS_URL"``)
        object.__setattr__(self, "sources", dict(sources or {}))

    def source_of(self, name: str) -> str:
        """The setting a value was read from: its own name, a scrapy-redis fallback, or ``default``."""
        return self.sources.get(name, name)

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __getattr__(self, attr: str) -> Any:
        try:
            return self._values[f"DEDUP_{attr.upper()}"]
        except KeyError:
            raise AttributeError(attr) from None

    def __setattr__(self, attr: str, value: Any) -> None:
        raise AttributeError("DedupSettings is read-only")

    def __repr__(self) -> str:
        from scrapy_dedup._util.redis_conn import mask_url

        shown = dict(self._values)  # the Redis password stays out of any log line or traceback showing this
        shown["DEDUP_REDIS_URL"] = mask_url(shown.get("DEDUP_REDIS_URL", ""))
        params = shown.get("DEDUP_REDIS_PARAMS")
        if isinstance(params, dict):
            shown["DEDUP_REDIS_PARAMS"] = {k: "***" if k in ("password", "ssl_password") else v
                                           for k, v in params.items()}
        return f"DedupSettings({shown!r})"

    def check_content_engine(self) -> None:
        """Cross-setting checks of the content engine (content/params.py: bands vs threshold, radius, ...)."""
        try:
            check_engine({p.key: self[f"DEDUP_{p.key.upper()}"] for p in ENGINE_PARAMS},
                         lambda key: f"DEDUP_{key.upper()}")
        except ParamError as exc:
            raise DedupConfigError(str(exc)) from None


def read_settings(settings: Any) -> DedupSettings:
    """Validate and freeze every ``DEDUP_*`` value of ``settings`` (a Scrapy Settings or a dict).

    Raises :class:`DedupConfigError` listing every bad value, one line each naming the setting,
    and every unknown ``DEDUP_*`` name (a typo would otherwise be silently ignored): a user fixes
    them all in one go (:attr:`DedupConfigError.errors` holds the lines).
    """
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    errors: list[str] = []
    for setting in SETTINGS:
        raw = settings.get(setting.name, None)
        source = setting.name
        if raw is None:
            raw, source = _fallback(settings, setting.name)
        try:
            values[setting.name] = setting.convert(setting.default if raw is None else raw, source)
        except DedupConfigError as exc:
            errors.append(str(exc))
            continue
        if source != setting.name:
            sources[setting.name] = source
    db = values.get("DEDUP_REDIS_PARAMS", {}).get("db")
    if db is not None and "DEDUP_REDIS_URL" in values and sources.get("DEDUP_REDIS_URL") in (
            "default", "REDIS_HOST/REDIS_PORT"):
        # scrapy-redis connects with Redis(host, port, **REDIS_PARAMS): there a `db` picks the database, which
        # the /0 of the URL built here would override (the dupefilter on another database than the queue)
        try:
            values["DEDUP_REDIS_URL"] = values["DEDUP_REDIS_URL"].rsplit("/", 1)[0] + f"/{int(db)}"
        except (TypeError, ValueError):
            errors.append(f"{sources.get('DEDUP_REDIS_PARAMS', 'DEDUP_REDIS_PARAMS')}: 'db' must be "
                          f"a database number, got {db!r}")
    names = settings.keys() if hasattr(settings, "keys") else ()
    for name in names:
        if isinstance(name, str) and name.startswith("DEDUP_") and name not in BY_NAME:
            close = closest_name(name, BY_NAME)
            hint = f"; did you mean {close}?" if close else ""
            errors.append(f"unknown setting {name}{hint}")
    cfg = DedupSettings(values, sources)
    if all(f"DEDUP_{p.key.upper()}" in values for p in ENGINE_PARAMS):  # (cross-checks of valid values only)
        try:
            cfg.check_content_engine()
        except DedupConfigError as exc:
            errors.append(str(exc))
    if errors:
        raise DedupConfigError.of(errors)
    return cfg


#: the loggers through which Scrapy reports a crawl that failed to start, with the exception's traceback:
#: asyncio's "Task exception was never retrieved" (AsyncCrawlerProcess) and Twisted's "Unhandled error in
#: Deferred" (CrawlerProcess)
_START_FAILURE_LOGGERS = ("asyncio", "twisted")


class _RefusalLines(logging.Filter):
    """Tell a start-up refusal of scrapy-dedup (an exception of one of its classes that ended the crawl) in its
    own lines, one per error, instead of the traceback Scrapy's event loop logs for it
    (``SCRAPY_DEDUP_DEBUG=1`` keeps the traceback).

    The message already names the setting or the store and what to do; the frames under it (the event
    loop's, Scrapy's start-up's) say nothing more to the user. Any other exception keeps its traceback.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        ours = _ours_in_chain(error)
        if ours is None or os.environ.get("SCRAPY_DEDUP_DEBUG"):  # (as the console script: it keeps the traceback)
            return True
        if getattr(ours, _LOGGED, False):  # told already, where it was raised (refusing_start)
            return False
        record.msg = f"scrapy-dedup cannot start: {str(ours) or type(ours).__name__}"
        if ours is not error:  # Scrapy's own error closing the engine the refusal left half-open: a consequence
            record.msg += f"\n(then, as Scrapy closed the engine: {type(error).__name__}: {error})"
        record.args = ()
        record.exc_info = None
        record.exc_text = None
        record.levelno, record.levelname = logging.ERROR, "ERROR"
        return True


def _ours_in_chain(error: BaseException | None) -> BaseException | None:
    """The first exception of scrapy-dedup's own classes in ``error``'s chain (it, its cause, its context)."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if type(error).__module__.startswith("scrapy_dedup."):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


_LOGGED = "_scrapy_dedup_logged"
_logger = logging.getLogger("scrapy_dedup")


ErrorT = TypeVar("ErrorT", bound=BaseException)


def logged_already(error: ErrorT) -> ErrorT:
    """``error``, marked as logged where it was raised: neither :func:`refusing_start` nor the loggers' filter
    tell it again."""
    setattr(error, _LOGGED, True)
    return error


@contextmanager
def refusing_start(crawler: Any = None) -> Iterator[None]:
    """Around the start-up of a component: a refusal of ours raised inside is logged at once, as its lines
    (before whatever Scrapy or Twisted print of the failed start), then raised on (:class:`_RefusalLines`
    drops Scrapy's own record of it).

    ``crawler``: the crawl being started, for a component Scrapy builds inside the engine's start (the
    scheduler's dupefilter): see :func:`start_failed`.
    """
    tell_refusals_without_traceback()
    try:
        yield
    except Exception as exc:
        ours = _ours_in_chain(exc)
        if ours is not None and not getattr(ours, _LOGGED, False):
            _logger.error("scrapy-dedup cannot start: %s", str(ours) or type(ours).__name__)
            setattr(ours, _LOGGED, True)
        if ours is not None and crawler is not None:
            start_failed(crawler)
        raise


def start_failed(crawler: Any) -> None:
    """A refusal of ours ends the start of ``crawler`` inside the engine's start (the scheduler's dupefilter
    built or opened), where the spider already exists: ``scrapy crawl`` must exit non-zero. Scrapy 2.13's
    ``CrawlerProcess`` (what its ``scrapy crawl`` runs) tells a failed start only by a crawler without a spider,
    so there it ended with exit status 0; the spider is taken off the crawler, as a start that never got that
    far would have left it. (Newer Scrapy counts any failed start too; nothing reads the spider after.)"""
    if getattr(crawler, "spider", None) is not None:
        crawler.spider = None


def tell_refusals_without_traceback() -> None:
    """Install :class:`_RefusalLines` on the loggers Scrapy reports a failed start through (once; idempotent).

    Called where scrapy-dedup first meets a crawl (the add-on, the fingerprinter, the dupefilters); the
    crawl still fails, so ``scrapy crawl`` exits with status 1.
    """
    for name in _START_FAILURE_LOGGERS:
        target = logging.getLogger(name)
        if not any(isinstance(f, _RefusalLines) for f in target.filters):
            target.addFilter(_RefusalLines())


def _fallback(settings: Any, name: str) -> tuple[Any, str]:
    """(value, source) of an unset ``DEDUP_*`` setting: scrapy-redis's settings, or None and ``default``.

    A scrapy-redis project that switches only ``DUPEFILTER_CLASS`` keeps its
    server: ``DEDUP_REDIS_URL`` falls back to ``REDIS_URL``, then to
    ``REDIS_HOST``/``REDIS_PORT``; ``DEDUP_REDIS_PARAMS`` to ``REDIS_PARAMS``
    (scrapy-redis's names and meanings).
    """
    if name == "DEDUP_REDIS_URL":
        if settings.get("REDIS_URL"):
            return settings.get("REDIS_URL"), "REDIS_URL"
        host, port = settings.get("REDIS_HOST"), settings.get("REDIS_PORT")
        if host or port:
            host = str(host or "localhost")
            host = f"[{host}]" if ":" in host and not host.startswith("[") else host
            return f"redis://{host}:{port or 6379}/0", "REDIS_HOST/REDIS_PORT"
    elif name == "DEDUP_REDIS_PARAMS" and settings.get("REDIS_PARAMS"):
        return settings.get("REDIS_PARAMS"), "REDIS_PARAMS"
    return None, "default" if name in ("DEDUP_REDIS_URL", "DEDUP_REDIS_PARAMS") else name


def closest_name(name: str, known: Iterable[str], cutoff: float = 0.8) -> str | None:
    """The known name most like ``name`` (a typo's intended setting), or None if none is close."""
    import difflib

    matches = difflib.get_close_matches(name, list(known), n=1, cutoff=cutoff)  # best ratio first
    return matches[0] if matches else None


def markdown_table() -> str:
    """The settings reference's table (docs/settings.md)."""
    lines = ["| Setting | Default | Meaning |", "| --- | --- | --- |"]
    for s in SETTINGS:
        default = repr(s.default) if not isinstance(s.default, tuple) or s.default else "()"
        if isinstance(s.default, tuple) and s.default:
            default = ", ".join(s.default)
        lines.append(f"| `{s.name}` | `{default}` | {s.doc} |")
    return "\n".join(lines)


def update_table(path: str) -> None:
    """Rewrite the table between the ``settings-table`` markers of ``path`` (docs/settings.md)."""
    import re

    with open(path, encoding="utf-8") as f:
        text = f.read()
    new, found = re.subn(r"(<!-- settings-table:start -->\n).*?(<!-- settings-table:end -->)",
                         lambda m: m.group(1) + markdown_table() + "\n" + m.group(2), text, flags=re.S)
    if not found:  # the table lives in docs/settings.md: a page without the markers gets nothing, say so
        raise ValueError(f"{path} has no settings-table markers (the table is in docs/settings.md)")
    with open(path, "w", encoding="utf-8") as f:
        f.write(new)


if __name__ == "__main__":  # pragma: no cover
    import sys

    # python -m scrapy_dedup.settings            -> print the table
    # python -m scrapy_dedup.settings docs/settings.md  -> rewrite that page's table in place
    if len(sys.argv) > 1:
        update_table(sys.argv[1])
    else:
        print(markdown_table())
