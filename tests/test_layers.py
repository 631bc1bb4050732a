"""The layers: every core module imports in a fresh process with neither Scrapy nor Twisted loaded."""
from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import scrapy_dedup

CORE_PACKAGES = ("url", "seen", "content", "audit", "_util")
#: top-level modules that are part of the core (no Scrapy): settings, the report, Redis plumbing
CORE_TOP_LEVEL = ("settings", "report", "redis_conn", "redis_policy", "_batching")


def core_modules() -> list[str]:
    root = Path(scrapy_dedup.__file__).parent
    names = [f"scrapy_dedup.{name}" for name in CORE_TOP_LEVEL]
    for package in CORE_PACKAGES:
        names.append(f"scrapy_dedup.{package}")
        names += [f"scrapy_dedup.{package}.{m.name}" for m in pkgutil.iter_modules([str(root / package)])]
    return names


@pytest.mark.parametrize("module", core_modules())
def test_core_module_imports_without_scrapy_or_twisted(module):
    code = (
        f"import sys, importlib; importlib.import_module({module!r}); "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('scrapy', 'twisted')); "
        "print(bad[:5]); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_public_name_resolves_and_the_type_checking_block_names_them_all():
    import ast

    source = Path(scrapy_dedup.__file__).read_text()
    tree = ast.parse(source)
    block = next(node for node in tree.body if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING")
    named = {alias.name: node.module for node in ast.walk(block) if isinstance(node, ast.ImportFrom)
             for alias in node.names}
    assert named == scrapy_dedup._EXPORTS
    for name, module in scrapy_dedup._EXPORTS.items():
        assert getattr(scrapy_dedup, name).__module__ == module, name
