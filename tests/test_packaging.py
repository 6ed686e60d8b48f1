"""What `pip install .` (the Docker image) ships: every package under bot/ and handlers/."""

from __future__ import annotations

import warnings
from pathlib import Path

from setuptools.config.pyprojecttoml import read_configuration

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_on_disk_is_in_the_distribution() -> None:
    # A package missing here imports fine in an editable checkout and fails in the image.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # setuptools calls its pyproject support beta
        config = read_configuration(ROOT / "pyproject.toml", expand=True)
    shipped = set(config["tool"]["setuptools"]["packages"])
    on_disk = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("bot", "handlers")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert "bot.engine.config" in on_disk
    assert shipped == on_disk
