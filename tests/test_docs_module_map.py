"""docs/architecture.md is the module map: every module of the package is in it, and it names no module that
is gone (a module added or deleted without the map is how it stops being true)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "scrapy_dedup"
MAP = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def modules() -> set[str]:
    """The package's modules as the map names them (relative to the package), packages' __init__ aside."""
    found = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")}
    return {m for m in found if not m.endswith("__init__.py") and m != "__main__.py"}


def test_every_module_is_in_the_map():
    missing = sorted(m for m in modules() if f"`{m}`" not in MAP and f"`scrapy_dedup/{m}`" not in MAP)
    assert not missing, f"modules not in docs/architecture.md: {missing}"


def test_the_map_names_no_module_that_is_gone():
    named = set(re.findall(r"`(?:scrapy_dedup/)?((?:[a-z_]+/)?[a-z_]+\.py)`", MAP))
    gone = sorted(m for m in named if not any((where / m).exists() for where in (PACKAGE, ROOT, ROOT / "benchmarks")))
    assert not gone, f"docs/architecture.md names modules that do not exist: {gone}"
