"""Two edits of one text, word by word: the words both replaced, and the words one lost."""

from __future__ import annotations

from bot.engine.wordiff import Clash, clash, dropped_words


def test_the_words_both_sides_replaced_with_words_of_their_own() -> None:
    base = '    x = torch.zeros(n, device="cuda")\n'
    assert clash(base, base.replace('"cuda"', "get_device()"),
                 base.replace('"cuda"', "self._device")) == Clash(
        '"cuda"', 'device="cuda"', "get_device()", "self._device", False, False)
    # Different words, one side only adding, or the same words deleted: no clash.
    assert clash("f(a, b)\n", "f(c, b)\n", "f(a, d)\n") is None
    assert clash("f(a)\n", "f(a, b)\n", "g(a)\n") is None
    assert clash("f(a, b)\n", "f(b)\n", "f(c, b)\n") is None
    assert clash("aa", "a", "<details>") is None and clash("x", "`y`", "z") is None
    # A version inside quotes is quoted whole.
    got = clash('  "lodash": "4.17.20",\n', '  "lodash": "4.17.21-fork",\n',
                '  "lodash": "4.17.21",\n')
    assert got is not None and (got.base, got.context) == ("20", '"4.17.20"')


def test_a_rewrapped_line_is_the_words_it_changed() -> None:
    base = "def ids(self, new: List[int]) -> None:\n"
    theirs = base.replace("self, new", "self,\n        new").replace("List", "Sequence")
    got = clash(base, base.replace("List[int]", "Tuple[int, ...]"), theirs)
    assert got is not None and (got.base, got.ours, got.theirs) == (
        "List[int]", "Tuple[int, ...]", "Sequence[int]")


def test_the_words_a_version_lost() -> None:
    ours = "from m import (A, Fused, B,\n               C)\n"
    assert dropped_words(ours, "from m import A, B, C\n") == "`Fused`"
    assert dropped_words("a b c d e\n", "x\n") == "`a`, `b`, `c` and 2 more words"
    assert dropped_words("f(a)\n", "f(a, b)\n") == ""
    assert dropped_words("f(float, float)\n", "f(int, int)\n") == "`float`"
