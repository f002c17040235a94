"""A tiny LETOR fold written by the tests themselves (train/vali/test.txt)."""
import pytest

import tfr_extensions as tfrx
from pipelines import common


@pytest.fixture(scope="session")
def tiny_fold(tmp_path_factory):
    """A folder with train.txt (30 queries), vali.txt and test.txt (10 each), 6 features."""
    folder = tmp_path_factory.mktemp("tiny_fold")
    data = tfrx.data.synthetic(num_queries=50, num_features=6, seed=3, list_size=(3, 12))
    subsets = common.split_queries(data, (3, 1, 1), seed=0)
    for part, subset in zip(("train", "vali", "test"), subsets):
        tfrx.data.write_libsvm(subset, folder / f"{part}.txt")
    return folder
