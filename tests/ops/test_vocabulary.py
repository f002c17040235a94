"""vocabulary: one table of metric names for ops, metrics, losses and evaluation."""
import pytest

import tfr_extensions as tfrx
from tfr_extensions import evaluation
from tfr_extensions.ops import vocabulary


def test_every_name_maps_to_its_canonical_metric_and_column():
    table = {"ndcg": ("ndcg", "ndcg"), "ap": ("ap", "map"), "map": ("ap", "map"),
             "average_precision": ("ap", "map"), "ap_min": ("ap_min", "map_min"),
             "map_min": ("ap_min", "map_min"), "precision": ("precision", "p"),
             "p": ("precision", "p"), "nerr": ("nerr", "nerr")}
    assert set(vocabulary.METRIC_NAMES) == set(table)
    for name, (canonical, column) in table.items():
        assert vocabulary.canonical_metric(name) == canonical
        assert vocabulary.column_prefix(name) == column
        assert vocabulary.metric_of_column(column) == canonical
    assert "min(k, R)" in vocabulary.definition("map_min")
    assert "over R, all relevant" in vocabulary.definition("map")


def test_the_places_that_take_metric_names_take_every_name():
    """RankingMetric("ap") and TwinSigmoidLoss(metric="map") both work, as every name does."""
    for name in vocabulary.METRIC_NAMES:
        tfrx.metrics.RankingMetric(name, topn=5)
        assert tfrx.losses.TwinSigmoidLoss(metric=name).options["metric"] == \
            vocabulary.canonical_metric(name)
        tfrx.losses.ExpectedUtilityLoss(metric=name)
        assert evaluation.parse_metric(f"{name}@5") == (vocabulary.column_prefix(name), 5)
    for bad in ("mrr", "err", "MAP", None):
        with pytest.raises(ValueError, match="`metric` must be one of"):
            vocabulary.canonical_metric(bad)
        with pytest.raises(ValueError, match="metric"):
            tfrx.losses.TwinSigmoidLoss(metric=bad)
