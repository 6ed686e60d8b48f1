"""Action mode: the documented workflow file, run step by step against the simulator.

The steps run as a runner would run them: the checkout is a clone over git smart
HTTP, the install is the file's own `pip install` from a git URL (pointed at this
repository, since tests never reach github.com or PyPI: the test's virtualenv
provides the dependencies), and the sync step runs in bash with the variables
GitHub Actions sets. Only the `${{ }}` expressions the file uses are understood;
any other one fails the test, so the file cannot drift from what is tested.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.sim import Simulator, github_sim  # noqa: F401 - github_sim is a fixture
from tests.test_e2e import FORK, UPSTREAM, UPSTREAM_CHANGE, build_scenario

REPO_ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = REPO_ROOT / "docs" / "forksync-workflow.yml"
INSTALL_URL = "git+https://github.com/forksync/forksync@main"


def workflow() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text())
    return data


def test_the_docs_show_the_tested_workflow() -> None:
    docs = (REPO_ROOT / "docs" / "APP.md").read_text()
    assert f"```yaml\n{WORKFLOW.read_text()}```" in docs
    assert "pip install forksync\n" not in docs  # nothing publishes that package


def test_the_workflow_asks_for_what_sync_publish_needs() -> None:
    wf = workflow()
    assert wf["permissions"] == {"contents": "write", "pull-requests": "write",
                                 "checks": "write", "issues": "write"}
    triggers = wf[True] if True in wf else wf["on"]  # YAML 1.1 reads `on:` as true
    assert set(triggers) == {"schedule", "workflow_dispatch"}
    (job,) = wf["jobs"].values()
    uses = [step["uses"] for step in job["steps"] if "uses" in step]
    assert uses == ["actions/checkout@v4", "actions/setup-python@v5"]
    assert job["steps"][0]["with"]["fetch-depth"] == 0


def expand(text: str, known: dict[str, str]) -> str:
    """Replace the workflow's `${{ }}` expressions; an unknown one is a test failure."""
    def one(m: re.Match[str]) -> str:
        expression = m.group(1).strip()
        assert expression in known, f"the test does not know ${{{{ {expression} }}}}"
        return known[expression]
    return re.sub(r"\$\{\{(.*?)\}\}", one, text)


@pytest.mark.parametrize("dispatch_to", [None, "#7"], ids=["schedule", "dispatch-to-#7"])
async def test_the_workflow_opens_the_sync_pr(github_sim: Simulator, tmp_path: Path,  # noqa: F811
                                              dispatch_to: str | None) -> None:
    sim = github_sim
    scenario = build_scenario(tmp_path / "repos")
    sim.create_repo("THUDM", "slime", scenario.upstream_dir, install=False)
    sim.create_repo("vime-org", "vime", scenario.fork_dir)
    await sim.commit(UPSTREAM, "main", UPSTREAM_CHANGE, "Tune the tables (#7)", user="alice")
    await sim.commit(UPSTREAM, "main", {"slime/later.py": "later = 1\n"}, "Later (#8)",
                     user="bob")
    token = sim.issue_token(FORK)  # what the runner's GITHUB_TOKEN is
    runner = {k: v for k, v in os.environ.items()
              if not k.startswith(("FORKSYNC_", "GITHUB_", "GIT_"))}
    runner.update(GITHUB_REPOSITORY=FORK, GITHUB_API_URL=sim.base_url,
                  GITHUB_SERVER_URL=sim.base_url, GITHUB_ACTIONS="true")
    # As Actions evaluates them: plain text pasted in, no quoting.
    known = {"secrets.GITHUB_TOKEN": token, "inputs.to": dispatch_to or ""}
    workspace, site = tmp_path / "workspace", tmp_path / "site"
    (job,) = workflow()["jobs"].values()
    for step in job["steps"]:
        if step.get("uses", "").startswith("actions/checkout@"):
            subprocess.run(["git", "clone", "-q", sim.git_url(FORK, token), str(workspace)],
                           check=True, env=runner)
            continue
        if step.get("uses", "").startswith("actions/setup-python@"):
            continue  # the test's own interpreter
        command = expand(step["run"], known)
        env = {**runner, **{k: expand(str(v), known) for k, v in step.get("env", {}).items()}}
        if command.startswith("pip install"):
            assert INSTALL_URL in command
            command = command.replace("pip install", f"{sys.executable} -m pip install --quiet "
                                      f"--no-deps --no-index --no-build-isolation --target "
                                      f"{site}").replace(INSTALL_URL, f"git+file://{REPO_ROOT}")
        else:
            # The runner's PATH has the installed `forksync`; nothing else provides it here.
            env["PATH"] = f"{site / 'bin'}:{env['PATH']}"
            env["PYTHONPATH"] = str(site)
        proc = subprocess.run(["bash", "-e", "-c", command], cwd=workspace, env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{command}\n{proc.stdout}\n{proc.stderr}"
        last = proc.stdout
    assert (site / "bot" / "cli.py").exists()  # installed from the git URL, not the checkout
    assert last.startswith("opened: vime-org/vime#1 forksync/sync-"), last
    (pr,) = sim.prs(FORK)
    assert pr.draft and len(sim.reviews(FORK, pr.number)) == 1
    (run,) = sim.check_runs(FORK, pr.head_sha, "forksync")
    assert run.conclusion == "failure"
    tip = sim.ref(UPSTREAM, "main") if dispatch_to is None else \
        subprocess.run(["git", f"--git-dir={sim.git_dir(UPSTREAM)}", "rev-parse", "main~1"],
                       capture_output=True, text=True, check=True).stdout.strip()
    message = subprocess.run(["git", f"--git-dir={sim.git_dir(FORK)}", "log", "-1",
                              "--format=%B", pr.head_sha], capture_output=True, text=True,
                             check=True).stdout
    assert f"Upstream-Sync: {UPSTREAM}@{tip}" in message
    assert sim.violations == [] and sim.unimplemented == [] and sim.internal_errors == []
