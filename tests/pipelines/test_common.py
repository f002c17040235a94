"""Shared pieces of the jobs: the synthetic data's splits and folds, the completion
marker and the stored summaries."""
import json

import numpy as np
import pytest

from pipelines import common


def test_synthetic_folds_rotate_five_parts_like_letor():
    folds = [common.load_splits(common.SYNTHETIC, fold=k) for k in range(1, 6)]
    everything = set(common.load_splits(common.SYNTHETIC).train.query_ids) | \
        set(common.load_splits(common.SYNTHETIC).vali.query_ids) | \
        set(common.load_splits(common.SYNTHETIC).test.query_ids)
    tests = [set(f.test.query_ids) for f in folds]
    assert set.union(*tests) == everything and sum(map(len, tests)) == len(everything) == 500
    for k, splits in enumerate(folds):
        parts = [set(p.query_ids) for p in (splits.train, splits.vali, splits.test)]
        assert [len(p) for p in parts] == [300, 100, 100]
        assert parts[0] | parts[1] | parts[2] == everything  # disjoint and complete
        assert parts[2] == set(folds[(k + 1) % 5].vali.query_ids)  # the next fold validates on it
    again = common.load_splits(common.SYNTHETIC, fold=3)
    np.testing.assert_array_equal(again.test.features, folds[2].test.features)
    for fold in (0, 6, 1.0):
        with pytest.raises(ValueError, match="fold"):
            common.load_splits(common.SYNTHETIC, fold=fold)


def test_done_marker_and_stored_summary_lines(tmp_path):
    common.write_done(str(tmp_path / "done.json"), {"epochs": 3}, {"identity": {"a": 1}})
    done = json.loads((tmp_path / "done.json").read_text())
    assert done["identity"] == {"a": 1} and done["config"] == {"epochs": 3}
    assert done["finished"].endswith("Z")
    assert common.stored_summary_lines(str(tmp_path)) == []  # no results.json
    summary = {"ndcg@5": 0.5, "num_counted": 8, "num_queries": 10, "no_relevant": "exclude"}
    common.write_json(str(tmp_path / common.RESULTS_FILE), {"test": summary})
    assert common.stored_summary_lines(str(tmp_path)) == [
        "test:       " + common.format_summary(summary)]
