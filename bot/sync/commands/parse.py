"""Parsing ``/sync ...`` slash commands from PR comments. Pure: text in, commands out.

Prow-style: a command is a comment line that starts with ``/sync``, one command
per line. Lines quoted with ``>`` (a reply that quotes an earlier command),
fenced code blocks and HTML comments are not commands, so that quoting or
documenting a command never runs it again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, TypeAlias

from bot.errors import ForksyncError

Side: TypeAlias = Literal["ours", "theirs", "suggested"]
SIDES: tuple[Side, ...] = ("ours", "theirs", "suggested")

PREFIX = "/sync"

USAGE: dict[str, str] = {
    "help": "/sync help",
    "status": "/sync status",
    "resolve": "/sync resolve <path> ours|theirs|suggested",
    "answer": "/sync answer <Qn>[-Qm][,...] <choice>",
    "extend": "/sync extend [#N|sha]",
    "refresh": "/sync refresh",
}

_SUMMARY: dict[str, str] = {
    "help": "show this list of commands",
    "status": "count what is left: unresolved conflicts, open questions, how far behind upstream",
    "resolve": "resolve every conflict in one file with our side, their side or the suggestion",
    "answer": "answer a question from the report, e.g. `/sync answer Q3 theirs`; a range or "
              "list answers a group: `/sync answer Q21-Q33 theirs`; `twin` gives conflict "
              "hunks the text their identical twins were resolved to",
    "extend": "extend the window to the upstream head, a PR (`#N`) or a commit; "
              "every resolution already made is replayed",
    "refresh": "redo the sync onto the newest fork main; every resolution already made is replayed",
}


@dataclass(frozen=True)
class Help:
    """``/sync help``."""


@dataclass(frozen=True)
class StatusCommand:
    """``/sync status``."""


@dataclass(frozen=True)
class Resolve:
    """``/sync resolve <path> ours|theirs|suggested``."""

    path: str
    side: Side


@dataclass(frozen=True)
class Answer:
    """``/sync answer <Qn|Mn> <choice>``; ``question`` is normalised to ``Q<n>`` or ``M<n>``.

    ``Q21-Q33`` and ``Q2,Q5,Q9-Q11`` answer several items at once: ``questions`` lists
    them all, in order, and ``question`` is the first.
    """

    question: str
    choice: str
    questions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.questions:
            object.__setattr__(self, "questions", (self.question,))


@dataclass(frozen=True)
class Extend:
    """``/sync extend [#N|sha]``: no target means the upstream branch head."""

    pr: int | None = None
    sha: str | None = None  # lower-case hex, 7 to 40 digits, as typed

    @property
    def target(self) -> str:
        """How to say the target in a reply."""
        if self.pr is not None:
            return f"#{self.pr}"
        if self.sha is not None:
            return self.sha
        return "the upstream head"


@dataclass(frozen=True)
class Refresh:
    """``/sync refresh``."""


Command: TypeAlias = Help | StatusCommand | Resolve | Answer | Extend | Refresh


class CommandError(ForksyncError):
    """A ``/sync`` line that is not a valid command; ``str()`` is the reply to post."""

    def __init__(self, line: str, problem: str, verb: str | None = None) -> None:
        self.line = line
        self.problem = problem
        self.verb = verb
        if verb in USAGE:
            usage = f"Usage: `{USAGE[verb]}`"
        else:
            usage = "Commands: " + ", ".join(f"`{u}`" for u in USAGE.values())
        super().__init__(f"I could not run `{line}`: {problem}\n\n{usage}")


@dataclass(frozen=True)
class ParsedLine:
    """One ``/sync`` line of a comment and what it parsed to."""

    line: str
    result: Command | CommandError

    @property
    def ok(self) -> bool:
        return not isinstance(self.result, CommandError)


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# Q<n>: a review item; M<n>: a line the check cannot tell from a conflict marker.
_QUESTION = re.compile(r"^#?([QqMm])(\d+)$")
_PR = re.compile(r"^#(\d+)$")
_SHA = re.compile(r"^[0-9a-fA-F]{7,40}$")


def command_lines(body: str) -> list[str]:
    """The lines of a comment that are ``/sync`` commands, outside quotes and code."""
    lines: list[str] = []
    fence: str | None = None  # the opening fence while inside a fenced code block
    in_html_comment = False
    for raw in body.splitlines():
        if fence is not None:
            # A fence closes with the same character, at least as long, and nothing after it.
            stripped = raw.strip()
            if stripped.startswith(fence) and set(stripped) == {fence[0]}:
                fence = None
            continue
        if in_html_comment:
            if "-->" in raw:
                in_html_comment = False
            continue
        match = _FENCE.match(raw)
        if match:
            fence = match.group(1)
            continue
        if raw.lstrip().startswith("<!--"):
            in_html_comment = "-->" not in raw
            continue
        # Four spaces of indentation make a Markdown code block, not a command.
        if raw.startswith(("    ", "\t")):
            continue
        line = raw.strip()
        if line == PREFIX or line.startswith((PREFIX + " ", PREFIX + "\t")):
            lines.append(line)
    return lines


def parse_comment(body: str) -> list[ParsedLine]:
    """Every ``/sync`` line of a comment, in order, each parsed or with its error."""
    parsed = []
    for line in command_lines(body):
        try:
            result: Command | CommandError = parse_line(line)
        except CommandError as exc:
            result = exc
        parsed.append(ParsedLine(line, result))
    return parsed


def parse_line(line: str) -> Command:
    """Parse one ``/sync ...`` line; raises :class:`CommandError` with the reply."""
    line = line.strip()
    words = line.split()
    if not words or words[0] != PREFIX:
        raise CommandError(line, f"a command starts with `{PREFIX}`")
    if len(words) == 1:
        raise CommandError(line, "it names no command.")
    verb = words[1].lower()
    args = words[2:]
    # The rest of the line after the verb, spacing kept, for paths and free-text choices.
    rest = line.split(None, 2)[2].strip() if len(words) > 2 else ""
    if verb == "help":
        _no_args(line, verb, args)
        return Help()
    if verb == "status":
        _no_args(line, verb, args)
        return StatusCommand()
    if verb == "refresh":
        _no_args(line, verb, args)
        return Refresh()
    if verb == "resolve":
        return _resolve(line, args, rest)
    if verb == "answer":
        return _answer(line, args, rest)
    if verb == "extend":
        return _extend(line, args)
    raise CommandError(line, f"`{words[1]}` is not a command I know.")


def _no_args(line: str, verb: str, args: list[str]) -> None:
    if args:
        raise CommandError(line, f"`{verb}` takes no arguments, but got `{' '.join(args)}`.",
                           verb)


def _resolve(line: str, args: list[str], rest: str) -> Resolve:
    if len(args) < 2:
        what = "a path and a side" if not args else "a side after the path"
        raise CommandError(line, f"`resolve` needs {what} (ours, theirs or suggested).",
                           "resolve")
    side = next((s for s in SIDES if s == args[-1].lower()), None)
    if side is None:
        raise CommandError(
            line, f"`{args[-1]}` is not a side; use ours, theirs or suggested.", "resolve")
    path = _clean_path(rest[: rest.rstrip().rfind(args[-1])])
    if not path:
        raise CommandError(line, "`resolve` needs a path before the side.", "resolve")
    if path.startswith("/") or ".." in path.split("/"):
        raise CommandError(line, f"`{path}` is not a path inside the repository.", "resolve")
    return Resolve(path=path, side=side)


def _clean_path(text: str) -> str:
    """Accept a path as people paste it: in backticks or quotes, with a leading ``./``."""
    path = _unquote(text)
    while path.startswith("./"):
        path = path[2:]
    return path


def _unquote(text: str) -> str:
    text = text.strip()
    for quote in ("`", '"', "'"):
        if len(text) >= 2 and text[0] == quote and text[-1] == quote:
            return text[1:-1].strip()
    return text


def _answer(line: str, args: list[str], rest: str) -> Answer:
    if not args:
        raise CommandError(line, "`answer` needs a question id (like Q3) and a choice.",
                           "answer")
    questions = _questions(line, args[0])
    choice = rest[len(args[0]):].strip()
    if not choice:
        raise CommandError(line, f"`answer` needs a choice after {args[0]}.", "answer")
    return Answer(question=questions[0], choice=_unquote(choice), questions=questions)


MAX_ANSWERS = 200  # one command may answer this many items


def _questions(line: str, spec: str) -> tuple[str, ...]:
    """``Q3``, ``Q21-Q33`` or ``Q2,Q5,Q9-Q11`` as the ids they name, in order, once each."""
    out: list[str] = []
    for part in spec.split(","):
        first, dash, last = part.partition("-")
        a, b = _QUESTION.match(first.strip()), _QUESTION.match(last.strip()) if dash else None
        if not a or (dash and not b) or (b and b.group(1).upper() != a.group(1).upper()):
            raise CommandError(line, f"`{spec}` is not a question id; they look like Q3, "
                               "Q21-Q33 or Q2,Q5.", "answer")
        letter = a.group(1).upper()
        lo = int(a.group(2))
        hi = int(b.group(2)) if b else lo
        if hi < lo:
            raise CommandError(line, f"`{part}` runs backwards; write {letter}{hi}-{letter}{lo}.",
                               "answer")
        if hi - lo + len(out) >= MAX_ANSWERS:
            raise CommandError(line, f"`{spec}` names more than {MAX_ANSWERS} items; "
                               "answer them in several commands.", "answer")
        out.extend(f"{letter}{n}" for n in range(lo, hi + 1) if f"{letter}{n}" not in out)
    return tuple(out)


def _extend(line: str, args: list[str]) -> Extend:
    if not args:
        return Extend()
    if len(args) > 1:
        raise CommandError(line, "`extend` takes at most one target (`#N` or a commit SHA).",
                           "extend")
    target = args[0]
    match = _PR.match(target)
    if match:
        return Extend(pr=int(match.group(1)))
    if target.isdigit() and len(target) < 7:
        raise CommandError(line, f"`{target}` is ambiguous; write `#{target}` for a PR.",
                           "extend")
    if _SHA.match(target):
        return Extend(sha=target.lower())
    raise CommandError(
        line, f"`{target}` is neither a PR (`#N`) nor a commit SHA (7 to 40 hex digits).",
        "extend")


def help_text() -> str:
    """The reply to ``/sync help``: every command with one line on what it does."""
    rows = [f"- `{USAGE[verb]}`: {_SUMMARY[verb]}" for verb in USAGE]
    return (
        "Commands for this sync PR, one per line of a comment in the conversation or of a "
        "reply under a review comment (only people with write access to the fork can run "
        "them):\n\n"
        + "\n".join(rows)
        + "\n\nResolutions people make are recorded: `extend` and `refresh` replay them "
        "onto the new merge, like `git rerere`."
    )
