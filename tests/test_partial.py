"""Partial caches: commits of the history, the trees and blobs a sync reads, nothing else.

The plans made on such caches are checked against plans on full repositories in
``test_engine_oracle`` (every scenario runs both ways); here: what the caches hold, that
the engine never fetches anything itself, that blobs come in one request, that a warm
sync fetches what changed, and that a directory the server leaves out is fetched.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.engine.git import Git
from bot.errors import MissingObject
from bot.github import remote
from tests.factory import PLAIN_CONFIG, Scenario, commit_tree, git, git_text, write_tree
from tests.partial import blob_count, partial_plan, serve_filters
from tests.sim.server import Simulator


def lines(n: int, tag: str) -> str:
    return "".join(f"line {i}: {tag} talks to sglang\n" for i in range(n))


@pytest.fixture
def history(tmp_path: Path) -> Scenario:
    """An upstream with a history of 12 PRs over 40 files, synced, then a window of 3 PRs."""
    s = Scenario(tmp_path / "repos", config=PLAIN_CONFIG)
    for n in range(12):
        s.upstream_pr(100 + n, f"History {n}", files={
            f"slime/pkg{k}/m{n}_{k}.py": lines(8, f"h{n}") for k in range(4)})
    s.sync_fork()
    s.upstream_pr(200, "Window 1", files={"slime/pkg0/m0_0.py": lines(9, "w1")})
    s.upstream_pr(201, "Window 2", files={"slime/pkg1/new.py": lines(3, "w2")})
    s.upstream_pr(202, "Window 3", files={"slime/pkg2/m3_2.py": None})
    return s


def test_the_caches_hold_the_history_s_commits_and_only_what_the_sync_reads(
        history: Scenario, tmp_path: Path) -> None:
    run = partial_plan(history.fork_dir, history.upstream_dir, tmp_path / "partial")
    up = Git(run.upstream_cache)
    # Every upstream commit is there (the window and ancestry need them) ...
    assert up.text("rev-list", "--count", "refs/heads/main").strip() == \
        git_text(history.upstream_git, "rev-list", "--count", "main")
    # ... but the trees of the history before the cutoff are not, nor its blobs.
    first = git_text(history.upstream_git, "rev-list", "--max-parents=0", "main")
    first_tree = git_text(history.upstream_git, "rev-parse", f"{first}^{{tree}}")
    assert up.missing_objects([first_tree]) == [first_tree]
    assert blob_count(run.upstream_cache) == len(run.needs.upstream) == run.fetched[1]
    assert blob_count(run.upstream_cache) < blob_count(history.upstream_git) // 4
    assert 0 < blob_count(run.fork_cache) <= len(run.needs.fork) + 1  # + the config
    assert [f.status.value for f in run.plan.files] == ["clean", "new", "deleted"]


def test_the_engine_never_fetches_a_blob_itself(history: Scenario, tmp_path: Path) -> None:
    """A blob the needs step left out fails the plan, naming it: nothing fetched it."""
    from bot.engine.pipeline import needs, plan

    root = tmp_path / "partial"
    partial_plan(history.fork_dir, history.upstream_dir, root)  # caches filled once
    fork = remote.mirror_path(root / "cache", "fork")
    up = remote.mirror_path(root / "cache", "upstream")
    wanted = needs(str(fork), str(up), workdir=str(root / "work2"))
    oid = sorted(wanted.upstream)[0]
    # An upstream cache with every blob the plan reads but that one.
    up_url = serve_filters(history.upstream_dir)
    fresh = tmp_path / "fresh"
    fresh_up = Path(remote.ensure_mirror(fresh, "upstream"))
    remote.fetch(fresh_up, up_url, ["+refs/heads/*:refs/heads/*"], None)
    remote.fetch_blobs(fresh_up, up_url, {k: v for k, v in wanted.upstream.items() if k != oid},
                       None)
    with pytest.raises(MissingObject) as info:
        plan(str(fork), str(fresh_up), workdir=str(tmp_path / "work3"))
    assert info.value.oid == oid and info.value.exit_code == 3
    assert "\n" not in str(info.value) and oid in str(info.value)
    assert Git(fresh_up).missing_objects([oid]) == [oid]  # still missing: no lazy fetch
    assert "[remote" not in (fresh_up / "config").read_text()


def test_all_the_blobs_come_in_one_request(history: Scenario, tmp_path: Path) -> None:
    with Simulator() as sim:
        name = sim.create_repo("THUDM", "slime", from_path=history.upstream_dir)
        url = sim.git_url(name)
        cache = Path(remote.ensure_mirror(tmp_path / "cache", name))
        head = remote.fetch_branch(cache, url, "main", None)
        assert head is not None and blob_count(cache) == 0
        listing = git_text(history.upstream_git, "ls-tree", "-r", "main").splitlines()
        blobs = {line.split()[2]: line.split("\t")[1] for line in listing}
        for wanted in (dict(list(blobs.items())[:1]), blobs):
            before = len(sim.requests)
            remote.fetch_blobs(cache, url, wanted, None)
            posts = [r for r in sim.requests[before:] if r.method == "POST"]
            assert len(posts) == 1 and posts[0].path.endswith("/git-upload-pack")
        assert blob_count(cache) == len(blobs)


def test_a_warm_sync_fetches_what_changed_not_the_repository(tmp_path: Path) -> None:
    s = Scenario(tmp_path / "repos", config=PLAIN_CONFIG)
    s.upstream_pr(100, "A big repository", files={
        f"slime/d{d}/e{e}/f{f}.py": lines(6, f"{d}.{e}.{f}")
        for d in range(10) for e in range(10) for f in range(5)})
    s.sync_fork()
    s.upstream_pr(101, "One file", files={"slime/d3/e4/f1.py": lines(7, "changed")})
    with Simulator() as sim:
        name = sim.create_repo("THUDM", "slime", from_path=s.upstream_dir)
        url = sim.git_url(name)
        cache = Path(remote.ensure_mirror(tmp_path / "cache", name))
        mark = len(sim.requests)
        first = remote.fetch_branch(cache, url, "main", None)
        assert first is not None
        remote.fetch_trees(cache, url, [first], None)
        cold = sim.git_bytes(mark)
        s.upstream_pr(102, "Another file", files={"slime/d7/e2/f4.py": lines(9, "again")})
        git(sim.git_dir(name), "fetch", "-q", str(s.upstream_dir), "+main:refs/heads/main")
        mark = len(sim.requests)
        tip = remote.fetch_branch(cache, url, "main", None)
        assert tip is not None and tip != first
        assert remote.fetch_trees(cache, url, [tip], None, base=first) == 0  # came with it
        warm = sim.git_bytes(mark)
    # The tree of 500 files (111 directories) came once; the second time, the 4
    # directories on the changed file's path, and its commit.
    assert warm * 20 < cold, (warm, cold)
    assert not Git(cache).missing_objects([git_text(s.upstream_git, "rev-parse",
                                                    "main:slime/d7/e2")])


def test_a_directory_put_back_as_an_old_commit_had_it_is_fetched(tmp_path: Path) -> None:
    """The server leaves out what it believes the cache has: a merge that takes a directory
    as an older commit had it gets that tree from an old commit, which the cache has
    only as a commit. fetch_trees finds the hole and fetches it."""
    server = tmp_path / "server.git"
    git(tmp_path, "init", "-q", "--bare", str(server))
    v1 = {f"d/f{i}.py": f"v1 {i}\n".encode() for i in range(3)}
    v2 = {f"d/f{i}.py": f"v2 {i}\n".encode() for i in range(3)}
    e1, e2 = {"e/x.py": b"e1\n"}, {"e/x.py": b"e2\n"}

    def tree(files: dict[str, bytes]) -> str:
        return write_tree(server, [(p, "100644", c) for p, c in files.items()])

    a = commit_tree(server, tree({**v1, **e1}), [], "A")
    b = commit_tree(server, tree({**v2, **e1}), [a], "B (the cutoff)")
    p = commit_tree(server, tree({**v1, **e2}), [a], "P, branched from A")
    m = commit_tree(server, tree({**v1, **e2}), [b, p], "Merge P, taking d/ as P has it")
    git(server, "update-ref", "refs/heads/main", b)
    url = serve_filters(server)
    cache = Path(remote.ensure_mirror(tmp_path / "cache", "o/r"))
    remote.fetch_branch(cache, url, "main", None)
    remote.fetch_trees(cache, url, [b], None)
    git(server, "update-ref", "refs/heads/main", m)
    remote.fetch_branch(cache, url, "main", None)
    d_v1 = git_text(server, "rev-parse", f"{m}:d")
    assert Git(cache).missing_objects([d_v1]) == [d_v1]  # the server left it out
    assert remote.fetch_trees(cache, url, [b, m], None, base=b) == 1
    assert Git(cache).missing_objects([d_v1]) == []
