"""LETOR / LibSVM data: a fast reader, tf.data ranking datasets, NumPy arrays, ELWC export.

    data = tfrx.data.read_libsvm("MQ2008/Fold1/train.txt")   # cached after the first read
    dataset = tfrx.data.ranking_dataset(data, batch_size=32)  # ({"features", "mask"}, labels)
    features, labels = tfrx.data.to_dense(data)              # NumPy [Q, L, F], [Q, L]
    batches = tfrx.data.RankingPyDataset(data, batch_size=32) # Keras 3 on JAX / PyTorch
    tfrx.data.to_elwc(data, "train.tfrecord")                # for TF-Ranking's own readers

The reader, :func:`to_dense` and :class:`RankingPyDataset` need no TensorFlow;
``ranking_dataset``, ``query_zscore`` and ELWC do (present when it imports).
"""
from tfr_extensions.backend import HAS_TENSORFLOW
from tfr_extensions.data.dense import RankingPyDataset, query_zscore_rows, to_dense
from tfr_extensions.data.cache import default_cache_dir
from tfr_extensions.data.libsvm import read_libsvm, write_libsvm
from tfr_extensions.data.libsvm_data import LibSVMData, group_by_query
from tfr_extensions.data.synthetic import synthetic

if HAS_TENSORFLOW:
    from tfr_extensions.data.dataset import numeric_masks, ranking_dataset, select_queries
    from tfr_extensions.data.elwc import elwc_feature_specs, to_elwc
    from tfr_extensions.data.normalization import query_zscore
else:
    from tfr_extensions.data.dense import select_queries
