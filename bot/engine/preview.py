"""``forksync sync --preview DIR``: exactly what the App will post for this sync PR. Pure.

The files are the App's own request bodies (:mod:`bot.engine.review`,
:mod:`bot.engine.gate`), anchored on the diff of commit 1 against the fork branch, which
is the diff GitHub shows for the PR:

- ``pr.md``: the PR body;
- ``review.json``: the body of ``POST /repos/{owner}/{repo}/pulls/{n}/reviews``;
- ``file-comments.json``: the bodies of ``POST /repos/{owner}/{repo}/pulls/{n}/comments``;
- ``check.json``: the body of ``POST /repos/{owner}/{repo}/check-runs``;
- ``preview.html``: one self-contained page showing all of it as GitHub would.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from bot.engine.anchor import PrDiff
from bot.engine.gate import annotation_batches, check_run_request, initial_remaining
from bot.engine.review import Delivery, build_delivery, pr_section

Json = dict[str, Any]


@dataclass(frozen=True)
class Preview:
    title: str
    branch: str
    plan: Json
    pr_body: str
    diff: PrDiff
    delivery: Delivery
    check: Json  # the POST body: the first 50 annotations
    annotations: list[Json]  # all of them (the App sends the rest 50 per PATCH)

    def files(self) -> dict[str, str]:
        """File name → content, as ``--preview DIR`` writes them."""
        from bot.engine.preview_html import render_page  # markdown-it: only for the page

        return {
            "pr.md": self.pr_body,
            "review.json": _json(self.delivery.review),
            "file-comments.json": _json(list(self.delivery.file_comments)),
            "check.json": _json(self.check),
            "preview.html": render_page(self),
        }


def _json(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def build_preview(plan_json: Json, diff_text: str, commit: str, *, title: str, branch: str,
                  report_url: str | None = None, report_path: str | None = None) -> Preview:
    """What the App posts for commit 1 of ``plan_json``: a new PR, nothing answered yet.

    ``report_path`` is the report file commit 1 holds, if the body overflowed (with no
    GitHub there is no URL to link: the body names the file)."""
    diff = PrDiff.parse(diff_text)
    delivery = build_delivery(plan_json, diff, commit)
    sync = {"delivery": delivery.summary(), "unanchored": delivery.unplaced(),
            "report_url": report_url, "report_path": report_path}
    remaining = initial_remaining(plan_json, {})
    batches = annotation_batches(plan_json, remaining)
    return Preview(title, branch, plan_json, pr_section(plan_json, sync), diff, delivery,
                   check_run_request(plan_json, remaining, commit,
                                     one_click=delivery.one_click()),
                   [a for batch in batches for a in batch])
