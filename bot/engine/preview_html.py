"""``preview.html``: one self-contained page of the sync PR as GitHub would show it.

The PR body, the review, each thread in place on its diff hunk (a suggestion as GitHub's
"Suggested change" box: the commented lines removed, the suggestion added), file-level
comments on their file, and the check run. Markdown is rendered with markdown-it-py and
sanitized with nh3 to the tags GitHub keeps; the page loads nothing and runs no script.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import nh3
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from mdit_py_plugins.tasklists import tasklists_plugin

from bot.engine.anchor import DiffFile, DiffHunk, DiffLine, Thread, Where
from bot.engine.report.body import count_of

if TYPE_CHECKING:
    from bot.engine.preview import Preview

Json = dict[str, Any]
CONTEXT = 3  # lines shown around a thread in a long hunk
WHOLE_HUNK = 80  # hunks up to this many lines are shown whole

_TAGS = {"a", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt",
         "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "input", "ins", "kbd", "li",
         "ol", "p", "pre", "s", "samp", "span", "strong", "sub", "summary", "sup", "table",
         "tbody", "td", "tfoot", "th", "thead", "tr", "ul"}
_ATTRIBUTES = {"*": {"class"}, "a": {"href", "title"}, "ol": {"start"},
               "input": {"type", "checked", "disabled"}}
_CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        "form-action 'none'; base-uri 'none'")


def _suggestion_fence(self: RendererHTML, tokens: Sequence[Token], idx: int,
                      options: OptionsDict, env: EnvType) -> str:
    token = tokens[idx]
    if token.info.strip() != "suggestion":
        return RendererHTML.fence(self, tokens, idx, options, env)
    replaced: list[tuple[int, str]] = env.get("replaced", [])
    added = token.content.split("\n")[:-1] if token.content else []
    rows = [_box_row("del", n, "-", text) for n, text in replaced]
    start = replaced[0][0] if replaced else 1
    rows += [_box_row("add", start + k, "+", text) for k, text in enumerate(added)]
    return ('<div class="suggestion"><div class="suggestion-head">Suggested change</div>'
            f'<table class="suggestion-diff">{"".join(rows)}</table></div>\n')


def _box_row(kind: str, number: int, sign: str, text: str) -> str:
    return (f'<tr class="{kind}"><td class="num">{number}</td><td class="sign">{sign}</td>'
            f'<td class="code">{html.escape(text)}</td></tr>')


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    md.use(tasklists_plugin)
    md.add_render_rule("fence", _suggestion_fence)
    return md


_MD = _markdown()


def markdown(text: str, replaced: list[tuple[int, str]] | None = None) -> str:
    """GitHub-flavoured Markdown to safe HTML; ``replaced``: the lines a suggestion replaces."""
    raw = _MD.render(text, {"replaced": replaced or []})
    return nh3.clean(raw, tags=_TAGS, attributes=_ATTRIBUTES,
                     url_schemes={"http", "https", "mailto"})


def render_page(p: Preview) -> str:
    """The whole page: conversation (PR body and review), files changed, checks."""
    d = p.delivery
    s = d.summary()
    threads_by_path: dict[str, list[tuple[int, Thread]]] = {}
    for k, t in enumerate(d.threads):
        if t.where is not Where.NONE:
            threads_by_path.setdefault(t.path, []).append((k, t))
    bodies = _comment_bodies(p)
    files = "".join(_file(p.diff.files[path], threads, bodies)
                    for path, threads in sorted(threads_by_path.items()))
    esc = html.escape
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(p.title)} · forksync preview</title>
<style>{_CSS}</style></head>
<body>
<header><h1 id="title">{esc(p.title)}</h1>
<p><span class="state">Draft</span> forksync wants to merge commit 1
<code>{esc(d.commit[:12])}</code> from <code>{esc(p.branch)}</code>:
{count_of(s['threads'], 'thread')} for {count_of(s['items'], 'review item')},
{count_of(s['suggestions'], 'one-click suggestion')}, {len(s['unplaced'])} without a
thread.</p>
<nav><a href="#conversation">Conversation</a> · <a href="#files">Files changed</a> ·
<a href="#checks">Checks</a></nav></header>
<main>
<section id="conversation"><h2>Conversation</h2>
<article class="comment pr-body" id="pr-body"><div class="comment-head">PR description
(<code>pr.md</code>)</div><div class="markdown">{markdown(p.pr_body)}</div></article>
<article class="comment review" id="review" data-commit="{esc(d.commit)}">
<div class="comment-head">forksync reviewed (<code>review.json</code>, event
<code>{esc(str(d.review.get("event")))}</code>)</div>
<div class="markdown">{markdown(str(d.review.get("body", "")))}</div></article>
</section>
<section id="files"><h2>Files changed: {len(threads_by_path)} with threads</h2>{files}</section>
<section id="checks"><h2>Checks (<code>check.json</code>)</h2>{_check(p)}</section>
</main></body></html>
"""


def _comment_bodies(p: Preview) -> dict[int, str]:
    """Each thread's posted text, by its index in ``threads``: the very request bodies."""
    d = p.delivery
    out = {k: c["body"] for k, c in zip(d.review_index, d.review.get("comments", []),
                                        strict=True)}
    out |= {k: c["body"] for k, c in zip(d.file_index, d.file_comments, strict=True)}
    return out


def _thread(t: Thread, body: str, replaced: list[tuple[int, str]]) -> str:
    span = (f"L{t.start_line}–{t.line}" if t.start_line else f"L{t.line}" if t.line
            else "file")
    attrs = (f'data-ids="{" ".join(t.ids)}" data-where="{t.where.value}" '
             f'data-path="{html.escape(t.path)}" data-line="{t.line or ""}" '
             f'data-start-line="{t.start_line or ""}"')
    return (f'<div class="thread" {attrs}><div class="comment-head"><b>forksync</b> · '
            f'{html.escape(", ".join(t.ids))} · {span}</div>'
            f'<div class="markdown">{markdown(body, replaced)}</div></div>')


def _file(f: DiffFile, threads: list[tuple[int, Thread]], bodies: dict[int, str]) -> str:
    head = (f'<div class="file-head"><code>{html.escape(f.path)}</code> '
            f'<span class="status">{html.escape(f.status)}'
            f'{" · binary" if f.binary else ""}</span></div>')
    file_level = "".join(_thread(t, bodies[k], []) for k, t in threads
                         if t.where is Where.FILE)
    on_lines = [(k, t) for k, t in threads if t.where is not Where.FILE]
    shown = [_hunk(h, [(k, t) for k, t in on_lines if t.line is not None
                       and h.first <= t.line <= h.last], bodies) for h in f.right_hunks]
    quiet = sum(1 for h in shown if not h)
    more = (f'<tr class="gap"><td colspan="3">⋯ {quiet} more hunk{"s" if quiet != 1 else ""}'
            " with no thread</td></tr>") if quiet and on_lines else ""
    return (f'<div class="file" data-path="{html.escape(f.path)}">{head}{file_level}'
            f'<table class="diff">{"".join(shown)}{more}</table></div>')


def _hunk(h: DiffHunk, numbered: list[tuple[int, Thread]], bodies: dict[int, str]) -> str:
    if not numbered:
        return ""
    threads = [t for _, t in numbered]
    rows = [f'<tr class="hunk-head"><td colspan="3">{html.escape(h.header)}</td></tr>']
    shown = _shown(h, threads)
    by_line: dict[int, list[tuple[int, Thread]]] = {}
    for k, t in numbered:
        assert t.line is not None
        by_line.setdefault(t.line, []).append((k, t))
    selected = {n for t in threads if t.start_line is not None
                for n in range(t.start_line, (t.line or 0) + 1)}
    hidden = 0
    for k, line in enumerate(h.lines):
        if k not in shown:
            hidden += 1
            continue
        if hidden:
            rows.append(f'<tr class="gap"><td colspan="3">⋯ {hidden} lines</td></tr>')
            hidden = 0
        rows.append(_line(line, line.new in selected and line.kind != "-"))
        if line.kind != "-" and line.new in by_line:
            for k, t in by_line.pop(line.new):
                rows.append(f'<tr class="thread-row"><td colspan="3">'
                            f'{_thread(t, bodies[k], _replaced(h, t))}</td></tr>')
    if hidden:
        rows.append(f'<tr class="gap"><td colspan="3">⋯ {hidden} lines</td></tr>')
    return "".join(rows)


def _shown(h: DiffHunk, threads: list[Thread]) -> set[int]:
    """Indexes of the hunk's lines to show: all of a short hunk, else around each thread."""
    if len(h.lines) <= WHOLE_HUNK:
        return set(range(len(h.lines)))
    shown: set[int] = set()
    for t in threads:
        first, last = (t.start_line or t.line or 0) - CONTEXT, (t.line or 0) + CONTEXT
        at = [k for k, ln in enumerate(h.lines) if ln.new is not None and first <= ln.new <= last]
        if at:  # removed lines between the shown ones are shown too
            shown.update(range(at[0], at[-1] + 1))
    return shown


def _replaced(h: DiffHunk, t: Thread) -> list[tuple[int, str]]:
    """The new file's lines a suggestion on ``t`` replaces (what GitHub shows removed)."""
    assert t.line is not None
    start = t.start_line or t.line
    return [(ln.new, ln.text) for ln in h.lines
            if ln.kind != "-" and ln.new is not None and start <= ln.new <= t.line]


def _line(ln: DiffLine, selected: bool) -> str:
    kind = {"+": "add", "-": "del"}.get(ln.kind, "ctx")
    cls = f"line {kind}" + (" selected" if selected else "")
    return (f'<tr class="{cls}"><td class="num">{ln.old or ""}</td>'
            f'<td class="num" data-line="{ln.new or ""}">{ln.new or ""}</td>'
            f'<td class="code">{html.escape(ln.kind + ln.text)}</td></tr>')


def _check(p: Preview) -> str:
    c, out = p.check, p.check.get("output", {})
    icon = "✓" if c.get("conclusion") == "success" else "✗"
    rows = "".join(
        f'<tr class="{html.escape(a["annotation_level"])}"><td><code>'
        f'{html.escape(a["path"])}</code></td><td>L{a["start_line"]}–{a["end_line"]}</td>'
        f'<td>{html.escape(a["annotation_level"])}</td><td>{html.escape(a["title"])}</td></tr>'
        for a in p.annotations)
    more = len(p.annotations) - len(out.get("annotations", []))
    note = (f"<p>The first {len(out.get('annotations', []))} annotations go with the "
            f"request; {more} more follow, 50 per update.</p>" if more > 0 else "")
    return (f'<div class="check" data-conclusion="{html.escape(str(c.get("conclusion")))}">'
            f'<div class="check-head"><span class="icon">{icon}</span> '
            f'<b>{html.escape(str(c.get("name")))}</b> — {html.escape(str(out.get("title")))}'
            f'</div><div class="markdown">{markdown(str(out.get("summary", "")))}</div>'
            f'<h3>{len(p.annotations)} annotations</h3>{note}<table class="annotations">'
            f'{rows}</table></div>')


_CSS = """
body{font:14px/1.5 -apple-system,"Segoe UI",Helvetica,Arial,sans-serif;color:#1f2328;
margin:0;background:#fff}
header{padding:16px 32px;border-bottom:1px solid #d1d9e0;background:#f6f8fa}
h1{font-size:24px;font-weight:400;margin:0 0 8px}
main{padding:0 32px 64px;max-width:1200px}
.state{background:#59636e;color:#fff;border-radius:2em;padding:2px 10px;font-weight:600}
.comment,.thread,.check,.file{border:1px solid #d1d9e0;border-radius:6px;margin:16px 0;
background:#fff}
.comment-head,.file-head,.check-head{background:#f6f8fa;border-bottom:1px solid #d1d9e0;
padding:8px 16px;border-radius:6px 6px 0 0}
.markdown{padding:8px 16px;overflow-wrap:anywhere}
.markdown pre{background:#f6f8fa;padding:12px;border-radius:6px;overflow:auto}
.markdown table{border-collapse:collapse}
.markdown td,.markdown th{border:1px solid #d1d9e0;padding:4px 10px}
.markdown blockquote{margin:0;padding:0 1em;color:#59636e;border-left:.25em solid #d1d9e0}
.file-head .status{color:#59636e;margin-left:8px}
table.diff{border-collapse:collapse;width:100%;font:12px/20px ui-monospace,Menlo,monospace}
table.diff td.num{width:1%;min-width:40px;color:#59636e;text-align:right;padding:0 8px;
user-select:none}
table.diff td.code{white-space:pre-wrap;padding:0 8px}
tr.add>td{background:#dafbe1}tr.del>td{background:#ffebe9}
tr.selected>td{background:#fff8c5}
tr.hunk-head>td,tr.gap>td{background:#ddf4ff;color:#59636e;padding:2px 8px}
tr.thread-row>td{padding:8px 16px;background:#f6f8fa;font:14px/1.5 -apple-system,
"Segoe UI",Helvetica,Arial,sans-serif}
.suggestion{border:1px solid #d1d9e0;border-radius:6px;margin:8px 0}
.suggestion-head{background:#f6f8fa;padding:4px 12px;font-weight:600;
border-bottom:1px solid #d1d9e0}
table.suggestion-diff{border-collapse:collapse;width:100%;
font:12px/20px ui-monospace,Menlo,monospace}
table.suggestion-diff td.code{white-space:pre-wrap}
table.suggestion-diff td.num,table.suggestion-diff td.sign{width:1%;padding:0 6px;
color:#59636e}
.check[data-conclusion=failure] .icon{color:#d1242f}
.check[data-conclusion=success] .icon{color:#1a7f37}
table.annotations{border-collapse:collapse;margin:0 16px 16px}
table.annotations td{border-top:1px solid #d1d9e0;padding:2px 8px}
"""
