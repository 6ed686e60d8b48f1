"""Config warnings: what a rule did in this window, on the line that holds the rule."""

from __future__ import annotations

from pathlib import Path

from bot.engine.config import CONFIG_PATH, EXAMPLE_CONFIG, load_config
from bot.engine.configwarn import prose_rewrites, rule_warnings
from bot.engine.report import warning_annotations
from bot.engine.translate import Translator
from tests.factory import PLAIN_CONFIG, Scenario
from tests.partial import partial_plan

CONFIG = load_config(EXAMPLE_CONFIG, CONFIG_PATH)
TR = Translator(CONFIG.translate)
RULE_LINE = EXAMPLE_CONFIG.splitlines().index(
    "    - {from: sglang, to: vLLM, files: ['*.md']}   # scoped: prose in docs") + 1

# Lines slime #2093 and #2022 added to docs (the *.md rule's scope).
GLM_MD = ["   --sglang-ep-size 64", "--sglang-speculative-algorithm EAGLE",
          "Use SGLang for rollout; see the sglang docs.",
          "| PD disaggregation | [SGLang Config](sglang-config.md) |",
          "Prefer [SGLang Config](sglang-config.md#3-multi-model-serving).",
          "python -m sglang.launch_server --port 10090", "import sglang.srt.utils"]


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


def test_a_prose_rule_is_warned_of_by_what_it_did_in_this_window() -> None:
    rewrites = prose_rewrites(CONFIG, TR, "docs/en/glm.md", "docs/en/glm.md", GLM_MD)
    # Prose ("the sglang docs") and kept spans (`sglang.srt`) are not code it broke.
    assert [(r.kind, r.upstream, r.scoped, r.general, r.at) for r in rewrites] == [
        ("command-line flags", "--sglang-ep-size", "--vLLM-ep-size", "--vllm-ep-size", 0),
        ("command-line flags", "--sglang-speculative-algorithm",
         "--vLLM-speculative-algorithm", "--vllm-speculative-algorithm", 1),
        ("file names", "sglang-config.md", "vLLM-config.md", "vllm-config.md", 3),
        ("file names", "sglang-config.md#3-multi-model-serving",
         "vLLM-config.md#3-multi-model-serving", "vllm-config.md#3-multi-model-serving", 4),
        ("module paths", "sglang.launch_server", "vLLM.launch_server", "vllm.launch_server", 5)]
    assert prose_rewrites(CONFIG, TR, "slime/x.py", "vime/x.py", GLM_MD) == []
    warnings = rule_warnings(CONFIG, TR, rewrites, lambda r: {0: 154, 5: 25}.get(r.at))
    assert [w["message"] for w in warnings] == [
        "the prose rule `sglang` → `vLLM` (files: *.md) rewrote command-line flags on 2 lines "
        "upstream added in this window, e.g. `--sglang-ep-size` became `--vLLM-ep-size` "
        "(`docs/en/glm.md` L154), where code says `--vllm-ep-size`; add a `keep` entry or a "
        "lookaround so code stays as code says",
        "the prose rule `sglang` → `vLLM` (files: *.md) rewrote module paths on 1 line "
        "upstream added in this window, e.g. `sglang.launch_server` became "
        "`vLLM.launch_server` (`docs/en/glm.md` L25), where code says `vllm.launch_server`; "
        "add a `keep` entry or a lookaround so code stays as code says",
        "the prose rule `sglang` → `vLLM` (files: *.md) rewrote file names on 2 lines upstream "
        "added in this window, e.g. `sglang-config.md` became `vLLM-config.md` "
        "(`docs/en/glm.md`), where code says `vllm-config.md`; add a `keep` entry or a "
        "lookaround so code stays as code says"]
    assert {w["line"] for w in warnings} == {RULE_LINE}


def test_with_nothing_in_this_window_a_prose_rule_is_said_to_be_what_it_would_do() -> None:
    (warning,) = rule_warnings(CONFIG, TR)
    assert warning["message"] == (
        "the prose rule `sglang` → `vLLM` (files: *.md) would also rewrite code in those "
        "files, e.g. the command-line flag `--sglang-config` into `--vLLM-config`, where code "
        "says `--vllm-config` (no line upstream added in this window has such code); add a "
        "`keep` entry or a lookaround so code stays as code says")
    # Never a made-up example worded as a finding.
    assert "example.com" not in warning["message"] and "becomes" not in warning["message"]


def test_a_plan_counts_the_rule_s_rewrites_in_the_window_s_docs(tmp_path: Path) -> None:
    s = Scenario(tmp_path / "repos", config=PLAIN_CONFIG, skeleton=False)
    s.upstream_pr(1, "Start", files={"docs/en/a.md": "# A\n"})
    s.sync_fork()
    s.upstream_pr(2, "GLM-5.2", files={
        "docs/en/a.md": "# A\n\nSet `--sglang-ep-size 8`.\n",
        "docs/en/glm.md": "# GLM\n\n```bash\n   --sglang-ep-size 64\n   --sglang-dp-size 8\n"
                          "```\n"})
    from bot.engine.pipeline import plan
    p = plan(str(s.fork_dir), str(s.upstream_dir), workdir=str(tmp_path / "work"))
    (warning,) = [w for w in p.warnings if w["kind"] == "prose-rule"]
    assert warning["message"].startswith(
        "the prose rule `sglang` → `vLLM` (files: *.md) rewrote command-line flags on 3 lines "
        "upstream added in this window, e.g. `--sglang-ep-size` became `--vLLM-ep-size` "
        "(`docs/en/a.md` L3), where code says `--vllm-ep-size`;")
    assert warning["line"] == PLAIN_CONFIG.splitlines().index(
        "    - {from: sglang, to: vLLM, files: ['*.md']}   # scoped: prose in docs") + 1
    # Read from blobs a plan reads anyway: the App's partial clones say the same.
    partial = partial_plan(s.fork_dir, s.upstream_dir, tmp_path / "partial").plan
    assert partial.to_json() == p.to_json()
