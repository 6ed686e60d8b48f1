"""``forksync sync --preview DIR``: the files, and the page in a real browser (headless Chromium).

The window of :func:`tests.factory.make_threads` needs every kind of thread; the CLI runs
as a process, and Chromium (Debian's, driven over the DevTools protocol) loads the page:
what is on it, where each thread sits, how a suggestion looks, and a screenshot.
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.engine.anchor import PrDiff
from bot.engine.preview import build_preview
from bot.engine.preview_html import markdown
from bot.engine.review import build_delivery, local_diff
from tests.browser import Browser
from tests.factory import make_threads

REPO_ROOT = Path(__file__).resolve().parents[1]
FILES = ["check.json", "file-comments.json", "pr.md", "preview.html", "review.json"]

def forksync(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def preview(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("preview")
    s = make_threads(root / "repos")
    out = root / "out"
    done = forksync("sync", "--fork", str(s.fork_dir), "--upstream", str(s.upstream_dir),
                    "--workdir", str(root / "work"), "--json", str(root / "plan.json"),
                    "--preview", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[-2] == f"preview: {out.resolve() / 'preview.html'}"
    branch = lines[-1]
    commit = subprocess.run(["git", "-C", str(s.fork_dir), "rev-parse", branch],
                            capture_output=True, text=True, check=True).stdout.strip()
    return {"out": out, "plan": json.loads((root / "plan.json").read_text()),
            "commit": commit, "fork": s.fork_dir, "branch": branch}


def test_the_preview_is_the_request_bodies_for_commit_1(preview: dict[str, Any]) -> None:
    out, plan, commit = preview["out"], preview["plan"], preview["commit"]
    assert sorted(p.name for p in out.iterdir()) == FILES
    review = json.loads((out / "review.json").read_text())
    files = json.loads((out / "file-comments.json").read_text())
    check = json.loads((out / "check.json").read_text())
    # The same objects the App builds from the diff of commit 1 against fork main.
    diff = local_diff(str(preview["fork"] / ".git"), "main", commit)
    d = build_delivery(plan, PrDiff.parse(diff), commit)
    assert review == d.review and files == list(d.file_comments)
    assert review["commit_id"] == commit and check["head_sha"] == commit
    assert check["conclusion"] == "failure" and check["name"] == "forksync"
    # Every comment names the ids of the items it carries; every item is somewhere.
    carried = {}
    for c in [*review["comments"], *files]:
        ids = re.findall(r"^\*\*(Q\d+) ·", c["body"], re.M)
        assert ids, c["body"][:80]
        carried.update(dict.fromkeys(ids, c["path"]))
    orphans = re.findall(r"<summary>(Q\d+) ·", review["body"])
    assert sorted([*carried, *orphans], key=lambda q: int(q[1:])) == \
        [f"Q{n}" for n in range(1, 8)]
    assert orphans == ["Q1", "Q2"]  # the Dockerfile (policy ours) and a binary both changed
    body = (out / "pr.md").read_text()
    assert "5 of 7 review items have a review thread" in body
    assert "**Q1** `docker/Dockerfile`" in body and "**Q2** `imgs/arch.png`" in body
    # Only Q7's thread has a suggestion button; Q6's proposal spans 2 hunks of the diff.
    assert "(upstream's change there is left out), one command: `/sync answer Q6 suggested` " \
        "| Q6 |\n" in body
    assert "| 1 starting point to check, one click each | Q7 |\n" in body
    page = (out / "preview.html").read_text()
    assert "5 threads for 7 review items,\n1 one-click suggestion, 2 without" in page
    # The check counts the open items as the body does ("Decide (6, 6 open)"), by id.
    assert "**Decide** (6, 6 open)" in body
    assert check["output"]["title"] == ("2 conflict regions still open (Q6–Q7) in 1 file; "
                                        "4 other open decisions (Q2–Q5)")


def test_a_preview_that_cannot_be_written_is_one_line_on_stderr(tmp_path: Path) -> None:
    s = make_threads(tmp_path / "repos")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    done = forksync("sync", "--fork", str(s.fork_dir), "--upstream", str(s.upstream_dir),
                    "--workdir", str(tmp_path / "work"), "--preview", str(blocker / "out"),
                    "--quiet")
    assert done.returncode == 1
    assert done.stderr.startswith("forksync: error: cannot write the preview into ")
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


PLACES = """(() => [...document.querySelectorAll('.thread')].map(t => {
  const row = t.closest('tr.thread-row');
  const above = row ? row.previousElementSibling : null;
  const box = t.getBoundingClientRect();
  return {ids: t.dataset.ids, where: t.dataset.where, line: t.dataset.line,
          path: t.dataset.path,
          file: t.closest('.file') ? t.closest('.file').dataset.path : null,
          above: above ? above.querySelectorAll('td')[1].dataset.line : null,
          text: t.innerText, width: box.width, height: box.height};
}))()"""


async def test_the_page_shows_each_thread_in_place_in_a_real_browser(
        preview: dict[str, Any]) -> None:
    out = preview["out"]
    review = json.loads((out / "review.json").read_text())
    async with Browser(1280, 900) as b:
        await b.open(out / "preview.html")
        places = await b.js(PLACES)
        by_ids = {p["ids"]: p for p in places}
        assert sorted(by_ids) == ["Q3", "Q4", "Q5", "Q6", "Q7"]
        for p in places:
            assert p["width"] > 300 and p["height"] > 40, p  # laid out and visible
            assert p["file"] == p["path"]
            assert re.search(rf"\b{p['ids']} · (Decide|Confirm|Settled)", p["text"])
        # Each comment on a line sits right under that line of its hunk, as on GitHub.
        for c in review["comments"]:
            (p,) = [p for p in places if p["path"] == c["path"] and p["line"] == str(c["line"])]
            assert p["above"] == str(c["line"]), p
        assert by_ids["Q3"]["where"] == "file" and by_ids["Q3"]["above"] is None
        assert "spans 2 hunks" in by_ids["Q6"]["text"]

        # The one suggestion: GitHub's box, the whole region removed, the proposal added.
        (region,) = [c for c in review["comments"] if "start_line" in c]
        box = await b.js("""(() => { const s = document.querySelector('.suggestion');
            return {head: s.querySelector('.suggestion-head').innerText,
                    del: [...s.querySelectorAll('tr.del td.code')].map(td => td.innerText),
                    add: [...s.querySelectorAll('tr.add td.code')].map(td => td.innerText),
                    delBg: getComputedStyle(s.querySelector('tr.del td')).backgroundColor,
                    addBg: getComputedStyle(s.querySelector('tr.add td')).backgroundColor,
                    thread: s.closest('.thread').dataset.ids}; })()""")
        assert box["head"] == "Suggested change" and box["thread"] == "Q7"
        assert len(box["del"]) == region["line"] - region["start_line"] + 1
        assert box["del"][0].startswith("<<<<<<<") and box["del"][-1].startswith(">>>>>>>")
        suggested = re.search(r"(`{3,})suggestion\n(.*?)\1", region["body"], re.S)
        assert suggested is not None
        assert box["add"] == suggested.group(2).splitlines()
        assert box["delBg"] == "rgb(255, 235, 233)" and box["addBg"] == "rgb(218, 251, 225)"
        assert await b.js("document.querySelectorAll('.suggestion').length") == 1

        # The PR body and the review render as Markdown; the check shows its annotations.
        page = await b.js("""(() => ({
            boxes: document.querySelectorAll('#pr-body input[type=checkbox]').length,
            tables: document.querySelectorAll('#pr-body table').length,
            orphans: [...document.querySelectorAll('#review details summary')]
                .map(s => s.innerText),
            check: document.querySelector('.check').dataset.conclusion,
            notes: document.querySelectorAll('table.annotations tr').length,
            fences: document.querySelectorAll('#review pre, .thread pre').length,
            text: document.body.innerText}))()""")
        assert page["boxes"] == 4  # the checklist: one box per conflicted file
        body = (out / "pr.md").read_text()
        assert page["tables"] == len(re.findall(r"^\|(?: ?:?-+:? ?\|)+$", body, re.M)) >= 1
        assert page["fences"] >= 3
        assert page["orphans"][:2] == ["Q1 · docker/Dockerfile", "Q2 · imgs/arch.png"]
        check = json.loads((out / "check.json").read_text())
        assert page["check"] == "failure"
        # One on each of what remains: the regions Q4, Q6, Q7 on their lines, and the
        # decisions about whole files (Q2, Q3 binary, Q5) on line 1; then the config's own
        # warnings.
        assert page["notes"] == len(check["output"]["annotations"]) >= 6
        assert [(a["title"].split(":")[0], a["start_line"])
                for a in check["output"]["annotations"][:6]] == [
            ("Q2", 1), ("Q3", 1), ("Q4", 10), ("Q5", 1), ("Q6", 10), ("Q7", 96)]
        for n in range(1, 8):
            assert f"Q{n}" in page["text"]

        shot = await b.screenshot(out / "thread.png", '.thread[data-ids="Q7"]')
        width, height = png_size(shot)
        assert width > 300 and height > 100
        full = await b.screenshot(out / "top.png")
        assert png_size(full) == (1280, 900)


async def test_the_page_runs_nothing_and_loads_nothing_from_the_text_it_shows(
        preview: dict[str, Any], tmp_path: Path) -> None:
    plan = json.loads(json.dumps(preview["plan"]))
    evil = ('<script>document.title="pwned"</script><img src="http://127.0.0.1:9/x.png" '
            'onerror="document.title=\'pwned\'"><a href="javascript:alert(1)">x</a>')
    plan["window"].append({"number": 99, "title": evil, "author": "mallory",
                           "sha": "9" * 40, "date": "", "kind": "pr"})
    diff = local_diff(str(preview["fork"] / ".git"), "main", preview["commit"])
    p = build_preview(plan, diff, preview["commit"], title="t", branch="b")
    (tmp_path / "preview.html").write_text(p.files()["preview.html"])
    async with Browser() as b:
        await b.open(tmp_path / "preview.html")
        got = await b.js("""(() => ({title: document.title,
            scripts: document.scripts.length, imgs: document.images.length,
            js: [...document.querySelectorAll('a')].filter(a => a.href.startsWith('javascript'))
                .length, links: document.querySelectorAll('link').length}))()""")
    assert got == {"title": "t · forksync preview", "scripts": 0, "imgs": 0, "js": 0,
                   "links": 0}


def test_markdown_renders_as_github_does_what_the_page_needs() -> None:
    html = markdown("- [x] done\n- [ ] open\n\n| a |\n|---|\n| 1 |\n\n"
                    "<details><summary>s</summary>\n\nin\n\n</details>\n")
    assert html.count('type="checkbox"') == 2 and "checked" in html
    assert "<table>" in html and "<details><summary>s</summary>" in html
    box = markdown("```suggestion\nnew\n```\n", replaced=[(7, "old")])
    assert "Suggested change" in box and ">old<" in box and ">new<" in box
    assert '<td class="num">7</td>' in box
