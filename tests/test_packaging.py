"""What the built distribution ships: the PEP 561 ``py.typed`` marker, so that a
project type-checking against scrapy-dedup gets our type hints, not ``Any``."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_built_package_ships_the_py_typed_marker(tmp_path):
    # setuptools' build_py step lays out exactly the files a wheel holds (modules and
    # package_data); it needs no wheel package, and runs on a copy of the sources so
    # that the build leaves nothing in the checkout.
    source = tmp_path / "src"
    shutil.copytree(ROOT / "scrapy_dedup", source / "scrapy_dedup",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    out = tmp_path / "lib"
    code = "from setuptools import setup; setup()"
    done = subprocess.run([sys.executable, "-c", code, "-q", "build_py", "--build-lib", str(out)],
                          cwd=source, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (out / "scrapy_dedup" / "py.typed").is_file()
    # the marker sits next to the modules it vouches for
    assert (out / "scrapy_dedup" / "content" / "engine.py").is_file()
