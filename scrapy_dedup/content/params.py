"""The content engine's parameters, defined once: default, converter with its bounds, doc, cross-checks.

Both configuration surfaces are built from :data:`ENGINE_PARAMS`: the crawl's
``DEDUP_*`` settings (:mod:`scrapy_dedup.settings`, ``DEDUP_<KEY>``) and the
offline audit's config keys (:mod:`scrapy_dedup.audit.config`, ``<key>``), so a
value one accepts the other accepts, and the audit with default settings finds
what a crawl with default settings finds. :func:`check_engine` holds the
cross-parameter rules both apply (the banded index's recall guarantee, the
verification radius, the shingle inside a page).

Converters take ``(value, name)`` and raise :class:`ParamError` naming ``name``;
each surface re-raises it as its own configuration error. No Scrapy imports.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ParamError", "EngineParam", "ENGINE_PARAMS", "DEFAULT_STRIP_TAGS", "check_engine", "raising"]

#: elements left out of a page's main text by default
DEFAULT_STRIP_TAGS = ("nav", "footer", "header", "aside", "script", "style", "form", "noscript", "template")


class ParamError(ValueError):
    """A parameter value or combination the engine cannot work with; the message names the parameter."""


Converter = Callable[[Any, str], Any]


def number(kind: type, *, minimum: float | None = None, maximum: float | None = None,
           exclusive_min: bool = False, optional: bool = False) -> Converter:
    """A converter to ``int`` or ``float`` within bounds (strings from a command line accepted)."""
    def convert(value: Any, name: str) -> Any:
        if value is None or (isinstance(value, str) and value.strip() == ""):
            if optional:
                return None
            raise ParamError(f"{name} must be set to a number, got {value!r}")
        if isinstance(value, bool):
            raise ParamError(f"{name} must be a number, got {value!r}")
        try:
            result = kind(value)
        except (TypeError, ValueError, OverflowError):  # OverflowError: int(float("inf"))
            raise ParamError(f"{name} must be {'an integer' if kind is int else 'a number'}, got {value!r}") from None
        if kind is int and isinstance(value, float) and value != result:
            raise ParamError(f"{name} must be an integer, got {value!r}")
        if isinstance(result, float) and not math.isfinite(result):
            raise ParamError(f"{name} must be a finite number, got {value!r}")
        if minimum is not None and (result <= minimum if exclusive_min else result < minimum):
            raise ParamError(f"{name} must be {'>' if exclusive_min else '>='} {minimum}, got {value!r}")
        if maximum is not None and result > maximum:
            raise ParamError(f"{name} must be <= {maximum}, got {value!r}")
        return result

    return convert


def boolean(value: Any, name: str) -> bool:
    """True or False (1/0, and from a command line "true"/"false", "yes"/"no", "on"/"off")."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        return value.strip().lower() in ("1", "true", "yes", "on")
    raise ParamError(f"{name} must be True or False, got {value!r}")


def raising(convert: Converter, error: type[ParamError]) -> Converter:
    """``convert``, raising ``error`` (a configuration surface's own ParamError subclass) with the same message."""
    def wrapped(value: Any, name: str) -> Any:
        try:
            return convert(value, name)
        except error:
            raise
        except ParamError as exc:
            raise error(str(exc)) from None

    return wrapped


def str_tuple(value: Any, name: str) -> tuple[str, ...]:
    """A list of strings (or one comma-separated string) as a tuple."""
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple, set, frozenset)) or not all(isinstance(v, str) for v in value):
        raise ParamError(f"{name} must be a list of strings, got {value!r}")
    return tuple(v.strip() for v in value if v.strip())


def css_selectors(value: Any, name: str) -> tuple[str, ...]:
    """A list of CSS selectors (as :func:`str_tuple`), each one checked now: a bad one is a configuration
    error at start-up, not an extraction error on every page."""
    from cssselect import HTMLTranslator, SelectorError

    selectors = str_tuple(value, name)
    translator = HTMLTranslator()
    for selector in selectors:
        try:
            translator.css_to_xpath(selector)
        except SelectorError as exc:
            raise ParamError(f"{name}: invalid CSS selector {selector!r} ({exc})") from None
    return selectors


@dataclass(frozen=True)
class EngineParam:
    """One parameter: ``key`` (``shingle_size``; the crawl setting is ``DEDUP_SHINGLE_SIZE``)."""

    key: str
    default: Any
    convert: Converter
    doc: str


def _p(key: str, default: Any, convert: Converter, doc: str) -> EngineParam:
    return EngineParam(key, default, convert, " ".join(doc.split()))


ENGINE_PARAMS: tuple[EngineParam, ...] = (
    _p("max_bytes", 2_000_000, number(int, minimum=1024),
       "Fingerprint at most this many bytes of a response body."),
    _p("shingle_size", 5, number(int, minimum=1, maximum=64),
       "Words per shingle of the simhash."),
    _p("fingerprint_bits", 64, number(int, minimum=64, maximum=128),
       "Bits of the simhash fingerprint (64 or 128)."),
    _p("hamming_threshold", 3, number(int, minimum=0, maximum=32),
       "Pages whose fingerprints differ in at most this many bits are near duplicates."),
    _p("bands", 4, number(int, minimum=1, maximum=64),
       "Blocks of the banded index; must be > DEDUP_HAMMING_THRESHOLD for guaranteed recall."),
    _p("sketch_size", 256, number(int, minimum=0, maximum=1024),
       "Values of the per-page verification sketch (4 bytes each, kept apart from the index); "
       "0 turns the verification stage off (plain rule: within DEDUP_HAMMING_THRESHOLD bits)."),
    _p("verify_radius", 20, number(int, minimum=0, maximum=63),
       "Candidates up to this many simhash bits away are verified by their sketches (>= the threshold)."),
    _p("verify_jaccard", 0.85, number(float, minimum=0, maximum=1, exclusive_min=True),
       "A verified candidate is a near duplicate when the estimated Jaccard resemblance of the "
       "shingle sets reaches this..."),
    _p("verify_max_diff", 10, number(float, minimum=0),
       "...or when one of the two pages has at most this many shingles of its own (an edit, an added "
       "line) and the resemblance reaches DEDUP_VERIFY_MIN_JACCARD."),
    _p("verify_min_jaccard", 0.6, number(float, minimum=0, maximum=1),
       "Resemblance floor of the DEDUP_VERIFY_MAX_DIFF clause (a short page inside a long one is not its duplicate)."),
    _p("min_words", 20, number(int, minimum=1),
       "Pages with fewer words of main text are degenerate: counted apart, never deduplicated or clustered."),
    _p("strip_tags", DEFAULT_STRIP_TAGS, str_tuple,
       "Elements left out of the main text (comments always are)."),
    _p("strip_selectors", (), css_selectors,
       "Extra CSS selectors left out of the main text."),
    _p("boilerplate", True, boolean,
       "Learn each host's boilerplate: blocks (paragraphs, list items, cells, lines) that recur on "
       "DEDUP_BOILERPLATE_MIN_PAGES distinct unique pages of a host leave its pages' fingerprints "
       "(content/boilerplate.py; per host in DEDUP_CONTENT_POLICIES as `boilerplate`)."),
    _p("boilerplate_min_pages", 4, number(int, minimum=2),
       "A block on at least this many distinct unique pages of its host is boilerplate."),
    _p("boilerplate_warmup_pages", 10, number(int, minimum=0),
       "A host's pages are fingerprinted on their whole text until this many of its unique pages are counted."),
    _p("boilerplate_capacity", 4096, number(int, minimum=64, maximum=1_000_000),
       "Blocks counted per host (16 bytes each; a quarter of it, 8 bytes each, can be boilerplate)."),
    _p("paragraphs", False, boolean,
       "Paragraph-level exact dedup (content/paragraphs.py): each block of a page's main text already seen "
       "on an earlier page (or earlier in the page) is a repeat; counted per host in `dedup/paragraphs/*`, "
       "removed from `DEDUP_PARAGRAPHS_FIELD`. Never changes a page's verdict (per host in "
       "DEDUP_CONTENT_POLICIES as `paragraphs`)."),
    _p("paragraphs_min_chars", 40, number(int, minimum=1),
       "Blocks shorter than this many characters once normalized (\"Home\", \"Next\") are not "
       "deduplicated: kept in the text, counted apart."),
)

BY_KEY: dict[str, EngineParam] = {p.key: p for p in ENGINE_PARAMS}


def check_engine(values: Mapping[str, Any], name: Callable[[str], str] = str, *,
                 approximate_ok: bool = False, approximate_hint: str = "") -> None:
    """The cross-parameter rules; ``values`` maps keys to converted values, ``name`` spells a key for messages.

    ``approximate_ok`` lifts the banded index's recall rule (``bands >
    hamming_threshold``) for a caller that asked for probabilistic recall.
    """
    v = values
    if v["fingerprint_bits"] not in (64, 128):
        raise ParamError(f"{name('fingerprint_bits')} must be 64 or 128, got {v['fingerprint_bits']}")
    if v["bands"] <= v["hamming_threshold"] and not approximate_ok:
        raise ParamError(
            f"{name('bands')} ({v['bands']}) must be greater than {name('hamming_threshold')} "
            f"({v['hamming_threshold']}): with fewer bands two fingerprints within the threshold may share "
            f"no band and be missed{approximate_hint}")
    if v["bands"] > v["fingerprint_bits"]:
        raise ParamError(f"{name('bands')} ({v['bands']}) must not exceed {name('fingerprint_bits')} "
                         f"({v['fingerprint_bits']})")
    if v["sketch_size"] and v["verify_radius"] < v["hamming_threshold"]:
        raise ParamError(
            f"{name('verify_radius')} ({v['verify_radius']}) must be at least {name('hamming_threshold')} "
            f"({v['hamming_threshold']}): verification looks at the candidates within the radius")
    if v["sketch_size"] and v["verify_min_jaccard"] > v["verify_jaccard"]:
        raise ParamError(f"{name('verify_min_jaccard')} ({v['verify_min_jaccard']}) must not exceed "
                         f"{name('verify_jaccard')} ({v['verify_jaccard']})")
    if v["min_words"] < v["shingle_size"]:
        raise ParamError(
            f"{name('min_words')} ({v['min_words']}) must be at least {name('shingle_size')} "
            f"({v['shingle_size']}): a page needs one whole shingle to be fingerprinted")
