"""The NumPy data path on Keras 3's JAX and PyTorch backends: MQ2008 Fold1 through
``tfrx.data.RankingPyDataset`` and ``to_dense``. (Training on it, against the NumPy
oracle's nDCG: ``tfrx-train`` in tests/neutral/test_neutral_train.py; every loss on each
backend against its oracle: tests/neutral/test_neutral_losses.py.)"""
import numpy as np

import tfr_extensions as tfrx


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
