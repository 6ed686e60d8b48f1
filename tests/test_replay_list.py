"""The committed list of replayed merges, read by set and by repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.replay_suggestions import MERGES, TRAINING, main, read_merges


def test_the_list_reads_by_set_and_by_repository() -> None:
    every = read_merges(MERGES, None)
    assert len(every) == len(set(every)) > 4000  # no merge listed twice
    vllm = read_merges(MERGES, {"dev", "heldout"}, {"HabanaAI/vllm-fork", "ROCm/vllm"})
    assert {repo for _s, repo, _sha in vllm} == {"HabanaAI/vllm-fork", "ROCm/vllm"}
    assert vllm == [m for m in every if m[1] in {"HabanaAI/vllm-fork", "ROCm/vllm"}]
    # A repository filter never reaches into sets that were not asked for.
    assert read_merges(MERGES, {"valid14"}, {"ROCm/vllm"}) == []
    assert {s for s, _r, _sha in read_merges(MERGES, set(TRAINING))} == set(TRAINING)


def test_a_filter_that_matches_nothing_is_an_error(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:  # not an empty replay printed as a result
        main(["--clones", str(tmp_path), "--set", "valid14", "--repo", "ROCm/vllm"])
    assert stopped.value.code == 2
    assert "no listed merge is in those sets and repositories" in capsys.readouterr().err
