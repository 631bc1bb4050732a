"""Seeded generator of realistic article pages for the content-engine tests (no fixtures on disk).

Articles draw words from an English vocabulary with a Zipf-like skew (frequent
function words, a long tail of content words, numbers and prices), in sentences
and paragraphs, wrapped in a site template with the usual chrome: a banner in
``<header>``, ``<nav>``, a CSRF token in a ``<form>``, scripts and a ``<footer>``.
"""
from __future__ import annotations

import random

COMMON = (
    "the of and to a in is it you that he was for on are with as his they be at one have this from or had "
    "by not word but what some we can out other were all there when up use your how said an each she which "
    "do their time if will way about many then them write would like so these her long make thing see him "
    "two has look more day could go come did number sound no most people my over know water than call first "
    "who may down side been now find any new work part take get place made live where after back little only "
    "round man year came show every good me give our under name very through just form sentence great think "
    "say help low line differ turn cause much mean before move right boy old too same tell does set three "
    "want air well also play small end put home read hand port large spell add even land here must big high "
    "such follow act why ask men change went light kind off need house picture try us again animal point "
    "mother world near build self earth father head stand own page should country found answer school grow "
    "study still learn plant cover food sun four between state keep eye never last let thought city tree "
    "cross farm hard start might story saw far sea draw left late run while press close night real life few"
).split()
SYLLABLES = ("ka", "lo", "mi", "ren", "sta", "vo", "qui", "der", "pan", "tor", "el", "is", "um", "ber", "nox",
             "tri", "gal", "ser", "phi", "dun", "wex", "yor", "zin", "ap", "cul")


def vocabulary(seed: int = 7, size: int = 4000) -> list[str]:
    """Common English words followed by a tail of made-up content words."""
    rng = random.Random(seed)
    tail = set()
    while len(tail) < size:
        tail.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    return list(COMMON) + sorted(tail)


VOCABULARY = vocabulary()


def article_words(rng: random.Random, n: int) -> list[str]:
    """``n`` words, Zipf-ish over the vocabulary, with the odd number or price."""
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.02:
            out.append(str(rng.randint(1, 2030)))
        elif r < 0.03:
            out.append(f"${rng.randint(1, 999)}.{rng.randint(0, 99):02d}")
        else:
            index = min(int(rng.paretovariate(0.9)) - 1, len(VOCABULARY) - 1)
            out.append(VOCABULARY[index] if rng.random() < 0.6 else rng.choice(VOCABULARY))
    return out


def paragraphs(words: list[str], rng: random.Random) -> list[str]:
    paras, i = [], 0
    while i < len(words):
        size = rng.randint(40, 120)
        chunk = words[i : i + size]
        paras.append(" ".join(chunk).capitalize() + ".")
        i += size
    return paras


def page(
    main: list[str],
    *,
    title: str = "Article",
    banner: str = "Spring sale: 20% off everything",
    csrf: str = "a1b2c3d4",
    footer: str = "Copyright 2024 Example Corp. All rights reserved.",
    generated: str = "2024-05-01 10:00",
    seed: int = 0,
) -> str:
    """An HTML page around ``main`` (the main-text words) with the usual chrome."""
    rng = random.Random(seed)
    body = "\n".join(f"<p>{p}</p>" for p in paragraphs(main, rng))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body {{ font-family: sans-serif }}</style>
<script>window.csrf = "{csrf}"; var generated = "{generated}";</script></head>
<body>
<header><div class="banner">{banner}</div><a href="/">Home</a></header>
<nav><ul><li><a href="/a">Products</a></li><li><a href="/b">About us</a></li><li><a href="/c">Contact</a></li></ul></nav>
<form action="/search"><input type="hidden" name="csrf" value="{csrf}"><input name="q"> Search</form>
<main><h1>{title}</h1>
{body}
</main>
<aside>Related: {" ".join(rng.choice(VOCABULARY) for _ in range(8))}</aside>
<footer>{footer} <span>Page generated at {generated}</span></footer>
<!-- served by node {csrf} -->
</body></html>"""


def edit_words(words: list[str], rng: random.Random, count: int) -> list[str]:
    """``words`` with ``count`` of them replaced by a word not in the vocabulary."""
    edited = list(words)
    for position in rng.sample(range(len(words)), count):
        edited[position] = f"edited{rng.randint(0, 10**6)}"
    return edited
