"""A short training run on MQ2008 Fold1 clearly beats a random scorer."""
import numpy as np

from pipelines import common
from pipelines import train
from tfr_extensions import evaluation

MARGIN = 0.15  # absolute test nDCG@5 over the mean of 20 random scorers


def test_short_training_beats_random_scorer_on_mq2008(mq2008_dir, tmp_path):
    config = train.TrainConfig(
        name="mq2008_smoke", data=str(mq2008_dir), fold=1, loss="twin_ndcg_type3",
        scorer="R4.L", hidden_units=32, epochs=3, batch_size=32, seed=0,
        output_dir=str(tmp_path), tensorboard=False, verbose=0)
    result = train.run(config)
    test = common.load_splits(str(mq2008_dir), fold=1).test
    rng = np.random.default_rng(0)
    random_ndcg5 = np.mean([
        evaluation.evaluate(test.labels, rng.random(len(test.labels)), test.query_offsets,
                            topns=(5,), metrics=("ndcg",)).summary["ndcg@5"]
        for _ in range(20)])
    trained = result.test.summary["ndcg@5"]
    print(f"MQ2008 Fold1 test nDCG@5: trained {trained:.4f}, random {random_ndcg5:.4f}")
    assert result.test.summary["num_counted"] < result.test.summary["num_queries"]  # excluded
    assert trained > random_ndcg5 + MARGIN, (trained, random_ndcg5)
