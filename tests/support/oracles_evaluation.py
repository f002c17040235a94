"""Independent NumPy oracles for per-query ranking metrics (one list at a time)."""
import numpy as np


def ranked_labels(labels, scores):
    """Labels in ranking order: score descending, ties to the lower index."""
    order = np.lexsort((np.arange(len(scores)), -np.asarray(scores, np.float64)))
    return np.asarray(labels, np.float64)[order]


def ndcg(labels, scores, k):
    def dcg(ys):
        ys = ys[:k]
        return np.sum((2.0 ** ys - 1.0) / np.log2(np.arange(2, len(ys) + 2)))
    ideal = dcg(np.sort(np.asarray(labels, np.float64))[::-1])
    return dcg(ranked_labels(labels, scores)) / ideal if ideal > 0 else 0.0


def _average_precision(labels, scores, k, total):
    relevant = ranked_labels(labels, scores) > 0
    if total(relevant.sum()) == 0:
        return 0.0
    hits = np.cumsum(relevant)
    ranks = np.arange(1, len(relevant) + 1)
    return np.sum((hits / ranks * relevant)[:k]) / total(relevant.sum())


def average_precision(labels, scores, k):
    """AP@k over R, all relevant documents of the list."""
    return _average_precision(labels, scores, k, lambda relevant: relevant)


def average_precision_min(labels, scores, k):
    """AP@k over min(k, R): LightGBM's map@k (its ``rank_metric`` divides by
    ``std::min(npos, k)``)."""
    return _average_precision(labels, scores, k, lambda relevant: min(relevant, k))


def precision(labels, scores, k):
    relevant = ranked_labels(labels, scores) > 0
    return relevant[:k].sum() / min(k, len(relevant))


def nerr(labels, scores, k):
    labels = np.asarray(labels, np.float64)
    if not (labels > 0).any():
        return 0.0
    max_grade = labels.max()

    def err(ys):
        probs = (2.0 ** ys[:k] - 1.0) / 2.0 ** max_grade
        not_stopped = np.concatenate([[1.0], np.cumprod(1.0 - probs)[:-1]])
        return np.sum(probs * not_stopped / np.arange(1, len(probs) + 1))
    return err(ranked_labels(labels, scores)) / err(np.sort(labels)[::-1])


ORACLES = {"ndcg": ndcg, "map": average_precision, "map_min": average_precision_min,
           "p": precision, "nerr": nerr}
