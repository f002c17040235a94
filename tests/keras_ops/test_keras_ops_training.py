"""End to end on Keras 3's JAX and PyTorch backends: MQ2008 Fold1 through the NumPy data path
(``tfrx.data.RankingPyDataset``, ``to_dense``) into ``model.fit`` with our loss, and
the trained model beats the untrained one on validation nDCG@5 (computed by the
independent NumPy oracle)."""
import numpy as np

import keras

import harness
from support import oracles
import tfr_extensions as tfrx


def _scorer(num_features: int) -> keras.Model:
    """A small MLP scoring each document of ``[B, L, F]`` -> ``[B, L]``."""
    return keras.Sequential([keras.Input((None, num_features)),
                             keras.layers.Dense(32, activation="relu"),
                             keras.layers.Dense(1), keras.layers.Reshape((-1,))])


def _mean_ndcg(model, features, labels, k=5):
    scores = harness.to_numpy(model.predict(features, batch_size=64, verbose=0))
    return float(np.mean([oracles.ndcg(y, s, k) for y, s in zip(labels, scores)]))


def test_py_dataset_serves_every_query_once_per_epoch_with_padding(mq2008_dir):
    data = tfrx.data.read_libsvm(mq2008_dir / "Fold1" / "vali.txt")
    features, labels = tfrx.data.to_dense(data)
    assert features.shape == (data.num_queries, int(data.list_sizes.max()), data.num_features)
    assert (labels >= 0).sum() == data.num_documents and np.all(features[labels < 0] == 0)
    batches = tfrx.data.RankingPyDataset(data, batch_size=16, shuffle=True, seed=3)
    batches.on_epoch_end()  # the second epoch's order
    served = sorted(np.round(y[y >= 0].sum(), 3) for i in range(len(batches))
                    for y in batches[i][1])
    expected = sorted(np.round(y[y >= 0].sum(), 3) for y in labels)
    assert served == expected  # every query exactly once (label sums as fingerprints)
    x, y = batches[0]
    assert x.shape[:2] == y.shape and x.dtype == np.float32 and y.dtype == np.float32


def test_trains_on_mq2008_and_beats_the_untrained_model(mq2008_dir):
    keras.utils.set_random_seed(0)
    train = tfrx.data.read_libsvm(mq2008_dir / "Fold1" / "train.txt")
    vali_features, vali_labels = tfrx.data.to_dense(
        tfrx.data.read_libsvm(mq2008_dir / "Fold1" / "vali.txt"))
    model = _scorer(train.num_features)
    before = _mean_ndcg(model, vali_features, vali_labels)
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=tfrx.losses.get("twin_ndcg_type3", topn=10, seed=0))
    # (bucketed list sizes: a few shapes, so JAX compiles the training step a few times,
    # not once per batch)
    history = model.fit(tfrx.data.RankingPyDataset(train, batch_size=32, shuffle=True,
                                                    drop_no_relevant=True,
                                                    bucket_list_sizes=True),
                        epochs=4, verbose=0)
    after = _mean_ndcg(model, vali_features, vali_labels)
    assert np.all(np.isfinite(history.history["loss"]))
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert after > before + 0.02, (before, after)


def test_every_registered_loss_computes_on_this_backend():
    """Every key of the registry builds and gives a finite loss here, a tensor of
    Keras's backend (its values: the oracle suites, and test_cross_implementation.py
    for the two implementations against each other)."""
    labels, scores = harness.CASES["mixed"]
    names = tfrx.losses.names(classes=False, presets=False, tf_ranking=False)
    assert {"approx_ndcg", "listnet", "twin_sigmoid", "softndcg", "wassrank", "ranknet",
            "ndcg_beta_hinge", "expected_utility", "mdprank", "lambda_loss",
            "neural_ndcg"} <= set(names)
    for name in names:
        out = tfrx.losses.get(name)(labels, scores)
        assert keras.ops.is_tensor(out), name
        assert np.isfinite(float(harness.to_numpy(out))), name
