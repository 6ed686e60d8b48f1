"""bot/engine/translate.py: the translation contract of DESIGN.md, by example and by property."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bot.engine.config import EXAMPLE_CONFIG, PathRule, Rule, TranslateConfig, load_config
from bot.engine.config import regexes as config_regexes
from bot.engine.translate import (
    MAX_TEXT_BYTES,
    RuleTimeoutError,
    Translator,
    _Entry,
    _Scanner,
)
from bot.errors import ConfigError


@pytest.fixture(scope="module")
def tr() -> Translator:
    """The translator for DESIGN.md's example config."""
    return Translator(load_config(EXAMPLE_CONFIG, ".github/forksync.yml").translate)


def rules(*replace: Rule, keep: tuple[str, ...] = (), **kw: object) -> Translator:
    return Translator(TranslateConfig(replace=replace, keep=keep, **kw))  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the example's rules


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # The long literal is found at an earlier position than its `sglang`.
        ("--sglang-mem-fraction-static 0.8", "--vllm-gpu-memory-utilization 0.8"),
        ("--sglang-tp-size", "--vllm-tp-size"),
        # Lookahead on the original text: SGLang before a capital or _ ...
        ("SGLangEngine", "VLLMEngine"),
        ("SGLang_ROUTER", "VLLM_ROUTER"),
        # ... and otherwise the plain rule listed after it.
        ("SGLang is fast", "vLLM is fast"),
        ("SGLangs", "vLLMs"),
        ("SGLANG_PORT", "SGLANG_PORT"),  # literal rules are case-sensitive
        ("import sglang", "import vllm"),
        # keep: a dotted sglang.srt path is copied as is; bare sglang.srt is not kept.
        (
            "from sglang.srt.managers.io_struct import X",
            "from sglang.srt.managers.io_struct import X",
        ),
        ("sglang.srt", "vllm.srt"),
        ("see https://github.com/THUDM/slime/blob/main/slime/x.py", None),
        ("see http://github.com/THUDM/slime", None),
        ("see https://github.com/other/slime", "see https://github.com/other/vime"),
        # (?<![A-Za-z])slime(?![A-Za-z]): letters around block it, _ and digits do not.
        ("slime", "vime"),
        ("import slime.utils", "import vime.utils"),
        ("slimes", "slimes"),
        ("xslime", "xslime"),
        ("_slime_", "_vime_"),
        ("slime2", "vime2"),
    ],
)
def test_design_example_rules(tr: Translator, source: str, expected: str | None) -> None:
    assert tr.text(source, "slime/x.py") == (source if expected is None else expected)


def test_scoped_rule_applies_only_to_matching_files(tr: Translator) -> None:
    assert tr.text("install sglang", "docs/en/install.md") == "install vLLM"
    assert tr.text("install sglang", "install.md") == "install vLLM"
    assert tr.text("install sglang", "slime/install.py") == "install vllm"
    # The keep entries and the earlier rules still win in scoped files.
    assert tr.text("sglang.srt.server and SGLang_X", "a.md") == "sglang.srt.server and VLLM_X"


def test_scoped_rule_must_come_before_the_general_rule_it_refines() -> None:
    scoped = Rule("sglang", "vLLM", files=("*.md",))
    general = Rule("sglang", "vllm")
    assert rules(scoped, general).text("sglang", "a.md") == "vLLM"
    # Listed after, it never fires: the general rule matches first at that position.
    assert rules(general, scoped).text("sglang", "a.md") == "vllm"


def test_scoped_rules_apply_to_content_never_to_paths(tr: Translator) -> None:
    # The DESIGN config's prose rule rewrites sglang to vLLM in *.md content only.
    assert tr.text("see sglang-config", "docs/zh/advanced/sglang-config.md") == \
        "see vLLM-config"
    assert tr.path("docs/zh/advanced/sglang-config.md") == "docs/zh/advanced/vllm-config.md"


def test_exclude_keeps_content_but_translates_the_path(tr: Translator) -> None:
    readme = "Built on sglang and slime.\r\n"
    assert tr.text(readme, "README.md") is readme
    assert tr.blob(readme.encode(), "README_zh.md") == readme.encode()
    assert tr.is_excluded("README_zh.md") and tr.is_excluded("assets/logo.png")
    # Globs match the whole path: docs/README.md is not README*.md.
    assert not tr.is_excluded("docs/README.md")
    assert tr.text(readme, "docs/README.md") == "Built on vLLM and vime.\r\n"
    assert tr.path("slime/assets/sglang.png") == "vime/assets/vllm.png"


# --------------------------------------------------------------------------- paths


def test_paths_longest_prefix_wins_whatever_the_order() -> None:
    t = Translator(
        TranslateConfig(
            paths=(
                PathRule("slime/", "vime/"),
                PathRule("slime/backends/sglang_utils/", "vime/backends/vllm_utils/"),
                PathRule("slime/backends/", "vime/engines/"),
            ),
            replace=(Rule("sglang", "vllm"),),
        )
    )
    assert t.path("slime/backends/sglang_utils/arguments.py") == (
        "vime/backends/vllm_utils/arguments.py"
    )
    assert t.path("slime/backends/megatron/x.py") == "vime/engines/megatron/x.py"
    assert t.path("slime/utils/sglang_router.py") == "vime/utils/vllm_router.py"
    assert t.path("tools/x.py") == "tools/x.py"


def test_path_prefix_ties_go_to_the_rule_listed_first() -> None:
    t = Translator(TranslateConfig(paths=(PathRule("a/", "first/"), PathRule("a/", "second/"))))
    assert t.path("a/x") == "first/x"


def test_example_paths(tr: Translator) -> None:
    assert tr.path("slime/backends/sglang_utils/sglang_engine.py") == (
        "vime/backends/vllm_utils/vllm_engine.py"
    )
    assert tr.path("slime/rollout/sglang_rollout.py") == "vime/rollout/vllm_rollout.py"
    assert tr.path("tests/test_slime.py") == "tests/test_vime.py"
    # `files:`-scoped rules never touch paths: the general rule renames docs/sglang.md.
    assert tr.path("docs/sglang.md") == "docs/vllm.md"
    assert tr.path("slimes/x") == "slimes/x"


def test_path_prefix_output_is_not_rescanned() -> None:
    t = Translator(
        TranslateConfig(paths=(PathRule("a/", "sglang/"),), replace=(Rule("sglang", "vllm"),))
    )
    assert t.path("a/sglang.py") == "sglang/vllm.py"


def test_regex_path_rules_match_at_the_start_and_expand_groups() -> None:
    t = Translator(
        TranslateConfig(
            paths=(PathRule(r"examples/(\w+)_sglang/", r"examples/\1_vllm/", regex=True),),
        )
    )
    assert t.path("examples/qwen_sglang/run.sh") == "examples/qwen_vllm/run.sh"
    assert t.path("x/examples/qwen_sglang/run.sh") == "x/examples/qwen_sglang/run.sh"


def test_path_scan_lookbehind_sees_the_upstream_path_before_the_prefix() -> None:
    t = Translator(
        TranslateConfig(
            paths=(PathRule("x", "y"),),
            replace=(Rule("(?<=x)a", "B", regex=True),),
        )
    )
    assert t.path("xa") == "yB"


def test_unchanged_path_is_the_same_object(tr: Translator) -> None:
    path = "".join(["tools/", "convert.py"])
    assert tr.path(path) is path


# --------------------------------------------------------------------------- rule kinds


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("sglang", "vllm"),
        ("sglang.x", "vllm.x"),
        ("(sglang)", "(vllm)"),
        ("sglang_x", "sglang_x"),
        ("xsglang", "xsglang"),
        ("sglang2", "sglang2"),
        ("ésglang", "ésglang"),  # a letter is a letter, ASCII or not
        ("sglang-x sglang", "vllm-x vllm"),
    ],
)
def test_word_rules_need_no_letter_digit_or_underscore_touching(source: str, expected: str) -> None:
    assert rules(Rule("sglang", "vllm", word=True)).text(source, "a.py") == expected


def test_literal_rules_are_not_regexes() -> None:
    t = rules(Rule("a.b", "X"), Rule("(c)", "Y"))
    assert t.text("a.b axb (c) c", "f") == "X axb Y c"


def test_regex_rules_expand_group_references() -> None:
    t = rules(Rule(r"sglang_(\w+)_v(?P<n>\d)", r"vllm_\1_\g<n>", regex=True))
    assert t.text("use sglang_router_v2 now", "f") == "use vllm_router_2 now"


def test_regex_rule_with_word_boundaries() -> None:
    t = rules(Rule(r"sg(lang)?", "vl", regex=True, word=True))
    assert t.text("sg sglang sgx", "f") == "vl vl sgx"


def test_leading_inline_flags_stay_with_their_rule() -> None:
    t = rules(Rule("(?i)sglang", "vllm", regex=True), Rule("x", "y"))
    assert t.text("SGLang sglang X x", "f") == "vllm vllm X y"


def test_keep_beats_a_replace_rule_at_the_same_position_but_not_an_earlier_one() -> None:
    t = rules(Rule("sglang", "vllm"), Rule("xs", "Z"), keep=(r"sglang\.srt",))
    assert t.text("sglang.srt", "f") == "sglang.srt"
    # Leftmost position wins overall: `xs` starts before the kept span.
    assert t.text("xsglang.srt", "f") == "Zglang.srt"


def test_translator_checks_a_config_built_in_code() -> None:
    with pytest.raises(ConfigError) as info:
        rules(Rule("(a+)+", "b", regex=True))
    assert info.value.key == "translate.replace[0].from"
    with pytest.raises(ConfigError) as info:
        rules(keep=("(",))
    assert info.value.key == "translate.keep[0]"
    with pytest.raises(ConfigError) as info:
        Translator(TranslateConfig(paths=(PathRule("", "x"),)))
    assert info.value.key == "translate.paths[0].from"


def test_empty_matches_advance_one_character_like_re_sub() -> None:
    # The loader refuses patterns that can match empty; the scan copes anyway.
    scanner = _Scanner((_Entry("translate.replace[0]", "x*", "Y", False, None),))
    for text in ("abc", "axxb", "", "xx"):
        got = scanner.scan(text, 0, "f", 5.0)
        assert (text if got is None else got) == re.sub("x*", "Y", text)


# --------------------------------------------------------------------------- blobs


def test_blob_translates_utf8_text_and_preserves_crlf(tr: Translator) -> None:
    data = b"import sglang\r\nfrom slime import x\r\n\r\nend\n"
    assert tr.blob(data, "slime/a.py") == b"import vllm\r\nfrom vime import x\r\n\r\nend\n"


def test_blob_keeps_a_bom_and_non_ascii_text(tr: Translator) -> None:
    data = "\ufeff# sglang — 速い\n".encode()
    assert tr.blob(data, "a.py") == "\ufeff# vllm — 速い\n".encode()


@pytest.mark.parametrize(
    ("data", "path"),
    [
        (b"sglang\x00binary", "slime/lib.so"),  # NUL: binary, as git decides
        (b"sglang " * 1000 + b"\x00", "slime/lib.bin"),  # NUL within the first 8000 bytes
        ("sglang café".encode("latin-1"), "slime/old.txt"),  # not UTF-8
        (b"sglang \xff\xfe", "slime/a.py"),
        (b"sglang in a picture", "docs/arch.svg"),  # excluded by glob
        (b"nothing to translate here\r\n", "slime/a.py"),  # no rule matches
        (b"", "slime/empty.py"),
    ],
)
def test_blob_returns_untranslatable_content_unchanged(
    tr: Translator, data: bytes, path: str
) -> None:
    assert tr.blob(data, path) is data


def test_blob_binary_sniff_looks_at_the_first_8000_bytes_only(tr: Translator) -> None:
    data = b"sglang " + b"x" * 8000 + b"\x00"
    assert tr.blob(data, "a.txt").startswith(b"vllm ")


def test_blob_over_10_mb_is_returned_unchanged(tr: Translator) -> None:
    at_limit = b"sglang\n" + b"x" * (MAX_TEXT_BYTES - 7)
    assert tr.blob(at_limit, "slime/big.py") == b"vllm\n" + at_limit[7:]
    over = at_limit + b"\n"
    assert tr.blob(over, "slime/big.py") is over


# --------------------------------------------------------------------------- limits and speed


def test_a_backtracking_rule_times_out_naming_rule_and_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Pretend the static check missed this one: the time limit must still hold.
    monkeypatch.setattr(config_regexes, "redos_reason", lambda pattern: None)
    t = Translator(
        TranslateConfig(keep=("zzz",), replace=(Rule("(a|aa)+$", "b", regex=True),)),
        time_limit=0.2,
    )
    started = time.monotonic()
    with pytest.raises(RuleTimeoutError) as info:
        t.text("a" * 80 + "!", "slime/evil.py")
    assert time.monotonic() - started < 5
    assert info.value.rule == "translate.replace[0]"
    assert info.value.upstream_path == "slime/evil.py"
    assert "translate.replace[0]" in str(info.value) and "slime/evil.py" in str(info.value)


def test_no_match_text_costs_one_search(tr: Translator) -> None:
    text = "import torch\nx = foo(bar)\n" * 40_000  # ~1 MB
    started = time.perf_counter()
    assert tr.text(text, "slime/model.py") is text
    assert time.perf_counter() - started < 0.5  # about 10 ms; generous for slow CI


def test_many_paths_are_fast(tr: Translator) -> None:
    paths = [f"slime/pkg{i}/sglang_mod{i % 7}/file{i}.py" for i in range(20_000)]
    paths += [f"tools/pkg{i}/file{i}.py" for i in range(20_000)]
    started = time.perf_counter()
    out = [tr.path(p) for p in paths]
    assert time.perf_counter() - started < 5  # about 0.3 s
    assert out[0] == "vime/pkg0/vllm_mod0/file0.py"
    assert out[-1] is paths[-1]


# --------------------------------------------------------------------------- properties


def reference(text: str, entries: list[tuple[str, str | None]]) -> str:
    """DESIGN.md's words as the slowest possible code: try every entry at every position."""
    compiled = [(re.compile(p), to) for p, to in entries]
    out: list[str] = []
    i = 0
    while i < len(text):
        for pattern, to in compiled:
            m = pattern.match(text, i)
            if m:
                out.append(m.group() if to is None else to)
                i = m.end()
                break
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


ALPHABET = "ab_ -.é1"
short = st.text(alphabet="ab", min_size=1, max_size=3)


@st.composite
def rule_sets(draw: st.DrawFn) -> tuple[list[str], list[Rule]]:
    keep = draw(st.lists(short, max_size=2))
    replace = [
        Rule(from_, to, word=word)
        for from_, to, word in draw(
            st.lists(
                st.tuples(short, st.text(alphabet="xyzb", max_size=3), st.booleans()), max_size=5
            )
        )
    ]
    return keep, replace


def as_entries(keep: list[str], replace: list[Rule]) -> list[tuple[str, str | None]]:
    entries: list[tuple[str, str | None]] = [(re.escape(k), None) for k in keep]
    for r in replace:
        p = re.escape(r.from_)
        entries.append((rf"(?<!\w){p}(?!\w)" if r.word else p, r.to))
    return entries


@settings(max_examples=400, deadline=None)
@given(rule_sets(), st.text(alphabet=ALPHABET, max_size=40))
@example((["ab"], [Rule("a", "b"), Rule("b", "c")]), "aab ab b")
def test_scan_matches_the_reference_semantics(rs: tuple[list[str], list[Rule]], text: str) -> None:
    keep, replace = rs
    t = Translator(TranslateConfig(keep=tuple(re.escape(k) for k in keep), replace=tuple(replace)))
    assert t.text(text, "f.py") == reference(text, as_entries(keep, replace))


@settings(max_examples=200, deadline=None)
@given(st.permutations("abc"), st.text(alphabet="abc xy", max_size=50))
def test_rules_never_chain(perm: list[str], text: str) -> None:
    # a→b, b→c, c→a all at once is a permutation only if no output is rescanned.
    t = rules(*(Rule(src, dst) for src, dst in zip("abc", perm, strict=True)))
    assert t.text(text, "f") == text.translate(str.maketrans("abc", "".join(perm)))


def test_rules_never_chain_example() -> None:
    assert rules(Rule("a", "b"), Rule("b", "c")).text("a", "f") == "b"


KEEP = r"\[[a-z]*\]"


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab[]cz ", max_size=60))
def test_keep_spans_are_never_changed(text: str) -> None:
    # Replace rules cannot produce or consume brackets, so kept spans are easy to find.
    t = rules(Rule("a", "bb"), Rule("b", ""), Rule("z", "[q]"), keep=(KEEP,))
    out = t.text(text, "f")
    kept = [s for s in re.findall(KEEP, text) if s != "[q]"]
    assert [s for s in re.findall(KEEP, out) if s != "[q]"] == kept


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(exclude_characters="sSgG"), max_size=80))
def test_text_without_a_match_comes_back_identical(tr: Translator, text: str) -> None:
    t = tr
    assert t.text(text, "slime/a.py") is text
    data = text.encode("utf-8", "surrogatepass")
    assert t.blob(data, "slime/a.py") is data


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="sglang SGLang_.-\r", max_size=12), max_size=8))
def test_blob_preserves_every_line_ending(tr: Translator, lines: list[str]) -> None:
    t = tr
    data = "\r\n".join(lines).encode()
    out = t.blob(data, "slime/a.py")
    assert out.count(b"\r\n") == data.count(b"\r\n")
    assert out.count(b"\r") == data.count(b"\r")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="slimegSGLan/_.-mdxv", max_size=40))
def test_needs_path_translation_false_means_path_unchanged(tr: Translator, path: str) -> None:
    t = tr
    if not t.needs_path_translation(path):
        assert t.path(path) == path


def test_needs_path_translation_examples(tr: Translator) -> None:
    assert tr.needs_path_translation("slime/backends/sglang_utils/x.py")
    assert tr.needs_path_translation("docs/sglang.md")
    assert not tr.needs_path_translation("tools/convert_hf.py")
    assert not tr.needs_path_translation("slimes/x.py")
