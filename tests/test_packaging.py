"""What `pip install .` (the Docker image) ships: every package, every dependency pinned."""

from __future__ import annotations

import re
import tomllib
import warnings
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
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


def _locked() -> dict[str, tuple[str, int]]:
    """requirements.lock as {name: (version, number of sha256 hashes)}."""
    locked: dict[str, tuple[str, int]] = {}
    name = ""
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9._-]+)==(\S+) \\$", line)
        if m:
            name = canonicalize_name(m[1])
            locked[name] = (m[2], 0)
        elif "--hash=sha256:" in line and name:
            version, hashes = locked[name]
            locked[name] = (version, hashes + 1)
    return locked


def test_the_image_installs_every_dependency_pinned_by_hash() -> None:
    # The Dockerfile installs with --require-hashes: a dependency missing from the lock,
    # or a lock older than a raised lower bound, fails the image build, not this test.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = read_configuration(ROOT / "pyproject.toml", expand=True)
    locked = _locked()
    wanted = [Requirement(r) for r in config["project"]["dependencies"]]
    wanted += [Requirement(r) for r in tomllib.loads(
        (ROOT / "pyproject.toml").read_text())["build-system"]["requires"]]
    for req in wanted:
        version, hashes = locked[canonicalize_name(req.name)]
        assert req.specifier.contains(version), (req, version)
        assert hashes >= 1, req.name
    assert all(hashes >= 1 for _, hashes in locked.values())
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "--require-hashes --no-deps -r requirements.lock" in dockerfile
    assert "--no-deps --no-build-isolation ." in dockerfile  # nothing unpinned at build time
