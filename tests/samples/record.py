"""Record the webhook samples in this directory from the GitHub simulator.

    .venv/bin/python -m tests.samples.record

Each sample is a payload the simulator sent for something people do on GitHub
(the simulator checks every payload against GitHub's webhook schema).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

import aiohttp

from tests.factory import Scenario
from tests.sim import Simulator

HERE = Path(__file__).parent
UPSTREAM = "THUDM/slime"
FORK = "vime-org/vime"
SYNC_BRANCH = "forksync/sync-0123456789"


def _save(name: str, payload: dict[str, Any]) -> None:
    (HERE / f"{name}.json").write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    print(f"wrote {name}.json")


async def _record_added(sim: Simulator) -> None:
    """The App installed on selected repositories, then the fork added to them."""
    await sim.install("vime-org", [])
    await sim.add_installation_repos("vime-org", [FORK])
    await sim.wait_deliveries()
    (added,) = sim.events_sent("installation_repositories", "added")
    _save("installation_repositories.added", added.payload)


async def _record(sim: Simulator) -> None:
    await sim.install("THUDM")
    await sim.install("vime-org")
    await sim.commit(UPSTREAM, "feature", {"slime/retry.py": "RETRIES = 3\n"},
                     "Add retries", user="alice")
    pr = await sim.open_pr(UPSTREAM, "feature", title="Add retries", user="alice")
    await sim.merge_pr(UPSTREAM, pr.number, method="squash", user="zhuzilin")

    await sim.commit(FORK, SYNC_BRANCH, {"vime/sync.txt": "commit 1\n"}, "sync: commit 1",
                     user="forksync-sim[bot]")
    sync_pr = await sim.open_pr(FORK, SYNC_BRANCH, title="sync(THUDM/slime #4..#4)",
                                user="forksync-sim[bot]", draft=True)
    head = await sim.commit(FORK, SYNC_BRANCH, {"vime/sync.txt": "resolved\n"},
                            "Resolve conflicts", user="vime-dev")
    token = sim.issue_token(FORK)
    async with aiohttp.ClientSession() as session, session.post(
            f"{sim.base_url}/repos/{FORK}/check-runs",
            headers={"Authorization": f"token {token}",
                     "Accept": "application/vnd.github+json"},
            json={"name": "forksync", "head_sha": head, "status": "completed",
                  "conclusion": "failure",
                  "output": {"title": "1 conflict", "summary": "1 conflict left"}}) as resp:
        run = await resp.json()
    await sim.rerequest_check_run(FORK, run["id"], user="vime-dev")
    await sim.merge_pr(FORK, sync_pr.number, method="merge", user="vime-dev")
    await sim.wait_deliveries()

    def first(event: str, action: str | None = None, repo: str | None = None,
              ref: str | None = None) -> dict[str, Any]:
        for d in sim.events_sent(event, action):
            if repo and d.payload.get("repository", {}).get("full_name") != repo:
                continue
            if ref and d.payload.get("ref") != ref:
                continue
            return d.payload
        raise LookupError(f"no {event} {action} delivery for {repo} {ref}")

    installed = next(d.payload for d in sim.events_sent("installation", "created")
                     if d.payload["installation"]["account"]["login"] == "vime-org")
    _save("installation.created", installed)
    _save("push.upstream_main", first("push", repo=UPSTREAM, ref="refs/heads/main"))
    _save("pull_request.closed.upstream_merged", first("pull_request", "closed", UPSTREAM))
    _save("pull_request.synchronize.sync_branch", first("pull_request", "synchronize", FORK))
    _save("check_run.rerequested", first("check_run", "rerequested", FORK))
    _save("pull_request.closed.sync_pr_merged", first("pull_request", "closed", FORK))
    await sim.uninstall("vime-org")
    await sim.wait_deliveries()
    _save("installation.deleted", first("installation", "deleted"))
    if sim.violations:
        raise SystemExit("the simulator reported schema violations:\n" + "\n".join(sim.violations))


async def _record_onboarding(sim: Simulator) -> None:
    """The App's onboarding PR merged on the fork (its branch is forksync/onboarding)."""
    await sim.install("vime-org")
    await sim.commit(FORK, "forksync/onboarding", {".github/forksync.yml": "upstream: "
                     "{repo: THUDM/slime}\n"}, "Configure forksync", user="forksync-sim[bot]")
    pr = await sim.open_pr(FORK, "forksync/onboarding", title="Configure forksync",
                           user="forksync-sim[bot]")
    await sim.merge_pr(FORK, pr.number, method="merge", user="vime-dev")
    await sim.wait_deliveries()
    (closed,) = sim.events_sent("pull_request", "closed")
    _save("pull_request.closed.onboarding_merged", closed.payload)


def record_onboarding(tmp: str) -> None:
    scenario = Scenario(tmp)
    scenario.sync_fork(trailer=False, config=False)
    sim = Simulator(root=Path(tmp) / "sim3").start()
    try:
        sim.create_repo("THUDM", "slime", scenario.upstream_dir, install=False)
        sim.create_repo("vime-org", "vime", scenario.fork_dir, install=False,
                        fork_of="THUDM/slime")
        asyncio.run(_record_onboarding(sim))
    finally:
        sim.stop()


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="forksync-samples-") as tmp:
        scenario = Scenario(tmp)
        scenario.sync_fork()
        sim = Simulator(root=Path(tmp) / "sim").start()
        try:
            sim.create_repo("THUDM", "slime", scenario.upstream_dir, install=False)
            sim.create_repo("vime-org", "vime", scenario.fork_dir, install=False)
            asyncio.run(_record(sim))
        finally:
            sim.stop()
        sim = Simulator(root=Path(tmp) / "sim2").start()
        try:
            sim.create_repo("vime-org", "vime", scenario.fork_dir, install=False)
            asyncio.run(_record_added(sim))
        finally:
            sim.stop()
        record_onboarding(tmp)


if __name__ == "__main__":
    main()
