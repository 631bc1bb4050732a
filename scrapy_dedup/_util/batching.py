"""Chunking an iterable into lists, for batched Redis calls and worker-process batches (no Scrapy imports)."""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import TypeVar

T = TypeVar("T")


def batches(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Consecutive lists of at most ``size`` items (``itertools.batched`` before Python 3.12)."""
    if size < 1:
        raise ValueError(f"batch size must be >= 1, got {size}")
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch
