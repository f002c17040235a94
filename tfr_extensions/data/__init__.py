"""LETOR / LibSVM data: a fast reader, tf.data ranking datasets, NumPy arrays, ELWC export.

    data = tfrx.data.read_libsvm("MQ2008/Fold1/train.txt")   # cached after the first read
    dataset = tfrx.data.ranking_dataset(data, batch_size=32)  # ({"features", "mask"}, labels)
    features, labels = tfrx.data.to_dense(data)              # NumPy [Q, L, F], [Q, L]
    batches = tfrx.data.RankingPyDataset(data, batch_size=32) # Keras 3 on JAX / PyTorch
    tfrx.data.to_elwc(data, "train.tfrecord")                # for TF-Ranking's own readers

The reader, :func:`to_dense`, :class:`RankingPyDataset` and :func:`synthetic` need
no TensorFlow; ``ranking_dataset``, ``numeric_masks``, ``query_zscore`` and ELWC are
TensorFlow by nature (where it is not installed, naming them raises an
``ImportError`` that says what to use instead).
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

#: the TensorFlow parts of the data path -> what to use without TensorFlow
TENSORFLOW_ONLY = {
    "ranking_dataset": "tfrx.data.RankingPyDataset (NumPy batches for Keras's fit on any "
                       "backend) or tfrx.data.to_dense",
    "numeric_masks": "tfrx.data.RankingPyDataset, whose masks need no conversion",
    "query_zscore": "tfrx.data.query_zscore_rows (NumPy), or the scorers' QueryZScore layer",
    "to_elwc": "write LETOR/LibSVM files with tfrx.data.write_libsvm",
    "elwc_feature_specs": "tfrx.data.RankingPyDataset",
}


#: the public names, in the order a user meets them (the API reference documents these;
#: the TensorFlow ones where TensorFlow is installed)
__all__ = ["read_libsvm", "LibSVMData", "RankingPyDataset", "to_dense", "synthetic",
           "write_libsvm", "group_by_query", "select_queries", "query_zscore_rows",
           "default_cache_dir"] + (["ranking_dataset", "numeric_masks", "query_zscore",
                                     "to_elwc", "elwc_feature_specs"] if HAS_TENSORFLOW else [])


def __getattr__(name):
    if name in TENSORFLOW_ONLY and not HAS_TENSORFLOW:
        raise ImportError(f"tfr_extensions.data.{name} is TensorFlow by nature and TensorFlow "
                          f"is not installed here. Instead: {TENSORFLOW_ONLY[name]}.")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
