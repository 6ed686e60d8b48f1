"""The per-fork state in the store, the plans on disk, and the sync branch's name.

Per-fork state (``Store`` key ``fork:<owner>/<repo>``), shared by the publish steps,
the follow-up and the slash commands::

    installation_id, upstream, upstream_branch, upstream_mirror, fork_branch,
    last_seen_upstream            the upstream head at the last sync or poll
    last_synced_tip               the tip of the last sync PR that was merged
    pushed: [sha, ...]            every head the bot wrote to a sync branch
    commands_done: [key, ...]     slash-command comments already answered
    refusals_replied: {"pr:login": time}  the last "write access only" reply per author and PR
    sync: {branch, commit, cutoff, tip, ours, window_label, plan_file, plan_key, report_url, pr,
           review_commit, delivery: {counts}, unanchored: [id], behind, head,
           check_runs: {sha: id},
           resolved: [id], remaining: [Remaining], resolutions: {id: how},
           followed: {commit, ids: {id: side or "twin"}},
           refused_head, answers: {id: choice}, rerere: {hunk key: text}, pending}

Who writes what. Each publish step (``bot.sync.publish``) owns its keys: the run
``installation_id``; fetch ``upstream``, ``upstream_branch``, ``upstream_mirror``, ``fork_branch``,
``last_seen_upstream``; prepare the window and commit 1 (``branch`` .. ``report_url``);
branch ``pushed`` and ``refused_head``; pr ``pr``; review ``review_commit``,
``delivery`` and ``unanchored``; check ``remaining``, ``head`` and ``check_runs``; behind
``behind`` and ``last_synced_tip``. The follow-up writes ``resolved``, ``remaining``,
``resolutions``, ``head`` and ``check_runs`` on every push, and its follow-up suggestions
(``bot.sync.follow``) ``followed``. The slash commands write
``answers``, ``rerere``, ``commands_done``, ``refusals_replied``, and a new window and
commit 1 by way of ``pending`` (a half-finished extend or refresh). Installing the App
records the upstream at once.

The plan itself (``Plan.to_json()``) is a file under ``<data_dir>/plans/``, named by
commit 1, because the body and the check are re-rendered from it on every push; the
store keeps a copy (``plan:<owner>/<repo>:<time saved>:<commit 1>``, named by
``sync.plan_key``), so that a replica on another machine, whose data directory has no such
file, reads it too.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from bot.app.settings import Settings
from bot.app.store import Store
from bot.errors import ForksyncError

SYNC_BRANCH_PREFIX = "forksync/sync-"
STATE_PREFIX = "fork:"  # the server's scheduler polls every fork under this prefix
MAX_PUSHED = 200  # heads remembered per fork: far more than live sync branches
PLAN_PREFIX = "plan:"  # the store's copy of a plan: plan:<owner>/<repo>:<time>:<commit 1>
MAX_PLANS = 4  # per fork: the open PR's, a pending refresh's, and room to spare


def sync_branch_name(cutoff: str) -> str:
    """Deterministic per window start, so a rerun of the same window finds its branch."""
    return f"{SYNC_BRANCH_PREFIX}{cutoff[:10]}"


def is_sync_branch(ref: str) -> bool:
    return ref.removeprefix("refs/heads/").startswith(SYNC_BRANCH_PREFIX)


def fork_state_key(fork: str) -> str:
    return f"{STATE_PREFIX}{fork}"


def load_fork_state(store: Store, fork: str) -> dict[str, Any]:
    return store.get_state(fork_state_key(fork)) or {"fork": fork}


def save_fork_state(store: Store, fork: str, state: dict[str, Any]) -> None:
    state["fork"] = fork
    store.put_state(fork_state_key(fork), state)


def forks_following(store: Store, repo: str, branch: str | None = None) -> list[dict[str, Any]]:
    """States of every registered fork whose config names ``repo`` (and ``branch``).

    ``repo`` is followed when it is the fork's ``upstream.repo`` or its
    ``upstream.mirror``: a mirror counts only where a fork's config names it, never
    by a likeness of names (anyone can create ``attacker/slime``).
    """
    found = []
    for key in store.state_keys(STATE_PREFIX):
        state = store.get_state(key) or {}
        named = {str(state.get(k) or "").lower() for k in ("upstream", "upstream_mirror")}
        if repo.lower() not in named - {""}:
            continue
        if branch is not None and state.get("upstream_branch", "main") != branch:
            continue
        state.setdefault("fork", key[len(STATE_PREFIX):])
        found.append(state)
    return found


def remember_pushed(state: dict[str, Any], sha: str) -> None:
    pushed = [s for s in state.get("pushed", []) if s != sha]
    state["pushed"] = [*pushed, sha][-MAX_PUSHED:]


def plan_path(settings: Settings, fork: str, commit: str) -> Path:
    return settings.data_dir / "plans" / fork.replace("/", "__") / f"{commit}.json"


def plan_key(fork: str, commit: str, saved_at: float) -> str:
    """Where the store keeps the plan of ``fork``'s commit 1 ``commit``, saved at
    ``saved_at``: the time leads, so a fork's keys sort oldest first and pruning reads
    none of the plans."""
    return f"{PLAN_PREFIX}{fork}:{int(saved_at * 1000):015d}:{commit}"


def _saved_order(key: str) -> str:
    """A plan key's sort key: its time, or none (oldest) for a key of round 13's form,
    ``plan:<fork>:<commit>``, which had no time in it."""
    rest = key[len(PLAN_PREFIX):].rsplit(":", 2)
    return rest[1] if len(rest) == 3 else ""


def save_plan(settings: Settings, fork: str, commit: str, plan_json: dict[str, Any],
              store: Store | None = None) -> dict[str, str]:
    """Write the plan to this replica's data directory, and with ``store`` to the store
    too, where every replica finds it; returns where (``plan_file`` and, with ``store``,
    ``plan_key``), for the sync's state. The store keeps the newest ``MAX_PLANS`` plans of
    a fork, and never drops the one just saved (a replica whose clock is behind)."""
    path = plan_path(settings, fork, commit)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(plan_json), encoding="utf-8")
    tmp.replace(path)
    saved = {"plan_file": str(path)}
    if store is not None:
        now = time.time()
        key = saved["plan_key"] = plan_key(fork, commit, now)
        store.put_state(key, {"saved_at": now, "plan": plan_json})
        others = sorted((k for k in store.state_keys(f"{PLAN_PREFIX}{fork}:") if k != key),
                        key=_saved_order)
        for stale in others[:max(0, len(others) - MAX_PLANS + 1)]:
            store.delete_state(stale)
    return saved


def load_plan(sync: dict[str, Any], store: Store | None = None) -> dict[str, Any]:
    """The plan of ``sync``'s commit 1: this replica's file, else (with ``store``) the
    store's copy, which a replica on another machine wrote."""
    path = sync.get("plan_file")
    if path and Path(path).exists():
        data: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
        return data
    kept = store.get_state(sync["plan_key"]) if store is not None and sync.get("plan_key") \
        else None
    if kept is None or not isinstance(kept.get("plan"), dict):
        raise ForksyncError("the sync's plan is missing from the data directory; "
                            "run `/sync refresh` to compute it again")
    plan: dict[str, Any] = kept["plan"]
    return plan
