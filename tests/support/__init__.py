"""Test support: real servers, sites and crawls. One rule for what a test may skip:

:func:`require` fails the test when ``CI=true`` (the README's test command installs
every part, so a missing one there is a broken set-up, never a silent skip) and skips
it elsewhere, naming what to install.
"""
from __future__ import annotations

import importlib
import os
from typing import Any


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require(available: bool, what: str) -> None:
    """Go on if ``available``; otherwise fail under CI, skip elsewhere, with ``what`` is missing and how to get it."""
    import pytest

    if available:
        return
    if in_ci():
        pytest.fail(f"{what} (required under CI=true)")
    pytest.skip(what)


def require_module(name: str, install: str = "pip install -e '.[test,bench]'") -> Any:
    """``import name``, or :func:`require` says it is missing."""
    try:
        return importlib.import_module(name)
    except ImportError:
        require(False, f"the Python package {name} is missing ({install})")
