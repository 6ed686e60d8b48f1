"""bot/engine/config/: the forksync.yml contract, its errors, globs, regex checks and schema."""

from __future__ import annotations

import json
import pickle
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import regex
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.engine.config import (
    CONFIG_PATH,
    EXAMPLE_CONFIG,
    Config,
    Flag,
    FlagTimeoutError,
    Policy,
    Rule,
    TranslateConfig,
    check_config_file,
    compile_glob,
    load_config,
    load_config_file,
    load_downstream,
    redos_reason,
    upstream_only,
)
from bot.engine.config import types as config_types
from bot.errors import ConfigError

SRC = ".github/forksync.yml"


def schema() -> dict[str, Any]:
    text = resources.files("bot").joinpath("forksync.schema.json").read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def error(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config(text, SRC)
    return info.value


# --------------------------------------------------------------------------- the example


def test_design_example_loads_with_every_field() -> None:
    c = load_config(EXAMPLE_CONFIG, SRC)
    assert c.upstream_repo == "THUDM/slime"
    assert c.upstream_branch == "main"
    assert c.source == SRC
    t = c.translate
    assert [(p.from_, p.to, p.regex) for p in t.paths] == [
        ("slime/backends/sglang_utils/", "vime/backends/vllm_utils/", False)
    ]
    assert t.keep == (r"sglang\.srt(\.\w+)+", r"https?://github\.com/THUDM/slime\S*")
    assert [(r.from_, r.to, r.regex, r.word, r.files) for r in t.replace] == [
        ("--sglang-mem-fraction-static", "--vllm-gpu-memory-utilization", False, False, ()),
        ("SGLang(?=[A-Z_])", "VLLM", True, False, ()),
        ("SGLang", "vLLM", False, False, ()),
        ("sglang", "vLLM", False, False, ("*.md",)),
        ("sglang", "vllm", False, False, ()),
        ("(?<![A-Za-z])slime(?![A-Za-z])", "vime", True, False, ()),
    ]
    assert t.exclude == ("*.png", "*.svg", "README*.md")
    assert [(p.paths, p.action) for p in c.policies] == [
        ((".github/workflows/**",), "skip"),
        (("docker/Dockerfile",), "ours"),
        (("docker/version.txt",), "theirs"),
        (("vime/rollout/vllm_rollout.py",), "manual"),
    ]
    assert [(f.pattern, f.say) for f in c.flags] == [
        ("--sglang-(enable-metrics|ep-size|speculative-)", "no vLLM equivalent")
    ]
    assert c.flags[0].matches("  parser.add_argument('--sglang-ep-size', type=int)")
    assert not c.flags[0].matches("  parser.add_argument('--sglang-tp-size', type=int)")


def test_example_is_the_one_in_the_design_doc() -> None:
    """EXAMPLE_CONFIG is DESIGN.md's example; it only shortened one comment to fit 100 columns."""
    assert (
        load_config(EXAMPLE_CONFIG, SRC).fingerprint()
        == load_config(
            EXAMPLE_CONFIG.replace("# port by hand", "# rewritten for the fork: port by hand"), SRC
        ).fingerprint()
    )


def test_minimal_config_defaults() -> None:
    c = load_config("upstream: {repo: THUDM/slime}\n", SRC)
    assert c.upstream_branch == "main"
    assert c.translate == TranslateConfig()
    assert c.policies == () and c.flags == ()
    assert c.policy_for("anything") is None


def test_empty_optional_sections_are_allowed() -> None:
    # Commenting out every item of a section leaves `key:` with no value.
    text = "upstream: {repo: a/b}\ntranslate:\n  keep:\n  replace:\npolicies:\n  # - x\nflags:\n"
    c = load_config(text, SRC)
    assert c.translate == TranslateConfig() and c.policies == () and c.flags == ()
    jsonschema.Draft202012Validator(schema()).validate(yaml.safe_load(text))


def test_load_config_file_reads_and_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "forksync.yml"
    path.write_text(EXAMPLE_CONFIG, encoding="utf-8")
    assert load_config_file(str(path)).source == str(path)
    path.write_text("upstream: {repo: a/b}\nflags: 3\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config_file(str(path))
    assert str(info.value) == f"{path}:2: flags: expected a list, got a number"


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    missing = tmp_path / CONFIG_PATH
    with pytest.raises(ConfigError) as info:
        load_config_file(str(missing))
    assert info.value.file == str(missing)
    assert info.value.line is None
    assert "does not exist" in str(info.value)


def test_non_utf8_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "forksync.yml"
    path.write_bytes(b"upstream: {repo: a/b}\n# \xff\n")
    with pytest.raises(ConfigError, match="UTF-8"):
        load_config_file(str(path))


# --------------------------------------------------------------------------- errors


# (config text, line, key, words the explanation must contain)
BAD_CONFIGS = [
    ("", 1, "upstream", "upstream"),
    ("- a\n- b\n", 1, "(top level)", "expected a mapping, got a list"),
    ("upstrem: {repo: a/b}\n", 1, "upstrem", "did you mean `upstream`"),
    ("upstream: {branch: main}\n", 1, "upstream.repo", "missing"),
    ("upstream: {repo: slime}\n", 1, "upstream.repo", "owner/repo"),
    ("upstream: {repo: a/b, branch: 'a..b'}\n", 1, "upstream.branch", "branch name"),
    ("upstream: {repo: a/b, repo: c/d}\n", 1, "upstream.repo", "once"),
    (
        "upstream: {repo: a/b}\ntranslate:\n  replce: []\n",
        3,
        "translate.replce",
        "did you mean `replace`",
    ),
    (
        "upstream: {repo: a/b}\ntranslate:\n  replace:\n    - sglang\n",
        4,
        "translate.replace[0]",
        "expected a mapping, got a string",
    ),
    (
        "upstream: {repo: a/b}\ntranslate:\n  replace:\n    - {from: a, to: b}\n"
        "    - {from: c, to: d}\n    - {frm: e, to: f}\n",
        6,
        "translate.replace[2].frm",
        "did you mean `from`",
    ),
    (
        "upstream: {repo: a/b}\ntranslate:\n  replace:\n    - {from: a}\n",
        4,
        "translate.replace[0].to",
        "missing",
    ),
    (
        "upstream: {repo: a/b}\ntranslate:\n  replace:\n    - {from: '', to: b}\n",
        4,
        "translate.replace[0].from",
        "non-empty",
    ),
    # YAML 1.1 reads an unquoted yes as true: say so instead of writing "True".
    (
        "upstream: {repo: a/b}\ntranslate:\n  replace:\n    - {from: a, to: yes}\n",
        4,
        "translate.replace[0].to",
        "quote it",
    ),
    (
        "upstream: {repo: a/b}\ntranslate:\n  replace:\n    - {from: a, to: 1.5}\n",
        4,
        "translate.replace[0].to",
        "got a number",
    ),
    (
        "upstream: {repo: a/b}\ntranslate:\n  replace:\n    - {from: a, to: b, regex: 'true'}\n",
        4,
        "translate.replace[0].regex",
        "true or false",
    ),
    (
        "upstream: {repo: a/b}\ntranslate:\n  replace:\n    - {from: a, to: b, files: []}\n",
        4,
        "translate.replace[0].files",
        "at least one",
    ),
    (
        "upstream: {repo: a/b}\ntranslate:\n  replace:\n    - {from: a, to: b, files: '*.md'}\n",
        4,
        "translate.replace[0].files",
        "expected a list",
    ),
    (
        "upstream: {repo: a/b}\ntranslate:\n  replace:\n"
        "    - {from: '(sglang', to: b, regex: true}\n",
        4,
        "translate.replace[0].from",
        "missing ), unterminated subpattern",
    ),
    (
        "upstream: {repo: a/b}\ntranslate:\n  replace:\n"
        "    - {from: '(a)', to: '\\2', regex: true}\n",
        4,
        "translate.replace[0].to",
        "invalid group reference 2",
    ),
    (
        "upstream: {repo: a/b}\ntranslate:\n  replace:\n"
        "    - {from: '(a)\\1', to: b, regex: true}\n",
        4,
        "translate.replace[0].from",
        "backreferences",
    ),
    (
        "upstream: {repo: a/b}\ntranslate:\n  replace:\n    - {from: 'a*', to: b, regex: true}\n",
        4,
        "translate.replace[0].from",
        "cannot match empty text",
    ),
    (
        # Both problems: the one that hangs is named (fixing only the `*` would not help).
        "upstream: {repo: a/b}\ntranslate:\n  replace:\n"
        "    - {from: '^(\\d+)*$', to: b, regex: true}\n",
        4,
        "translate.replace[0].from",
        "backtrack catastrophically",
    ),
    (
        "upstream: {repo: a/b}\nflags:\n  - {pattern: '(.*a){12}', say: hm}\n",
        3,
        "flags[0].pattern",
        "backtrack catastrophically",
    ),
    (
        "upstream: {repo: a/b}\ntranslate:\n  keep:\n    - 'x(a+)+'\n",
        4,
        "translate.keep[0]",
        "backtrack catastrophically",
    ),
    (
        "upstream: {repo: a/b}\ntranslate:\n  keep:\n    - 7\n",
        4,
        "translate.keep[0]",
        "expected a string",
    ),
    (
        "upstream: {repo: a/b}\ntranslate:\n  paths:\n"
        "    - {from: '(x|xy)*z', to: a, regex: true}\n",
        4,
        "translate.paths[0].from",
        "backtrack catastrophically",
    ),
    (
        "upstream: {repo: a/b}\ntranslate:\n  exclude: ['']\n",
        3,
        "translate.exclude[0]",
        "non-empty",
    ),
    (
        "upstream: {repo: a/b}\npolicies:\n  - {paths: [x], action: mine}\n",
        3,
        "policies[0].action",
        "ours, theirs, skip, manual",
    ),
    (
        "upstream: {repo: a/b}\npolicies:\n  - {paths: [x], action: our}\n",
        3,
        "policies[0].action",
        "did you mean `ours`",
    ),
    ("upstream: {repo: a/b}\npolicies:\n  - {action: ours}\n", 3, "policies[0].paths", "missing"),
    (
        "upstream: {repo: a/b}\nflags:\n  - {pattern: '(.*)*x', say: hm}\n",
        3,
        "flags[0].pattern",
        "backtrack catastrophically",
    ),
    ("upstream: {repo: a/b}\nflags:\n  - {pattern: 'x'}\n", 3, "flags[0].say", "missing"),
    ("upstream: {repo: a/b}\ntranslate:\n  keep: [\n", 4, "yaml", "valid YAML"),
    ("upstream: {repo: a/b}\ntranslate:\n\tkeep: []\n", 3, "yaml", "valid YAML"),
]


@pytest.mark.parametrize(("text", "line", "key", "words"), BAD_CONFIGS)
def test_errors_name_file_line_key_and_what_was_expected(
    text: str, line: int, key: str, words: str
) -> None:
    e = error(text)
    assert (e.file, e.line, e.key) == (SRC, line, key), str(e)
    assert words in e.expected
    assert str(e) == f"{SRC}:{line}: {key}: {e.expected}"


def test_lines_point_at_the_item_in_block_style() -> None:
    text = EXAMPLE_CONFIG.replace(
        "    - {from: sglang, to: vllm}\n",
        "    - from: sglang\n      to: vllm\n      wrd: true\n",
    )
    e = error(text)
    line = text.splitlines().index("      wrd: true") + 1
    assert (e.line, e.key) == (line, "translate.replace[4].wrd")
    assert "did you mean `word`" in e.expected


def test_absurd_nesting_is_a_config_error_not_a_recursion_error() -> None:
    e = error("upstream: " + "[" * 3000 + "]" * 3000 + "\n")
    assert e.key == "yaml" and "nested" in e.expected
    deep = "(" * 2000 + "a" + ")" * 2000
    e = error(f"upstream: {{repo: a/b}}\ntranslate:\n  keep: [{json.dumps(deep)}]\n")
    assert e.key == "translate.keep[0]" and "nested" in e.expected
    assert redos_reason(deep) is not None


def mutations(base: str) -> st.SearchStrategy[str]:
    """The example with a slice cut out or a character put in: near-miss configs."""

    def cut(i: int, n: int) -> str:
        return base[:i] + base[i + n :]

    def insert(i: int, ch: str) -> str:
        return base[:i] + ch + base[i:]

    positions = st.integers(0, len(base))
    return st.one_of(
        st.builds(cut, positions, st.integers(1, 12)),
        st.builds(insert, positions, st.sampled_from(list("{}[]:,-'\"*+()?|\\\t\n #&!%@`"))),
    )


@settings(max_examples=300, deadline=None)
@given(mutations(EXAMPLE_CONFIG) | st.text(max_size=200))
def test_any_input_is_a_config_or_a_config_error_never_a_traceback(text: str) -> None:
    try:
        c = load_config(text, SRC)
    except ConfigError as e:
        assert e.key and e.expected and e.file == SRC
        assert e.line is None or 1 <= e.line <= text.count("\n") + 2
    else:
        assert isinstance(c, Config)


# --------------------------------------------------------------------------- globs and policies


@pytest.mark.parametrize(
    ("glob", "path", "matches"),
    [
        ("*.md", "README.md", True),
        ("*.md", "docs/en/usage.md", True),  # `*` crosses `/`
        ("*.md", "docs/usage.mdx", False),  # whole path
        ("README*.md", "README_zh.md", True),
        ("README*.md", "docs/README.md", False),  # anchored at the start
        (".github/workflows/**", ".github/workflows/ci/lint.yml", True),
        (".github/workflows/*", ".github/workflows/ci/lint.yml", True),  # same as **
        (".github/workflows/**", ".github/workflows", False),
        ("docker/Dockerfile", "docker/Dockerfile", True),
        ("docker/Dockerfile", "docker/Dockerfile.dev", False),
        ("docs/?.md", "docs/a.md", True),
        ("docs/?.md", "docs/ab.md", False),
        ("img/[ab].png", "img/b.png", True),
        ("img/[!ab].png", "img/b.png", False),
        ("*.PNG", "a.png", False),  # case-sensitive everywhere
    ],
)
def test_globs_match_the_whole_path(glob: str, path: str, matches: bool) -> None:
    assert bool(compile_glob(glob).match(path)) is matches


def test_first_matching_policy_wins() -> None:
    c = load_config(
        "upstream: {repo: a/b}\npolicies:\n"
        "  - {paths: ['docker/version.txt'], action: theirs}\n"
        "  - {paths: ['docker/*', 'ci/**'], action: ours}\n"
        "  - {paths: ['*'], action: manual}\n",
        SRC,
    )
    pv = c.policy_for("docker/version.txt")
    assert pv is not None and pv.action == "theirs"
    assert [c.policy_for(p).action for p in ("docker/x", "ci/a/b.yml", "src/x.py")] == [  # type: ignore[union-attr]
        "ours",
        "ours",
        "manual",
    ]


def test_policy_for_returns_none_without_a_match() -> None:
    c = load_config(EXAMPLE_CONFIG, SRC)
    assert c.policy_for("vime/rollout/other.py") is None
    assert c.policy_for(".github/CODEOWNERS") is None
    policy = c.policy_for(".github/workflows/pr.yml")
    assert policy == Policy((".github/workflows/**",), "skip")


def test_rule_files_scope() -> None:
    rule = Rule("sglang", "vLLM", files=("*.md", "docs/**"))
    assert rule.applies_to("docs/a.txt") and rule.applies_to("x/y.md")
    assert not rule.applies_to("slime/a.py")
    assert Rule("a", "b").applies_to("anything")


def test_config_survives_pickling() -> None:
    # Jobs may hand a config to another process; compiled parts must come along.
    c = load_config(EXAMPLE_CONFIG, SRC)
    copy = pickle.loads(pickle.dumps(c))
    assert copy == c and copy.fingerprint() == c.fingerprint()
    assert copy.policy_for(".github/workflows/ci.yml") == c.policies[0]
    assert copy.translate.is_excluded("logo.png")
    assert copy.translate.replace[3].applies_to("docs/a.md")
    assert copy.flags[0].matches("--sglang-enable-metrics")


# --------------------------------------------------------------------------- fingerprint


def test_fingerprint_is_stable_and_ignores_layout_comments_and_source() -> None:
    a = load_config(EXAMPLE_CONFIG, SRC)
    relaid = yaml.safe_dump(yaml.safe_load(EXAMPLE_CONFIG), default_flow_style=False)
    b = load_config(relaid, "elsewhere.yml")
    assert a.fingerprint() == b.fingerprint()
    assert len(a.fingerprint()) == 64 and int(a.fingerprint(), 16) >= 0
    # Defaults are spelled out, so writing them makes no difference.
    assert (
        load_config("upstream: {repo: a/b}\n", SRC).fingerprint()
        == load_config("upstream: {repo: a/b, branch: main}\ntranslate: {}\n", SRC).fingerprint()
    )


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("branch: main", "branch: dev"),
        ("{from: SGLang, to: vLLM}", "{from: SGLang, to: VLLM}"),
        ("{from: sglang, to: vllm}", "{from: sglang, to: vllm, word: true}"),
        ("'*.png', '*.svg'", "'*.svg', '*.png'"),  # order is meaning-preserving here, but
        ("action: ours}", "action: theirs}"),
        ("say: 'no vLLM equivalent'", "say: 'no vLLM flag'"),
    ],
)
def test_fingerprint_changes_with_any_effective_setting(old: str, new: str) -> None:
    # ...the fingerprint is a cache key, not an equivalence check: reordering counts.
    assert old in EXAMPLE_CONFIG
    changed = EXAMPLE_CONFIG.replace(old, new, 1)
    assert load_config(changed, SRC).fingerprint() != load_config(EXAMPLE_CONFIG, SRC).fingerprint()


# --------------------------------------------------------------------------- regex checks


@pytest.mark.parametrize(
    "pattern",
    [
        r"(a+)+",
        r"(a*)*",
        r"(.*)*",
        r"^(a+)+$",
        r"(\w+\s?)*$",
        r"(a|a)*",
        r"(a|ab)+",
        r"(\d+|\w+)*",
        r"(a|b+)+",
        r"(?:x+x+)+y",
        r"(a*b*a*)+",
        r"((a+)b?)+",
        r"(?i)(ab|AB)+",  # the same text once case is folded
        r"(a+){10,}",
        r"^(\d+)*$",
        r"(.*a){12}",  # polynomial of degree 12: each repetition can end at any `a`
        r"(.*,)+",
        r"(\w+_)+",
        r"(?:\s*#.*)+",
        r"((?:.*)x){10}",
    ],
)
def test_redos_shapes_are_refused(pattern: str) -> None:
    assert redos_reason(pattern) is not None


@pytest.mark.parametrize(
    "pattern",
    [
        r"sglang\.srt(\.\w+)+",  # the design example: `.` starts every repetition
        r"https?://github\.com/THUDM/slime\S*",
        r"(?<![A-Za-z])slime(?![A-Za-z])",
        r"SGLang(?=[A-Z_])",
        r"(foo|far)+",
        r"(\.\w+|\[\d+\])+",
        r"x(ab+c)*",
        r"(\w|\d)+",  # one character class after parsing: nothing to backtrack over
        r"(a+){1,3}",
        r"\w+\s+\w+",
        r"(?>a+)+",
        r"([^,]*,){12}",  # the usual fix of `(.*,){12}`: `[^,]` never eats the `,`
        r"(\w+\.)+\w+",
        r"(?:\d+\.){3}\d+",
        r"(?>.*a){12}",
        r"^\d+$",
    ],
)
def test_safe_patterns_are_accepted(pattern: str) -> None:
    assert redos_reason(pattern) is None
    load_config(f"upstream: {{repo: a/b}}\ntranslate:\n  keep: [{json.dumps(pattern)}]\n", SRC)


def test_leading_inline_flags_are_allowed_other_global_flags_are_not() -> None:
    load_config("upstream: {repo: a/b}\ntranslate:\n  keep: ['(?i)sglang']\n", SRC)
    e = error("upstream: {repo: a/b}\ntranslate:\n  keep: ['(?a)\\w+']\n")
    assert e.key == "translate.keep[0]" and "scoped" in e.expected


@pytest.mark.parametrize("pattern", ["[[:alpha:]]+", "[a--b]"])
def test_sets_that_re_and_regex_read_differently_are_refused(pattern: str) -> None:
    # `re` validates, `regex` runs: where they would disagree, refuse instead of guessing.
    e = error(f"upstream: {{repo: a/b}}\ntranslate:\n  keep: [{json.dumps(pattern)}]\n")
    assert e.key == "translate.keep[0]" and "unambiguous character set" in e.expected


def test_flag_matching_is_time_limited(monkeypatch: pytest.MonkeyPatch) -> None:
    # A pattern the static check would refuse, built directly to prove the limit holds.
    monkeypatch.setattr(config_types, "FLAG_TIMEOUT", 0.05)
    flag = Flag("(a|aa)+$", "slow", regex.compile("(a|aa)+$"))
    with pytest.raises(FlagTimeoutError, match=r"\(a\|aa\)\+\$"):
        flag.matches("a" * 60 + "b")


# --------------------------------------------------------------------------- the JSON Schema


def test_schema_is_valid_draft_2020_12_and_accepts_the_example() -> None:
    s = schema()
    jsonschema.Draft202012Validator.check_schema(s)
    assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator(s).validate(yaml.safe_load(EXAMPLE_CONFIG))


SCHEMA_AND_LOADER_REFUSE = [
    "upstrem: {repo: a/b}\n",
    "upstream: {branch: main}\n",
    "upstream: {repo: slime}\n",
    "upstream: {repo: a/b, branch: '-x'}\n",
    "upstream: {repo: a/b}\ntranslate: {replce: []}\n",
    "upstream: {repo: a/b}\ntranslate: {replace: [sglang]}\n",
    "upstream: {repo: a/b}\ntranslate: {replace: [{from: a}]}\n",
    "upstream: {repo: a/b}\ntranslate: {replace: [{from: '', to: b}]}\n",
    "upstream: {repo: a/b}\ntranslate: {replace: [{from: a, to: 1}]}\n",
    "upstream: {repo: a/b}\ntranslate: {replace: [{from: a, to: b, regex: 'yes'}]}\n",
    "upstream: {repo: a/b}\ntranslate: {replace: [{from: a, to: b, files: []}]}\n",
    "upstream: {repo: a/b}\ntranslate: {paths: [{from: a, to: b, word: true}]}\n",
    "upstream: {repo: a/b}\npolicies: [{paths: [x], action: mine}]\n",
    "upstream: {repo: a/b}\npolicies: [{paths: [], action: ours}]\n",
    "upstream: {repo: a/b}\nflags: [{pattern: x}]\n",
    "upstream: {repo: a/b}\nflags: {pattern: x, say: y}\n",
    "upstream: {repo: a/b, mirror: slime}\n",
    "upstream: {repo: a/b, mirror: [c/d]}\n",
    "upstream: {repo: a/b}\ndownstream: [vime]\n",
    "upstream: {repo: a/b}\ndownstream: c/d\n",
    "downstream: [c/d, c/d]\n",
]


@pytest.mark.parametrize("text", SCHEMA_AND_LOADER_REFUSE)
def test_schema_and_loader_agree_on_bad_configs(text: str) -> None:
    with pytest.raises(ConfigError):
        load_config(text, SRC)
    errors = list(jsonschema.Draft202012Validator(schema()).iter_errors(yaml.safe_load(text)))
    assert errors, "the schema accepted a config the loader refuses"


@pytest.mark.parametrize(
    "text",
    [
        "upstream: {repo: a/b}\n",
        "upstream: {repo: my-org/my.repo_2, branch: release/v1.2}\n",
        "upstream: {repo: a/b}\ntranslate:\n"
        "  paths: [{from: 'a/(\\w+)/', to: 'b/\\1/', regex: true}]\n",
        "upstream: {repo: a/b}\ntranslate:\n"
        "  replace: [{from: x, to: '', word: true, files: [a]}]\n",
        "upstream: {repo: a/b, mirror: c/b-mirror}\ndownstream: [d/e]\n",
    ],
)
def test_schema_and_loader_agree_on_good_configs(text: str) -> None:
    load_config(text, SRC)
    jsonschema.Draft202012Validator(schema()).validate(yaml.safe_load(text))


def test_the_mirror_is_named_in_the_upstream_section() -> None:
    cfg = load_config("upstream: {repo: THUDM/slime, mirror: vime-org/slime-mirror}\n", SRC)
    assert cfg.upstream_mirror == "vime-org/slime-mirror"
    assert load_config("upstream: {repo: THUDM/slime}\n", SRC).upstream_mirror is None
    e = error("upstream:\n  repo: THUDM/slime\n  mirror: thudm/SLIME\n")
    assert (e.line, e.key) == (3, "upstream.mirror") and "other than upstream.repo" in e.expected
    e = error("upstream: {repo: THUDM/slime, mirror: slime}\n")
    assert e.key == "upstream.mirror" and "expected owner/repo" in e.expected


def test_an_upstreams_own_file_lists_its_downstream_forks() -> None:
    text = "downstream:\n  - vime-org/vime\n  - other/fork\n"
    assert upstream_only(text, SRC)
    assert load_downstream(text, SRC) == ("vime-org/vime", "other/fork")
    # A fork that is an upstream too holds both; it is a fork's file.
    both = "upstream: {repo: a/b}\ndownstream: [c/d]\n"
    assert not upstream_only(both, SRC) and load_config(both, SRC).downstream == ("c/d",)
    assert load_downstream(both, SRC) == ("c/d",)
    assert load_downstream("upstream: {repo: a/b}\n", SRC) == ()
    assert not upstream_only("upstream: {repo: a/b}\n", SRC) and not upstream_only("[]", SRC)
    with pytest.raises(ConfigError, match=r"downstream\[1\]: expected each fork once"):
        load_downstream("downstream: [c/d, C/D]\n", SRC)
    with pytest.raises(ConfigError, match="downstrem"):
        load_downstream("downstrem: [c/d]\n", SRC)


def test_the_forks_own_config_is_never_merged_from_upstream() -> None:
    cfg = load_config("upstream: {repo: a/b}\npolicies: [{paths: ['**'], action: theirs}]\n", SRC)
    policy = cfg.policy_for(CONFIG_PATH)
    assert policy is not None and policy.action == "skip"
    other = cfg.policy_for("x.py")
    assert other is not None and other.action == "theirs"


def test_check_config_summarises_a_forks_file_and_an_upstreams(tmp_path: Path) -> None:
    fork = tmp_path / "fork.yml"
    fork.write_text("upstream: {repo: THUDM/slime, mirror: vime-org/slime-mirror}\n")
    assert "announced by the mirror vime-org/slime-mirror" in check_config_file(str(fork))
    upstream = tmp_path / "upstream.yml"
    upstream.write_text("downstream: [vime-org/vime]\n")
    assert check_config_file(str(upstream)).endswith("may read it: vime-org/vime)")
