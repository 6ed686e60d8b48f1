"""GitHub's size limits: fences that content cannot close, sides cut with a link, and a
cut that never leaves a code fence or a ``<details>`` open. Pure."""

from __future__ import annotations

import re

BODY_LIMIT = 65_536  # GitHub's limit for PR bodies and comments
CHECK_SUMMARY_LIMIT = 65_535
SIDE_LIMIT = 6_000  # characters of one side shown in a comment before it is cut

_FENCE = re.compile(r"^(`{3,}|~{3,})")


_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")
_BLOCK_START = re.compile(r"^(`{3,}|~{3,}|#|>)")
_OUR_TAGS = re.compile(r"</?(details|summary)", re.I)


def one_line(text: str) -> str:
    """People's text (a PR title, a commit's summary) as one line of our Markdown: no HTML
    of its own (``<`` is escaped, but not inside a code span, where ``&lt;`` would show as
    typed), and no fence, heading or quote opened at its head (a commit body's bare
    fence line once opened a code block that swallowed the rest of a PR body)."""
    text = text.replace("\r", " ").replace("\n", " ")
    out, at = [], 0
    for m in _CODE_SPAN.finditer(text):
        # A span that holds our own structure's tags is escaped all the same: a cut
        # through it must never leave a live ``</details>``.
        span = m.group() if not _OUR_TAGS.search(m.group()) else m.group().replace("<", "&lt;")
        out += [text[at:m.start()].replace("<", "&lt;"), span]
        at = m.end()
    out.append(text[at:].replace("<", "&lt;"))
    line = "".join(out)
    return "\\" + line if _BLOCK_START.match(line) else line


def fence(text: str, info: str = "") -> str:
    """A code fence longer than any backtick run inside ``text``, so content cannot close it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"{ticks}{info}\n{body}{ticks}"


def cut_side(text: str, limit: int, url: str | None, what: str,
             where: str | None = None) -> tuple[str, str]:
    """``text`` cut at a line end to about ``limit`` characters, and a note saying so.

    The note goes outside the fence (inside it would read as code); it links the whole
    file at the sync commit when ``url`` is given, or else says ``where`` the rest can
    be seen, if anywhere: never a report that may not exist.
    """
    if len(text) <= limit:
        return text, ""
    cut = text[:limit]
    cut = cut[: cut.rfind("\n") + 1] or cut
    shown = cut.count("\n")
    total = text.count("\n") + (0 if text.endswith("\n") else 1)
    rest = (f"; see [the whole file at the sync commit]({url})" if url
            else f"; {where}" if where else "")
    return cut, f"*{what}: {shown} of {total} lines shown{rest}.*"


def _step(line: str, fence_open: str | None, details: int) -> tuple[str | None, int]:
    """The open fence and ``<details>`` depth after ``line`` (CommonMark's fence rules)."""
    stripped = line.strip()
    if fence_open is None:
        m = _FENCE.match(stripped)
        if m:
            return m.group(1), details
        return None, details + line.count("<details") - line.count("</details>")
    if stripped and set(stripped) == {fence_open[0]} and len(stripped) >= len(fence_open):
        return None, details
    return fence_open, details


def balanced_cut(text: str, limit: int, note: str) -> str:
    """``text`` within ``limit``: cut at a line end, then close what the cut left open.

    Open code fences are closed with their own marker and ``<details>`` with
    ``</details>``, so the rest of the page renders as Markdown; ``note`` ends it.
    """
    if len(text) <= limit:
        return text
    budget = limit - len(note) - 8
    kept: list[str] = []
    size = 0
    fence_open: str | None = None
    details = 0
    for line in text.split("\n"):
        after_fence, after_details = _step(line, fence_open, details)
        # Keep the line only if closing everything still open after it fits too.
        closing = (len(after_fence) + 1 if after_fence else 0) + max(after_details, 0) * 11
        if size + len(line) + 1 + closing > budget:
            break
        kept.append(line)
        size += len(line) + 1
        fence_open, details = after_fence, max(after_details, 0)
    tail = ([fence_open] if fence_open else []) + ["</details>"] * details
    return "\n".join(kept + tail + ["", note])


def is_balanced(text: str) -> bool:
    """True when every code fence is closed and ``<details>`` opens and closes evenly."""
    fence_open: str | None = None
    details = 0
    for line in text.split("\n"):
        fence_open, details = _step(line, fence_open, details)
        if details < 0:
            return False
    return fence_open is None and details == 0


__all__ = ["BODY_LIMIT", "CHECK_SUMMARY_LIMIT", "SIDE_LIMIT", "balanced_cut", "cut_side",
           "fence", "is_balanced", "one_line"]
