"""Settings of an offline audit: a ``--config`` file, overridden by command-line flags.

The file is YAML (``.yaml``/``.yml``, the usual ``dupcheck.yaml``), JSON
(``.json``) or TOML (``.toml``, Python 3.11+); a flat mapping of the keys of
:data:`KEYS`. Unknown keys and bad values are refused at start-up with a
message naming the key (a typo must not silently fall back to a default), and
so are combinations that would break the engine's guarantees, most of all
``bands <= hamming_threshold`` (two pages within the threshold could then share
no band and be missed) unless ``allow_approximate: true`` says that recall may
be probabilistic.

Defaults are the crawl's defaults (:mod:`scrapy_dedup.settings`), so an
offline audit and a crawl with default settings find the same duplicates.
"""
from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Callable, Optional

from scrapy_dedup.content.params import BY_KEY, ENGINE_PARAMS, ParamError, check_engine, raising

__all__ = ["AuditConfig", "AuditConfigError", "KEYS", "load_config_file", "build_config"]


class AuditConfigError(ParamError):
    """A bad config file, key, value or combination; the message names the key."""


def _default(key: str) -> Any:
    return BY_KEY[key].default


@dataclass(frozen=True)
class AuditConfig:
    """Every knob of ``scrapy-dedup report``; ``None`` for the minhash ones means "datasketch's choice"."""

    method: str = "simhash"
    shingle_size: int = _default("shingle_size")
    fingerprint_bits: int = _default("fingerprint_bits")
    hamming_threshold: int = _default("hamming_threshold")
    bands: int = _default("bands")
    allow_approximate: bool = False
    min_words: int = _default("min_words")
    sketch_size: int = _default("sketch_size")
    verify_radius: int = _default("verify_radius")
    verify_jaccard: float = _default("verify_jaccard")
    verify_max_diff: float = _default("verify_max_diff")
    verify_min_jaccard: float = _default("verify_min_jaccard")
    strip_tags: tuple = _default("strip_tags")
    strip_selectors: tuple = _default("strip_selectors")
    max_bytes: int = _default("max_bytes")
    boilerplate: bool = _default("boilerplate")
    boilerplate_min_pages: int = _default("boilerplate_min_pages")
    boilerplate_warmup_pages: int = _default("boilerplate_warmup_pages")
    boilerplate_capacity: int = _default("boilerplate_capacity")
    paragraphs: bool = _default("paragraphs")
    paragraphs_min_chars: int = _default("paragraphs_min_chars")
    #: the blocks' seen set in a Bloom filter (less memory, false positives at most 1e-6) instead of an exact set
    paragraphs_bloom: bool = False
    url_field: str = "url"
    html_field: str = "html"
    text_field: str = "text"
    num_perm: int = 128
    jaccard_threshold: float = 0.8
    lsh_bands: Optional[int] = None
    lsh_rows: Optional[int] = None
    lshbloom_bands: int = 32
    lshbloom_rows: int = 8
    lshbloom_error_rate: float = 1e-4
    lshbloom_memory_mb: int = 1024
    sample: int = 25
    seed: int = 0
    representative: str = "canonical"
    timestamp_field: Optional[str] = None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["strip_tags"] = list(self.strip_tags)
        d["strip_selectors"] = list(self.strip_selectors)
        return d


#: config key -> (type check/convert, help)
def _int(minimum: int, maximum: Optional[int] = None) -> Callable[[Any, str], int]:
    def convert(value: Any, key: str) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise AuditConfigError(f"{key} must be an integer, got {value!r}")
        try:
            number = int(value)
        except ValueError:
            raise AuditConfigError(f"{key} must be an integer, got {value!r}") from None
        if number < minimum or (maximum is not None and number > maximum):
            bound = f"between {minimum} and {maximum}" if maximum is not None else f"at least {minimum}"
            raise AuditConfigError(f"{key} must be {bound}, got {number}")
        return number
    return convert


def _optional_int(minimum: int) -> Callable[[Any, str], Optional[int]]:
    inner = _int(minimum)

    def convert(value: Any, key: str) -> Optional[int]:
        return None if value is None else inner(value, key)
    return convert


def _float01(value: Any, key: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise AuditConfigError(f"{key} must be a number, got {value!r}") from None
    if not 0.0 < number <= 1.0:
        raise AuditConfigError(f"{key} must be in (0, 1], got {number}")
    return number


def _bool(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "1", "on", "false", "no", "0", "off"):
        return value.strip().lower() in ("true", "yes", "1", "on")
    raise AuditConfigError(f"{key} must be true or false, got {value!r}")


def _str(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value:
        raise AuditConfigError(f"{key} must be a non-empty string, got {value!r}")
    return value


METHODS = ("simhash", "minhash", "lshbloom")
REPRESENTATIVES = ("first", "canonical", "newest")


def _representative(value: Any, key: str) -> str:
    if value not in REPRESENTATIVES:
        raise AuditConfigError(f"{key} must be one of {', '.join(map(repr, REPRESENTATIVES))}, got {value!r}")
    return value


def _optional_str(value: Any, key: str) -> Optional[str]:
    return None if value is None else _str(value, key)


def _method(value: Any, key: str) -> str:
    if value not in METHODS:
        raise AuditConfigError(f"{key} must be one of {', '.join(map(repr, METHODS))}, got {value!r}")
    return value


def _rate(value: Any, key: str) -> float:
    number = _float01(value, key)
    if number >= 0.1:
        raise AuditConfigError(f"{key} must be below 0.1 (a share of new pages wrongly flagged), got {number}")
    return number


KEYS = {
    "method": _method,
    # the engine's parameters: the crawl's DEDUP_* settings are built from the same definitions
    **{p.key: raising(p.convert, AuditConfigError) for p in ENGINE_PARAMS},
    "allow_approximate": _bool,
    "paragraphs_bloom": _bool,
    "url_field": _str,
    "html_field": _str,
    "text_field": _str,
    "num_perm": _int(16, 1024),
    "jaccard_threshold": _float01,
    "lsh_bands": _optional_int(1),
    "lsh_rows": _optional_int(1),
    "lshbloom_bands": _int(1, 256),
    "lshbloom_rows": _int(1, 64),
    "lshbloom_error_rate": _rate,
    "lshbloom_memory_mb": _int(1),
    "sample": _int(0),
    "seed": _int(0),
    "representative": _representative,
    "timestamp_field": _optional_str,
}
assert set(KEYS) == {f.name for f in fields(AuditConfig)}


def load_config_file(path: str) -> dict:
    """Read a config file into a flat dict (not yet validated). Format from the file name's suffix."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise AuditConfigError(f"cannot read config file {path!r}: {exc.strerror or exc}") from None
    suffix = p.suffix.lower()
    try:
        if suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(raw.decode("utf-8"))
        elif suffix == ".toml":
            try:
                import tomllib
            except ImportError:  # pragma: no cover - Python < 3.11
                raise AuditConfigError("TOML config files need Python 3.11+; use YAML or JSON") from None
            data = tomllib.loads(raw.decode("utf-8"))
        elif suffix == ".json":
            data = json.loads(raw.decode("utf-8"))
        else:
            raise AuditConfigError(f"config file {path!r}: unknown format (use .yaml, .yml, .json or .toml)")
    except AuditConfigError:
        raise
    except Exception as exc:  # yaml.YAMLError, json/toml decode errors, UnicodeDecodeError
        raise AuditConfigError(f"config file {path!r} is not valid: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise AuditConfigError(f"config file {path!r} must hold a mapping of keys to values")
    return dict(data)


def build_config(file_values: Mapping[str, Any] | None = None,
                 overrides: Mapping[str, Any] | None = None) -> AuditConfig:
    """Validate file values, apply flag ``overrides`` (``None`` values mean "flag not given"), check combinations."""
    values: dict[str, Any] = {}
    for source in (file_values or {}, {k: v for k, v in (overrides or {}).items() if v is not None}):
        for key, value in source.items():
            norm = str(key).strip().lower().replace("-", "_")
            if norm not in KEYS:
                close = difflib.get_close_matches(norm, list(KEYS), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise AuditConfigError(f"unknown config key {key!r}{hint}")
            values[norm] = KEYS[norm](value, norm)
    cfg = replace(AuditConfig(), **values)
    check(cfg)
    return cfg


def check(cfg: AuditConfig) -> None:
    """Cross-key checks: the same rules as the crawl settings (``check_content_engine``)."""
    try:
        check_engine({p.key: getattr(cfg, p.key) for p in ENGINE_PARAMS},
                     approximate_ok=cfg.allow_approximate or cfg.method != "simhash",
                     approximate_hint=(". Raise bands, lower the threshold, or set allow_approximate: true to "
                                       "accept probabilistic recall"))
    except ParamError as exc:
        raise AuditConfigError(str(exc)) from None
    if (cfg.lsh_bands is None) != (cfg.lsh_rows is None):
        raise AuditConfigError("lsh_bands and lsh_rows go together: give both or neither")
    if cfg.lsh_bands is not None and cfg.lsh_bands * cfg.lsh_rows > cfg.num_perm:  # type: ignore[operator]
        raise AuditConfigError(
            f"lsh_bands * lsh_rows ({cfg.lsh_bands} * {cfg.lsh_rows}) must not exceed num_perm ({cfg.num_perm})")
    if cfg.lshbloom_bands * cfg.lshbloom_rows > 4096:
        raise AuditConfigError(f"lshbloom_bands * lshbloom_rows ({cfg.lshbloom_bands} * {cfg.lshbloom_rows}) "
                               "must not exceed 4096")
