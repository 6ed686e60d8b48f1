"""The architecture in the folders: imports point one way, and the engine does no I/O.

    bot.engine   local git in, data out      may import: bot.errors, bot.engine
    bot.github   GitHub I/O                  may import: + bot.github
    bot.app      the running App             may import: + bot.app
    bot.sync     jobs joining engine+GitHub  may import: + bot.sync
    handlers     webhook routers             may import: everything above
    bot.cli      the composition root        may import: everything

The rule is read from the source with ``ast`` (imports inside functions count too), so
it survives the next change without anyone remembering it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# What each layer may import from this project (by module prefix).
ALLOWED: dict[str, tuple[str, ...]] = {
    "bot.engine": ("bot.errors", "bot.engine"),
    "bot.github": ("bot.errors", "bot.engine", "bot.github"),
    "bot.app": ("bot.errors", "bot.engine", "bot.github", "bot.app"),
    "bot.sync": ("bot.errors", "bot.engine", "bot.github", "bot.app", "bot.sync"),
    "handlers": ("bot.errors", "bot.engine", "bot.github", "bot.app", "bot.sync", "handlers"),
    "bot.errors": (),
}
# Third-party or standard modules that mean network, a database or the App's runtime.
ENGINE_FORBIDDEN = ("aiohttp", "gidgethub", "jwt", "sqlite3", "socket", "http", "urllib.request",
                    "requests", "ssl", "asyncio")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports, as (line, absolute dotted name)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" \
        else module_name(path)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            found.append((node.lineno, prefix))
            # "from bot.engine import git" imports the module bot.engine.git.
            found.extend((node.lineno, f"{prefix}.{alias.name}") for alias in node.names)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module"):
            first = node.args[0] if node.args else None
            # A literal name is checked like any import; a computed one cannot be.
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.append((node.lineno, first.value))
            else:
                found.append((node.lineno, "<importlib.import_module>"))
    return found


def project_modules() -> list[Path]:
    return sorted([*(ROOT / "bot").rglob("*.py"), *(ROOT / "handlers").rglob("*.py")])


def layer_of(module: str) -> str | None:
    for layer in sorted(ALLOWED, key=len, reverse=True):
        if module == layer or module.startswith(layer + "."):
            return layer
    return None


def wrong_way(path: Path) -> list[str]:
    """The imports of ``path`` that break the layering, as readable lines."""
    module = module_name(path)
    layer = layer_of(module)
    if layer is None:  # bot, bot.cli: the composition root may import anything
        return []
    problems = []
    for line, name in imports_of(path):
        where = f"{path.relative_to(ROOT)}:{line}"
        if name == "<importlib.import_module>":
            problems.append(f"{where}: importlib hides an import from this check")
            continue
        if name == "bot" or name == "bot.__version__":
            continue
        if name.startswith(("bot.", "handlers")):
            target = layer_of(name) or name
            if name == "bot.cli" or name.startswith("bot.cli."):
                target = "bot.cli"
            if not any(target == ok or target.startswith(ok + ".") for ok in ALLOWED[layer]):
                problems.append(f"{where}: {layer} imports {name}")
        elif layer == "bot.engine" and any(name == bad or name.startswith(bad + ".")
                                           for bad in ENGINE_FORBIDDEN):
            problems.append(f"{where}: the engine imports {name}, which means I/O")
    return problems


def test_every_module_belongs_to_a_layer_or_is_the_root() -> None:
    loose = [module_name(p) for p in project_modules()
             if layer_of(module_name(p)) is None and module_name(p) not in ("bot", "bot.cli")]
    assert loose == [], f"modules outside bot.engine/github/app/sync: {loose}"


@pytest.mark.parametrize("path", project_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_one_way(path: Path) -> None:
    assert wrong_way(path) == []


def test_the_check_catches_a_wrong_way_import(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule is not vacuous: planted wrong-way imports are reported, right-way ones not."""
    fake = tmp_path / "bot" / "engine"
    fake.mkdir(parents=True)
    (tmp_path / "bot" / "github").mkdir()
    (fake / "leak.py").write_text(
        "from bot.app.store import Store\n"
        "import aiohttp\n"
        "def f():\n"
        "    from ..sync import publish\n"
        "from bot.engine.git import Git\n"
        "from bot.errors import GitError\n")
    (tmp_path / "bot" / "github" / "up.py").write_text("from bot.sync.jobs import JOBS\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    leak = sorted(wrong_way(fake / "leak.py"))
    up = sorted(wrong_way(tmp_path / "bot" / "github" / "up.py"))
    assert leak == ["bot/engine/leak.py:1: bot.engine imports bot.app.store",
                    "bot/engine/leak.py:1: bot.engine imports bot.app.store.Store",
                    "bot/engine/leak.py:2: the engine imports aiohttp, which means I/O",
                    "bot/engine/leak.py:4: bot.engine imports bot.sync",
                    "bot/engine/leak.py:4: bot.engine imports bot.sync.publish"]
    assert up == ["bot/github/up.py:1: bot.github imports bot.sync.jobs",
                  "bot/github/up.py:1: bot.github imports bot.sync.jobs.JOBS"]
