"""Sphinx configuration of the scrapy-dedup documentation.

The pages are the Markdown files of this folder, read with myst-parser (the same files
read well on a repository host). ``scripts/test.sh`` builds them with warnings as
errors: ``sphinx-build -W -b html docs docs/_build/html``.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scrapy_dedup import __version__  # noqa: E402

project = "scrapy-dedup"
author = "the scrapy-dedup authors"
release = __version__
version = ".".join(__version__.split(".")[:2])

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
# "## Heading" gets the anchor a repository host gives it, so links such as
# benchmarks.md#dust-rules-benchmarksbench_dustpy work on both.
myst_heading_anchors = 4
html_theme = "alabaster"
html_title = f"scrapy-dedup {release}"
