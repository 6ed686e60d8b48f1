"""The pytest fixture: ``github_sim`` starts a simulator for one test and stops it after."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .openapi import REST_SPEC, WEBHOOK_SPEC, SpecMissingError, rest_spec, webhook_spec
from .server import Simulator


def _specs_or_fail() -> None:
    try:
        rest_spec()
        webhook_spec()
    except SpecMissingError as exc:
        pytest.fail(str(exc), pytrace=False)
    assert REST_SPEC.is_file() and WEBHOOK_SPEC.is_file()


@pytest.fixture
def github_sim(tmp_path: Path) -> Iterator[Simulator]:
    """A running simulator with no bot URL; set ``sim.bot_url`` to receive webhooks.

    Synchronous on purpose: it works for sync and async tests alike, and the
    simulator runs on its own thread and loop anyway.
    """
    _specs_or_fail()
    sim = Simulator(root=tmp_path / "github-sim").start()
    try:
        yield sim
    finally:
        sim.stop()
