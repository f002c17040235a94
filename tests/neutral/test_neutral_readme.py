"""The README's quickstart for Keras 3 on JAX or PyTorch, run verbatim on this process's
backend (on the jax and torch stacks: without TensorFlow): it trains our scorer with our
loss, and its ``ranker.keras`` loads back with the loss's options and the same scores."""
import pathlib
import re

import numpy as np
import pytest

import tfr_extensions as tfrx
from tfr_extensions import backend

pytestmark = pytest.mark.skipif(not backend.IS_KERAS_3, reason="the quickstart is Keras 3's")

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"
HEADING = "## Quickstart: Keras 3 on JAX or PyTorch"


def quickstart() -> str:
    """The first python block under the heading, verbatim."""
    section = README.read_text().split(HEADING, 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_quickstart_trains_saves_and_loads(tmp_path, monkeypatch):
    data = tfrx.data.synthetic(num_queries=48, num_features=46, seed=0, list_size=(4, 12))
    (tmp_path / "Fold1").mkdir()
    tfrx.data.write_libsvm(data, str(tmp_path / "Fold1" / "train.txt"))
    monkeypatch.chdir(tmp_path)
    # the block sets KERAS_BACKEND where it is unset: this process's, restored afterwards
    monkeypatch.setenv("KERAS_BACKEND", backend.backend_name())
    namespace = {}
    exec(compile(quickstart(), str(README), "exec"), namespace)  # noqa: S102
    model, keras = namespace["model"], namespace["keras"]
    history = model.history.history
    assert len(history["loss"]) == 20 and np.all(np.isfinite(history["loss"]))
    assert history["loss"][-1] < history["loss"][0]  # minus nDCG: it falls as the ranker learns
    assert history["ndcg_5"][-1] > history["ndcg_5"][0]
    x, _ = namespace["batches"].batch(0, 0)
    scores = keras.ops.convert_to_numpy(model(x, training=False))
    loaded = keras.models.load_model("ranker.keras")
    assert loaded.loss.get_config() == model.loss.get_config()
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded(x, training=False)), scores,
                               rtol=1e-6, atol=1e-6)
