"""Parsing /sync slash commands: every command, bad input, quotes and code ignored."""

from __future__ import annotations

import pytest

from bot.sync.commands.parse import (
    USAGE,
    Answer,
    CommandError,
    Extend,
    Help,
    Refresh,
    Resolve,
    StatusCommand,
    command_lines,
    help_text,
    parse_comment,
    parse_line,
)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("/sync help", Help()),
        ("/sync status", StatusCommand()),
        ("/sync refresh", Refresh()),
        ("/sync STATUS", StatusCommand()),
        ("/sync resolve vime/a.py ours", Resolve("vime/a.py", "ours")),
        ("/sync resolve vime/a.py Theirs", Resolve("vime/a.py", "theirs")),
        ("/sync resolve `docs/my file.md` suggested", Resolve("docs/my file.md", "suggested")),
        ("/sync resolve ./vime/a.py ours", Resolve("vime/a.py", "ours")),
        ("/sync resolve ours ours", Resolve("ours", "ours")),
        ("/sync answer Q3 theirs", Answer("Q3", "theirs")),
        ("/sync answer q07 keep the fork's flag", Answer("Q7", "keep the fork's flag")),
        ("/sync answer #Q2 `ours`", Answer("Q2", "ours")),
        ("/sync extend", Extend()),
        ("/sync extend #2130", Extend(pr=2130)),
        ("/sync extend 0123ABCdef", Extend(sha="0123abcdef")),
        ("   /sync   status   ", StatusCommand()),
    ],
)
def test_parse_line(line: str, expected: object) -> None:
    assert parse_line(line) == expected


@pytest.mark.parametrize(
    ("line", "problem", "usage"),
    [
        ("/sync", "names no command", None),
        ("/sync frobnicate", "`frobnicate` is not a command I know", None),
        ("/sync status now", "`status` takes no arguments, but got `now`", "/sync status"),
        ("/sync help me", "takes no arguments", "/sync help"),
        ("/sync refresh please", "takes no arguments", "/sync refresh"),
        ("/sync resolve", "needs a path and a side", USAGE["resolve"]),
        ("/sync resolve a.py", "needs a side after the path", USAGE["resolve"]),
        ("/sync resolve a.py mine", "`mine` is not a side", USAGE["resolve"]),
        ("/sync resolve ../etc/passwd ours", "not a path inside the repository", USAGE["resolve"]),
        ("/sync resolve /abs.py ours", "not a path inside the repository", USAGE["resolve"]),
        ("/sync answer", "needs a question id", USAGE["answer"]),
        ("/sync answer three ours", "`three` is not a question id", USAGE["answer"]),
        ("/sync answer Q3", "needs a choice after Q3", USAGE["answer"]),
        ("/sync extend 2130", "write `#2130` for a PR", USAGE["extend"]),
        ("/sync extend main", "neither a PR", USAGE["extend"]),
        ("/sync extend #1 #2", "at most one target", USAGE["extend"]),
    ],
)
def test_bad_input_says_what_was_wrong_and_the_usage(line: str, problem: str,
                                                       usage: str | None) -> None:
    with pytest.raises(CommandError) as info:
        parse_line(line)
    message = str(info.value)
    assert message.startswith(f"I could not run `{line}`: ")
    assert problem in message
    if usage is None:
        for each in USAGE.values():  # an unknown verb lists every command
            assert f"`{each}`" in message
    else:
        assert f"Usage: `{usage}`" in message


def test_several_commands_in_one_comment_in_order() -> None:
    body = (
        "Thanks for the sync!\n"
        "/sync resolve vime/a.py theirs\r\n"
        "/sync answer Q1 ours\n"
        "/sync bogus\n"
        "/sync status\n"
    )
    parsed = parse_comment(body)
    assert [p.line for p in parsed] == [
        "/sync resolve vime/a.py theirs", "/sync answer Q1 ours", "/sync bogus", "/sync status"]
    assert parsed[0].result == Resolve("vime/a.py", "theirs")
    assert parsed[1].result == Answer("Q1", "ours")
    assert isinstance(parsed[2].result, CommandError) and not parsed[2].ok
    assert parsed[3].result == StatusCommand() and parsed[3].ok


def test_quotes_code_and_comments_are_not_commands() -> None:
    body = "\n".join([
        "> /sync refresh",
        ">/sync status",
        "```",
        "/sync resolve a.py ours",
        "```",
        "~~~~ text",
        "/sync refresh",
        "~~~",  # too short to close a ~~~~ fence
        "/sync refresh",
        "~~~~",
        "    /sync status",  # an indented code block
        "<!-- template",
        "/sync extend",
        "-->",
        "<!-- /sync help -->",
        "Run `/sync status` to see",  # not at the start of the line
        "/syncstatus",
        "/sync help",
    ])
    assert command_lines(body) == ["/sync help"]


def test_unclosed_fence_hides_the_rest() -> None:
    assert command_lines("```\n/sync help\n") == []


def test_no_commands() -> None:
    assert parse_comment("LGTM, but please /sync later") == []


def test_help_lists_every_command() -> None:
    text = help_text()
    for usage in USAGE.values():
        assert f"`{usage}`" in text
    assert "write access" in text


def test_extend_target_wording() -> None:
    assert Extend().target == "the upstream head"
    assert Extend(pr=5).target == "#5"
    assert Extend(sha="abcdef1").target == "abcdef1"
