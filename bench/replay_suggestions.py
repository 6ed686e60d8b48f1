#!/usr/bin/env python3
"""Replay real merges: forksync's suggestion for every conflict hunk against what people committed.

For each merge commit M (parents P1, P2) listed in ``bench/replay_merges.txt``, git itself
merges P1 and P2 (``git merge-tree --write-tree``, diff3 markers). Every conflict hunk goes
through ``bot.engine.suggest.propose_region``, the function the classifier uses, and the
proposal is compared with the text people committed in M at the same place, found by
anchoring on the lines around the marker region. Precision is exact text, ignoring only
trailing whitespace, because a suggestion commits exactly what it shows.

Usage::

    .venv/bin/python bench/replay_suggestions.py --clones DIR --tiers    # the training sets
    .venv/bin/python bench/replay_suggestions.py --clones DIR --set dev  # one set
    .venv/bin/python bench/replay_suggestions.py --clones DIR --set dev --set heldout \
        --repo HabanaAI/vllm-fork --repo ROCm/vllm                        # two forks only
    .venv/bin/python bench/replay_suggestions.py --clones DIR --find owner/name

``DIR`` holds one clone per repository, as ``DIR/owner+name`` (a bare repository or one
with a ``repo`` or ``.git`` directory inside) or ``DIR/name``. The clones stay out of this
repository; only the list of merges is committed. ``--find`` scans a clone's merges and
prints the conflicting ones in the list's format, to build or extend the list.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.learn_table import follow_lines, follow_stats, learn_lines  # noqa: E402
from bench.tier_table import Record, cv_lines, forward_lines, tier_lines  # noqa: E402
from bot.engine.git import CatFile, Git  # noqa: E402
from bot.engine.markers import split_lines  # noqa: E402
from bot.engine.model import Changed  # noqa: E402
from bot.engine.remerge import merge_words  # noqa: E402
from bot.engine.replay import (  # noqa: E402
    conflicting_merges,
    merge_tree,
    replay_file,
    same_text,
    stage_changes,
    text_of,
)
from bot.engine.suggest import propose_whole_file  # noqa: E402
from bot.errors import GitError  # noqa: E402

MERGES = ROOT / "bench" / "replay_merges.txt"
# The sets the tiers are derived from (`valid` joined them in round 4, once it was spent).
# `valid2` and `valid3` are replayed only when named: once each, after the tiers were
# frozen (see the list's header).
# Every set replayed so far; from round 7 the validation sets valid2..valid5, all spent,
# are training data too (bench/README.md).
TRAINING = ("dev", "heldout", "fresh", "valid", "valid2", "valid3", "valid4", "valid5",
            "valid6", "valid7", "valid8", "valid9", "valid10")
TIERS = ("Settled", "Confirm", "Decide")
TARGETS = {"Settled": 0.97, "Confirm": 0.80}
TARGET_COVERAGE = 0.40
TARGET_ONE_CLICK = 0.30


@dataclass
class Case:
    """One conflict hunk: what forksync proposed and what people committed."""

    set: str
    repo: str
    merge: str
    path: str
    line: int
    tier: str
    rule: str  # the rule that decided (Proposal.rule)
    reason: str
    suggested: bool
    right: bool  # the suggestion equals the committed text
    ours_right: bool
    theirs_right: bool
    # Layout-only hunks: would applying one side's layout to the other's content (the word
    # merge) have been right? None for other hunks.
    transfer_right: bool | None = None
    ours: str = ""
    base: str = ""
    theirs: str = ""
    suggestion: str | None = None
    committed: str = ""
    # The rule's candidate (offered or not, see Proposal.candidate) is what was committed:
    # what the tier table measures. None: the rule has no candidate.
    candidate_right: bool | None = None
    # The lines each side changed in the whole file since base ([ours, theirs]; what the
    # fork's-file rule reads), or None where the file's three versions are not all text.
    changed: list[int] | None = None


@dataclass
class MergeResult:
    set: str
    repo: str
    merge: str
    cases: list[Case] = field(default_factory=list)
    files: int = 0
    unanchored: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    whole: list[WholeFile] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class WholeFile:
    """A conflict on a whole file (modify/delete): which side deleted it, what was proposed,
    and what people kept."""

    set: str
    repo: str
    merge: str
    path: str
    deleted_by: str  # "fork" (the first parent) or "upstream" (the second)
    tier: str
    rule: str
    suggested: str | None  # the side proposed ("ours", "theirs") or None
    kept: str  # "deleted", "ours", "theirs" or "other" (the file as people left it in M)


# ---------------------------------------------------------------------------- git side


def find_clone(clones: Path, repo: str) -> Path:
    owner, _, name = repo.partition("/")
    for candidate in (clones / f"{owner}+{name}", clones / name):
        for sub in ("repo", "repo/.git", ".git", ""):
            path = candidate / sub if sub else candidate
            if (path / "objects").is_dir() and (path / "HEAD").exists():
                return path
    raise SystemExit(f"replay: no clone of {repo} under {clones} (expected {owner}+{name}/)")


# ---------------------------------------------------------------------------- replay


def replay_merge(set_name: str, repo: str, clone: str, sha: str) -> MergeResult:
    started = time.perf_counter()
    out = MergeResult(set_name, repo, sha)
    git = Git(clone, config=["merge.conflictStyle=diff3"])
    parents = git.text("rev-list", "--parents", "-n", "1", sha).split()[1:]
    if len(parents) != 2:
        out.skipped["not a two-parent merge"] += 1
        return out
    try:
        tree, stages = merge_tree(git, parents[0], parents[1])
    except GitError:
        out.skipped["merge-tree failed (missing objects?)"] += 1
        return out
    with CatFile(git) as cat:
        for path in sorted(stages):
            st = stages[path]
            if not {2, 3} <= st.keys():
                out.whole.append(_whole_file(out, git, path, st))
                continue
            merged = _blob_text(out, cat, f"{tree}:{path}", "no merged blob",
                                "binary or large file")
            resolved = None if merged is None else _blob_text(
                out, cat, f"{sha}:{path}", "file deleted by the merge",
                "resolution is binary or large")
            if merged is None or resolved is None:
                continue
            out.files += 1
            out.cases += _replay_file(out, path, merged, resolved, added_both=1 not in st,
                                      changed=stage_changes(cat, st))
    out.seconds = time.perf_counter() - started
    return out


def _whole_file(out: MergeResult, git: Git, path: str, stages: dict[int, str]) -> WholeFile:
    """A whole-file conflict: what forksync proposes and what the merge commit kept."""
    deleted_by = "fork" if 2 not in stages else "upstream"
    prop = propose_whole_file(deleted_by)
    found = git.run_proc("rev-parse", "--verify", "-q", f"{out.merge}:{path}")
    oid = found.stdout.decode().strip() if found.returncode == 0 else None
    kept = ("deleted" if oid is None else "ours" if oid == stages.get(2)
            else "theirs" if oid == stages.get(3) else "other")
    return WholeFile(out.set, out.repo, out.merge, path, deleted_by, prop.tier.value,
                     prop.rule, prop.side, kept)


def _blob_text(out: MergeResult, cat: CatFile, rev: str, missing: str,
               unusable: str) -> str | None:
    """The text at ``rev``; None, counted under its reason, if it is missing or not text."""
    try:
        text = text_of(cat.read(rev)[1])
    except GitError:
        out.skipped[missing] += 1
        return None
    if text is None:
        out.skipped[unusable] += 1
    return text


def _replay_file(out: MergeResult, path: str, merged: str, resolved: str, *,
                 added_both: bool, changed: Changed | None) -> list[Case]:
    replayed = replay_file(path, merged, resolved, added_both=added_both, changed=changed)
    out.unanchored += replayed.unanchored
    if replayed.committed_with_markers:
        out.skipped["hunk committed with its markers"] += replayed.committed_with_markers
    cases = []
    for r in replayed.regions:
        region, prop, text = r.region, r.proposal, r.committed
        suggested = prop.suggestion is not None
        transfer = None
        if "layout only" in prop.rule:
            words = merge_words(region.base or "", region.ours, region.theirs)
            transfer = words is not None and same_text(words, text)
        cases.append(Case(
            out.set, out.repo, out.merge, path, region.start_line, prop.tier.value, prop.rule,
            prop.reason,
            suggested, suggested and same_text(prop.suggestion or "", text),
            same_text(region.ours, text), same_text(region.theirs, text), transfer,
            region.ours, region.base or "", region.theirs, prop.suggestion, text,
            None if prop.candidate is None else same_text(prop.candidate, text),
            None if changed is None else [changed.ours, changed.theirs]))
    return cases


def read_merges(path: Path, sets: set[str] | None,
                repos: set[str] | None = None) -> list[tuple[str, str, str]]:
    """The listed merges of ``sets`` (all with None), of ``repos`` only where given."""
    out = []
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        set_name, repo, sha = line.split()
        if (sets is None or set_name in sets) and (repos is None or repo in repos):
            out.append((set_name, repo, sha))
    return out


# ---------------------------------------------------------------------------- report


def pct(n: int, d: int) -> str:
    return f"{100 * n / d:5.1f}%" if d else "    –"


def table(title: str, cases: list[Case], merges: int, files: int, unanchored: int) -> list[str]:
    n = len(cases)
    out = [f"== {title}: {merges} merges, {files} files, {n} hunks"
           f" ({unanchored} more could not be found in the merge commit)",
           f"{'tier':<10}{'hunks':>7}{'suggestion':>12}{'right':>7}{'precision':>11}"
           f"{'target':>9}"]
    for tier in TIERS:
        group = [c for c in cases if c.tier == tier]
        sug = sum(c.suggested for c in group)
        right = sum(c.right for c in group)
        target = TARGETS.get(tier)
        verdict = ""
        if target is not None and sug:
            verdict = f"≥{target:.0%} " + ("ok" if right / sug >= target else "MISSED")
        out.append(f"{tier:<10}{len(group):>7}{sug:>12}{right:>7}{pct(right, sug):>11}"
                   f"   {verdict}")
    sug = sum(c.suggested for c in cases)
    right = sum(c.right for c in cases)
    out.append(f"{'all':<10}{n:>7}{sug:>12}{right:>7}{pct(right, sug):>11}")
    cov_ok = "ok" if n and sug / n >= TARGET_COVERAGE else "MISSED"
    one_ok = "ok" if n and right / n >= TARGET_ONE_CLICK else "MISSED"
    out.append(f"hunks with a suggestion: {pct(sug, n).strip()} (target ≥{TARGET_COVERAGE:.0%}"
               f" {cov_ok}); right in one click: {pct(right, n).strip()} "
               f"(target ≥{TARGET_ONE_CLICK:.0%} {one_ok})")
    st = follow_stats(cases)
    out.append(f"right in one click with the follow-up suggestions: {pct(st.after, n).strip()} "
               f"({st.offered} follow-ups, {st.offered_right} right)")
    ours = sum(c.ours_right for c in cases)
    theirs = sum(c.theirs_right for c in cases)
    either = sum(c.ours_right or c.theirs_right for c in cases)
    out.append(f"baselines over all hunks: take ours {pct(ours, n).strip()}, take theirs "
               f"{pct(theirs, n).strip()}, either side {pct(either, n).strip()}")
    out.append(least_decide(cases))
    layout = [c for c in cases if c.transfer_right is not None]
    if layout:
        out.append(f"layout-only hunks: {len(layout)}; the content side as it is was right in "
                   f"{sum(c.right for c in layout)}, its content in the other side's layout "
                   f"in {sum(bool(c.transfer_right) for c in layout)}")
    return out


def least_decide(cases: list[Case]) -> str:
    """The smallest Decide share any tiering of these hunks could reach with Confirm right
    in 80% (the target): one that knew which candidates people committed would raise each
    of those and a quarter as many wrong ones, and nothing else. How far the "at most 40%
    Decide" target is from the suggestions themselves, whatever the tiers."""
    n = len(cases)
    one_click = sum(c.right for c in cases)
    candidate = sum(bool(c.candidate_right) for c in cases)
    floor = TARGETS["Confirm"]

    def least(right: int) -> str:
        return pct(max(0, n - round(right / floor)), n).strip()
    return (f"least Decide share at {floor:.0%} Confirm precision, tiered by an oracle: "
            f"{least(one_click)} of these hunks with the one-click suggestions, "
            f"{least(candidate)} with every rule's candidate offered")


def rule_table(cases: list[Case]) -> list[str]:
    out = ["hunks by rule: right / hunks (take ours right, take theirs right)"]
    for tier, rule in sorted({(c.tier, c.rule) for c in cases},
                             key=lambda k: (TIERS.index(k[0]), k[1])):
        group = [c for c in cases if c.tier == tier and c.rule == rule]
        ok = sum(c.right for c in group)
        out.append(f"  {tier:<8} {ok:>5}/{len(group):<5} {pct(ok, len(group))}  {rule:<42}"
                   f"(ours {sum(c.ours_right for c in group)}, "
                   f"theirs {sum(c.theirs_right for c in group)})")
    return out


def _kept_side(f: WholeFile) -> str:
    """The side people took, as a whole-file answer names it: a kept deletion is the side
    that deleted."""
    if f.kept == "deleted":
        return "ours" if f.deleted_by == "fork" else "theirs"
    return f.kept


def whole_table(files: list[WholeFile]) -> list[str]:
    """Whole-file conflicts by who deleted the file: what people kept, what was proposed."""
    if not files:
        return []
    out = ["whole-file conflicts (modify/delete): what the merge kept"]
    for who in ("fork", "upstream"):
        group = [f for f in files if f.deleted_by == who]
        if not group:
            continue
        kept = Counter(f.kept for f in group)
        sug = [f for f in group if f.suggested is not None]
        right = sum(_kept_side(f) == f.suggested for f in sug)
        out.append(f"  {who} deleted: {len(group)} files; kept deleted {kept['deleted']}, "
                   f"took ours {kept['ours']}, took theirs {kept['theirs']}, other "
                   f"{kept['other']}; tier {', '.join(sorted({f.tier for f in group}))}; "
                   f"proposal right {right}/{len(sug)}")
    return out


def report(results: list[MergeResult], *, by_repo: bool) -> str:
    out: list[str] = []
    for set_name in sorted({r.set for r in results}):
        rs = [r for r in results if r.set == set_name]
        cases = [c for r in rs for c in r.cases]
        out += table(f"set {set_name}", cases, len(rs), sum(r.files for r in rs),
                     sum(r.unanchored for r in rs))
        if by_repo:
            for repo in sorted({r.repo for r in rs}):
                rr = [r for r in rs if r.repo == repo]
                repo_cases = [c for r in rr for c in r.cases]
                out += ["", *table(f"  {set_name} · {repo}", repo_cases, len(rr),
                                   sum(r.files for r in rr), sum(r.unanchored for r in rr)),
                        *rule_table(repo_cases)]
            out += ["", f"== set {set_name}, all repositories"]
        out += rule_table(cases)
        out += whole_table([w for r in rs for w in r.whole])
        out.append("")
    names = sorted({r.set for r in results})
    if len(names) > 1:
        cases = [c for r in results for c in r.cases]
        out += [*table(f"sets {', '.join(names)} pooled", cases, len(results),
                       sum(r.files for r in results), sum(r.unanchored for r in results)),
                *rule_table(cases), *whole_table([w for r in results for w in r.whole]), ""]
    skipped: Counter[str] = Counter()
    for r in results:
        skipped.update(r.skipped)
    if skipped:
        out.append("not replayed: " + ", ".join(f"{v} {k}" for k, v in skipped.most_common()))
    secs = [r.seconds for r in results if r.seconds]
    if secs:
        out.append(f"time per merge: median {statistics.median(secs):.2f} s "
                   f"(min {min(secs):.2f}, max {max(secs):.2f})")
    return "\n".join(out)


def tier_records(results: list[MergeResult]) -> list[Record]:
    """(rule, repository, right, merge) for every candidate: hunks, then whole-file
    conflicts."""
    out: list[Record] = [(c.rule, c.repo, c.candidate_right, c.merge) for r in results
                         for c in r.cases if c.candidate_right is not None]
    return out + [(w.rule, w.repo, _kept_side(w) == w.suggested, w.merge) for r in results
                  for w in r.whole if w.suggested is not None]


def show_misses(results: list[MergeResult], tier: str, limit: int) -> str:
    out = []
    misses = [c for r in results for c in r.cases if c.tier == tier and c.suggested
              and not c.right]
    for c in misses[:limit]:
        out.append(f"--- {c.repo}@{c.merge[:12]}:{c.path}:{c.line} [{c.reason}]")
        for name, text in (("ours", c.ours), ("base", c.base), ("theirs", c.theirs),
                           ("suggested", c.suggestion or ""), ("committed", c.committed)):
            out.append(f"  [{name}]")
            out += [f"    |{ln.rstrip()}" for ln in split_lines(text)[:30]]
    return "\n".join(out)


# ---------------------------------------------------------------------------- find


def find(clone: Path, repo: str, set_name: str, limit: int, rev: str, *,
         grep: str | None = None, first_parent: bool = False,
         max_files: int = 100) -> Iterator[str]:
    """Merges under ``rev`` whose replay has at least one text conflict and at most
    ``max_files`` conflicted files, newest first."""
    extra = ([f"--grep={grep}"] if grep else []) + (["--first-parent"] if first_parent else [])
    for merge in conflicting_merges(Git(clone), rev, limit, extra=tuple(extra),
                                    max_files=max_files):
        yield f"{set_name} {repo} {merge.sha}"


def main(argv: Iterable[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clones", type=Path, default=os.environ.get("FORKSYNC_CLONES"),
                    help="the directory of clones (default: $FORKSYNC_CLONES)")
    ap.add_argument("--merges", type=Path, default=MERGES)
    ap.add_argument("--set", action="append",
                    help=f"replay this set (repeatable; default: {', '.join(TRAINING)})")
    ap.add_argument("--repo", action="append", metavar="OWNER/NAME",
                    help="only this repository's merges of those sets (repeatable)")
    ap.add_argument("--tiers", action="store_true",
                    help="print the tier each rule earns by the criterion, and the criterion "
                         "held out one repository family at a time")
    ap.add_argument("--learn", action="store_true",
                    help="also: per repository, learn tiers from its older half of merges "
                         "(forksync learn) and test them on its newer half")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--by-repo", action="store_true", help="also one table per repository")
    ap.add_argument("--misses", metavar="TIER", help="print wrong suggestions of this tier")
    ap.add_argument("--limit", type=int, default=20, help="how many misses, or merges to find")
    ap.add_argument("--json", type=Path, help="write every hunk's record to this file")
    ap.add_argument("--find", metavar="OWNER/NAME", help="list conflicting merges of a clone")
    ap.add_argument("--find-set", default="dev")
    ap.add_argument("--rev", default="HEAD", help="with --find: the history to scan")
    ap.add_argument("--grep", help="with --find: only merges whose message matches this")
    ap.add_argument("--first-parent", action="store_true",
                    help="with --find: only merges on the branch itself, not inside merged ones")
    ap.add_argument("--max-files", type=int, default=100,
                    help="with --find: skip merges with more conflicted files than this")
    args = ap.parse_args(list(argv) if argv is not None else None)
    if args.clones is None:
        ap.error("name the directory of clones with --clones DIR (or FORKSYNC_CLONES)")
    args.clones = Path(args.clones)

    if args.find:
        for line in find(find_clone(args.clones, args.find), args.find, args.find_set,
                         args.limit, args.rev, grep=args.grep,
                         first_parent=args.first_parent, max_files=args.max_files):
            print(line, flush=True)
        return 0
    merges = read_merges(args.merges, set(args.set or TRAINING),
                         set(args.repo) if args.repo else None)
    if not merges:
        ap.error("no listed merge is in those sets"
                 + (" and repositories" if args.repo else "") + f" ({args.merges})")
    jobs = [(s, repo, str(find_clone(args.clones, repo)), sha) for s, repo, sha in merges]
    started = time.perf_counter()
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            results = list(pool.map(replay_merge, *zip(*jobs, strict=True), chunksize=4))
    else:
        results = [replay_merge(*job) for job in jobs]
    print(report(results, by_repo=args.by_repo))
    print(f"replayed {len(results)} merges in {time.perf_counter() - started:.1f} s")
    print("\n".join(follow_lines([c for r in results for c in r.cases])))
    if args.tiers:
        records = tier_records(results)
        print(f"\n== tiers, from the sets {', '.join(sorted({r.set for r in results}))}")
        print("\n".join(tier_lines(records, (c.rule for r in results for c in r.cases
                                              if c.candidate_right is None))))
        print("\n".join(["", *cv_lines(records)]))
        by_set = {s: tier_records([r for r in results if r.set == s]) for s in TRAINING}
        if len([s for s in TRAINING if by_set[s]]) > 4:
            print("\n".join(["", *forward_lines(by_set, TRAINING)]))
    if args.learn:
        order = {(repo, sha): i for i, (_s, repo, sha) in enumerate(merges)}
        print("\n".join(["", *learn_lines([c for r in results for c in r.cases], order,
                                           table, rule_table,
                                           [w for r in results for w in r.whole])]))
    if args.misses:
        print(show_misses(results, args.misses, args.limit))
    if args.json:
        args.json.write_text(json.dumps({
            "hunks": [asdict(c) for r in results for c in r.cases],
            "whole_files": [asdict(w) for r in results for w in r.whole]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
