"""Files of a tree that refer to a path (``bot.engine.refs``): one bounded git grep, each
line checked for a real reference, counted and capped. Real repositories throughout."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.engine import refs as refs_module
from bot.engine.git import Git
from bot.engine.refs import Refs, deletion_note, find_refs, stub_note
from tests.factory import git_text, init_repo, write_tree


def test_a_stub_is_not_preferred_against_where_it_has_the_names() -> None:
    found = Refs("pkg/mod.py", {"pkg/use.py": (1,)}, ("run",))
    full = "".join(f"x{i} = {i}\n" for i in range(20))
    # A stub that has the imported name (a re-export, say) may well do: nothing is said.
    assert stub_note(found, "from other import run\n", full) is None
    # Two full versions: no stub.
    assert stub_note(found, full, full + "run = 1\n") is None
    said = stub_note(found, full + "def run():\n    pass\n", "pass\n")
    assert said is not None and said[1] == "ours"
    assert said[0].endswith("Imported from it: `run`, none of which upstream's version has. "
                            "Upstream's version is a 1-line stub; the fork's has 22 lines.")


def _repo(tmp_path: Path, files: dict[str, str]) -> tuple[Git, str]:
    git_dir = init_repo(tmp_path / "r.git", bare=True)
    tree = write_tree(git_dir, [(p, "100644", c.encode()) for p, c in files.items()])
    return Git(git_dir), tree


def test_references_are_capped_and_counted(tmp_path: Path) -> None:
    files = {
        "docs/a.md": "# A\n",
        "docs/b.md": "".join(f"[A, {i}](a.md)\n" for i in range(5)),
        **{f"docs/{n}.md": "See [A](./a.md).\n" for n in ("c", "d", "e", "f")},
        "docs/z/far.md": "[A](a.md)\n",  # docs/z/a.md: another page
    }
    git, tree = _repo(tmp_path, files)
    found = find_refs(git, tree, ["docs/a.md"])["docs/a.md"]
    assert found.complete and found.lines["docs/b.md"] == (1, 2, 3, 4, 5)
    assert len(found.lines) == 5 and "docs/z/far.md" not in found.lines
    # Three files, three lines each, and the count of the rest: every number adds up.
    assert deletion_note(found, "upstream") == (
        "5 files on this branch still refer to it: `docs/b.md` L1, L2, L3 and 2 more lines; "
        "`docs/c.md` L1; `docs/d.md` L1; and 2 more files. Check these before you take the "
        "deletion.")


def test_the_grep_reads_a_bounded_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    files = {"lib/a.sh": "echo a\n", **{f"bin/run{i:02}.sh": "source lib/a.sh\n" * 3
                                         for i in range(40)}}
    git, tree = _repo(tmp_path, files)
    whole = find_refs(git, tree, ["lib/a.sh"])["lib/a.sh"]
    assert whole.complete and len(whole.lines) == 40
    # Past the limit git is stopped; what was read is a lower bound, and says so.
    monkeypatch.setattr(refs_module, "OUTPUT_LIMIT", 1000)
    head = git.run_head("grep", "-n", "-F", "-e", "a.sh", tree, "--", limit=1000)
    assert head.cut and len(head.stdout) == 1000 and head.returncode is None
    cut = find_refs(git, tree, ["lib/a.sh"])["lib/a.sh"]
    assert not cut.complete and 0 < len(cut.lines) < 40
    n = len(cut.lines)
    assert deletion_note(cut, "fork").startswith(f"At least {n} files on this branch still "
                                                 "refer to it: `bin/run00.sh` L1, L2, L3; ")
    # So are the paths one sync searches.
    monkeypatch.setattr(refs_module, "TARGETS_MOST", 1)
    files2 = {"x.sh": "", "y.sh": "", "use.sh": "source x.sh\nsource y.sh\n"}
    git2, tree2 = _repo(tmp_path / "two", files2)
    assert list(find_refs(git2, tree2, ["x.sh", "y.sh"])) == ["x.sh"]


def test_a_partial_clone_is_searched_as_far_as_it_goes(tmp_path: Path) -> None:
    git, tree = _repo(tmp_path, {"a.md": "# A\n", "README.md": "[A](a.md)\n"})
    # A tree whose other referrer's blob is absent, as in the App's partial clones.
    listing = git_text(git.git_dir, "ls-tree", tree)
    missing = "0123456789abcdef0123456789abcdef01234567"
    partial = git_text(git.git_dir, "mktree", "--missing",
                       input=f"{listing}\n100644 blob {missing}\tdocs.md\n".encode()).strip()
    found = find_refs(git, partial, ["a.md"])["a.md"]
    assert found.lines == {"README.md": (1,)} and not found.complete
    assert deletion_note(found, "fork").startswith("At least 1 file on this branch still "
                                                   "refers to it: `README.md` L1.")


@pytest.mark.parametrize(("target", "line", "refers"), [
    ("pkg/sub/mod.py", "from pkg.sub.mod import a, b", True),
    ("pkg/sub/mod.py", "from pkg.sub import (other, mod)  # x", True),
    ("pkg/sub/mod.py", "from pkg.sub import other, module", False),
    ("pkg/sub/mod.py", "import pkg.sub.module", False),
    ("pkg/sub/mod.py", 'patch("pkg.sub.mod.requests.get")', True),
    ("pkg/sub/mod.py", "x = mypkg.sub.mod", False),
    ("src/pkg/mod.py", "from pkg.mod import run", True),
    ("pkg/__init__.py", "from pkg import run", True),
    ("tool.py", "import tool", True),
    ("tool.py", "from tool import run", True),
    ("tool.py", "import toolbox", False),
    ("docs/en/page.md", "[Page](https://github.com/o/r/blob/main/docs/en/page.md#top)", True),
    ("docs/en/page.md", "see docs/en/page.md.", True),
    ("docs/en/page.md", "see other/docs/en/page.md", False),
    ("scripts/models/m.sh", 'source "${SCRIPT_DIR}/models/m.sh"', True),
])
def test_what_counts_as_a_reference(tmp_path: Path, target: str, line: str,
                                    refers: bool) -> None:
    where = "scripts/run.sh" if target.endswith(".sh") else "use.py"
    git, tree = _repo(tmp_path, {target: "x\n", where: line + "\n"})
    assert (target in find_refs(git, tree, [target])) is refers
