"""The example site as a router: ``(host, target) -> Response``, with the truth of each page.

Four hosts, one application, dispatched on the Host header:

- ``shop.test``: the store (home, category listings with pagination, product pages,
  print views, query-string mirrors ``/product?id=N``, stale price snapshots, help
  pages linked with and without a trailing slash, a sitemap, "Access denied" pages).
- ``www.shop.test``: the same store under ``www.`` (its links point back to ``shop.test``).
- ``eu.shop.test``: the regional mirror: the same product and listing text, its own home.
- ``blog.test``: a blog (paginated index, posts, tags, yearly archives, AMP copies,
  WordPress-style ``?replytocom=`` mirrors) linking into the store with tracking parameters.

:meth:`DemoSite.resolve` tells, for any URL, which content it serves and how the URL
relates to the content's canonical URL; the truth file (:mod:`demosite.truth`) is built
from it by walking the links. :meth:`DemoSite.handle` renders the page, with per-fetch
tokens (banner, CSRF token, "generated at" line) when ``dynamic`` is on.
"""
from __future__ import annotations

import itertools
import re
import secrets
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from html import escape
from typing import Callable
from urllib.parse import parse_qsl, urlencode

from . import catalog as cat
from . import chrome

STORE = "shop.test"
WWW = "www.shop.test"
EU = "eu.shop.test"
BLOG = "blog.test"
HOSTS = (STORE, WWW, EU, BLOG)
START_HOSTS = (STORE, EU, BLOG)  # www.shop.test is reached through links from the blog

TRACKING_PARAM = re.compile(r"^(utm_[a-z]+|gclid)$")
JSESSIONID = re.compile(r";jsessionid=([0-9A-F]{32})$")
PHPSESSID = re.compile(r"^[0-9a-v]{26}$")
SNAPSHOT = "2024-01"


@dataclass(frozen=True)
class PageInfo:
    """What a URL serves, for the truth file.

    ``content``: the content id; two URLs with the same id serve the same main text.
    ``variants``: how this URL differs from the content's canonical URL (``print``,
    ``query_id``, ``tracking``, ``session``, ``region``, ``www``, ``slash``, ``replytocom``,
    ``page1``); empty for the canonical URL. ``near_of`` / ``edit``: this content is the
    content ``near_of`` with a small edit (``price`` or ``one-word``). ``degenerate``: an
    "Access denied" page with almost no main text.
    """

    content: str
    kind: str
    variants: tuple[str, ...] = ()
    near_of: str | None = None
    edit: str | None = None
    degenerate: bool = False


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class _Fetch:
    """Per-fetch tokens."""

    csrf: str
    banner: str
    stamp: str
    node: int
    millis: int


Renderer = Callable[[_Fetch], str]


class DemoSite:
    """The whole site. ``port`` is the one the server listens on (80: no port in URLs)."""

    def __init__(self, port: int = 80, *, seed: int = cat.SEED, dynamic: bool = True):
        self.port = port
        self.seed = seed
        self.dynamic = dynamic
        self.catalog = cat.build_catalog(seed)
        self._counter = itertools.count()
        self.store_css = chrome.stylesheet(seed, 200)
        self.store_js = chrome.script(seed, 22)
        self.print_css = chrome.stylesheet(seed + 1, 300)
        self.blog_css = chrome.stylesheet(seed + 2, 200)
        self.blog_js = chrome.script(seed + 2, 24)

    # --- URLs -----------------------------------------------------------------

    def origin(self, host: str) -> str:
        return f"http://{host}" if self.port == 80 else f"http://{host}:{self.port}"

    def url(self, host: str, target: str = "/") -> str:
        return self.origin(host) + target

    def start_urls(self) -> list[str]:
        return [self.url(h) for h in START_HOSTS]

    # --- serving --------------------------------------------------------------

    def handle(self, host: str, target: str) -> Response:
        """Render ``target`` (path and query) of ``host``; 404 for anything the site does not have."""
        resolved = self.resolve(host, target)
        if resolved is None:
            return Response(404, b"<!DOCTYPE html><html><head><title>Not found</title></head>"
                                 b"<body><h1>Not found</h1></body></html>")
        _info, render = resolved
        return Response(200, render(self._fetch_tokens()).encode("utf-8"),
                        headers={"Cache-Control": "no-store"})

    def _fetch_tokens(self) -> _Fetch:
        n = next(self._counter)
        if not self.dynamic:
            return _Fetch("0" * 32, chrome.BANNERS[0], "2024-06-07T12:00:00+00:00", 1, 10)
        return _Fetch(
            csrf=secrets.token_hex(16),
            banner=chrome.BANNERS[n % len(chrome.BANNERS)],
            stamp=datetime.now(timezone.utc).isoformat(timespec="microseconds"),
            node=1 + n % 7,
            millis=5 + (time.perf_counter_ns() // 1000) % 90,
        )

    # --- routing --------------------------------------------------------------

    def resolve(self, host: str, target: str) -> tuple[PageInfo, Renderer] | None:
        """The page at ``host`` + ``target``: its truth and its renderer, or None (404)."""
        host = host.lower()
        if host not in HOSTS:
            return None
        path, _, query = target.partition("?")
        variants: list[str] = []
        match = JSESSIONID.search(path)
        if match:
            path = path[: match.start()]
            variants.append("session")
        try:
            params = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
        except ValueError:
            return None
        kept: dict[str, str] = {}
        for name, value in params:
            if TRACKING_PARAM.match(name):
                if "tracking" not in variants:
                    variants.append("tracking")
            elif name == "PHPSESSID" and PHPSESSID.match(value):
                variants.append("session")
            elif name in kept:
                return None
            else:
                kept[name] = value
        if host == BLOG:
            found = self._blog_route(path, kept, variants)
        else:
            if host == WWW:
                variants.append("www")
            found = self._store_route(host, path, kept, variants)
        if found is None:
            return None
        info, render = found
        return replace(info, variants=tuple(variants)), render

    def _store_route(self, host: str, path: str, q: dict[str, str], variants: list[str]):
        c = self.catalog
        region = host == EU
        if region:
            variants.append("region")
        if path.endswith("/") and path != "/" and not region:
            path = path[:-1]
            variants.append("slash")
            if not (path.startswith("/help/") or path == "/about"):
                return None
        if path == "/" and not q:
            if region:
                variants.remove("region")
                return PageInfo("eu-home", "home"), lambda f: self._store_page(host, f, "Shop.test Europe",
                                                                                  self._eu_home_main(), path)
            return PageInfo("store-home", "home"), lambda f: self._store_page(host, f, "Shop.test", self._home_main(),
                                                                              path)
        if path == "/products" and set(q) <= {"category", "page"} and q.get("category") in cat.CATEGORIES:
            category = q["category"]
            pages = self._listing_pages(category)
            page_text = q.get("page", "1")
            if not page_text.isdigit() or not 1 <= int(page_text) <= pages or page_text != str(int(page_text)):
                return None
            page = int(page_text)
            if "page" in q and page == 1:
                variants.append("page1")
            title = f"{category.capitalize()} - page {page} | Shop.test"
            return (PageInfo(f"listing-{category}-p{page}", "listing"),
                    lambda f: self._store_page(host, f, title, self._listing_main(category, page), path))
        match = re.fullmatch(r"/product/([1-9][0-9]*)", path)
        if match and c.product(int(match.group(1))):
            product = c.product(int(match.group(1)))
            title = f"{product.name} | Shop.test"
            if not q:
                return (PageInfo(f"product-{product.id}", "product"),
                        lambda f: self._store_page(host, f, title, self._product_main(product, host), path,
                                                   tools=self._product_tools(product, host),
                                                   aside_extra=self._legacy_widget(product, host)))
            if q == {"print": "1"} and not region:
                variants.append("print")
                return (PageInfo(f"product-{product.id}", "product"),
                        lambda f: self._print_page(f, title, self._product_main(product, host), path))
            if q == {"snapshot": SNAPSHOT} and not region and product.id in cat.SNAPSHOT_PRODUCTS:
                old = cat.Product(**{**product.__dict__, "price_cents": product.price_cents + 1000})
                return (PageInfo(f"product-{product.id}@{SNAPSHOT}", "product", near_of=f"product-{product.id}",
                                 edit="price"),
                        lambda f: self._store_page(host, f, title, self._product_main(old, host), path,
                                                   banner="You are viewing a saved copy of this page from "
                                                          "15 January 2024; prices may have changed."))
            return None
        if path == "/product" and not region and set(q) == {"id"} and q["id"].isdigit() \
                and c.product(int(q["id"])) and q["id"] == str(int(q["id"])):
            product = c.product(int(q["id"]))
            variants.append("query_id")
            title = f"{product.name} | Shop.test"
            return (PageInfo(f"product-{product.id}", "product"),
                    lambda f: self._store_page(host, f, title, self._product_main(product, host), path,
                                               tools=self._product_tools(product, host)))
        denied = cat.DENIED_STORE_PATHS if not region else ("/account",)
        if path in denied and not q:
            if region:
                variants.remove("region")
            return (PageInfo(f"denied-{host}{path}", "denied", degenerate=True),
                    lambda f: self._store_page(host, f, "Access denied | Shop.test", self._denied_main(), path))
        if region or q:
            return None
        if path == "/help":
            return PageInfo("help-index", "help"), lambda f: self._store_page(host, f, "Help | Shop.test",
                                                                              self._help_index_main(), path)
        if path.startswith("/help/") and path[6:] in cat.HELP_PAGES:
            name = path[6:]
            return (PageInfo(f"help-{name}", "help"),
                    lambda f: self._store_page(host, f, f"Help: {name} | Shop.test",
                                               self._text_main(f"Help: {name}", c.help_text[name]), path))
        if path == "/about":
            return (PageInfo("store-about", "help"),
                    lambda f: self._store_page(host, f, "About us | Shop.test",
                                               self._text_main("About Shop.test", c.about_text), path))
        if path == "/sale":
            return PageInfo("store-sale", "sale"), lambda f: self._store_page(host, f, "Sale | Shop.test",
                                                                              self._sale_main(), path)
        if path == "/sitemap":
            return PageInfo("store-sitemap", "sitemap"), lambda f: self._store_page(host, f, "Sitemap | Shop.test",
                                                                                    self._sitemap_main(), path)
        return None

    def _blog_route(self, path: str, q: dict[str, str], variants: list[str]):
        c = self.catalog
        pages = -(-len(c.posts) // cat.POSTS_PER_PAGE)
        if path == "/" and not q:
            return PageInfo("blog-index-p1", "blog-index"), lambda f: self._blog_page(
                f, "The Shop.test blog", self._blog_index_main(1), path)
        match = re.fullmatch(r"/page/([1-9][0-9]*)/", path)
        if match and not q and int(match.group(1)) <= pages:
            page = int(match.group(1))
            if page == 1:
                variants.append("page1")
            title = "The Shop.test blog" if page == 1 else f"The Shop.test blog - page {page}"
            return PageInfo(f"blog-index-p{page}", "blog-index"), lambda f: self._blog_page(
                f, title, self._blog_index_main(page), path)
        match = re.fullmatch(r"/(amp/)?posts/([a-z0-9-]+)/", path)
        if match and c.post_by_slug(match.group(2)):
            post = c.post_by_slug(match.group(2))
            if match.group(1):
                if q or post.id not in cat.AMP_POSTS:
                    return None
                return (PageInfo(f"post-{post.id}@amp", "post", near_of=f"post-{post.id}", edit="one-word"),
                        lambda f: self._blog_page(f, post.title, self._post_main(post, amp=True), path))
            reply = None
            if q:
                ids = {str(cid) for cid, _a, _t in post.comments}
                if set(q) != {"replytocom"} or q["replytocom"] not in ids:
                    return None
                reply = int(q["replytocom"])
                variants.append("replytocom")
            amp = f"/amp/posts/{post.slug}/" if post.id in cat.AMP_POSTS else None
            return (PageInfo(f"post-{post.id}", "post"),
                    lambda f: self._blog_page(f, post.title, self._post_main(post, reply=reply), path, amp=amp))
        if q:
            return None
        match = re.fullmatch(r"/tags/([a-z]+)/", path)
        if match and match.group(1) in cat.BLOG_TAGS:
            tag = match.group(1)
            return PageInfo(f"blog-tag-{tag}", "blog-tag"), lambda f: self._blog_page(
                f, f"Posts tagged {tag}", self._tag_main(tag), path)
        match = re.fullmatch(r"/(2024|2025)(/?)", path)
        if match:
            year = int(match.group(1))
            if match.group(2):
                return PageInfo(f"blog-archive-{year}", "blog-archive"), lambda f: self._blog_page(
                    f, f"Archive {year}", self._archive_main(year), path)
            return PageInfo(f"blog-stats-{year}", "blog-stats"), lambda f: self._blog_page(
                f, f"{year} in numbers", self._stats_main(year), path)
        if path == "/about/":
            return PageInfo("blog-about", "blog-page"), lambda f: self._blog_page(
                f, "About the blog", self._blog_about_main(), path)
        if path == "/contact/":
            return PageInfo("blog-contact", "blog-page"), lambda f: self._blog_page(
                f, "Contact", self._text_main("Contact the editors", c.blog_contact_text), path)
        if path in cat.DENIED_BLOG_PATHS:
            return (PageInfo(f"denied-{BLOG}{path}", "denied", degenerate=True),
                    lambda f: self._blog_page(f, "Access denied", self._denied_main(), path))
        return None

    # --- store links ------------------------------------------------------------

    def _store_href(self, host: str, target: str) -> str:
        """Links on www.shop.test point to the canonical host; the others are root-relative,
        except where the EU mirror has no such page (it links to the main store then)."""
        if host == WWW:
            return self.url(STORE, target)
        if host == EU and not (target == "/" or target.startswith(("/product", "/account"))):
            return self.url(STORE, target)
        return target

    def _product_href(self, host: str, product: cat.Product) -> str:
        return self._store_href(host, f"/product/{product.id}")

    def _card(self, host: str, product: cat.Product, href: str | None = None) -> str:
        href = href or self._product_href(host, product)
        return (f"<li class=\"card\"><h3><a href=\"{escape(href)}\">{escape(product.name)}</a></h3>"
                f"<p class=\"card__price\">{cat.price(product.price_cents)}</p>"
                f"<p>{escape(product.variant_text[0])}</p></li>")

    def _listing_pages(self, category: str) -> int:
        return -(-len(self.catalog.in_category(category)) // cat.PRODUCTS_PER_PAGE)

    # --- store mains ----------------------------------------------------------

    def _home_main(self) -> str:
        c = self.catalog
        cards = []
        for pid in cat.FEATURED_PRODUCTS:
            product = c.product(pid)
            href = f"/product/{pid}?" + urlencode(
                [("utm_campaign", "featured"), ("utm_medium", "web"), ("utm_source", "home")])
            cards.append(self._card(STORE, product, href))
        tiles = "".join(
            f"<li><a href=\"{self._store_href(STORE, '/products?category=' + k)}\">{k.capitalize()}</a>: "
            f"{escape(c.category_intro[k].split('.')[0])}.</li>" for k in cat.CATEGORIES)
        return (f"<h1>Welcome to Shop.test</h1><p>{escape(c.sale_text[1])}</p>"
                f"<section class=\"featured\"><h2>Featured this week</h2><ul>{''.join(cards)}</ul></section>"
                f"<section class=\"categories\"><h2>Shop by category</h2><ul>{tiles}</ul></section>")

    def _eu_home_main(self) -> str:
        c = self.catalog
        cards = []
        for pid in cat.EU_SESSION_PRODUCTS:
            product = c.product(pid)
            href = f"/product/{pid}?PHPSESSID=" + cat.session_token("phpsessid", EU, pid)
            cards.append(self._card(EU, product, href))
        tiles = "".join(f"<li><a href=\"/products?category={k}\">{k.capitalize()}</a></li>" for k in cat.CATEGORIES)
        return (f"<h1>Welcome to Shop.test Europe</h1><p>{escape(c.sale_text[0])}</p>"
                "<p>We ship to every country of the European Union from our warehouse in Ghent, "
                "with duties and taxes paid and free returns within thirty days.</p>"
                f"<section class=\"featured\"><h2>Popular in Europe</h2><ul>{''.join(cards)}</ul></section>"
                f"<section class=\"categories\"><h2>Categories</h2><ul>{tiles}</ul></section>")

    def _listing_main(self, category: str, page: int) -> str:
        c = self.catalog
        products = c.in_category(category)
        start = (page - 1) * cat.PRODUCTS_PER_PAGE
        cards = "".join(self._card(STORE, p) for p in products[start:start + cat.PRODUCTS_PER_PAGE])
        intro = f"<p class=\"intro\">{escape(c.category_intro[category])}</p>" if page == 1 else ""
        return (f"<h1>{category.capitalize()}</h1>{intro}<p class=\"count\">Page {page} of "
                f"{self._listing_pages(category)}, {len(products)} products in {category}.</p>"
                f"<ul class=\"grid\">{cards}</ul>" + self._pager(category, page))

    def _pager(self, category: str, page: int) -> str:
        pages = self._listing_pages(category)
        base = f"/products?category={category}"
        items = []
        if page > 1:
            items.append((f"{base}&page=1", "\u00ab First"))  # explicit page=1: a mirror of the first page
            items.append((base if page == 2 else f"{base}&page={page - 1}", "\u2039 Previous"))
        items += [(base if n == 1 else f"{base}&page={n}", str(n)) for n in range(1, pages + 1)]
        if page < pages:
            items.append((f"{base}&page={page + 1}", "Next \u203a"))
        return "<nav class=\"pagination\">" + chrome.links(items) + "</nav>"

    def _product_main(self, product: cat.Product, host: str) -> str:
        description = "".join(f"<p>{escape(t)}</p>" for t in product.family_text + product.variant_text)
        return (
            f"<article class=\"product\" data-sku=\"{product.sku}\"><h1>{escape(product.name)}</h1>"
            f"<p class=\"price\">Price: {cat.price(product.price_cents)}</p>"
            "<form class=\"add-to-cart\" method=\"post\" action=\"/cart\">"
            "<input type=\"hidden\" name=\"csrf_token\" value=\"%(csrf)s\">"
            f"<input type=\"hidden\" name=\"sku\" value=\"{product.sku}\"><button>Add to cart</button></form>"
            f"<section class=\"description\">{description}</section>"
            "<table class=\"specs\"><caption>Specifications</caption>"
            f"<tr><th>Colour</th><td>{product.colour}</td></tr><tr><th>SKU</th><td>{product.sku}</td></tr>"
            f"<tr><th>Weight</th><td>{product.weight_g} g</td></tr>"
            f"<tr><th>Category</th><td>{product.category}</td></tr></table></article>"
        )

    def _product_tools(self, product: cat.Product, host: str) -> str:
        if host == EU:
            return ""
        items = [(self._store_href(host, f"/product/{product.id}?print=1"), "Print this page")]
        if product.id in cat.SNAPSHOT_PRODUCTS:
            items.append((self._store_href(host, f"/product/{product.id}?snapshot={SNAPSHOT}"),
                          "Price on 15 January 2024"))
        siblings = [p for p in self.catalog.products if p.family == product.family and p.id != product.id]
        items += [(self._product_href(host, p), f"Also in {p.colour}") for p in siblings]
        return "<nav class=\"page-tools\">" + chrome.links(items) + "</nav>"

    def _legacy_widget(self, product: cat.Product, host: str) -> str:
        """The boots pages' old recommendation widget appends the session id to its links."""
        if product.category != cat.SESSION_CATEGORY or host != STORE:
            return ""
        others = [p for p in self.catalog.in_category(product.category) if p.family != product.family][:2]
        items = [(f"/product/{p.id};jsessionid={cat.session_token('jsessionid', product.id, p.id)}",
                  f"Customers also bought {p.name}") for p in others]
        return "<div class=\"legacy-reco\"><h4>You may also like</h4>" + chrome.links(items) + "</div>"

    def _denied_main(self) -> str:
        return "<h1>Access denied</h1><p>Please sign in to continue.</p>"

    def _help_index_main(self) -> str:
        items = [(f"/help/{h}", f"{h.capitalize()}") for h in cat.HELP_PAGES] + [("/about", "About us")]
        return ("<h1>Help centre</h1><p>Answers to the questions our customers ask most often: shipping times, "
                "returns and exchanges, finding your size, paying safely, and how to reach a person when "
                "an answer here is not enough. Pick a topic below.</p>" + chrome.links(items, "help-topics"))

    def _text_main(self, heading: str, paragraphs: tuple[str, ...]) -> str:
        return f"<h1>{escape(heading)}</h1>" + "".join(f"<p>{escape(p)}</p>" for p in paragraphs)

    def _sale_main(self) -> str:
        c = self.catalog
        cards = "".join(self._card(STORE, c.product(pid)) for pid in (6, 18, 29, 40, 53, 68))
        return ("<h1>Sale</h1>" + "".join(f"<p>{escape(p)}</p>" for p in c.sale_text)
                + f"<ul class=\"grid\">{cards}</ul>")

    def _sitemap_main(self) -> str:
        items = [(f"/product?id={p.id}", p.name) for p in self.catalog.products]
        cats = [(f"/products?category={k}", k.capitalize()) for k in cat.CATEGORIES]
        return ("<h1>Sitemap</h1><h2>Categories</h2>" + chrome.links(cats)
                + "<h2>All products</h2>" + chrome.links(items, "sitemap"))

    # --- store chrome ---------------------------------------------------------

    def _store_page(self, host: str, f: _Fetch, title: str, main: str, path: str, *, tools: str = "",
                    aside_extra: str = "", banner: str | None = None) -> str:
        h = lambda target: self._store_href(host, target)  # noqa: E731
        nav = [(h(f"/products?category={k}"), k.capitalize()) for k in cat.CATEGORIES]
        nav += [(h("/sale"), "Sale"), (h("/account"), "My account")]
        if host != EU:
            nav += [(h("/orders"), "Orders"), (h("/wishlist"), "Wishlist"), (h("/help"), "Help")]
        footer = [(self.url(STORE, f"/help/{x}/"), x.capitalize()) for x in cat.HELP_PAGES]
        footer += [(self.url(STORE, "/about/"), "About us"), (self.url(STORE, "/sitemap"), "Sitemap"),
                   (self.url(STORE, "/admin"), "Staff login"), (self.url(BLOG, "/"), "Our blog"),
                   ("https://social.example/shoptest", "Follow us"), ("https://pay.example/", "Payments by pay")]
        vat = ("<div class=\"vat-notice\">All prices include VAT at the rate of your EU country of delivery; "
               "customs duties are paid by us.</div>\n") if host == EU else ""
        aside = (
            "<aside><h4>Newsletter</h4><p>Get new arrivals and members-only offers every Friday.</p>"
            "<form class=\"newsletter\" method=\"post\" action=\"/subscribe\">"
            f"<input type=\"hidden\" name=\"csrf_token\" value=\"{f.csrf}\"><input name=\"email\"></form>"
            f"<h4>Trending</h4>{chrome.links([(h('/sale'), 'Sale picks')])}{aside_extra}</aside>"
        )
        canonical = self.url(STORE if host == WWW else host, path)
        # www.shop.test resolves every relative link against the canonical host
        base = f"<base href=\"{self.url(STORE, '/')}\">" if host == WWW else ""
        return (
            chrome.head(title, f.csrf, canonical, self.store_css, extra=base)
            + "<body class=\"store\">\n<header><div class=\"banner\"><a href=\"" + h("/sale") + "\">"
            + escape(banner or f.banner) + "</a></div>"
            + f"<div class=\"logo\"><a href=\"{h('/')}\">Shop.test</a></div>"
            + "<form class=\"search\" action=\"/search\">"
            + f"<input type=\"hidden\" name=\"csrf\" value=\"{f.csrf}\"><input name=\"q\"></form></header>\n"
            + "<nav class=\"main-nav\">" + chrome.links(nav) + "</nav>\n" + vat + tools
            + "<div class=\"layout\"><main>" + main.replace("%(csrf)s", f.csrf) + "</main>\n" + aside + "</div>\n"
            + chrome.generated_at(f.stamp, f.node, f.millis)
            + "<footer>" + chrome.links(footer) + "<p>\u00a9 2024 Shop.test Ltd. All rights reserved.</p></footer>\n"
            + "<script>\n" + self.store_js + "\n</script></body></html>\n"
        )

    def _print_page(self, f: _Fetch, title: str, main: str, path: str) -> str:
        """The print view: other chrome (no nav, no aside, print stylesheet), the same main block."""
        return (
            chrome.head(title, f.csrf, self.url(STORE, path), self.print_css,
                        extra="<meta name=\"robots\" content=\"noindex\">")
            + "<body class=\"print\">\n<header class=\"print-header\">Shop.test - printer-friendly page</header>\n"
            + "<main>" + main.replace("%(csrf)s", f.csrf) + "</main>\n"
            + chrome.generated_at(f.stamp, f.node, f.millis)
            + "<footer>Printed from Shop.test. Prices and availability may change.</footer>\n"
            + "<script>window.print && window.addEventListener('load', function(){window.print();});</script>"
            + "</body></html>\n"
        )

    # --- blog -----------------------------------------------------------------

    def _summary(self, post: cat.Post) -> str:
        words = post.paragraphs[0].split()[:30]
        return (f"<li class=\"post-summary\"><h2><a href=\"/posts/{post.slug}/\">{escape(post.title)}</a></h2>"
                f"<p>{escape(' '.join(words))} ...</p></li>")

    def _blog_index_main(self, page: int) -> str:
        posts = self.catalog.posts
        chunk = posts[(page - 1) * cat.POSTS_PER_PAGE: page * cat.POSTS_PER_PAGE]
        pages = -(-len(posts) // cat.POSTS_PER_PAGE)
        items = []
        if page > 1:
            items.append(("/page/1/", "First"))
        items += [("/" if n == 1 else f"/page/{n}/", str(n)) for n in range(1, pages + 1)]
        return (f"<h1>Latest posts</h1><ul class=\"posts\">{''.join(self._summary(p) for p in chunk)}</ul>"
                f"<nav class=\"pagination\">{chrome.links(items)}</nav>")

    def _post_main(self, post: cat.Post, *, amp: bool = False, reply: int | None = None) -> str:
        paragraphs = list(post.paragraphs)
        if amp:  # an older revision: one word of the second paragraph differs
            words = paragraphs[1].split()
            index = len(words) // 2
            words[index] = "sturdy" if words[index] != "sturdy" else "rugged"
            paragraphs[1] = " ".join(words)
        product = self.catalog.product(post.product_id)
        shop_link = self.url(STORE, f"/product/{product.id}?" + urlencode(
            [("utm_campaign", post.slug), ("utm_medium", "post"), ("utm_source", "blog")]))
        body = "".join(f"<p>{escape(p)}</p>" for p in paragraphs)
        sponsored = ""
        if post.id in cat.GCLID_POSTS:
            other = self.catalog.product(post.product_id % len(self.catalog.products) + 1)
            href = self.url(STORE, f"/product/{other.id}?gclid={cat.click_id(post.id, other.id)}")
            sponsored = f"<p class=\"sponsored\">Sponsored: <a href=\"{href}\">{escape(other.name)}</a></p>"
        tags = " ".join(f"<a href=\"/tags/{t}/\">#{t}</a>" for t in post.tags)
        comments = ""
        if post.comments:
            parts = []
            for cid, author, text in post.comments:
                parts.append(f"<li id=\"comment-{cid}\"><b>{author}</b>: {escape(text)} "
                             f"<a class=\"reply\" href=\"/posts/{post.slug}/?replytocom={cid}\">Reply</a></li>")
            form = ""
            if reply is not None:
                form = (f"<form class=\"reply-form\" method=\"post\"><input type=\"hidden\" name=\"parent\" "
                        f"value=\"{reply}\"><p>Reply to comment {reply}</p><textarea></textarea></form>")
            comments = f"<section class=\"comments\"><h2>Comments</h2><ul>{''.join(parts)}</ul>{form}</section>"
        return (f"<article class=\"post\"><h1>{escape(post.title)}</h1><p class=\"byline\">Posted in {post.year} "
                f"by the Shop.test team</p>{body}<p>Shop the look: <a href=\"{shop_link}\">{escape(product.name)}"
                f"</a></p>{sponsored}<p class=\"tags\">Tags: {tags}</p></article>{comments}")

    def _tag_main(self, tag: str) -> str:
        posts = [p for p in self.catalog.posts if tag in p.tags]
        return (f"<h1>Posts tagged {tag}</h1><p>{len(posts)} posts about {tag}.</p>"
                f"<ul class=\"posts\">{''.join(self._summary(p) for p in posts)}</ul>")

    def _archive_main(self, year: int) -> str:
        posts = [p for p in self.catalog.posts if p.year == year]
        return f"<h1>Archive {year}</h1><ul class=\"posts\">{''.join(self._summary(p) for p in posts)}</ul>"

    def _stats_main(self, year: int) -> str:
        posts = [p for p in self.catalog.posts if p.year == year]
        counts = {t: sum(t in p.tags for p in posts) for t in cat.BLOG_TAGS}
        rows = "".join(f"<tr><th>{t}</th><td>{n} posts</td></tr>" for t, n in counts.items())
        words = sum(len(" ".join(p.paragraphs).split()) for p in posts)
        return (f"<h1>{year} in numbers</h1><p>In {year} we published {len(posts)} posts with {words} words in "
                f"total, answered {sum(len(p.comments) for p in posts)} comments and tested more shoes than we "
                f"care to count. Here is how the posts of {year} spread over our tags.</p>"
                f"<table class=\"stats\">{rows}</table>")

    def _blog_about_main(self) -> str:
        items = [(self.url(WWW, f"/product/{pid}"), self.catalog.product(pid).name) for pid in cat.WWW_LINKED_PRODUCTS]
        return (self._text_main("About the blog", self.catalog.blog_about_text)
                + "<h2>Our favourite products</h2>" + chrome.links(items))

    def _blog_page(self, f: _Fetch, title: str, main: str, path: str, amp: str | None = None) -> str:
        c = self.catalog
        nav = [("/", "Home"), ("/2024/", "2024"), ("/2025/", "2025"), ("/about/", "About"),
               ("/contact/", "Contact"), (self.url(WWW, "/"), "Shop")]
        nav += [(f"/tags/{t}/", f"#{t}") for t in cat.BLOG_TAGS]
        popular = [(f"/posts/{p.slug}/", p.title) for p in c.posts[:6]]
        if amp:  # the AMP copy, made from an older revision of the post
            popular.insert(0, (amp, "Read the lightweight (AMP) version"))
        aside = ("<aside><h4>Popular posts</h4>" + chrome.links(popular)
                 + "<h4>Year in numbers</h4>" + chrome.links([("/2024", "2024 in numbers"),
                                                               ("/2025", "2025 in numbers")]) + "</aside>")
        footer = [("/wp-admin/", "Log in"), ("/drafts/", "Drafts"), ("https://social.example/shoptestblog", "Social")]
        return (
            chrome.head(f"{title} | The Shop.test blog", f.csrf, self.url(BLOG, path), self.blog_css)
            + "<body class=\"blog\">\n<header><div class=\"banner\">" + escape(f.banner) + "</div>"
            + "<div class=\"logo\"><a href=\"/\">The Shop.test blog</a></div></header>\n"
            + "<nav class=\"blog-nav\">" + chrome.links(nav) + "</nav>\n"
            + "<div class=\"layout\"><main>" + main + "</main>\n" + aside + "</div>\n"
            + chrome.generated_at(f.stamp, f.node, f.millis)
            + "<footer>" + chrome.links(footer) + "<p>Written by the Shop.test team.</p></footer>\n"
            + "<script>\n" + self.blog_js + "\n</script></body></html>\n"
        )
