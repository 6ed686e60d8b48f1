"""Blob bytes as text, by git's rules: binary when a NUL is in the first 8000 bytes; runs of
numbers for line lists and id ranges. Pure."""

from __future__ import annotations

from collections.abc import Iterable

_BINARY_SNIFF = 8000


def is_binary(data: bytes) -> bool:
    """git's own rule: a NUL in the first 8000 bytes."""
    return b"\0" in data[:_BINARY_SNIFF]


def decode(data: bytes) -> str | None:
    """UTF-8 text, or None for a binary blob or one that is not UTF-8."""
    if is_binary(data):
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def number_runs(numbers: Iterable[int]) -> list[tuple[int, int]]:
    """Runs of consecutive numbers, first and last of each: ``[1, 3, 4, 5]`` is
    ``[(1, 1), (3, 5)]`` (line lists and id ranges are written from them)."""
    nums = sorted(set(numbers))
    runs: list[tuple[int, int]] = []
    for n in nums:
        if runs and n == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], n)
        else:
            runs.append((n, n))
    return runs
