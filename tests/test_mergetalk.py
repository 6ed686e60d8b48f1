"""Review items speak forksync's words: git's conflict messages, flags as the fork holds them."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.engine.flags import FLAG_CHOICES
from bot.engine.mergetalk import describe
from bot.engine.model import Plan
from bot.engine.pipeline import plan
from tests.factory import PLAIN_CONFIG, Scenario, Symlink
from tests.partial import partial_plan

FLAG_CONFIG = PLAIN_CONFIG + (
    "flags:\n  - {pattern: '--sglang-enable-metrics', say: 'no vLLM equivalent'}\n")
GIT_WORDS = ("warning:", "CONFLICT", "Cannot merge", " ours", " theirs", "left in tree",
             "Merge conflict in")


def _plan(s: Scenario, tmp: Path) -> Plan:
    return plan(str(s.fork_dir), str(s.upstream_dir), workdir=tmp / "work")


@pytest.fixture
def conflicts(tmp_path: Path) -> tuple[Scenario, Plan]:
    """Every whole-file conflict kind git reports, on one window."""
    s = Scenario(tmp_path / "repos", config=FLAG_CONFIG, skeleton=False)
    s.upstream_pr(1, "Start", files={
        "data/a.bin": b"\0one", "slime/gone_up.py": "x = 1\n", "slime/gone_fork.py": "y = 1\n",
        "slime/moved.py": "".join(f"line {i}\n" for i in range(30)), "slime/kind": "text\n"})
    s.sync_fork()
    s.fork_commit("Fork work", {
        "data/a.bin": b"\0fork", "vime/gone_up.py": "x = 2  # fork\n", "vime/gone_fork.py": None,
        "vime/both.py": "fork = True\n", "vime/moved.py": None, "vime/kind": "fork text\n"})
    s.upstream_pr(2, "Upstream work", files={
        "data/a.bin": b"\0upstream", "slime/gone_up.py": None, "slime/gone_fork.py": "y = 2\n",
        "slime/both.py": "upstream = True\n", "slime/kind": Symlink("elsewhere")},
        renames={"slime/moved.py": "slime/moved_again.py"})
    return s, _plan(s, tmp_path)


def _file(p: Plan, path: str) -> tuple[str, str]:
    (f,) = [f for f in p.files if f.path == path]
    assert f.status.value == "conflict", (path, f.status)
    (item,) = f.review_items
    return f.note, item.reason


def test_whole_file_conflicts_are_explained_in_forksync_words(
        conflicts: tuple[Scenario, Plan]) -> None:
    _, p = conflicts
    expected = {
        "data/a.bin": ("binary file changed on both sides",
                       "The fork and upstream both changed this binary file, which cannot be "
                       "merged line by line."),
        "vime/gone_up.py": ("deleted upstream, changed in the fork",
                            "Upstream deleted this file and the fork changed it."),
        "vime/gone_fork.py": ("deleted in the fork, changed upstream",
                              "The fork deleted this file and upstream changed it."),
    }
    for path, (note, reason) in expected.items():
        got_note, got_reason = _file(p, path)
        # A modify/delete item goes on to say what its proposal keeps.
        assert got_note == note and got_reason.startswith(reason)
    whole = [f for f in p.files if f.status.value == "conflict"
             and all(i.kind.value == "file" for i in f.review_items)]
    texts = [f.note for f in whole] + [i.reason for f in whole for i in f.review_items]
    for text in texts:
        assert not any(word in text for word in GIT_WORDS), text
    assert len(whole) >= 4  # rename/delete and the symlink are in there too
    assert {f.note for f in whole} >= {"renamed by upstream, deleted by the fork",
                                       "a different kind of entry on each side"}


def test_every_message_git_writes_has_a_sentence_of_ours() -> None:
    cases = [
        ("CONFLICT (contents)", "CONFLICT (add/add): Merge conflict in x.py",
         "added on both sides"),
        ("CONFLICT (rename/delete)", "CONFLICT (rename/delete): a.py renamed to b.py in theirs, "
         "but deleted in ours.", "renamed by upstream, deleted by the fork"),
        ("CONFLICT (distinct modes)", "CONFLICT (distinct types): lnk had different types on "
         "each side; renamed one of them so each can be recorded somewhere.",
         "a different kind of entry on each side"),
        ("CONFLICT (file/directory)", "CONFLICT (file/directory): directory in the way of fd "
         "from ours; moving it to fd~ours instead.", "a file on one side, a directory on the "
         "other"),
        ("CONFLICT (submodule lacks merge base)", "Failed to merge submodule sub",
         "submodule conflict"),
        ("CONFLICT (something new)", "CONFLICT (something new): x", "something new"),
    ]
    for kind, text, label in cases:
        got_label, sentence = describe(kind, text)
        assert got_label == label
        assert sentence.endswith(".") and "CONFLICT" not in sentence


def test_a_flag_quotes_the_line_as_the_fork_holds_it_and_offers_every_choice(
        tmp_path: Path) -> None:
    s = Scenario(tmp_path / "repos", config=FLAG_CONFIG, skeleton=False)
    s.upstream_pr(1, "Start", files={"slime/args.py": "ARGS = []\n"})
    s.sync_fork()
    s.upstream_pr(2, "Metrics", files={
        "slime/args.py": "ARGS = []\nARGS.append('--sglang-enable-metrics')\n"})
    p = _plan(s, tmp_path)
    (item,) = [i for i in p.items if i.kind.value == "flag"]
    merged = "ARGS.append('--vllm-enable-metrics')"
    assert item.theirs == merged + "\n"
    assert item.question is not None
    assert item.question.startswith("Upstream added `ARGS.append('--sglang-enable-metrics')` "
                                     f"(here `{merged}`) at L2: no vLLM equivalent.")
    assert "adapt" in item.question and item.choices == list(FLAG_CHOICES)
    assert item.choices == ["keep", "adapt", "drop"]
    assert item.start_line == 2  # anchored on the translated line in the merged file


EP_CONFIG = PLAIN_CONFIG + (
    "flags:\n  - {pattern: '--sglang-(ep-size|speculative-)', say: 'no vLLM equivalent'}\n")


def test_a_flag_names_how_the_fork_spells_the_option_the_same_on_partial_clones(
        tmp_path: Path) -> None:
    # slime #2093 in vime: the `*.md` prose rule writes `--vLLM-ep-size` into the new docs,
    # while the fork's scripts, which the window also changes, pass `--vllm-ep-size`.
    s = Scenario(tmp_path / "repos", config=EP_CONFIG, skeleton=False)
    script = "python train.py \\\n   --sglang-ep-size 8 \\\n   --lr 1e-5\n"
    s.upstream_pr(1, "Start", files={"scripts/run-a.sh": script, "scripts/run-b.sh": script,
                                     "scripts/other.sh": "echo --sglang-ep-size\n"})
    s.sync_fork()
    s.upstream_pr(2, "GLM-5.2", files={
        "scripts/run-a.sh": script.replace("1e-5", "2e-5"),
        "scripts/run-b.sh": script.replace("1e-5", "3e-5"),
        "docs/en/glm.md": "# GLM\n\n```bash\n   --sglang-ep-size 64\n```\n"})
    p = _plan(s, tmp_path)
    (item,) = [i for i in p.items if i.kind.value == "flag"]
    assert item.path == "docs/en/glm.md" and item.start_line == 4
    # Searched: the fork's run-a.sh and run-b.sh, the files upstream changed (other.sh, which
    # the window leaves alone, is not read).
    assert item.question == (
        "Upstream added `--sglang-ep-size 64` (here `--vLLM-ep-size 64`) at L4: no vLLM "
        "equivalent. But the fork spells it `--vllm-ep-size` (2 of the files upstream "
        "changed, e.g. `scripts/run-a.sh` L2). Change it to the fork's spelling?")
    assert item.flagged is not None and item.flagged["searched"] == 2
    # The App plans on partial clones: the search reads only blobs a plan reads anyway.
    partial = partial_plan(s.fork_dir, s.upstream_dir, tmp_path / "partial").plan
    assert partial.to_json() == p.to_json()
