"""No one-click button commits Python that does not parse where a plain side would.

QA found a suggestion that committed an unterminated string into a Python adapter. The
merges here are git's own: a window planned end to end (``bot.engine.pipeline.plan``),
and ``git merge-file`` for the replay and for files with several regions.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bot.engine import parsecheck
from bot.engine.markers import find_marker_regions_in_lines, split_lines
from bot.engine.model import Tier
from bot.engine.parsecheck import check_parses
from bot.engine.replay import replay_file, same_text
from bot.engine.suggest import Proposal, propose_region
from tests.factory import git_env
from tests.test_mergetree import conflicted, file_of

HEAD = "def call(client, prompt):\n"
TAIL = "    return client.send(prompt)\n"
DOC = '    """Send the prompt."""\n'
# The fork writes its docstrings with one quote; upstream makes this one longer. Merged
# word by word, the fork's closing quote lands after upstream's last line: the string
# never closes.
FORK_DOC = '    "Send the prompt."\n'
UPSTREAM_DOC = '    """Send the prompt.\n\n    Returns the reply.\n    """\n'
BASE, OURS, THEIRS = HEAD + DOC + TAIL, HEAD + FORK_DOC + TAIL, HEAD + UPSTREAM_DOC + TAIL
PATH = "slime/agent/adapters/anthropic.py"
SENTENCE = ("The proposal does not parse as Python (line 1 of the proposal: unterminated "
            "string literal), though either side's version (ours or theirs) does, so there "
            "is no button: pick a side or fix it by hand.")


def compiles(text: str) -> bool:
    try:
        compile(text, "x.py", "exec", dont_inherit=True)
    except SyntaxError:
        return False
    return True


def merge_file(tmp_path: Path, base: str, ours: str, theirs: str) -> str:
    """git's merge of one file, diff3 markers kept."""
    paths = []
    for name, text in (("ours", ours), ("base", base), ("theirs", theirs)):
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))
    proc = subprocess.run(["git", "merge-file", "-p", "--diff3", "-L", "ours", "-L", "base",
                           "-L", "theirs", *paths], capture_output=True, text=True,
                          env=git_env(), check=False)
    assert proc.returncode > 0, proc.stderr  # the number of conflicts
    return proc.stdout


def proposals(path: str, merged: str) -> list[Proposal]:
    """Every region's proposal, checked as classify checks them."""
    lines = split_lines(merged)
    regions = find_marker_regions_in_lines(lines)
    return check_parses(path, lines, regions,
                        [propose_region(lines, r, path=path) for r in regions])


def test_a_word_merge_that_leaves_a_string_open_has_no_button(tmp_path: Path) -> None:
    assert compiles(OURS) and compiles(THEIRS)
    s, p = conflicted(tmp_path, PATH, BASE, OURS, THEIRS)
    (item,) = file_of(p, s.translate_path(PATH)).review_items
    assert item.rule == "merge word by word"  # the rule is kept: the replay measures it
    assert item.tier is Tier.DECIDE and item.suggestion is None
    assert item.reason.endswith(SENTENCE)
    assert item.choices == ["ours", "theirs"]
    assert "suggestion" not in item.to_json() or item.to_json()["suggestion"] is None


def test_the_withheld_text_is_still_the_rules_candidate_in_the_replay(tmp_path: Path) -> None:
    merged = merge_file(tmp_path, BASE, OURS, THEIRS)
    combined = HEAD + '    "Send the prompt.\n\n    Returns the reply.\n    "\n' + TAIL
    assert not compiles(combined)
    # People committed upstream's docstring: the withheld text was not theirs to commit.
    (r,) = replay_file(PATH, merged, THEIRS, added_both=False).regions
    assert r.proposal.suggestion is None and r.proposal.tier is Tier.DECIDE
    assert r.proposal.candidate is not None
    assert same_text(HEAD + r.proposal.candidate + TAIL, combined)
    assert not same_text(r.proposal.candidate, r.committed)
    assert SENTENCE in r.proposal.reason


def test_the_forks_lines_left_indented_after_upstream_deleted_their_block(
        tmp_path: Path) -> None:
    base = "x = 0\nif debug:\n    log('x')\nrun()\n"
    ours = "x = 0\nif debug:\n    log('x')\n    log('y')\nrun()\n"
    theirs = "x = 0\nrun()\n"
    (prop,) = proposals("tool.py", merge_file(tmp_path, base, ours, theirs))
    assert prop.rule == "fork's lines beside upstream's deletion"
    assert prop.suggestion is None and prop.candidate == "    log('y')\n"
    assert "does not parse as Python (line 1 of the proposal: unexpected indent)" in prop.reason
    assert prop.choices == ("ours", "theirs")


def test_a_file_where_nothing_parses_is_left_as_it_is(tmp_path: Path) -> None:
    # A template: no version of it is Python, so the check has nothing to say.
    top = "{% if async %}\nimport asyncio\n{% endif %}\n\n\n"
    merged = merge_file(tmp_path, top + BASE, top + OURS, top + THEIRS)
    (prop,) = proposals(PATH, merged)
    assert prop.suggestion is not None and not compiles(top + HEAD + prop.suggestion + TAIL)
    assert "parse" not in prop.reason


@pytest.mark.parametrize("path", ["docs/call.md", "slime/call.py.txt", "scripts/call"])
def test_a_file_that_is_not_python_is_left_as_it_is(tmp_path: Path, path: str) -> None:
    (prop,) = proposals(path, merge_file(tmp_path, BASE, OURS, THEIRS))
    assert prop.suggestion is not None and "parse" not in prop.reason


def test_a_combination_that_parses_keeps_its_button(tmp_path: Path) -> None:
    base = HEAD + "    return client.send(prompt, timeout=10)\n"
    ours = HEAD + "    return client.send(prompt, timeout=30)\n"
    theirs = HEAD + "    return client.send(prompt.strip(), timeout=10)\n"
    s, p = conflicted(tmp_path, PATH, base, ours, theirs)
    (item,) = file_of(p, s.translate_path(PATH)).review_items
    assert item.suggestion == "    return client.send(prompt.strip(), timeout=30)\n"
    assert "parse" not in item.reason


def test_a_stub_file_is_python_too(tmp_path: Path) -> None:
    (prop,) = proposals("slime/call.pyi", merge_file(tmp_path, BASE, OURS, THEIRS))
    assert prop.suggestion is None and "does not parse as Python" in prop.reason


def test_only_the_region_that_breaks_the_file_loses_its_button(tmp_path: Path) -> None:
    # Two regions far apart: the first merges cleanly, the second leaves a string open.
    first_base = "def setup(opts):\n    return opts.get('timeout', 10)\n"
    first_ours = "def setup(opts):\n    return opts.get('timeout', 30)\n"
    first_theirs = "def setup(opts):\n    return opts.get('timeout', 10) or 10\n"
    gap = "".join(f"X{n} = {n}\n" for n in range(8))
    merged = merge_file(tmp_path, first_base + gap + BASE, first_ours + gap + OURS,
                        first_theirs + gap + THEIRS)
    fine, broken = proposals(PATH, merged)
    assert fine.suggestion == "    return opts.get('timeout', 30) or 10\n"
    assert broken.suggestion is None
    # The error is in the second region: its line numbers are the proposal's own.
    assert "(line 1 of the proposal: unterminated string literal)" in broken.reason


def test_two_broken_regions_each_lose_their_button(tmp_path: Path) -> None:
    # Each region's suggestion breaks the file: judged with the other region as upstream
    # has it, neither hides the other.
    other = BASE.replace("call", "ask")
    gap = "".join(f"X{n} = {n}\n" for n in range(8))
    merged = merge_file(tmp_path, BASE + gap + other, OURS + gap + OURS.replace("call", "ask"),
                        THEIRS + gap + THEIRS.replace("call", "ask"))
    props = proposals(PATH, merged)
    assert len(props) == 2
    assert all(p.suggestion is None and SENTENCE in p.reason for p in props)


def test_an_error_after_the_region_is_told_by_its_line_in_commit_one(tmp_path: Path) -> None:
    # The fork wraps the call; upstream drops the block it sat in. The fork's added line
    # stays, and the next line of the file no longer lines up.
    base = "def run():\n    if debug:\n        log('x')\n    go()\n"
    ours = "def run():\n    if debug:\n        log('x')\n        log('y')\n    go()\n"
    theirs = "def run():\n    go()\n"
    merged = merge_file(tmp_path, base, ours, theirs)
    (prop,) = proposals("tool.py", merged)
    region = find_marker_regions_in_lines(split_lines(merged))[0]
    assert prop.suggestion is None
    assert (f"(line {region.end_line + 1}: unindent does not match any outer indentation "
            "level)") in prop.reason


def test_large_files_are_not_judged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    merged = merge_file(tmp_path, BASE, OURS, THEIRS)
    monkeypatch.setattr(parsecheck, "MAX_CHARS", len(merged) - 1)
    (prop,) = proposals(PATH, merged)
    assert prop.suggestion is not None


def test_the_parse_budget_leaves_unreached_regions_as_they_are(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    merged = merge_file(tmp_path, BASE, OURS, THEIRS)
    monkeypatch.setattr(parsecheck, "MAX_PARSES", 1)  # the combined file only
    (prop,) = proposals(PATH, merged)
    assert prop.suggestion is not None


def test_a_large_file_gets_fewer_compiles(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    merged = merge_file(tmp_path, BASE, OURS, THEIRS)
    monkeypatch.setattr(parsecheck, "MAX_COMPILED", 2 * len(merged))  # two of this size
    # The combined file (the suggestion's variant too, here) and one side's: no room
    # for the other side's, so nothing is judged.
    (prop,) = proposals(PATH, merged)
    assert prop.suggestion is not None
    monkeypatch.setattr(parsecheck, "MAX_COMPILED", 4 * len(merged))
    (prop,) = proposals(PATH, merged)
    assert prop.suggestion is None
