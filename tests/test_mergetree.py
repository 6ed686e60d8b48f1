"""git's merge and its markers: a marker size per path, the base label, read back exactly.

The inputs of these merges hold lines git could take for markers: Markdown setext
underlines (``=======``) and a documented ``<<<<<<< HEAD`` in a code block. The merge
must step up to a marker size none of those lines has, record it in the plan, and
every review item must then hold exactly its side's lines, never a marker.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from bot.engine.markers import find_marker_regions, marker_kind, scan
from bot.engine.mergetree import attributes, shared_sizes
from bot.engine.pipeline import plan
from bot.engine.report import render_json
from tests.factory import PLAIN_CONFIG, Scenario, git, git_env

GUIDE = """Guide
=======

Intro.

Usage
=======

Run slime with the defaults.

```
<<<<<<< HEAD
a conflict looks like this
>>>>>>> feature
```

Tuning
=======

Set the batch size.
"""


def conflicted(tmp_path: Path, path: str, base: str, ours: str, theirs: str) -> Any:
    """Plan a window where the fork changed ``path`` to ``ours`` and upstream to ``theirs``."""
    s = Scenario(tmp_path / "repos", config=PLAIN_CONFIG)
    s.upstream_pr(10, "Add the file", "alice", files={path: base})
    s.sync_fork()
    fork_path = s.translate_path(path)
    s.fork_commit("Fork edit", {fork_path: s.translate_text(ours, path).decode()})
    s.upstream_pr(11, "Upstream edit", "bob", files={path: theirs})
    return s, plan(str(s.fork_dir), str(s.upstream_dir), workdir=str(tmp_path / "work"))


def merged_text(p: Any, path: str) -> str:
    return git(p.work_git_dir, "cat-file", "blob", f"{p.merged_tree}:{path}").decode()


def file_of(p: Any, path: str) -> Any:
    (found,) = [f for f in p.files if f.path == path]
    return found


def gits_own_merge(p: Any, path: str, size: int, tmp_path: Path) -> str:
    """The file as git merges the plan's own ours/theirs with conflict-marker-size=``size``."""
    attrs = tmp_path / "attrs"
    attrs.write_text(f"/{path} conflict-marker-size={size}\n")
    out = subprocess.run(
        ["git", f"--git-dir={p.work_git_dir}", "-c", "merge.conflictStyle=diff3", "-c",
         f"core.attributesFile={attrs}", "merge-tree", "--write-tree", "ours", "theirs"],
        capture_output=True, env=git_env(), check=False).stdout.decode().splitlines()[0]
    return git(p.work_git_dir, "cat-file", "blob", f"{out}:{path}").decode()


def test_setext_headings_on_both_sides_of_a_real_conflict(tmp_path: Path) -> None:
    # Each side adds its own section, heading and underline, at the same place.
    ours = GUIDE.replace("Tuning\n", "On the fork\n=======\n\nUse slime's fork.\n\nTuning\n")
    theirs = GUIDE.replace("Tuning\n", "Upstream\n=======\n\nUse slime.\n\nTuning\n")
    s, p = conflicted(tmp_path, "docs/en/guide.md", GUIDE, ours, theirs)
    path = s.translate_path("docs/en/guide.md")
    result = file_of(p, path)
    assert result.status.value == "conflict" and result.marker_size == 8
    (item,) = [i for i in result.review_items if i.start_line is not None]
    assert item.ours == "On the fork\n=======\n\nUse vime's fork.\n\n"
    assert item.theirs == "Upstream\n=======\n\nUse vime.\n\n"
    assert item.base == ""
    for text in (item.ours, item.base, item.theirs, item.suggestion or ""):
        assert not any(marker_kind(line, 8) for line in text.splitlines(keepends=True))
    text = merged_text(p, path)
    lines = text.splitlines()
    assert lines[item.start_line - 1] == "<<<<<<<< ours"
    assert lines[item.end_line - 1] == ">>>>>>>> theirs"
    # Exactly git's merge at that size, but for the base label (see the next test).
    cutoff_label = f"|||||||| upstream@{p.cutoff[:12]}"
    assert cutoff_label in lines
    git_says = gits_own_merge(p, path, 8, tmp_path).splitlines()
    assert [ln for ln in lines if ln != cutoff_label] == \
        [ln for ln in git_says if not ln.startswith("|||||||| ")]
    # Every other "=======" in the file is a heading: nothing marker-like is left over.
    assert scan(text, 8, reference=text).orphans == []
    # The JSON report records the size, so a rescan parses at it.
    report = json.loads(render_json(p.to_json()))
    (entry,) = [f for f in report["files"] if f["path"] == path]
    assert entry["marker_size"] == 8


def test_a_literal_conflict_marker_in_a_code_block(tmp_path: Path) -> None:
    ours = GUIDE.replace("a conflict looks like this\n",
                         "a conflict looks like this\n<<<<<<< HEAD\nthe fork's example\n")
    theirs = GUIDE.replace("a conflict looks like this\n",
                           "a conflict looks like this\n=======\nupstream's example\n")
    s, p = conflicted(tmp_path, "docs/en/guide.md", GUIDE, ours, theirs)
    path = s.translate_path("docs/en/guide.md")
    result = file_of(p, path)
    assert result.marker_size == 8
    (item,) = [i for i in result.review_items if i.start_line is not None]
    assert item.ours == "<<<<<<< HEAD\nthe fork's example\n"
    assert item.theirs == "=======\nupstream's example\n"
    assert item.base == ""
    text = merged_text(p, path)
    (region,) = find_marker_regions(text, 8)
    assert (region.start_line, region.end_line) == (item.start_line, item.end_line)
    # At git's default size the same text misleads: that is what the size is for.
    assert [r.ours for r in find_marker_regions(text)] != [item.ours]


def test_a_file_with_no_marker_like_lines_keeps_gits_size_and_the_base_names_the_cutoff(
        tmp_path: Path) -> None:
    base = "".join(f"line {i}\n" for i in range(10))
    _, p = conflicted(tmp_path, "slime/core.py", base, base.replace("line 4", "fork 4"),
                      base.replace("line 4", "upstream 4"))
    result = file_of(p, "vime/core.py")
    assert result.marker_size == 7
    text = merged_text(p, "vime/core.py")
    assert f"\n||||||| upstream@{p.cutoff[:12]}\n" in text
    # The synthetic base commit that git would name is in neither repository.
    base_commit = git(p.work_git_dir, "merge-base", "ours", "theirs").decode().strip()
    assert base_commit[:7] not in text


def test_marker_sizes_reach_git_exactly_even_for_paths_git_cannot_spell(tmp_path: Path) -> None:
    # "a b.md" cannot be written in an attributes file; "a?b.md" reaches "a_b.md" too, so
    # the two share the size that suits both.
    sizes = shared_sizes({"a b.md": {7}, "a_b.md": {8}, "c[1]*.md": {7}, "d\tx.md": set(),
                          "plain.md": set()})
    assert sizes == {"a b.md": 9, "a_b.md": 9, "c[1]*.md": 8, "d\tx.md": 7, "plain.md": 7}
    attrs = tmp_path / "attrs"
    attrs.write_bytes(attributes(sizes))
    repo = tmp_path / "r.git"
    git(tmp_path, "init", "-q", "--bare", str(repo))
    out = subprocess.run(
        ["git", f"--git-dir={repo}", "-c", f"core.attributesFile={attrs}", "check-attr", "-z",
         "--stdin", "conflict-marker-size"],
        input="\0".join([*sizes, "c1.md", "a-b.md"]).encode() + b"\0", capture_output=True,
        env=git_env(), check=True).stdout.decode().split("\0")
    told = {out[i]: out[i + 2] for i in range(0, len(out) - 2, 3)}
    assert told == {"a b.md": "9", "a_b.md": "9", "c[1]*.md": "8", "d\tx.md": "unspecified",
                    "plain.md": "unspecified", "c1.md": "unspecified", "a-b.md": "9"}


def test_a_path_with_a_space_gets_its_marker_size_from_git(tmp_path: Path) -> None:
    ours = GUIDE.replace("Tuning\n", "On the fork\n=======\n\nTuning\n")
    theirs = GUIDE.replace("Tuning\n", "Upstream\n=======\n\nTuning\n")
    s, p = conflicted(tmp_path, "docs/en/user guide.md", GUIDE, ours, theirs)
    path = s.translate_path("docs/en/user guide.md")
    result = file_of(p, path)
    assert result.marker_size == 8
    (region,) = find_marker_regions(merged_text(p, path), 8)
    assert region.ours == "On the fork\n=======\n\n" and region.theirs == "Upstream\n=======\n\n"
