"""Config warnings: on the line that holds the rule."""

from __future__ import annotations

from bot.engine.config import CONFIG_PATH, EXAMPLE_CONFIG, load_config
from bot.engine.configwarn import rule_warnings
from bot.engine.report import warning_annotations
from bot.engine.translate import Translator

CONFIG = load_config(EXAMPLE_CONFIG, CONFIG_PATH)
TR = Translator(CONFIG.translate)
RULE_LINE = EXAMPLE_CONFIG.splitlines().index(
    "    - {from: sglang, to: vLLM, files: ['*.md']}   # scoped: prose in docs") + 1


def test_a_rule_s_warning_is_annotated_on_the_rule_s_line_of_the_config() -> None:
    notes = warning_annotations({"warnings": rule_warnings(CONFIG, TR)})
    assert notes and {(n["path"], n["start_line"], n["end_line"]) for n in notes} == \
        {(CONFIG_PATH, RULE_LINE, RULE_LINE)}
    assert RULE_LINE == 12
    # A config read from elsewhere (`--config`) has no line in the fork's file.
    other = load_config(EXAMPLE_CONFIG, "/tmp/other.yml")
    assert "line" not in rule_warnings(other, TR)[0]


def test_a_flag_that_can_never_match_is_annotated_on_its_line() -> None:
    text = EXAMPLE_CONFIG + "  - {pattern: '--vllm-x', say: 'named as the fork writes it'}\n"
    (warning,) = [w for w in rule_warnings(load_config(text, CONFIG_PATH), TR)
                  if w["kind"] == "flag-never-matches"]
    assert warning["line"] == len(text.splitlines())
