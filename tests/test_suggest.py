"""Safe proposals for conflict hunks, and questions where there is none."""

from __future__ import annotations

from bot.engine.model import Tier
from bot.engine.suggest import propose


def test_both_sides_add_distinct_imports_is_settled_union() -> None:
    p = propose("import os\nimport vllm\n", "import os\n", "import os\nimport json\n")
    assert p.tier is Tier.SETTLED
    assert p.suggestion == "import os\nimport vllm\nimport json\n"


def test_upstream_only_reformats_keeps_ours() -> None:
    p = propose("x = vllm.run(a)\n", "x=run(a)\n", "x = run( a )\n")
    assert p.tier is Tier.SETTLED and p.suggestion == "x = vllm.run(a)\n"
    assert "reformat" in p.reason


def test_ours_only_reformats_takes_theirs() -> None:
    p = propose("x = run( a )\n", "x=run(a)\n", "x = run(a, b)\n")
    assert p.tier is Tier.SETTLED and p.suggestion == "x = run(a, b)\n"


def test_already_applied_on_our_side() -> None:
    p = propose("retries = 3  # fork\nlog()\n", "retries = 1\n", "retries = 3  # fork\n")
    assert p.tier is Tier.SETTLED and p.suggestion == "retries = 3  # fork\nlog()\n"
    assert "already applied" in p.reason


def test_both_only_add_lines_is_confirm_with_both() -> None:
    p = propose("a\nours_line\n", "a\n", "a\ntheirs_line\n")
    assert p.tier is Tier.CONFIRM
    assert p.suggestion == "a\nours_line\ntheirs_line\n"
    assert p.question and "suggested" in p.choices


def test_real_disagreement_is_a_decide_question() -> None:
    p = propose("timeout = 30\n", "timeout = 10\n", "timeout = 60\n")
    assert p.tier is Tier.DECIDE and p.suggestion is None
    assert p.question and p.choices == ("ours", "theirs")
