"""Tiers a fork earns from its own past merges (``forksync learn``, ``bot.engine.learn``).

A real repository with real merges: in each, the fork and upstream both edit README.md
and requirements.txt; people keep the fork's README and merge the requirements word by
word. Replaying the history must find both habits, and a plan of a fork that committed
the learned file must turn a covered Decide hunk into a Confirm with the fork's text.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.engine.git import CatFile, Git
from bot.engine.learn import (
    LEARNED_PATH,
    MAX_SOURCES,
    Learned,
    Outcome,
    Way,
    dumps,
    earn,
    from_state,
    learn,
    loads,
    remember,
    sync_commits,
    sync_outcomes,
    tally,
)
from bot.engine.model import ReviewItem, Tier
from bot.engine.pipeline import plan, sync
from bot.engine.report import render_markdown
from bot.engine.rerere import take_side
from bot.engine.suggest import FORK_FILE, Hunk, propose, propose_hunk
from bot.errors import ConfigError
from tests.factory import Scenario, commit_tree, git, git_text, init_repo, write_tree

ROUNDS = 17  # 17 of 17 right: a Wilson lower bound of 0.816, just past Confirm's 0.80


def _tree(repo: Path, readme: str, reqs: str) -> str:
    return write_tree(repo, [("README.md", "100644", readme.encode()),
                             ("requirements.txt", "100644", reqs.encode()),
                             ("src/app.py", "100644", b"print('hi')\n")])


def _readme(version: str) -> str:
    return f"# project\n\nversion {version}\n\nrun it\n"


def history(tmp: Path, rounds: int = ROUNDS) -> Path:
    """``rounds`` merges of an upstream edit and a fork edit of the same lines."""
    repo = init_repo(tmp / "fork", bare=True)
    head = commit_tree(repo, _tree(repo, _readme("0"), "numpy==1.0 torch==1.0\n"), [], "base")
    for r in range(1, rounds + 1):
        ours = commit_tree(repo, _tree(repo, _readme(f"{r} (our build)"),
                                       f"numpy==1.{r} torch==1.{r - 1}\n"), [head], "fork work")
        theirs = commit_tree(repo, _tree(repo, _readme(f"{r}"),
                                         f"numpy==1.{r - 1} torch==1.{r}\n"), [head], "upstream")
        merged = _tree(repo, _readme(f"{r} (our build)"), f"numpy==1.{r} torch==1.{r}\n")
        head = commit_tree(repo, merged, [ours, theirs], f"Merge upstream {r}")
        # The next round starts from the merge, both sides agreeing on it.
        ours_next = commit_tree(repo, _tree(repo, _readme(f"{r}"), f"numpy==1.{r} torch==1.{r}\n"),
                                [head], "settle")
        head = ours_next
    git(repo, "update-ref", "refs/heads/main", head)
    return repo


@pytest.fixture(scope="module")
def fork(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return history(tmp_path_factory.mktemp("learn"))


def test_learn_finds_the_forks_habits(fork: Path) -> None:
    learned = learn(Git(fork), "main")
    assert learned.merges == ROUNDS
    assert learned.hunks == 2 * ROUNDS
    ways = {(w.kind, w.key, w.action): w for w in learned.ways}
    readme = ways[("file", "README.md", "ours")]
    assert (readme.right, readme.n, len(readme.merges), readme.tier) == \
        (ROUNDS, ROUNDS, ROUNDS, Tier.CONFIRM)
    words = ways[("rule", "merge word by word, data file", "suggested")]
    assert (words.right, words.n, words.tier) == (ROUNDS, ROUNDS, Tier.CONFIRM)
    # Upstream's README was never what people kept: that way earns nothing.
    assert ("file", "README.md", "theirs") not in ways
    assert all(w.tier is not Tier.DECIDE for w in learned.ways)


def test_too_few_merges_earn_nothing(fork: Path) -> None:
    # 16 of 16 is a bound of 0.806; 8 of 8 only 0.676: not a habit yet.
    assert learn(Git(fork), "main", limit=8).ways == []


def test_a_way_seen_in_fewer_than_three_merges_earns_nothing() -> None:
    way = Way("file", "a.txt", "ours", right=50, n=50, merges={"m1", "m2"})
    tiers = [way.tier]
    way.merges.add("m3")
    tiers.append(way.tier)
    assert way.lower > 0.9 and tiers == [Tier.DECIDE, Tier.CONFIRM]


def test_a_way_must_hold_in_most_merges_not_only_most_hunks() -> None:
    # 95 of 100 hunks, but its 5 misses fall in 2 of 5 merges: people took it in whole
    # merges, not as a habit of the file (valid4's Cargo.lock: 2,325 of 2,738 hunks).
    clustered = Way("file", "Cargo.lock", "ours", right=95, n=100,
                    merges={f"m{i}" for i in range(5)}, missed={"m1", "m3"})
    assert clustered.lower > 0.88 and clustered.merges_right == 3
    assert clustered.tier is Tier.DECIDE
    spread = Way("file", "Cargo.lock", "ours", right=95, n=100,
                 merges={f"m{i}" for i in range(25)}, missed={"m1", "m3", "m5"})
    assert spread.tier is Tier.CONFIRM  # 22 of 25 merges right throughout
    counted = tally([Outcome("m1", "a.txt", "conflict", None, True, False),
                     Outcome("m1", "a.txt", "conflict", None, False, True),
                     Outcome("m2", "a.txt", "conflict", None, True, False)])
    ours = next(w for w in counted if (w.kind, w.key, w.action) == ("file", "a.txt", "ours"))
    assert (ours.right, ours.n, len(ours.merges), ours.merges_right) == (2, 3, 2, 1)


def test_a_file_from_before_merges_were_counted_is_said_not_used() -> None:
    old = ('{"version": 1, "ways": [{"kind": "file", "key": "a", "action": "ours", '
           '"right": 40, "n": 40, "merges": 5}]}')
    learned = loads(old)
    assert learned.ways == [] and "did not count merges" in learned.warning
    assert "run `forksync learn` again" in learned.warning
    two = loads('{"version": 2, "ways": [{"kind": "file", "key": "a", "action": "ours", '
                '"right": 40, "n": 40, "merges": 5, "merges_right": 5}]}')
    assert two.ways == [] and "held in its newest merges" in two.warning


def test_a_habit_missed_in_its_newest_merges_is_a_decide_until_it_holds_twice() -> None:
    def way(missed: set[str], merges: int = 10) -> Way:
        names = [f"m{i:02}" for i in range(merges)]
        return Way("file", "docs/a.md", "ours", right=99, n=100, merges=set(names),
                   missed=missed, order=names)

    assert way({"m03"}).tier is Tier.CONFIRM  # an old miss, then eight merges right
    newest = way({"m09"})
    assert newest.lower > 0.9 and newest.merges_right == 9 and newest.last_right == 1
    assert newest.tier is Tier.DECIDE and not newest.held_lately
    assert way({"m08"}).tier is Tier.DECIDE  # the one before it counts too
    assert way({"m09"}, merges=11).tier is Tier.DECIDE
    # Two more merges right: the habit holds again (m09 is no longer among the newest two).
    back = way({"m09"}, merges=12)
    assert back.last_right == 2 and back.tier is Tier.CONFIRM
    # tally keeps the order the outcomes came in, not the names' order.
    counted = tally([Outcome(m, "a.txt", "conflict", None, m != "z", True)
                     for m in ("z", "b", "a")])
    ours = next(w for w in counted if (w.kind, w.key, w.action) == ("file", "a.txt", "ours"))
    assert ours.order == ["z", "b", "a"] and ours.last_right == 2


def test_learn_reads_a_forks_merges_oldest_first(tmp_path: Path) -> None:
    # The fork kept its deletions in 26 merges, then took upstream's version in its newest:
    # 26 of 27 is past the bound (0.817), but the habit did not hold in the newest merge.
    fork = deletions(tmp_path / "late", 27, 26)
    learned = learn(Git(fork), "main")
    assert learned.merges == 27
    assert not [w for w in learned.ways if w.key == "modify/delete, fork deleted"]
    (lapsed,) = [w for w in learned.lapsed if w.key == "modify/delete, fork deleted"]
    assert (lapsed.right, lapsed.n, lapsed.last_right) == (26, 27, 1)
    # The file's item says why the habit no longer raises it; its tier stays Decide.
    from bot.engine.suggest import propose_whole_file
    prop = learned.apply_file(propose_whole_file("fork"))
    assert prop.tier is Tier.DECIDE and not prop.learned
    assert ("This fork's people kept the deletion at 26 of 27 files the fork deleted in past "
            "merges, but not at every one of them in the newest 2 of those merges"
            in prop.reason and "holds in 2 merges in a row" in prop.reason)
    # forksync learn says so on stderr too.
    proc = _cli("learn", "--fork", str(fork), "--rev", "main", "-q")
    assert proc.returncode == 0, proc.stderr
    assert "missed in their newest merges" in proc.stderr
    assert "lapsed   rule modify/delete, fork deleted: suggested, right 26 of 27" in proc.stderr
    # The same counts with the miss in the oldest merge earn the Confirm.
    early = tally([Outcome(f"m{r:02}", f"t/o{r}.py", "modify/delete, fork deleted", r > 0,
                           r > 0, r == 0) for r in range(27)])
    way = next(w for w in early if w.key == "modify/delete, fork deleted")
    assert way.tier is Tier.CONFIRM


def test_the_file_round_trips_and_only_counts_are_trusted(fork: Path) -> None:
    learned = learn(Git(fork), "main")
    text = dumps(learned)
    again = loads(text)
    assert [(w.kind, w.key, w.action, w.right, w.n, w.tier) for w in again.ways] == \
        [(w.kind, w.key, w.action, w.right, w.n, w.tier) for w in learned.ways]
    data = json.loads(text)
    data["ways"][0]["tier"] = "Settled"  # an edited tier promises nothing: counts decide
    data["ways"].append({"kind": "file", "key": "x.py", "action": "theirs", "right": 3,
                         "n": 3, "merges": 3, "merges_right": 3, "last_right": 2,
                         "tier": "Settled"})
    edited = loads(json.dumps(data))
    assert [w.tier for w in edited.ways] == [Tier.CONFIRM, Tier.CONFIRM, Tier.DECIDE]


@pytest.mark.parametrize(("text", "says"), [
    ("{", "JSON"),
    ("[]", "a JSON object"),
    ('{"version": 9, "ways": []}', "version"),
    ('{"version": 3, "ways": [{"kind": "glob", "key": "a", "action": "ours"}]}',
     "ways[0].kind"),
    ('{"version": 3, "ways": [{"kind": "file", "key": "a", "action": "suggested"}]}',
     "ways[0].action"),
    ('{"version": 3, "replayed": {"merges": 1, "hunks": 1}, "ways": [{"kind": "file", '
     '"key": "a", "action": "ours", "right": 5, "n": 4, "merges": 3, "merges_right": 3, '
     '"last_right": 2}]}',
     "ways[0].right"),
    ('{"version": 3, "ways": [{"kind": "file", "key": "a", "action": "ours", "right": 4, '
     '"n": 4, "merges": 3}]}', "ways[0].merges_right"),
    ('{"version": 3, "ways": [{"kind": "file", "key": "a", "action": "ours", "right": 4, '
     '"n": 4, "merges": 3, "merges_right": 4, "last_right": 2}]}',
     "ways[0].merges_right: at most merges"),
    ('{"version": 3, "ways": [{"kind": "file", "key": "a", "action": "ours", "right": 4, '
     '"n": 4, "merges": 3, "merges_right": 3}]}', "ways[0].last_right"),
    ('{"version": 3, "ways": [{"kind": "file", "key": "a", "action": "ours", "right": 4, '
     '"n": 4, "merges": 3, "merges_right": 2, "last_right": 0}]}',
     "ways[0].last_right: between 1 and 2"),
    ('{"version": 3, "ways": [{"kind": "file", "key": "a", "action": "ours", "right": 4, '
     '"n": 4, "merges": 3, "merges_right": 1, "last_right": 2}]}',
     "ways[0].last_right: between 0 and 1"),
    ('{"version": 3, "replayed": {"merges": -1, "hunks": 1}, "ways": []}', "replayed.merges"),
    ('{"version": 3, "ways": [], "held_back": {}}', "held_back: a list"),
    ('{"version": 3, "ways": [], "held_back": [{"right": 1}]}', "held_back[0].rule"),
    ('{"version": 3, "ways": [], "held_back": [{"rule": "same change", "right": 5, "n": 4, '
     '"merges": 2}]}', "held_back[0].right: at most n"),
    ('{"version": 3, "ways": [], "held_back": [{"rule": "same change", "right": 1, "n": 4, '
     '"merges": 5}]}', "held_back[0].merges: between 1 and n"),
])
def test_a_broken_file_names_the_field(text: str, says: str) -> None:
    with pytest.raises(ConfigError) as err:
        loads(text)
    assert LEARNED_PATH in str(err.value) and says in str(err.value)


def _learned(kind: str, key: str, action: str, right: int = 40, n: int = 40) -> Learned:
    return Learned([Way(kind, key, action, right, n, {f"m{i}" for i in range(5)})])


def test_a_lapsed_habit_leaves_the_hunk_a_decide_and_says_why() -> None:
    # The fork's README: ours at every conflict of 26 merges, then upstream's in the newest.
    outcomes = [Outcome(f"m{r:02}", "README.md", "conflict", None, r < 26, r == 26)
                for r in range(27)]
    learned = earn(outcomes, merges=27)
    assert not [w for w in learned.ways if w.key == "README.md"]
    prop = propose("a = 2\n", "a = 1\n", "a = 3\n", path="README.md")
    after = learned.apply(prop, "a = 2\n", "a = 3\n", "README.md")
    assert after.tier is Tier.DECIDE and after.suggestion == prop.suggestion
    assert after.reason.startswith(prop.reason)
    assert ("This fork's people committed the fork's side (ours) at 26 of 27 conflict hunks "
            "in `README.md` in past merges, but not at every one of them in the newest 2"
            in after.reason)
    # Other files are not told about it.
    other = propose("a = 2\n", "a = 1\n", "a = 3\n", path="src/a.py")
    assert learned.apply(other, "a = 2\n", "a = 3\n", "src/a.py") == other


def test_the_apps_memory_withdraws_a_habit_of_the_file_it_saw_missed(tmp_path: Path) -> None:
    s = _conflicted(tmp_path)
    s.fork_commit("Learned tiers", {LEARNED_PATH: dumps(_learned(
        "file", "notes/build.txt", "ours", right=20, n=20))})
    assert _item(s, tmp_path / "file").tier is Tier.CONFIRM
    # Since the file was committed, two sync PRs were merged; at the newer one people took
    # upstream's side in the file: the file's habit is withdrawn, and the item says why.
    state: dict[str, object] = {}
    remember(state, "c1", [Outcome("c1", "notes/build.txt", "conflict", None, True, False)])
    remember(state, "c2", [Outcome("c2", "notes/build.txt", "conflict", None, False, True)])
    memory = from_state(state)
    p = plan(str(s.fork_dir), str(s.upstream_dir), workdir=tmp_path / "wd", learned=memory)
    (item,) = [i for f in p.files if f.path == "notes/build.txt" for i in f.review_items]
    assert item.tier is Tier.DECIDE and not item.learned
    assert ("This fork's people committed the fork's side (ours) at 1 of 2 conflict hunks in "
            "`notes/build.txt` in past merges, but not at every one of them in the newest 2 "
            "of those merges (the fork's merged sync PRs, as forksync saw them)" in item.reason)
    # The memory's counts also give a rule's figure, citing the memory, not the file.
    checked_memory = from_state({"sources": {f"w{r}": [["src/a.py", "merge word by word",
                                                        r < 4, False, False]]
                                             for r in range(12)}})
    assert checked_memory is not None
    from bot.engine.suggest import Proposal
    prop = Proposal(Tier.DECIDE, "Merged word by word.", "x\n", rule="merge word by word",
                    candidate="x\n")
    said = _learned("file", "notes/build.txt", "ours").checked_by(checked_memory).apply(
        prop, "a\n", "b\n", "src/b.py").reason
    assert said == ("Merged word by word. In this fork's past merges, people committed this "
                    "rule's proposal at 4 of 12 conflict hunks of this kind, in 12 merges (the "
                    "fork's merged sync PRs, as forksync saw them).")
    # A memory that saw the habit hold leaves the file's way as it is.
    held: dict[str, object] = {}
    remember(held, "c1", [Outcome("c1", "notes/build.txt", "conflict", None, True, False)])
    p = plan(str(s.fork_dir), str(s.upstream_dir), workdir=tmp_path / "wd2",
             learned=from_state(held))
    (item,) = [i for f in p.files if f.path == "notes/build.txt" for i in f.review_items]
    assert item.tier is Tier.CONFIRM and "20 of 20" in item.reason


def test_a_decide_gives_this_forks_own_figure_for_its_rule() -> None:
    from bot.engine.suggest import Proposal
    # In this fork the word merge was what people committed at 11 of 38 hunks.
    outcomes = [Outcome(f"m{r:02}", f"src/f{r}.py", "merge word by word", r % 7 < 2, False,
                        False) for r in range(38)]
    learned = earn(outcomes, merges=38)
    assert not learned.ways and not learned.lapsed
    prop = Proposal(Tier.DECIDE, "Both edits merged word by word.", "x = 3\n",
                    rule="merge word by word", candidate="x = 3\n")
    out = learned.apply(prop, "x = 2\n", "x = 1\n", "src/new.py")
    assert out.tier is Tier.DECIDE and out.suggestion == "x = 3\n"
    right = sum(r % 7 < 2 for r in range(38))
    assert out.reason == ("Both edits merged word by word. In this fork's past merges, people "
                          f"committed this rule's proposal at {right} of 38 conflict hunks of "
                          "this kind, in 38 merges (`.github/forksync-learned.json`).")
    # Under ten hunks, no figure: too few to say anything.
    few = earn(outcomes[:9], merges=9)
    assert few.apply(prop, "x = 2\n", "x = 1\n", "src/new.py") == prop
    # A rule with no candidate has no figure of its own.
    bare = Proposal(Tier.DECIDE, "Both sides changed it.", None, rule="merge word by word")
    assert learned.apply(bare, "x = 2\n", "x = 1\n", "src/new.py") == bare


def test_a_global_confirm_is_a_decide_in_a_fork_whose_own_merges_fall_short_of_it() -> None:
    from bot.engine.model import Changed
    from bot.engine.suggest import Hunk, propose_hunk
    rule = "upstream deleted, fork changed, upstream's file"
    base = "def old(a):\n    x = f(a)\n    return x\n"
    ours = "def old(a):\n    x = f(a, vime=True)\n    return x\n"
    prop = propose_hunk(Hunk(ours, base, "", changed=Changed(ours=1, theirs=20)))
    assert (prop.tier, prop.rule, prop.suggestion) == (Tier.CONFIRM, rule, "")
    # This fork keeps its edits where upstream deletes the lines: 3 of 12 took the deletion.
    outcomes = [Outcome(f"m{r:02}", f"src/f{r}.py", rule, r < 3, r >= 3, r < 3)
                for r in range(12)]
    out = earn(outcomes, merges=12).apply(prop, ours, "", "src/new.py")
    assert out.tier is Tier.DECIDE and out.rule == rule
    # As every Decide: upstream's side is never its one-click default.
    assert out.suggestion is None and out.candidate == "" and "ours" in out.choices
    assert out.reason.startswith(prop.reason)
    assert out.reason.endswith("In this fork's past merges, though, people committed this "
                               "rule's proposal at only 3 of 12 conflict hunks of this kind, "
                               "in 12 merges (`.github/forksync-learned.json`): here it is a "
                               "Decide.")
    # At 8 in 10 or more, or on fewer than ten hunks, the global tier stands.
    held = [Outcome(f"m{r:02}", f"src/f{r}.py", rule, r < 8, r >= 8, r < 8) for r in range(10)]
    assert earn(held, merges=10).apply(prop, ours, "", "src/new.py") == prop
    assert earn(outcomes[:9], merges=9).apply(prop, ours, "", "src/new.py") == prop


def test_the_file_keeps_the_rules_a_fork_holds_back_and_a_plan_uses_them() -> None:
    from bot.engine.model import Changed
    from bot.engine.suggest import Hunk, propose_hunk
    rule = "upstream deleted, fork changed, upstream's file"
    outcomes = [Outcome(f"m{r:02}", f"src/f{r}.py", rule, r < 3, r >= 3, r < 3)
                for r in range(12)]
    outcomes += [Outcome(f"m{r:02}", f"src/g{r}.py", "same change", True, True, True)
                 for r in range(12)]
    text = dumps(earn(outcomes, merges=12))
    assert json.loads(text)["held_back"] == [{"rule": rule, "right": 3, "n": 12, "merges": 12}]
    again = loads(text)
    base = "def old(a):\n    x = f(a)\n    return x\n"
    ours = "def old(a):\n    x = f(a, vime=True)\n    return x\n"
    prop = propose_hunk(Hunk(ours, base, "", changed=Changed(ours=1, theirs=20)))
    out = again.apply(prop, ours, "", "src/new.py")
    assert out.tier is Tier.DECIDE and "at only 3 of 12 conflict hunks" in out.reason
    # A rule the fork bears out keeps its global tier.
    same = propose_hunk(Hunk("y = 2\n", "y = 1\n", "y = 2\n"))
    assert again.apply(same, "y = 2\n", "y = 2\n", "src/new.py") == same
    # The App's memory, checking the file, keeps the file's record of a rule it has not
    # seen itself, and its own where it has.
    memory = earn([Outcome("c1", "src/h.py", "same change", True, True, True)], merges=1)
    assert again.checked_by(memory).apply(prop, ours, "", "src/new.py").tier is Tier.DECIDE
    took = earn([Outcome(f"c{r:02}", f"src/h{r}.py", rule, True, False, True)
                 for r in range(10)], merges=10)
    assert again.checked_by(took).apply(prop, ours, "", "src/new.py") == prop


def test_apply_turns_a_covered_decide_into_a_confirm() -> None:
    prop = propose("a = 2\n", "a = 1\n", "a = 3\n", path="conf/a.py")
    assert prop.tier is Tier.DECIDE and prop.suggestion is None
    out = _learned("dir", "conf", "ours").apply(prop, "a = 2\n", "a = 3\n", "conf/a.py")
    assert out.tier is Tier.CONFIRM and out.suggestion == "a = 2\n"
    assert "40 of 40" in out.reason and "under `conf/`" in out.reason
    assert out.choices == ("suggested", "theirs")
    # Elsewhere, nothing changes.
    assert _learned("dir", "conf", "ours").apply(prop, "a = 2\n", "a = 3\n", "b.py") is prop


def test_apply_says_when_the_learned_side_drops_the_forks_edit() -> None:
    prop = propose("a = 2\n", "a = 1\n", "a = 3\n", path="a.py")
    out = _learned("file", "a.py", "theirs").apply(prop, "a = 2\n", "a = 3\n", "a.py")
    assert out.tier is Tier.CONFIRM and out.suggestion == "a = 3\n"
    assert "drops the fork's edit" in out.reason


def test_a_settled_way_and_add_add() -> None:
    prop = propose("a = 2\n", "a = 1\n", "a = 3\n", path="a.py")
    settled = _learned("file", "a.py", "ours", right=400, n=400)
    assert settled.apply(prop, "a = 2\n", "a = 3\n", "a.py").tier is Tier.SETTLED
    # Two new files are never glued together, nor one picked by habit.
    both = propose_hunk(Hunk("x\n", "", "y\n", added_both=True, path="a.py"))
    assert both.rule == "add/add"
    assert settled.apply(both, "x\n", "y\n", "a.py") is both
    assert settled.choose("add/add", "a.py", False) is None


def _conflicted(tmp: Path) -> Scenario:
    s = Scenario(tmp / "repos")
    s.upstream_pr(4, "Add a build note", "alice", files={"notes/build.txt": "build 1\n"})
    s.sync_fork()
    s.fork_commit("Pin our build", {"notes/build.txt": "build 1 (our image)\n"})
    s.upstream_pr(5, "Bump the build", "alice", files={"notes/build.txt": "build 2\n"})
    return s


def _item(s: Scenario, tmp: Path) -> ReviewItem:
    p = plan(str(s.fork_dir), str(s.upstream_dir), workdir=tmp / "wd")
    items = [i for f in p.files if f.path == "notes/build.txt" for i in f.review_items]
    assert len(items) == 1
    return items[0]


def test_a_plan_reads_the_learned_file_on_fork_main(tmp_path: Path) -> None:
    s = _conflicted(tmp_path)
    before = _item(s, tmp_path)
    assert before.tier is Tier.DECIDE
    s.fork_commit("Learned tiers", {LEARNED_PATH: dumps(_learned(
        "file", "notes/build.txt", "ours", right=20, n=20))})
    after = _item(s, tmp_path)
    assert after.tier is Tier.CONFIRM
    assert after.suggestion == "build 1 (our image)\n"
    assert "20 of 20" in after.reason


def test_a_broken_learned_file_stops_the_plan_with_its_name(tmp_path: Path) -> None:
    s = _conflicted(tmp_path)
    s.fork_commit("Hand-edited", {LEARNED_PATH: '{"version": 3, "ways": "all"}'})
    with pytest.raises(ConfigError, match=r"forksync-learned\.json: ways: a list"):
        plan(str(s.fork_dir), str(s.upstream_dir), workdir=tmp_path / "wd")


def test_a_learned_file_from_an_older_forksync_is_a_warning_not_a_stop(tmp_path: Path) -> None:
    s = _conflicted(tmp_path)
    s.fork_commit("Learned tiers, round 5", {LEARNED_PATH: (
        '{"version": 1, "ways": [{"kind": "file", "key": "notes/build.txt", "action": "ours", '
        '"right": 20, "n": 20, "merges": 5}]}')})
    data = plan(str(s.fork_dir), str(s.upstream_dir), workdir=tmp_path / "wd").to_json()
    item = next(i for f in data["files"] for i in f["review_items"]
                if f["path"] == "notes/build.txt")
    assert item["tier"] == "Decide" and not item.get("learned")  # its ways are not used
    warning = next(w for w in data["warnings"] if w["kind"] == "learned-file")
    assert warning["path"] == LEARNED_PATH and "did not count merges" in warning["message"]
    assert "did not count merges" in render_markdown(data)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], capture_output=True,
                          text=True, timeout=120)


def test_cli_learn_writes_the_file(fork: Path, tmp_path: Path) -> None:
    out = tmp_path / "learned.json"
    proc = _cli("learn", "--fork", str(fork), "--rev", "main", "--out", str(out), "-q")
    assert proc.returncode == 0, proc.stderr
    assert f"replayed {ROUNDS} merges, {2 * ROUNDS} conflict hunks; 2 ways earned" in proc.stderr
    assert "Confirm  file README.md: ours, right 17 of 17" in proc.stderr
    assert {(w.kind, w.key) for w in loads(out.read_text()).ways} == \
        {("file", "README.md"), ("rule", "merge word by word, data file")}


@pytest.mark.parametrize(("args", "code", "says"), [
    (("--rev", "nope"), 3, "the fork has no revision nope"),
    (("--limit", "0"), 64, "--limit: 0 is not 1 or more"),
])
def test_cli_learn_bad_input(fork: Path, args: tuple[str, ...], code: int, says: str) -> None:
    proc = _cli("learn", "--fork", str(fork), *args)
    assert proc.returncode == code and says in proc.stderr and "Traceback" not in proc.stderr


def test_cli_learn_on_a_url_or_a_missing_path(tmp_path: Path) -> None:
    url = _cli("learn", "--fork", "https://example.test/fork.git")
    assert url.returncode == 1 and "is a URL" in url.stderr
    gone = _cli("learn", "--fork", str(tmp_path / "absent"))
    assert gone.returncode == 3 and "does not exist" in gone.stderr


RUN = "step one\nstep two\n{}\nstep four\nstep five\n"


def _resolve_and_merge(s: Scenario, branch: str, commit1: str, side: str) -> str:
    """People resolve every region of commit 1 to ``side``, then merge the PR into main
    with a merge commit."""
    repo = s.fork_git
    paths = git_text(repo, "diff-tree", "-r", "--name-only", f"{commit1}^", commit1).split()
    env = {"GIT_INDEX_FILE": str(s.root / f"index-{branch.replace('/', '-')}")}
    git(repo, "read-tree", commit1, env=env)
    for path in paths:
        text = git(repo, "cat-file", "blob", f"{commit1}:{path}").decode()
        resolved, count = take_side(text, side)
        if count:
            oid = git_text(repo, "hash-object", "-w", "--stdin", input=resolved.encode())
            git(repo, "update-index", "--cacheinfo", f"100644,{oid},{path}", env=env)
    tree = git_text(repo, "write-tree", env=env)
    fixed = commit_tree(repo, tree, [commit1], f"Resolve the sync ({side})")
    main = git_text(repo, "rev-parse", "refs/heads/main")
    merged = commit_tree(repo, tree, [main, fixed], f"Merge {branch}")
    git(repo, "update-ref", "refs/heads/main", merged)
    git(repo, "update-ref", f"refs/heads/{branch}", fixed)
    return fixed


def test_learn_reads_forksyncs_own_sync_commits(tmp_path: Path) -> None:
    s = Scenario(tmp_path / "repos")
    s.upstream_pr(4, "Add notes", "alice", files={
        "notes/build.txt": "build 1\n", "notes/run.txt": RUN.format("step three")})
    s.sync_fork()
    s.fork_commit("Our notes", {"notes/build.txt": "build 1 (ours)\n",
                                "notes/run.txt": RUN.format("step three, our way")})
    s.upstream_pr(5, "Upstream notes", "bob", files={
        "notes/build.txt": "build 2\n", "notes/run.txt": RUN.format("step three, faster")})
    result = sync(str(s.fork_dir), str(s.upstream_dir), branch="forksync/sync-a",
                  workdir=tmp_path / "wd")
    assert sum(len(f.review_items) for f in result.plan.files
               if f.path.startswith("notes/")) == 2
    _resolve_and_merge(s, "forksync/sync-a", result.commit, "ours")
    fork = Git(s.fork_git)
    assert result.commit in sync_commits(fork, "main", 50)
    with CatFile(fork) as cat:
        found = sync_outcomes(fork, cat, result.commit, "main")
    assert sorted((o.path, o.ours_right, o.theirs_right) for o in found) == [
        ("notes/build.txt", True, False), ("notes/run.txt", True, False)]
    # The earlier syncs (trailers, no markers) teach nothing; commit 1 is one source.
    learned = learn(fork, "main")
    assert (learned.merges, learned.hunks) == (1, 2)


def test_the_body_says_which_proposals_were_learned(tmp_path: Path) -> None:
    s = _conflicted(tmp_path)
    s.fork_commit("Learned tiers", {LEARNED_PATH: dumps(_learned(
        "file", "notes/build.txt", "ours", right=20, n=20))})
    p = plan(str(s.fork_dir), str(s.upstream_dir), workdir=tmp_path / "wd")
    data = p.to_json()
    item = next(i for f in data["files"] for i in f["review_items"]
                if f["path"] == "notes/build.txt")
    assert item["learned"] == ("file notes/build.txt: ours, right 20 of 20 in 5 merges "
                               "(5 right throughout)")
    assert "1 proposal follows this fork's own past resolutions" in render_markdown(data)
    assert ("at every one of them in 5 of 5 merges, the newest 2 included "
            "(`.github/forksync-learned.json`)" in item["reason"])


def test_the_app_remembers_each_merged_sync_once_and_the_newest_hundred() -> None:
    state: dict[str, object] = {}
    one = [Outcome("c1", "a.py", "conflict", None, True, False)]
    assert from_state(state) is None
    assert remember(state, "c1", one) is True
    assert remember(state, "c1", one * 5) is False  # a redelivered event counts once
    for n in range(2, MAX_SOURCES + 6):
        remember(state, f"c{n}", one)
    sources = state["sources"]
    assert isinstance(sources, dict) and len(sources) == MAX_SOURCES
    assert "c1" not in sources and f"c{MAX_SOURCES + 5}" in sources
    learned = from_state(state)
    assert learned is not None and learned.merges == MAX_SOURCES
    (way,) = [w for w in learned.ways if (w.kind, w.key) == ("file", "a.py")]
    assert (way.action, way.right, way.n, way.tier) == ("ours", 100, 100, Tier.CONFIRM)
    assert "merged sync PRs" in learned.source


def test_a_region_left_with_markers_of_the_files_own_size_is_not_an_outcome() -> None:
    from bot.engine.replay import replay_file

    def region(n: int, ours: str, base: str, theirs: str) -> str:
        return (f"{'<' * n} ours\n{ours}{'|' * n} base\n{base}{'=' * n}\n{theirs}"
                f"{'>' * n} theirs\n")

    top = "".join(f"above {i}\n" for i in range(6))
    bottom = "".join(f"below {i}\n" for i in range(6))
    merged = top + region(9, "x = 1\n", "x = 0\n", "x = 2\n") + bottom
    # People committed a half-region at the file's marker size (9): not a resolution.
    half = top + "x = 1\n" + "=" * 9 + "\nx = 2\n" + ">" * 9 + " theirs\n" + bottom
    replayed = replay_file("a.txt", merged, half, added_both=False, size=9)
    assert replayed.regions == [] and replayed.committed_with_markers == 1
    done = replay_file("a.txt", merged, top + "x = 2\n" + bottom, added_both=False, size=9)
    assert [r.committed for r in done.regions] == ["x = 2\n"]


def _regions(n: int, side: str, *, base: bool = True, done: int = 0) -> str:
    """A file of ``n`` conflict regions kept as a review queue (the first ``done`` of them
    resolved to ours already), or resolved to ``side``."""
    out = []
    for k in range(n):
        out.append(f"def step_{k}():\n    '''Step {k} of the pipeline.'''\n")
        ours, old, theirs = f"    return run({k}, fork=True)\n", f"    return run({k})\n", \
            f"    return run({k}, fast=True)\n"
        if side == "markers" and k < done:
            out.append(ours)
        elif side == "markers":
            mid = f"||||||| base\n{old}" if base else ""
            out.append(f"<<<<<<< ours\n{ours}{mid}=======\n{theirs}>>>>>>> theirs\n")
        else:
            out.append(ours if side == "ours" else theirs)
        out.append("\n\n")
    return "".join(out) + "# end of the steps\n"


EXAMPLE = ("# Resolving conflicts\n\nGit shows:\n\n<<<<<<< HEAD\nmine\n=======\nyours\n"
           ">>>>>>> branch\n\nEdit the file, then commit.\n")


def test_learn_reads_syncs_made_by_hand_with_their_markers_kept(tmp_path: Path) -> None:
    """vime's people merge upstream and commit the markers as a review queue, then resolve
    them in later commits: `forksync learn` reads those syncs too, with no trailer."""
    repo = init_repo(tmp_path / "fork", bare=True)

    def tree(pipeline: str, guide: str, plain: str) -> str:
        return write_tree(repo, [("vime/pipeline.py", "100644", pipeline.encode()),
                                 ("docs/git.md", "100644", guide.encode()),
                                 ("vime/plain.py", "100644", plain.encode())])

    head = commit_tree(repo, tree(_regions(6, "ours"), EXAMPLE, "x = 1\n"), [], "start")
    for r in range(3):
        queue = commit_tree(repo, tree(_regions(6, "markers"), EXAMPLE + f"v{r}\n",
                                       _regions(1, "markers", base=False)), [head],
                            f"sync(slime #{r}): 3-way merge, conflict markers preserved")
        # Half the queue resolved: this commit removes markers but put none in.
        half = commit_tree(repo, tree(_regions(6, "markers", done=3), EXAMPLE + f"v{r}\n",
                                      _regions(1, "theirs")), [queue], "resolve plain.py")
        head = commit_tree(repo, tree(_regions(6, "ours"), EXAMPLE + f"v{r}\n",
                                      _regions(1, "theirs")), [half], "resolve the rest")
    git(repo, "update-ref", "refs/heads/main", head)
    fork = Git(repo)
    with CatFile(fork) as cat:
        first = git_text(repo, "rev-list", "--reverse", "main").split()[1]
        found = sync_outcomes(fork, cat, first, "main")
    # Six regions kept ours; the merge-style region of plain.py took theirs and teaches no
    # rule; the guide's example markers were there before the commit: not a sync's.
    assert sorted({(o.path, o.ours_right, o.theirs_right) for o in found}) == [
        ("vime/pipeline.py", True, False), ("vime/plain.py", False, True)]
    assert [o.candidate_right for o in found if o.path == "vime/plain.py"] == [None]
    learned = learn(fork, "main")
    assert (learned.merges, learned.hunks) == (3, 21)
    ways = {(w.kind, w.key, w.action): w for w in learned.ways}
    kept = ways[("file", "vime/pipeline.py", "ours")]
    assert (kept.right, kept.n, len(kept.merges), kept.tier) == (18, 18, 3, Tier.CONFIRM)
    assert not any(w.kind == "file" and w.key == "docs/git.md" for w in learned.ways)


def test_markers_never_resolved_soon_after_are_not_a_sync(tmp_path: Path) -> None:
    # A guide that shows markers as an example, rewritten many edits later without them.
    repo = init_repo(tmp_path / "fork", bare=True)
    head = commit_tree(repo, write_tree(repo, [("docs/git.md", "100644", b"# Git\n")]), [], "a")
    first = head = commit_tree(repo, write_tree(repo, [("docs/git.md", "100644",
                                                        EXAMPLE.encode())]), [head], "guide")
    for k in range(12):
        head = commit_tree(repo, write_tree(repo, [("docs/git.md", "100644",
                                                    (EXAMPLE + f"tip {k}\n").encode())]),
                           [head], f"edit {k}")
    rewritten = EXAMPLE.replace("<<<<<<< HEAD\nmine\n=======\nyours\n>>>>>>> branch\n",
                                "(two versions of the lines)\n")
    head = commit_tree(repo, write_tree(repo, [("docs/git.md", "100644", rewritten.encode())]),
                       [head], "rewrite")
    git(repo, "update-ref", "refs/heads/main", head)
    fork = Git(repo)
    with CatFile(fork) as cat:
        assert sync_outcomes(fork, cat, first, "main") == []
    assert learn(fork, "main").hunks == 0


# -- files one side deleted (modify/delete) ------------------------------------------
def deletions(tmp: Path, rounds: int, kept: int) -> Path:
    """``rounds`` merges in which the fork deleted a file that upstream changed (and both
    edited README.md, so that the merge conflicts on text too); people kept the deletion
    in the first ``kept`` of them and took upstream's version in the rest."""
    repo = init_repo(tmp / "fork", bare=True)

    def tree(readme: str, files: dict[str, str]) -> str:
        return write_tree(repo, [("README.md", "100644", readme.encode()),
                                 *((p, "100644", t.encode()) for p, t in sorted(files.items()))])

    head = commit_tree(repo, tree(_readme("0"), {}), [], "base")
    for r in range(1, rounds + 1):
        name = f"tools/old{r}.py"
        head = commit_tree(repo, tree(_readme(f"{r - 1}"), {name: "x = 1\n"}), [head], "add")
        ours = commit_tree(repo, tree(_readme(f"{r} (ours)"), {}), [head], "fork drops it")
        theirs = commit_tree(repo, tree(_readme(f"{r}"), {name: "x = 2\n"}), [head], "upstream")
        files = {} if r <= kept else {name: "x = 2\n"}
        head = commit_tree(repo, tree(_readme(f"{r} (ours)"), files), [ours, theirs],
                           f"Merge upstream {r}")
    git(repo, "update-ref", "refs/heads/main", head)
    return repo


def test_learn_counts_the_files_the_fork_deleted_and_kept_deleted(tmp_path: Path) -> None:
    learned = learn(Git(deletions(tmp_path / "kept", ROUNDS, ROUNDS)), "main")
    ways = {(w.kind, w.key): w for w in learned.ways}
    way = ways[("rule", "modify/delete, fork deleted")]
    assert (way.right, way.n, len(way.merges), way.tier) == (ROUNDS, ROUNDS, ROUNDS,
                                                             Tier.CONFIRM)
    # A whole file's decision teaches nothing about its folder's hunks.
    assert ("dir", "tools") not in ways and ("file", "tools/old1.py") not in ways
    # A fork that took upstream's version back in a third of its merges earns nothing.
    mixed = learn(Git(deletions(tmp_path / "mixed", ROUNDS, 11)), "main")
    assert not [w for w in mixed.ways if w.key == "modify/delete, fork deleted"]


def test_a_fork_that_keeps_its_deletions_gets_them_as_a_confirm(tmp_path: Path) -> None:
    from bot.engine.suggest import propose_whole_file

    s = Scenario(tmp_path / "repos")
    s.upstream_pr(4, "Add a tool", "alice", files={"tools/old.py": "x = 1\n"})
    s.sync_fork()
    s.fork_commit("We do not ship the tool", {"tools/old.py": None})
    s.upstream_pr(5, "Fix the tool", "alice", files={"tools/old.py": "x = 2\n"})

    def item() -> ReviewItem:
        p = plan(str(s.fork_dir), str(s.upstream_dir), workdir=tmp_path / "wd")
        (found,) = [i for i in p.items if i.path == "tools/old.py"]
        return found

    before = item()
    assert (before.kind.value, before.tier, before.rule) == (
        "file", Tier.DECIDE, "modify/delete, fork deleted")
    s.fork_commit("Learned tiers", {LEARNED_PATH: dumps(_learned(
        "rule", "modify/delete, fork deleted", "suggested", right=30, n=30))})
    after = item()
    assert (after.tier, after.choices[0]) == (Tier.CONFIRM, "ours")
    assert "people kept the deletion at 30 of 30 files the fork deleted" in after.reason
    assert after.learned.startswith("rule modify/delete, fork deleted: suggested")
    # Upstream's deletions are another rule: the fork's habit does not cover them.
    up = propose_whole_file("upstream")
    assert _learned("rule", "modify/delete, fork deleted", "suggested").apply_file(up) is up


def test_the_app_remembers_whether_a_merged_sync_kept_a_deletion(tmp_path: Path) -> None:
    from bot.engine.learn import sync_pr_outcomes

    repo = init_repo(tmp_path / "fork", bare=True)
    upstream_version = "x = 2\n"
    commit1 = commit_tree(repo, write_tree(repo, [
        ("tools/old.py", "100644", upstream_version.encode()),
        ("README.md", "100644", b"hi\n")]), [], "commit 1: upstream's version kept")
    blob = git_text(repo, "rev-parse", f"{commit1}:tools/old.py").strip()
    deleted = commit_tree(repo, write_tree(repo, [("README.md", "100644", b"hi\n")]),
                          [commit1], "keep the fork's deletion")
    files = [{"path": "tools/old.py", "status": "conflict", "review_items": [{
        "id": "Q1", "kind": "file", "path": "tools/old.py",
        "rule": "modify/delete, fork deleted",
        "sides": {"ours": None, "theirs": {"mode": "100644", "oid": blob}}}]}]
    (kept,) = sync_pr_outcomes(Git(repo), files, commit1, deleted)
    assert (kept.merge, kept.rule, kept.candidate_right, kept.ours_right, kept.theirs_right) \
        == (commit1, "modify/delete, fork deleted", True, True, False)
    (taken,) = sync_pr_outcomes(Git(repo), files, commit1, commit1)  # upstream's version
    assert (taken.candidate_right, taken.ours_right, taken.theirs_right) == (False, False, True)
    remembered: dict[str, Any] = {}
    remember(remembered, commit1, [kept])
    assert from_state(remembered) is not None


def test_the_app_remembers_a_conflict_in_the_forks_file_under_the_classifiers_rule(
        tmp_path: Path) -> None:
    from bot.engine.learn import sync_pr_outcomes

    repo = init_repo(tmp_path / "fork", bare=True)
    marked = ("head\n<<<<<<< ours\n    return rt.alloc(n, domain)\n||||||| base\n"
              "    return alloc(n)\n=======\n    return alloc(n, flags)\n>>>>>>> theirs\ntail\n")
    commit1 = commit_tree(repo, write_tree(repo, [("vime/gc.py", "100644", marked.encode())]),
                          [], "commit 1")
    head = commit_tree(repo, write_tree(repo, [
        ("vime/gc.py", "100644", b"head\n    return rt.alloc(n, domain)\ntail\n")]),
        [commit1], "keep the fork's lines")
    f = {"path": "vime/gc.py", "status": "conflict", "marker_size": 7, "review_items": []}
    # Without the plan's counts the region is a bare conflict, as before round 9.
    (bare,) = sync_pr_outcomes(Git(repo), [f], commit1, head)
    assert (bare.rule, bare.candidate_right) == ("conflict", None)
    # With them (the plan JSON's "changed"), the rule the classifier used, and its outcome.
    (owned,) = sync_pr_outcomes(Git(repo), [{**f, "changed": {"ours": 90, "theirs": 10}}],
                                commit1, head)
    assert (owned.rule, owned.candidate_right, owned.ours_right) == (FORK_FILE, True, True)
