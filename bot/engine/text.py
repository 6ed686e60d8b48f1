"""Blob bytes as text, by git's rules: binary when a NUL is in the first 8000 bytes. Pure."""

from __future__ import annotations

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
