"""Files of commit 1 that still refer to a path a whole-file item deletes, or to an add/add
whose one version is a stub (``bot.engine.refs``): found by one git grep, said in the
item's reason, and taken into its recommendation. Real repositories throughout."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.engine import refs as refs_module
from bot.engine.git import Git
from bot.engine.learn import Learned, Way
from bot.engine.model import Plan, ReviewItem, Tier
from bot.engine.pipeline import plan
from bot.engine.refs import Refs, deletion_note, find_refs, stub_note
from bot.engine.report.comments import render_review_comment
from bot.engine.report.groups import group_items, recommend
from bot.engine.report.needs import workload_rows
from bot.engine.suggest import FORK_DELETED, propose_whole_file
from tests.factory import PLAIN_CONFIG, Scenario, git_text, init_repo, write_tree

FORK_DELETED_SAYS = "The fork deleted this file and upstream changed it."


def _plan(s: Scenario, tmp_path: Path, **kw: object) -> Plan:
    return plan(str(s.fork_dir), str(s.upstream_dir), workdir=str(tmp_path / "work"),
                **kw)  # type: ignore[arg-type]


def _item(p: Plan, path: str) -> ReviewItem:
    (found,) = [i for i in p.items if i.path == path]
    return found


def _docs_fork(tmp_path: Path) -> Scenario:
    """The fork deleted `docs/en/guide.md`, which upstream then changed; the README and the
    English index still link it (a link, a `:doc:` role, a toctree entry), while the
    Chinese index links its own guide and another page only says the word."""
    s = Scenario(tmp_path / "repos", config=PLAIN_CONFIG)
    s.upstream_pr(10, "Docs", "alice", files={
        "docs/en/guide.md": "# Guide\n\nStep one.\n",
        "docs/en/index.rst": "Welcome\n=======\n\n- Start here: :doc:`guide`\n\n"
                             ".. toctree::\n\n   guide\n   other\n",
        "docs/en/other.md": "# Other\n\nNot a guide: see the guide of another project.\n",
        "docs/zh/guide.md": "# Guide (zh)\n",
        "docs/zh/index.rst": "- :doc:`guide`\n",
        "README.md": "# Project\n\n- [Guide](./docs/en/guide.md)\n- [Other](docs/en/other.md)\n",
    })
    s.sync_fork()
    s.fork_commit("Fork: we have no guide", {"docs/en/guide.md": None})
    s.upstream_pr(11, "Guide: step two", "bob",
                  files={"docs/en/guide.md": "# Guide\n\nStep one.\nStep two.\n"})
    return s


def test_a_page_the_fork_deleted_names_the_files_that_still_link_it(tmp_path: Path) -> None:
    p = _plan(_docs_fork(tmp_path), tmp_path)
    item = _item(p, "docs/en/guide.md")
    assert (item.kind.value, item.tier, item.rule) == ("file", Tier.DECIDE, FORK_DELETED)
    # The statistic stays; the branch's own links follow it, with their lines in commit 1:
    # README.md L3 (a Markdown link), docs/en/index.rst L4 (`:doc:`) and L8 (the toctree).
    # The Chinese index links docs/zh/guide.md, and "the guide" in prose is no link.
    assert item.reason == (
        f"{FORK_DELETED_SAYS} {propose_whole_file('fork').reason} 2 files on this branch "
        "still refer to it: `README.md` L3; `docs/en/index.rst` L4, L8. Check these before "
        "you keep the deletion.")
    assert item.refs == {"files": 2, "complete": True}
    # No one command deletes it with the other deletions: the recommendation says to fix
    # the links first, and the PR body's table counts it as a file to decide.
    data = p.to_json()
    (found,) = [i for f in data["files"] for i in f["review_items"] if i["id"] == item.id]
    assert found["refs"] == {"files": 2, "complete": True}
    assert recommend(found) == ("fix the 2 files that still refer to it, then keep the "
                                "fork's deletion; or take theirs if the fork still needs this "
                                "file", None)
    assert ("1 file one side deleted: keep or delete", [item.id]) in workload_rows([found])
    assert Plan.from_json(data).to_json() == data  # the field survives the App's store
    comment = render_review_comment(found, data)
    assert "Recommended: fix the 2 files that still refer to it" in comment
    assert f"`/sync answer {item.id} ours`" not in comment


def test_a_deletion_nothing_refers_to_keeps_its_reason(tmp_path: Path) -> None:
    s = Scenario(tmp_path / "repos", config=PLAIN_CONFIG)
    s.upstream_pr(10, "Tools", "alice", files={
        "tools/legacy.py": "X = 1\n",
        "tools/used.py": "def main():\n    return 1\n",
        "tools/run.py": "from tools.used import main\n\nmain()\n",
        # Near misses: another folder's legacy.py, a longer module name.
        "docs/tools.md": "Run `scripts/legacy.py` or `import tools.legacy_v2`.\n",
    })
    s.sync_fork()
    s.fork_commit("Fork: drop two tools", {"tools/legacy.py": None, "tools/used.py": None})
    s.upstream_pr(11, "Tools: new values", "bob", files={
        "tools/legacy.py": "X = 2\n", "tools/used.py": "def main():\n    return 2\n"})
    p = _plan(s, tmp_path)
    legacy, used = _item(p, "tools/legacy.py"), _item(p, "tools/used.py")
    data = {i["id"]: i for f in p.to_json()["files"] for i in f["review_items"]}
    # One grep for the sync: it finds the importer of tools/used.py ...
    assert used.reason.endswith("1 file on this branch still refers to it: `tools/run.py` "
                                "L1. Check it before you keep the deletion.")
    assert recommend(data[used.id]) == ("fix the file that still refers to it, then keep the "
                                        "fork's deletion; or take theirs if the fork still "
                                        "needs this file", None)
    # ... and nothing for tools/legacy.py: its reason and recommendation are as they were.
    assert legacy.reason == f"{FORK_DELETED_SAYS} {propose_whole_file('fork').reason}"
    assert legacy.refs is None and "refs" not in data[legacy.id]
    assert recommend(data[legacy.id])[1] == "ours"


def test_a_stub_the_branch_imports_from_recommends_the_full_module(tmp_path: Path) -> None:
    s = Scenario(tmp_path / "repos", config=PLAIN_CONFIG)
    s.sync_fork()
    stub = "# vime: not needed with vLLM; kept as a stub.\n"
    s.fork_commit("Fork: stub", {"vime/backends/vllm_utils/external.py": stub})
    full = ('"""External engines."""\n\nimport requests\n\n\n'
            "def get_server_info(url):\n    return requests.get(url).json()\n\n\n"
            "def start_external_rollout_servers(urls):\n"
            "    return [get_server_info(u) for u in urls]\n\n\n"
            "def discover(urls):\n    return list(urls)\n")
    ray = s.upstream_file("slime/ray/rollout.py").decode()
    s.upstream_pr(11, "External engines", "bob", files={
        "slime/backends/sglang_utils/external.py": full,
        # Upstream's own files use it, and merge cleanly into the fork's.
        "slime/ray/rollout.py": "from slime.backends.sglang_utils.external import "
                                "get_server_info, start_external_rollout_servers\n" + ray,
        "tests/test_external.py": "import slime.backends.sglang_utils.external as ext\n\n\n"
                                  "def test_it(monkeypatch):\n"
                                  '    monkeypatch.setattr("slime.backends.sglang_utils.'
                                  'external.requests.get", None)\n',
    })
    p = _plan(s, tmp_path)
    item = _item(p, "vime/backends/vllm_utils/external.py")
    assert (item.rule, item.tier, item.suggestion) == ("add/add", Tier.DECIDE, None)
    assert item.reason == (
        "both sides added this file (add/add) and their versions differ here; two new files "
        "are never glued together. 2 files on this branch refer to it: `vime/ray/rollout.py` "
        "L1; `tests/test_external.py` L1, L5. Imported from it: `get_server_info`, "
        "`start_external_rollout_servers`, none of which the fork's version has. The fork's "
        f"version is a 1-line stub; upstream's has {full.count(chr(10))} lines.")
    assert item.refs == {"files": 2, "complete": True, "keep": "theirs"}
    data = p.to_json()
    found = next(i for f in data["files"] for i in f["review_items"] if i["id"] == item.id)
    # The recommendation takes upstream's version, by the command the PR body shows.
    assert recommend(found) == ("take upstream's whole version (theirs), which keeps the 2 "
                                "files that refer to it working: the fork's is a stub",
                                "theirs")
    (group,) = [g for g in group_items(data) if item.id in g.ids]
    assert group.command == f"/sync answer {item.id} theirs"
    assert f"`/sync answer {item.id} theirs`" in render_review_comment(found, data)


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


def test_a_pages_bare_name_is_read_in_doc_pages_only(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # "usage" is a word of every command-line module: as a bare name it is a link only in a
    # doc page, and only doc pages are searched for it, so code cannot fill the output.
    files = {"docs/usage.md": "# Usage\n", "docs/index.rst": ".. toctree::\n\n   usage\n",
             **{f"src/cli{i:02}.py": "parser.print_usage()  # usage\n" * 20 for i in range(20)}}
    git, tree = _repo(tmp_path, files)
    monkeypatch.setattr(refs_module, "OUTPUT_LIMIT", 1000)
    found = find_refs(git, tree, ["docs/usage.md"])["docs/usage.md"]
    assert found.complete and found.lines == {"docs/index.rst": (3,)}


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


def test_a_deletion_this_fork_settled_waits_for_a_look_when_files_refer_to_it(
        tmp_path: Path) -> None:
    s = _docs_fork(tmp_path)
    habit = Learned([Way("rule", FORK_DELETED, "suggested", 400, 400,
                         {f"m{i}" for i in range(100)})])
    assert habit.ways[0].tier is Tier.SETTLED
    item = _item(_plan(s, tmp_path, learned=habit), "docs/en/guide.md")
    assert item.tier is Tier.CONFIRM and item.learned
    assert "Check these before you keep the deletion." in item.reason


def test_the_apps_partial_clones_say_at_least_what_they_read(tmp_path: Path) -> None:
    from tests.partial import partial_plan

    s = _docs_fork(tmp_path)
    s.upstream_pr(12, "README: a line more", "carol", files={
        "README.md": "# Project\n\n- [Guide](./docs/en/guide.md)\n- [Other](docs/en/other.md)\n"
                     "- [Changes](CHANGES.md)\n"})
    full = _item(_plan(s, tmp_path), "docs/en/guide.md")
    assert full.refs == {"files": 2, "complete": True}
    # The App's caches hold the window's blobs only: the README (changed upstream) is read,
    # the English index (unchanged) is not, and the count says it may be more.
    run = partial_plan(s.fork_dir, s.upstream_dir, tmp_path / "partial")
    item = _item(run.plan, "docs/en/guide.md")
    assert item.refs == {"files": 1, "complete": False}
    assert item.reason.endswith("At least 1 file on this branch still refers to it: "
                                "`README.md` L3. Check it before you keep the deletion.")
    data = run.plan.to_json()
    found = next(i for f in data["files"] for i in f["review_items"] if i["id"] == item.id)
    assert recommend(found)[0].startswith("fix the files that still refer to it (at least 1), "
                                          "then keep the fork's deletion")
