"""The example site's content: a seeded, deterministic catalogue and blog.

Everything the site serves is derived from :func:`build_catalog` with a fixed
seed, so every run (and the truth file) sees the same products, posts and
texts. Only the per-fetch tokens (banner, CSRF token, "generated at" line) vary,
and they live outside the main text.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import lru_cache

SEED = 20240607

CATEGORIES = ("shoes", "boots", "sandals", "sneakers", "socks", "jackets")
PRODUCTS_PER_FAMILY = 3  # colour variants: the templated siblings
FAMILIES_PER_CATEGORY = 4
PRODUCTS_PER_PAGE = 4  # listing pagination
POSTS = 40
POSTS_PER_PAGE = 10
BLOG_TAGS = ("trail", "city", "care", "sizing", "materials", "travel", "winter", "reviews")
HELP_PAGES = ("shipping", "returns", "sizing", "payment", "contact")
DENIED_STORE_PATHS = ("/account", "/orders", "/wishlist", "/admin")
DENIED_BLOG_PATHS = ("/wp-admin/", "/drafts/")
SNAPSHOT_PRODUCTS = (2, 9, 17, 30, 41, 55)  # products with a stale price snapshot (near duplicates)
AMP_POSTS = (1, 4, 9, 15, 22, 31)  # posts with an AMP copy from an older revision (one-word edit)
COMMENTED_POSTS = 12  # posts 1..12 have two comments each, with ?replytocom= links
GCLID_POSTS = (3, 8, 13, 21, 34)  # sponsored posts linking a product with a gclid
WWW_LINKED_PRODUCTS = (1, 5, 12, 20, 27, 33, 44, 50, 61, 70)  # linked from the blog on www.shop.test
EU_SESSION_PRODUCTS = (3, 7, 14, 22, 38, 46, 58, 66)  # linked from the EU home with ?PHPSESSID=
FEATURED_PRODUCTS = (4, 10, 16, 25, 36, 47, 52, 63)  # linked from the store home with utm_* params
SESSION_CATEGORY = "boots"  # its product pages' legacy widget appends ;jsessionid=

COLOURS = ("black", "navy", "olive", "sand", "burgundy", "slate", "ochre", "teal", "charcoal", "rust", "ivory", "moss")

_ADJ = ("lightweight", "durable", "breathable", "waterproof", "cushioned", "flexible", "supportive", "rugged",
        "minimal", "classic", "versatile", "padded", "grippy", "warm", "airy", "sturdy", "soft", "stretchy")
_MATERIAL = ("full-grain leather", "recycled mesh", "merino wool", "organic cotton", "suede", "ripstop nylon",
             "natural rubber", "cork", "canvas", "Gore-Tex membrane", "EVA foam", "hemp")
_USE = ("long city walks", "muddy trails", "rainy commutes", "weekend hikes", "summer festivals", "office days",
        "winter mornings", "travel days", "gym sessions", "beach holidays", "mountain huts", "dog walks")
_PART = ("outsole", "midsole", "heel counter", "toe box", "lining", "tongue", "collar", "footbed", "upper",
         "lacing system", "cuff", "seams", "zip", "hood", "pocket")
_VERB = ("keeps", "gives", "adds", "offers", "brings", "provides", "delivers", "holds", "protects", "supports")
_BENEFIT = ("your feet dry", "extra grip on wet stone", "a snug fit around the ankle", "all-day comfort",
            "warmth without bulk", "room for thick socks", "quick drying after a shower", "a springy step",
            "stability on uneven ground", "a clean look with jeans", "protection from sharp rocks",
            "easy care at home", "ventilation on hot days", "a secure hold on descents")
_NAMES_A = ("Alder", "Birch", "Cedar", "Dune", "Ember", "Fjord", "Glen", "Harbor", "Isle", "Juniper", "Kestrel",
            "Lark", "Mesa", "Nimbus", "Orchard", "Pike", "Quarry", "Ridge", "Summit", "Tundra", "Umber", "Vale",
            "Willow", "Yarrow")
_NAMES_B = ("Runner", "Trekker", "Walker", "Strider", "Loafer", "Slide", "Court", "Hiker", "Classic", "Pro",
            "Lite", "Max")

_TOPIC = ("breaking in new boots", "caring for suede", "choosing trail shoes", "packing light for a city break",
          "keeping feet warm in winter", "the right sock for the job", "resoling versus replacing",
          "why sizing differs between brands", "waterproofing that lasts", "walking the coast path",
          "our repair workshop", "materials we stopped using", "a week of rainy commutes",
          "what a heel drop really means", "the story of our cork footbeds", "testing grip on wet stone")
_BLOG_WORDS = ("we", "found", "that", "the", "most", "important", "thing", "is", "comfort", "after", "a", "long",
               "day", "readers", "often", "ask", "about", "fit", "and", "materials", "this", "season", "our",
               "team", "walked", "tested", "compared", "several", "pairs", "in", "rain", "mud", "snow", "sun",
               "results", "surprised", "us", "because", "cheaper", "options", "sometimes", "lasted", "longer",
               "than", "expensive", "ones", "when", "cared", "for", "properly", "with", "wax", "brush", "cloth",
               "patience", "every", "step", "matters", "on", "steep", "ground", "so", "choose", "soles",
               "carefully", "then", "lace", "them", "firmly", "before", "setting", "out", "early", "morning")

CITIES = ("Lisbon", "Oslo", "Vienna", "Ghent", "Porto", "Turin", "Bergen", "Lyon", "Krakow", "Tallinn")


@dataclass(frozen=True)
class Product:
    id: int
    family: int
    category: str
    name: str
    colour: str
    price_cents: int
    sku: str
    family_text: tuple[str, ...]  # paragraphs shared by the whole family (the template)
    variant_text: tuple[str, ...]  # paragraphs only this colour variant has
    weight_g: int


@dataclass(frozen=True)
class Post:
    id: int
    slug: str
    title: str
    year: int
    tags: tuple[str, ...]
    paragraphs: tuple[str, ...]
    product_id: int
    comments: tuple[tuple[int, str, str], ...] = field(default=())  # (comment id, author, text)


@dataclass(frozen=True)
class Catalog:
    products: tuple[Product, ...]
    posts: tuple[Post, ...]
    category_intro: dict
    help_text: dict
    about_text: tuple[str, ...]
    blog_about_text: tuple[str, ...]
    sale_text: tuple[str, ...]
    blog_contact_text: tuple[str, ...]

    def product(self, product_id: int) -> Product | None:
        if 1 <= product_id <= len(self.products):
            return self.products[product_id - 1]
        return None

    def post_by_slug(self, slug: str) -> Post | None:
        for post in self.posts:
            if post.slug == slug:
                return post
        return None

    def in_category(self, category: str) -> list[Product]:
        return [p for p in self.products if p.category == category]


def _sentence(rng: random.Random) -> str:
    shape = rng.randrange(4)
    if shape == 0:
        return (f"The {rng.choice(_ADJ)} {rng.choice(_PART)} in {rng.choice(_MATERIAL)} "
                f"{rng.choice(_VERB)} {rng.choice(_BENEFIT)}.")
    if shape == 1:
        return (f"Made for {rng.choice(_USE)} and {rng.choice(_USE)}, it {rng.choice(_VERB)} "
                f"{rng.choice(_BENEFIT)} and {rng.choice(_BENEFIT)}.")
    if shape == 2:
        return (f"A {rng.choice(_ADJ)}, {rng.choice(_ADJ)} {rng.choice(_PART)} {rng.choice(_VERB)} "
                f"{rng.choice(_BENEFIT)}, even on {rng.choice(_USE)}.")
    return (f"We chose {rng.choice(_MATERIAL)} for the {rng.choice(_PART)} because it {rng.choice(_VERB)} "
            f"{rng.choice(_BENEFIT)} season after season.")


def _paragraph(rng: random.Random, sentences: int) -> str:
    return " ".join(_sentence(rng) for _ in range(sentences))


def _blog_paragraph(rng: random.Random, words: int) -> str:
    out = []
    while len(out) < words:
        n = rng.randint(8, 16)
        chunk = [rng.choice(_BLOG_WORDS) for _ in range(n)]
        chunk[0] = chunk[0].capitalize()
        out.extend(chunk[:-1] + [chunk[-1] + "."])
    return " ".join(out)


@lru_cache(maxsize=4)
def build_catalog(seed: int = SEED) -> Catalog:
    """The whole site's content, derived from ``seed`` only."""
    rng = random.Random(seed)
    products: list[Product] = []
    names = [f"{a} {b}" for a in _NAMES_A for b in _NAMES_B]
    rng.shuffle(names)
    family = 0
    for category in CATEGORIES:
        for _ in range(FAMILIES_PER_CATEGORY):
            family += 1
            name = names[family]
            family_text = tuple(_paragraph(rng, rng.randint(4, 6)) for _ in range(3))
            base_price = rng.randrange(39, 240) * 100 + rng.choice((0, 50, 99))
            colours = rng.sample(COLOURS, PRODUCTS_PER_FAMILY)
            for colour in colours:
                pid = len(products) + 1
                variant_rng = random.Random(seed * 1000 + pid)
                variant_text = (
                    f"This {colour} edition of the {name} is finished by hand. "
                    + _paragraph(variant_rng, 3),
                    f"Colour notes: {colour} {rng.choice(_MATERIAL)} that {rng.choice(_VERB)} "
                    f"{rng.choice(_BENEFIT)}; pair it with {rng.choice(COLOURS)} laces for "
                    f"{rng.choice(_USE)}.",
                )
                products.append(Product(
                    id=pid, family=family, category=category, name=f"{name} {colour.capitalize()}",
                    colour=colour, price_cents=base_price + rng.choice((0, 0, 500, 1000)),
                    sku=f"{category[:2].upper()}-{family:03d}-{colour[:3].upper()}",
                    family_text=family_text, variant_text=variant_text,
                    weight_g=rng.randrange(180, 1400, 10),
                ))
    posts: list[Post] = []
    used_slugs: set[str] = set()
    for i in range(1, POSTS + 1):
        topic = _TOPIC[(i - 1) % len(_TOPIC)]
        title = topic[0].upper() + topic[1:] + ("" if i <= len(_TOPIC) else f", part {1 + (i - 1) // len(_TOPIC)}")
        slug = "-".join(title.lower().replace(",", "").split())
        assert slug not in used_slugs
        used_slugs.add(slug)
        paragraphs = tuple(_blog_paragraph(rng, rng.randint(70, 110)) for _ in range(rng.randint(4, 6)))
        comments: tuple = ()
        if i <= COMMENTED_POSTS:
            comments = tuple(
                (1000 + i * 10 + k, rng.choice(("Ana", "Ben", "Chloe", "Dev", "Eva", "Finn")),
                 _blog_paragraph(rng, rng.randint(12, 25)))
                for k in range(2)
            )
        posts.append(Post(
            id=i, slug=slug, title=title, year=2024 if i <= 22 else 2025,
            tags=tuple(sorted(rng.sample(BLOG_TAGS, 2))), paragraphs=paragraphs,
            product_id=rng.randrange(1, len(products) + 1), comments=comments,
        ))
    category_intro = {c: _paragraph(rng, 4) for c in CATEGORIES}
    help_text = {h: tuple(_blog_paragraph(rng, rng.randint(60, 90)) for _ in range(3)) for h in HELP_PAGES}
    about_text = tuple(_blog_paragraph(rng, 80) for _ in range(3))
    blog_about_text = tuple(_blog_paragraph(rng, 80) for _ in range(3))
    sale_text = tuple(_paragraph(rng, 5) for _ in range(2))
    blog_contact_text = tuple(_blog_paragraph(rng, 70) for _ in range(2))
    return Catalog(tuple(products), tuple(posts), category_intro, help_text, about_text, blog_about_text,
                   sale_text, blog_contact_text)


def price(cents: int) -> str:
    return f"\u20ac{cents // 100}.{cents % 100:02d}"


def session_token(kind: str, *parts: object) -> str:
    """A deterministic session id for a link, in the shape real servers use.

    ``jsessionid``: 32 upper-case hex digits (Tomcat); ``phpsessid``: 26 characters of
    ``[0-9a-v]`` (PHP's default, 5 bits per character). Derived from the linking page, so
    the crawl space stays finite and the truth file can list every URL.
    """
    import hashlib

    digest = hashlib.sha256(("|".join(map(str, (kind, *parts)))).encode()).digest()
    if kind == "jsessionid":
        return digest[:16].hex().upper()
    alphabet = "0123456789abcdefghijklmnopqrstuv"
    number = int.from_bytes(digest[:17], "big")
    return "".join(alphabet[(number >> (5 * i)) & 31] for i in range(26))


def click_id(*parts: object) -> str:
    """A deterministic Google Ads click id (gclid) shape: 40 URL-safe characters."""
    import base64
    import hashlib

    digest = hashlib.sha256(("|".join(map(str, ("gclid", *parts)))).encode()).digest()
    return base64.urlsafe_b64encode(digest).decode()[:40].replace("-", "A").replace("_", "B")
