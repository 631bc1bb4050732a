"""Page chrome of the example site: stylesheets, scripts, header, nav, aside, footer.

The chrome is what makes the pages realistic (20-60 KB, mostly boilerplate)
and what a duplicate detector must look past: it is the same on every page of a
host, except the rotated banner, the CSRF token and the "generated at" line,
which change on every fetch.
"""
from __future__ import annotations

import random
from functools import lru_cache
from html import escape

BANNERS = (
    "Free shipping on orders over \u20ac60 this week",
    "New autumn colours just landed",
    "Members get 10% off their first order",
    "Repair service: bring your old boots back to life",
    "Student discount: show your card at checkout",
)


@lru_cache(maxsize=8)
def stylesheet(seed: int, rules: int) -> str:
    """A deterministic, realistic-looking CSS file of ``rules`` rules."""
    rng = random.Random(seed)
    blocks = ("header", "nav", "card", "grid", "price", "button", "footer", "aside", "banner", "form", "table",
              "badge", "hero", "menu", "breadcrumb", "pager", "modal", "toast", "rating", "gallery")
    elems = ("title", "body", "icon", "link", "item", "label", "image", "caption", "meta", "inner", "wrap")
    mods = ("active", "disabled", "large", "small", "dark", "light", "muted", "primary", "secondary", "sale")
    props = (
        lambda: f"color:#{rng.randrange(0x1000000):06x}",
        lambda: f"background-color:#{rng.randrange(0x1000000):06x}",
        lambda: f"margin:{rng.randrange(0, 40)}px {rng.randrange(0, 40)}px",
        lambda: f"padding:{rng.randrange(0, 24)}px",
        lambda: f"font-size:{rng.randrange(10, 32)}px",
        lambda: f"line-height:{rng.choice(('1.2', '1.4', '1.5', '1.6', 'normal'))}",
        lambda: f"border:{rng.randrange(0, 3)}px solid #{rng.randrange(0x1000000):06x}",
        lambda: f"display:{rng.choice(('block', 'flex', 'grid', 'inline-block', 'none'))}",
        lambda: f"border-radius:{rng.randrange(0, 12)}px",
        lambda: f"transition:all {rng.randrange(1, 9) / 10}s ease-in-out",
    )
    out = []
    for _ in range(rules):
        selector = f".{rng.choice(blocks)}__{rng.choice(elems)}"
        if rng.random() < 0.5:
            selector += f"--{rng.choice(mods)}"
        body = ";".join(rng.choice(props)() for _ in range(rng.randint(2, 5)))
        out.append(f"{selector}{{{body}}}")
        if rng.random() < 0.08:
            out.append(f"@media (max-width:{rng.choice((480, 640, 768, 1024))}px){{{selector}{{{body}}}}}")
    return "\n".join(out)


@lru_cache(maxsize=8)
def script(seed: int, functions: int) -> str:
    """A deterministic, realistic-looking JavaScript bundle."""
    rng = random.Random(seed)
    verbs = ("init", "track", "load", "render", "toggle", "update", "fetch", "bind", "open", "close")
    nouns = ("Cart", "Menu", "Carousel", "Banner", "Consent", "Search", "Gallery", "Rating", "Wishlist", "Tabs")
    out = ["(function(w,d){'use strict';var q=w.__q=w.__q||[];"]
    for i in range(functions):
        name = f"{rng.choice(verbs)}{rng.choice(nouns)}{i}"
        out.append(
            f"function {name}(el,opts){{opts=opts||{{}};var n=d.querySelectorAll('.{rng.choice(nouns).lower()}__item');"
            f"for(var i=0;i<n.length;i++){{n[i].addEventListener('click',function(e){{q.push(['{name}',"
            f"e.target.dataset.id,{rng.randrange(1000)}]);}});}}return n.length>{rng.randrange(10)};}}"
        )
    out.append("w.addEventListener('load',function(){for(var k in w){if(/^init/.test(k))w[k]();}});"
               "})(window,document);")
    return "\n".join(out)


def head(title: str, csrf: str, canonical: str, css: str, extra: str = "") -> str:
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{escape(title)}</title>"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<meta name=\"csrf-token\" content=\"{csrf}\">"
        f"<link rel=\"canonical\" href=\"{escape(canonical)}\">"
        f"{extra}<style>\n{css}\n</style></head>\n"
    )


def generated_at(stamp: str, node: int, millis: int) -> str:
    """A per-fetch line outside the stripped tags; the demo strips it with DEDUP_STRIP_SELECTORS."""
    return f"<p class=\"generated-at\">Page generated at {stamp} by web node {node} in {millis} ms.</p>\n"


def links(items: list[tuple[str, str]], css_class: str = "") -> str:
    cls = f" class=\"{css_class}\"" if css_class else ""
    return "<ul{}>{}</ul>".format(cls, "".join(f"<li><a href=\"{escape(h)}\">{escape(t)}</a></li>" for h, t in items))
