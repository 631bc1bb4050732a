"""Every ``DEDUP_*`` setting: its default, its validation, and its documentation.

The table :data:`SETTINGS` is the single source: components read their
settings once, at start-up, through :func:`read_settings`, which validates
every value and raises :class:`DedupConfigError` naming the setting (and the
key, for dict settings) on a bad one. The README's settings table is generated
from it (``python -m scrapy_dedup.settings``) and a test keeps the two in sync.

This module does not import Scrapy: it accepts any object with ``get(name)``
(a Scrapy ``Settings`` or a plain dict).
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any


class DedupConfigError(ValueError):
    """A ``DEDUP_*`` setting has a value that cannot work; raised at start-up."""


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


def _number(kind: type, *, minimum: float | None = None, maximum: float | None = None,
            exclusive_min: bool = False, optional: bool = False) -> Converter:
    def convert(value: Any, name: str) -> Any:
        if value is None or (isinstance(value, str) and value.strip() == ""):
            if optional:
                return None
            raise DedupConfigError(f"{name} must be set to a number, got {value!r}")
        if isinstance(value, bool):
            raise DedupConfigError(f"{name} must be a number, got {value!r}")
        try:
            number = kind(value)
        except (TypeError, ValueError):
            raise DedupConfigError(f"{name} must be {'an integer' if kind is int else 'a number'}, got {value!r}") from None
        if kind is int and isinstance(value, float) and value != number:
            raise DedupConfigError(f"{name} must be an integer, got {value!r}")
        if isinstance(number, float) and not math.isfinite(number):
            raise DedupConfigError(f"{name} must be a finite number, got {value!r}")
        if minimum is not None and (number <= minimum if exclusive_min else number < minimum):
            raise DedupConfigError(f"{name} must be {'>' if exclusive_min else '>='} {minimum}, got {value!r}")
        if maximum is not None and number > maximum:
            raise DedupConfigError(f"{name} must be <= {maximum}, got {value!r}")
        return number

    return convert


def _choice(*choices: str) -> Converter:
    def convert(value: Any, name: str) -> str:
        if isinstance(value, str) and value.strip().lower() in choices:
            return value.strip().lower()
        raise DedupConfigError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")

    return convert


def to_optional_str(value: Any, name: str) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return value
    # pathlib.Path and friends
    if hasattr(value, "__fspath__"):
        return str(value.__fspath__())
    raise DedupConfigError(f"{name} must be a string, got {value!r}")


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


def to_str_tuple(value: Any, name: str) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple, set, frozenset)) or not all(isinstance(v, str) for v in value):
        raise DedupConfigError(f"{name} must be a list of strings, got {value!r}")
    return tuple(value)


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
    from scrapy_dedup.redis_conn import validate_url

    try:
        return validate_url(to_str(value, name), name)
    except ValueError as exc:
        raise DedupConfigError(str(exc)) from None


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
            key = f"{name}[{domain!r}]"
            validate_one(overrides, key)
            result[domain.strip().strip(".").lower()] = to_dict(overrides, key)
        return result

    return convert


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


DEFAULT_STRIP_TAGS = ("nav", "footer", "header", "aside", "script", "style", "form", "noscript", "template")

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
    _s("DEDUP_FALLBACK_REQUEST_FINGERPRINTER_CLASS", None, to_optional_str, "url",
       "A fingerprinter that `CanonicalRequestFingerprinter` wraps: it is given the request with its "
       "canonical URL. None: Scrapy's fingerprint shape (method, URL, body; SHA-1) computed directly."),
    _s("DEDUP_DUST_RULES", (), to_optional_str_or_list, "url",
       "DUST rules file(s) from `scrapy-dedup mine-dust`, applied per host right after the safe steps."),
    _s("DEDUP_DUST_LEARN", False, to_bool, "url",
       "Learn DUST rules during the crawl (needs `scrapy_dedup.dust_learning.DustLearningMiddleware`): "
       "validated rules are activated for later requests of their host and logged."),
    _s("DEDUP_DUST_LEARN_EVERY", 25, _number(int, minimum=1), "url",
       "With `DEDUP_DUST_LEARN`: mine the pages fetched so far every this many pages."),
    _s("DEDUP_DUST_EXPLORE", 0.05, _number(float, minimum=0, maximum=1), "url",
       "With `DEDUP_DUST_LEARN`: share of the requests an active learned rule collapses that are still "
       "fetched, to catch the rule's violations (a violating rule is deactivated)."),
    _s("DEDUP_DUST_RULES_OUT", None, to_optional_str, "url",
       "With `DEDUP_DUST_LEARN`: write the DUST rules in force at crawl end (loaded and learned) to this "
       "file, for the next crawl."),
    # --- seen-URL stores ---
    _s("DEDUP_BLOOM_CAPACITY", 10_000_000, _number(int, minimum=1), "seen",
       "URLs the Bloom filter is sized for before it grows (local and Redis Bloom)."),
    _s("DEDUP_BLOOM_ERROR_RATE", 1e-6, _number(float, minimum=0, maximum=0.1, exclusive_min=True), "seen",
       "Target false-positive rate: the share of new URLs wrongly skipped as seen."),
    _s("DEDUP_CHECKPOINT_SECONDS", 300.0, _number(float, minimum=0), "seen",
       "Seconds between checkpoints of local state into JOBDIR (0: only at close)."),
    _s("DEDUP_BLOOM_ON_CORRUPT", "fail", _choice("fail", "empty"), "seen",
       "What `BloomDupeFilter` does when its JOBDIR checkpoint is truncated or corrupt: `fail` (refuse "
       "to start: an empty filter would refetch the whole crawl) or `empty` (start empty, keep the bad "
       "file as `seen.bloom.corrupt-<time>`)."),
    _s("DEDUP_REDIS_URL", "redis://localhost:6379/0", _redis_url, "redis",
       "Redis server of the shared stores: redis://, rediss:// or unix://. The password is masked in logs."),
    _s("DEDUP_REDIS_KEY", "dedup:%(spider)s:seen", to_str, "redis",
       "Key of the shared seen set; `%(spider)s` is the spider name, so all processes of a spider share it."),
    _s("DEDUP_REDIS_PERSIST", True, to_bool, "redis",
       "Keep the Redis keys after the crawl (False: delete them at close)."),
    _s("DEDUP_REDIS_FLUSH_ON_START", False, to_bool, "redis",
       "Delete the Redis keys when the crawl opens (start fresh)."),
    _s("DEDUP_REDIS_TTL", None, _number(int, minimum=1, optional=True), "redis",
       "Optional expiry, in seconds, of the whole Redis key, refreshed while the crawl runs."),
    _s("DEDUP_REDIS_PARAMS", {}, to_dict, "redis",
       "Keyword arguments for the Redis client (`redis_cls` picks the class, e.g. `redis.cluster.RedisCluster`). "
       "`socket_timeout`, `socket_connect_timeout` and `retry` given here replace the ones derived from "
       "`DEDUP_REDIS_ON_ERROR` (one attempt per call, bounded by the outage budget)."),
    _s("DEDUP_REDIS_BLOOM_SHARDS", 1, _number(int, minimum=1, maximum=4096), "redis",
       "Number of Redis keys the Redis Bloom filter is split over (one hash slot each, for Redis Cluster)."),
    _s("DEDUP_REDIS_ON_ERROR", "retry", _choice("retry", "fail_open"), "redis",
       "What the Redis dupefilters do while Redis is unreachable, hung, or refuses writes (full, read-only, "
       "failing snapshots): `retry` (wait, retrying with exponential "
       "backoff for up to `DEDUP_REDIS_RETRY_SECONDS` per outage, then close the spider with reason "
       "`dedup_redis_unavailable`) or `fail_open` (treat requests as unseen, counted in "
       "`dedup/redis/fail_open`). One log line per outage; see docs/reliability.md."),
    _s("DEDUP_REDIS_RETRY_SECONDS", 60.0, _number(float, minimum=0), "redis",
       "Longest wait, in seconds, of `DEDUP_REDIS_ON_ERROR = 'retry'` for Redis to come back in one outage. "
       "Each call's socket timeouts default to a third of it (at least 1 s, at most 30 s, 10 s to connect); "
       "under `fail_open` to 1 s."),
    _s("DEDUP_REDIS_INDEX_KEY", "dedup:%(spider)s:content", to_str, "redis",
       "Key prefix of the shared content index (`DEDUP_CONTENT_BACKEND = 'redis'`)."),
    # --- content layer ---
    _s("DEDUP_CONTENT_BACKEND", "memory", _choice("memory", "redis"), "content",
       "Where the content index lives: `memory` (one process, checkpointed to JOBDIR) or `redis` (shared)."),
    _s("DEDUP_CONTENT_ACTION", "drop", _choice("drop", "tag", "log"), "content",
       "What the pipeline does with an item of a duplicate page: `drop`, `tag` (keep, add cluster and "
       "kept URL) or `log` (measure only)."),
    _s("DEDUP_TAG_FIELD", "dedup", to_str, "content",
       "Item field that `tag` mode fills with {cluster, kept_url, distance, kind}."),
    _s("DEDUP_CONTENT_FIELD", None, to_optional_str, "content",
       "Fingerprint this item field (HTML or text) instead of the response."),
    _s("DEDUP_DROP_DUPLICATE_RESPONSES", False, to_bool, "content",
       "Drop a duplicate response before the spider parses it (its links are not followed either)."),
    _s("DEDUP_MAX_BYTES", 2_000_000, _number(int, minimum=1024), "content",
       "Fingerprint at most this many bytes of a response body."),
    _s("DEDUP_SHINGLE_SIZE", 5, _number(int, minimum=1, maximum=64), "content",
       "Words per shingle of the simhash."),
    _s("DEDUP_FINGERPRINT_BITS", 64, _number(int, minimum=64, maximum=128), "content",
       "Bits of the simhash fingerprint (64 or 128)."),
    _s("DEDUP_HAMMING_THRESHOLD", 3, _number(int, minimum=0, maximum=32), "content",
       "Pages whose fingerprints differ in at most this many bits are near duplicates."),
    _s("DEDUP_BANDS", 4, _number(int, minimum=1, maximum=64), "content",
       "Blocks of the banded index; must be > DEDUP_HAMMING_THRESHOLD for guaranteed recall."),
    _s("DEDUP_SKETCH_SIZE", 256, _number(int, minimum=0, maximum=1024), "content",
       "Values of the per-page verification sketch (4 bytes each, kept apart from the index); "
       "0 turns the verification stage off (plain rule: within DEDUP_HAMMING_THRESHOLD bits)."),
    _s("DEDUP_VERIFY_RADIUS", 20, _number(int, minimum=0, maximum=63), "content",
       "Candidates up to this many simhash bits away are verified by their sketches (>= the threshold)."),
    _s("DEDUP_VERIFY_JACCARD", 0.85, _number(float, minimum=0, maximum=1, exclusive_min=True), "content",
       "A verified candidate is a near duplicate when the estimated Jaccard resemblance of the "
       "shingle sets reaches this..."),
    _s("DEDUP_VERIFY_MAX_DIFF", 10, _number(float, minimum=0), "content",
       "...or when one of the two pages has at most this many shingles of its own (an edit, an added "
       "line) and the resemblance reaches DEDUP_VERIFY_MIN_JACCARD."),
    _s("DEDUP_VERIFY_MIN_JACCARD", 0.6, _number(float, minimum=0, maximum=1), "content",
       "Resemblance floor of the DEDUP_VERIFY_MAX_DIFF clause (a short page inside a long one is not its duplicate)."),
    _s("DEDUP_MIN_WORDS", 20, _number(int, minimum=1), "content",
       "Pages with fewer words of main text are degenerate: counted apart, never deduplicated or clustered."),
    _s("DEDUP_STRIP_TAGS", DEFAULT_STRIP_TAGS, to_str_tuple, "content",
       "Elements left out of the main text (comments always are)."),
    _s("DEDUP_STRIP_SELECTORS", (), to_str_tuple, "content",
       "Extra CSS selectors left out of the main text."),
    _s("DEDUP_CONTENT_POLICIES", {}, _per_domain(_content_overrides), "content",
       "Per-domain content overrides: domain -> {strip_selectors, strip_tags, min_words, max_bytes}."),
    _s("DEDUP_AUDIT_FILE", None, to_optional_str, "report",
       "JSON Lines file: one line per duplicate found (url, kept_url, distance, kind, cluster)."),
    _s("DEDUP_LOG_FILE", None, to_optional_str, "report",
       "JSON Lines crawl log: one line per fetched page (URLs, hashes, word count), read by `mine-dust`."),
    _s("DEDUP_CANARY_SIZE", 50, _number(int, minimum=2), "report",
       "Warn when one duplicate cluster or index bucket grows past this size (boilerplate canary)."),
)

BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}

#: settings that DEDUP_CONTENT_POLICIES may override per domain
CONTENT_OVERRIDABLE: dict[str, Setting] = {
    name: BY_NAME[f"DEDUP_{name}"]
    for name in ("STRIP_TAGS", "STRIP_SELECTORS", "MIN_WORDS", "MAX_BYTES")
}


class DedupSettings(Mapping):
    """The validated ``DEDUP_*`` values, read once; attributes drop the prefix.

    ``cfg.bloom_capacity`` is ``cfg["DEDUP_BLOOM_CAPACITY"]``.
    """

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, Any]):
        object.__setattr__(self, "_values", dict(values))

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
        return f"DedupSettings({self._values!r})"

    def check_content_engine(self) -> None:
        """Cross-setting checks of the content engine (bands vs threshold, shingle vs min words)."""
        if self.fingerprint_bits not in (64, 128):
            raise DedupConfigError(f"DEDUP_FINGERPRINT_BITS must be 64 or 128, got {self.fingerprint_bits}")
        if self.bands <= self.hamming_threshold:
            raise DedupConfigError(
                f"DEDUP_BANDS ({self.bands}) must be greater than DEDUP_HAMMING_THRESHOLD "
                f"({self.hamming_threshold}): with fewer bands two fingerprints within the threshold "
                "may share no band and be missed"
            )
        if self.bands > self.fingerprint_bits:
            raise DedupConfigError(
                f"DEDUP_BANDS ({self.bands}) must not exceed DEDUP_FINGERPRINT_BITS ({self.fingerprint_bits})"
            )
        if self.sketch_size and self.verify_radius < self.hamming_threshold:
            raise DedupConfigError(
                f"DEDUP_VERIFY_RADIUS ({self.verify_radius}) must be at least DEDUP_HAMMING_THRESHOLD "
                f"({self.hamming_threshold}): verification looks at the candidates within the radius"
            )
        if self.sketch_size and self.verify_min_jaccard > self.verify_jaccard:
            raise DedupConfigError(
                f"DEDUP_VERIFY_MIN_JACCARD ({self.verify_min_jaccard}) must not exceed DEDUP_VERIFY_JACCARD "
                f"({self.verify_jaccard})"
            )
        if self.min_words < self.shingle_size:
            raise DedupConfigError(
                f"DEDUP_MIN_WORDS ({self.min_words}) must be at least DEDUP_SHINGLE_SIZE "
                f"({self.shingle_size}): a page needs one whole shingle to be fingerprinted"
            )


def read_settings(settings: Any) -> DedupSettings:
    """Validate and freeze every ``DEDUP_*`` value of ``settings`` (a Scrapy Settings or a dict).

    Raises :class:`DedupConfigError` naming the setting on the first bad value,
    and also on an unknown ``DEDUP_*`` name (a typo would otherwise be silently ignored).
    """
    values: dict[str, Any] = {}
    for setting in SETTINGS:
        raw = settings.get(setting.name, None)
        values[setting.name] = setting.convert(setting.default if raw is None else raw, setting.name)
    names = settings.keys() if hasattr(settings, "keys") else ()
    for name in names:
        if isinstance(name, str) and name.startswith("DEDUP_") and name not in BY_NAME:
            close = [s for s in BY_NAME if _similar(s, name)]
            hint = f"; did you mean {close[0]}?" if close else ""
            raise DedupConfigError(f"unknown setting {name}{hint}")
    cfg = DedupSettings(values)
    cfg.check_content_engine()
    return cfg


def _similar(a: str, b: str) -> bool:
    import difflib

    return difflib.SequenceMatcher(None, a, b).ratio() > 0.8


def markdown_table() -> str:
    """The README's settings table."""
    lines = ["| Setting | Default | Meaning |", "| --- | --- | --- |"]
    for s in SETTINGS:
        default = repr(s.default) if not isinstance(s.default, tuple) or s.default else "()"
        if isinstance(s.default, tuple) and s.default:
            default = ", ".join(s.default)
        lines.append(f"| `{s.name}` | `{default}` | {s.doc} |")
    return "\n".join(lines)


def update_readme(path: str) -> None:
    """Rewrite the table between the ``settings-table`` markers of ``path`` (a README)."""
    import re

    with open(path, encoding="utf-8") as f:
        text = f.read()
    new = re.sub(r"(<!-- settings-table:start -->\n).*?(<!-- settings-table:end -->)",
                 lambda m: m.group(1) + markdown_table() + "\n" + m.group(2), text, flags=re.S)
    with open(path, "w", encoding="utf-8") as f:
        f.write(new)


if __name__ == "__main__":  # pragma: no cover
    import sys

    # python -m scrapy_dedup.settings            -> print the table
    # python -m scrapy_dedup.settings README.md  -> rewrite the README's table in place
    if len(sys.argv) > 1:
        update_readme(sys.argv[1])
    else:
        print(markdown_table())
