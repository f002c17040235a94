"""The README's Keras 3 quickstart, run verbatim on the keras3 stack: it trains with our
loss beside keras-rs's metrics, saves a ``.keras`` file that loads back with the same
loss options and scores, and exports a SavedModel that serves the same scores."""
import re

import numpy as np
import pytest
import tensorflow as tf

import tfr_extensions as tfrx
from support.stack import REPO
from tfr_extensions import backend

pytestmark = pytest.mark.skipif(not backend.IS_KERAS_3,
                                reason="the Keras 3 quickstart needs Keras 3 and keras-rs")


def quickstart() -> str:
    """The first python block under the README's Keras 3 quickstart heading, verbatim."""
    text = (REPO / "README.md").read_text()
    section = text.split("## Quickstart: Keras 3", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_quickstart_trains_saves_loads_and_exports(tmp_path, monkeypatch):
    data = tfrx.data.synthetic(num_queries=48, num_features=46, seed=0, list_size=(4, 12))
    (tmp_path / "Fold1").mkdir()
    tfrx.data.write_libsvm(data, str(tmp_path / "Fold1" / "train.txt"))
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(quickstart(), "README.md", "exec"), namespace)  # noqa: S102
    model, keras = namespace["model"], namespace["keras"]

    history = model.history.history
    assert len(history["loss"]) == 20 and np.all(np.isfinite(history["loss"]))
    assert history["loss"][-1] < history["loss"][0]  # minus nDCG: it falls as the ranker learns
    assert {"ndcg_5", "map", "nerr_10"} <= set(history)
    assert history["ndcg_5"][-1] > history["ndcg_5"][0]

    batch, _ = next(iter(tfrx.data.ranking_dataset(data, batch_size=8, shuffle=False)))
    scores = model(batch, training=False).numpy()
    loaded = keras.models.load_model("ranker.keras")
    assert loaded.loss.get_config() == model.loss.get_config()
    assert int(loaded.loss._calls.numpy()) == int(model.loss._calls.numpy()) > 0
    np.testing.assert_allclose(loaded(batch, training=False).numpy(), scores, rtol=1e-6,
                               atol=1e-6)
    exported = tf.saved_model.load("ranker/1")  # kept: its functions need its variables
    served = exported.serve(batch)
    np.testing.assert_allclose(served.numpy(), scores, rtol=1e-5, atol=1e-5)
