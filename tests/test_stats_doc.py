"""docs/stats.md is the stats reference: every ``dedup/...`` stat the code can write is named in it,
and it names none the code cannot write.

The names are found in the package's source, not listed here: string literals, f-strings (a
placeholder is a wildcard, ``dedup/url/filtered/{switch}`` is ``dedup/url/filtered/<...>``, and a
placeholder bound by a ``for`` over a tuple of strings is expanded to those strings), prefixes joined
to a name elsewhere (``stats_prefix="dedup/content/redis_"``), and the names the counting helpers
(``_count("truncated")`` in the content extension is ``dedup/content/truncated``) and the report
(:meth:`DuplicationReport.to_stats`) put under a prefix. tests/test_demo.py checks the stats of a
real crawl against the same page.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "scrapy_dedup"
REFERENCE = ROOT / "docs" / "stats.md"
WILD = "<>"

#: the counting helpers that put their argument under a prefix: (module, function) -> prefixes;
#: ``None`` for the prefixes the code passes as ``stats_prefix`` (and that argument's default)
HELPERS = {
    ("extensions.py", "_count"): ["dedup/content/"],
    ("paragraph_flow.py", "_count"): ["dedup/paragraphs/"],
    ("redis_content.py", "count"): ["dedup/content/"],
    ("_util/redis_policy.py", "_count"): None,
    ("redis_queue.py", "_count"): [""],
    ("redis_queue.py", "_flag"): [""],
}


def _pattern(node: ast.JoinedStr, bound: dict[str, tuple[str, ...]]) -> list[str]:
    """The names an f-string can take: a placeholder bound by a loop over strings takes each of them,
    any other placeholder is a wildcard."""
    names = [""]
    for part in node.values:
        if isinstance(part, ast.Constant):
            names = [n + str(part.value) for n in names]
        elif isinstance(part, ast.FormattedValue) and isinstance(part.value, ast.Name) and part.value.id in bound:
            names = [n + v for n in names for v in bound[part.value.id]]
        else:
            names = [n + WILD for n in names]
    return names


def _loop_values(node: ast.For, bound: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """``for name in ("a", "b")`` and ``for name, x in (("a", ...), ...)``: name -> the strings."""
    if not isinstance(node.iter, ast.Tuple) or not node.iter.elts:
        return {}
    target = node.target.elts[0] if isinstance(node.target, ast.Tuple) else node.target
    values: list[str] = []
    for elt in node.iter.elts:
        first = elt.elts[0] if isinstance(elt, ast.Tuple) and isinstance(node.target, ast.Tuple) else elt
        strings = _strings(first, bound)
        if not strings:
            return {}
        values.extend(strings)
    return {target.id: tuple(values)} if isinstance(target, ast.Name) else {}


def _strings(node: ast.AST, bound: dict[str, tuple[str, ...]]) -> list[str]:
    """The strings an expression can be: a literal, an f-string, a name bound to strings, a sum of those
    (an operand that is none of them is a wildcard)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return _pattern(node, bound)
    if isinstance(node, ast.Name) and node.id in bound:
        return list(bound[node.id])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = _strings(node.left, bound)
        if left:
            return [a + b for a in left for b in (_strings(node.right, bound) or [WILD])]
    return []


def code_names() -> tuple[set[str], set[str]]:
    """(names and patterns the code writes, prefixes it joins to names elsewhere)."""
    names: set[str] = set()
    prefixes: set[str] = set()
    stats_prefixes: set[str] = set()
    helper_args: dict[tuple[str, str], list[str]] = {key: [] for key in HELPERS}

    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # module constants (STATS_RULE_PREFIX = "dedup/url/rule/") stand for their value
        constants = {target.id: (node.value.value,) for node in tree.body if isinstance(node, ast.Assign)
                     and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                     for target in node.targets if isinstance(target, ast.Name)}

        def visit(node: ast.AST, bound: dict[str, tuple[str, ...]], module: str = module) -> None:
            if isinstance(node, ast.For):
                bound = {**bound, **_loop_values(node, bound)}
            texts = _strings(node, bound) if isinstance(node, (ast.Constant, ast.JoinedStr, ast.BinOp)) else []
            for text in texts:
                for found in re.findall(r"dedup/[a-z0-9_/<>.-]*", text):
                    found = found.rstrip(".")
                    (prefixes if found.endswith(("/", "_")) else names).add(found)
            if isinstance(node, ast.keyword) and node.arg == "stats_prefix":
                stats_prefixes.update(_strings(node.value, bound))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
                key = (module, node.func.attr)
                if key in helper_args:
                    helper_args[key].extend(_strings(node.args[0], bound) or [WILD])
            for child in ast.iter_child_nodes(node):
                visit(child, bound)

        visit(tree, constants)
        for fn in ast.walk(tree):  # the default of a stats_prefix argument
            if isinstance(fn, ast.FunctionDef):
                args = fn.args.args + fn.args.kwonlyargs
                defaults = [None] * (len(fn.args.args) - len(fn.args.defaults)) + fn.args.defaults \
                    + fn.args.kw_defaults
                for arg, default in zip(args, defaults):
                    if arg.arg == "stats_prefix" and default is not None:
                        stats_prefixes.update(_strings(default, {}))

    for (module, helper), args in helper_args.items():
        assert args, f"no call of {helper} found in {module}: is HELPERS out of date?"
        for prefix in HELPERS[(module, helper)] or sorted(stats_prefixes):
            names.update(prefix + arg for arg in args)

    from scrapy_dedup.content.report import DuplicationReport

    report = DuplicationReport(total=0, exact=0, near=0, unique=0, degenerate=0, clusters=0, largest_cluster=0)
    names.update(report.to_stats(prefix="dedup/content/"))
    return {n for n in names if n.startswith("dedup/") and n not in ("dedup/",)}, prefixes


def documented() -> set[str]:
    """The stat names docs/stats.md gives (in backquotes), placeholders (``<host>``) as wildcards."""
    text = REFERENCE.read_text(encoding="utf-8")
    return {re.sub(r"<[^>]*>", WILD, name) for name in re.findall(r"`(dedup/[^`\s]+)`", text)}


def _regex(name: str) -> re.Pattern[str]:
    return re.compile("".join("[^/]+" if part == WILD else re.escape(part)
                              for part in re.split(f"({re.escape(WILD)})", name)) + r"\Z")


def is_documented(name: str, docs: set[str]) -> bool:
    """A name is documented when the page names it, or a pattern of the page covers it; a pattern of
    the code is documented when the page names that pattern or a stat it covers."""
    if name in docs:
        return True
    if any(WILD in doc and _regex(doc).match(name.replace(WILD, "x")) for doc in docs):
        return True
    return WILD in name and any(_regex(name).match(doc) for doc in docs)


def test_every_stat_the_code_writes_is_documented():
    names, prefixes = code_names()
    docs = documented()
    assert len(names) > 100, sorted(names)  # the scan finds them (it is not looking at nothing)
    missing = sorted(n for n in names if not is_documented(n, docs))
    assert not missing, f"stats not in docs/stats.md: {missing}"
    bare = sorted(p for p in prefixes if not any(doc.startswith(p) for doc in docs))
    assert not bare, f"prefixes of stats of which docs/stats.md names none: {bare}"


def test_the_reference_names_no_stat_the_code_cannot_write():
    names, prefixes = code_names()
    stale = sorted(doc for doc in documented()
                   if not is_documented(doc, names) and not any(doc.startswith(p) for p in prefixes))
    assert not stale, f"docs/stats.md names stats the code does not write: {stale}"


def test_an_undocumented_stat_is_found():
    # the check can fail: a name the page lacks, under each form the scan reads
    docs = documented()
    assert not is_documented("dedup/content/no_such_stat", docs)
    assert not is_documented("dedup/no_such_family/" + WILD, docs)
    assert is_documented("dedup/url/filtered/strip_www", docs)
