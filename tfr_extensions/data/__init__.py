"""LETOR / LibSVM data: a fast reader, tf.data ranking datasets, ELWC export.

    data = tfrx.data.read_libsvm("MQ2008/Fold1/train.txt")   # cached after the first read
    dataset = tfrx.data.ranking_dataset(data, batch_size=32)  # ({"features", "mask"}, labels)
    tfrx.data.to_elwc(data, "train.tfrecord")                # for TF-Ranking's own readers
"""
from tfr_extensions.data.dataset import numeric_masks, ranking_dataset, select_queries
from tfr_extensions.data.elwc import elwc_feature_specs, to_elwc
from tfr_extensions.data.libsvm import (LibSVMData, default_cache_dir, group_by_query, read_libsvm,
                                        write_libsvm)
from tfr_extensions.data.normalization import query_zscore
from tfr_extensions.data.synthetic import synthetic
