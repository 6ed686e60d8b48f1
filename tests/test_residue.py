"""Translation residue: upstream names left behind in fork files."""

from __future__ import annotations

from bot.engine.config import load_config
from bot.engine.residue import find_residue
from bot.engine.translate import Translator
from tests.factory import DEFAULT_CONFIG


def translator() -> Translator:
    return Translator(load_config(DEFAULT_CONFIG, "forksync.yml").translate)


def test_untranslated_names_are_residue_with_the_expected_line() -> None:
    text = "import vime\nfrom sglang import Engine\nURL = 'https://github.com/THUDM/slime'\n"
    found = find_residue(translator(), "vime/x.py", "slime/x.py", text)
    assert [(r.line, r.text) for r in found] == [(2, "from sglang import Engine")]
    assert found[0].expected == "from vllm import Engine"


def test_clean_text_and_excluded_files_have_none() -> None:
    assert find_residue(translator(), "vime/x.py", "slime/x.py", "import vime\n") == []
    assert find_residue(translator(), "README.md", "README.md", "sglang everywhere\n") == []


def test_marker_lines_are_not_residue_and_the_count_is_capped() -> None:
    text = "<<<<<<< ours\n" + "use sglang\n" * 50 + ">>>>>>> theirs\n"
    found = find_residue(translator(), "vime/x.py", "slime/x.py", text, limit=5)
    assert len(found) == 5 and all(r.line > 1 for r in found)
