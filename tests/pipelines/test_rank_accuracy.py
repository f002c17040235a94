"""Section 4.2's rank-accuracy experiment: twin-sigmoid ranks are exact."""
import numpy as np
import pytest

from pipelines import rank_accuracy


@pytest.mark.parametrize("quantize", [None, 10, 1000])
def test_tie_broken_twin_ranks_have_zero_l1_error_also_with_many_ties(quantize):
    scores = rank_accuracy.uniform_lists(20, 123, seed=1, quantize=quantize)
    ranks = rank_accuracy.twin_ranks(scores, tie_break=True, seed=3)
    assert rank_accuracy.l1_rank_error(ranks, scores) == 0.0
    assert all(sorted(r) == list(range(1, 124)) for r in ranks)


def test_shared_ranks_err_by_exactly_the_spread_of_each_tie_group():
    scores = rank_accuracy.uniform_lists(20, 123, seed=2, quantize=10)
    shared = rank_accuracy.twin_ranks(scores, tie_break=False)
    # a tie group of m documents shares the mean rank; its best-matching sort
    # puts them m consecutive positions apart: sum_k |mean - k| per group
    expected = np.mean([sum(np.abs(np.arange(m) - (m - 1) / 2).sum()
                            for m in np.unique(s, return_counts=True)[1]) for s in scores])
    np.testing.assert_allclose(rank_accuracy.l1_rank_error(shared, scores), expected)
    assert expected > 100


def test_l1_error_of_the_sigmoid_approximation_falls_with_alpha_as_in_table_2():
    # the mean over four draws of 100 lists: at alpha = 1e5 the error is a few
    # float32 roundings per list, and one draw of 100 lists moves it by +-30%
    rows = [rank_accuracy.table_2({(100, 123): rank_accuracy.uniform_lists(100, 123, seed)},
                                  alphas=(1.0, 100.0, 1e5))[(100, 123)] for seed in range(4)]
    row = list(np.mean(rows, axis=0))
    paper = rank_accuracy.PAPER_TABLE_2[(100, 123)]
    np.testing.assert_allclose(row, [paper[0], paper[2], paper[5]], rtol=0.25)
    scores = {(100, 123): rank_accuracy.uniform_lists(100, 123)}
    lines = rank_accuracy.format_tables({(100, 123): row + [0, 0, 0]},
                                        rank_accuracy.table_3(scores))
    assert any("0.00 / 0.00" in line for line in lines)


def test_the_config_and_its_flags():
    config = rank_accuracy.parse_args(["--seed", "2", "--quantize", "20"])
    assert config == rank_accuracy.RankAccuracyConfig(seed=2, quantize=20)
    assert rank_accuracy.parse_args([]) == rank_accuracy.RankAccuracyConfig()
    with pytest.raises(ValueError, match="quantize"):
        rank_accuracy.RankAccuracyConfig(quantize=0)
