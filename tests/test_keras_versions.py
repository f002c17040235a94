"""Keras 2 and Keras 3 give the same numbers: every loss name of ``tfrx.losses.names()``
(two seeded calls each, so the step counter is exercised), its gradient, and
``RankingMetric`` under every no-relevant rule and sample weight, computed on the
tf221 stack (TF 2.21, Keras 2 as tf-keras) and on the keras3 stack (TF 2.21, Keras 3):
the same TensorFlow, so any difference would be the Keras layer's.

A cross-stack test (``TFRX_CROSS_STACK=1``, see ``tests/support/stack.py``): it runs on the
keras3 stack, and computes tf221's numbers with tf221's interpreter.
"""
import json
import subprocess
import sys

import numpy as np
import pytest

from support.stack import REPO, THIS_STACK, stack_python

#: measured: bitwise equal (the same TensorFlow ops on the same inputs); the bound
#: leaves room for a different summation order only
TOLERANCE = 1e-6

# Prints {name: [loss call 1, loss call 2, gradient of call 2 (flat)], "metric/...": value}.
NUMBERS = r"""
import json, sys
import numpy as np
import tensorflow as tf
import tfr_extensions as tfrx

labels = tf.constant([
    [2.0, 0.0, 1.0, 0.0, 3.0, -1.0, -1.0],   # padded tail
    [0.0, 0.0, 0.0, 0.0, -1.0, -1.0, -1.0],  # no relevant document
    [1.0, 0.0, -1.0, 2.0, 0.0, 1.0, 0.0],    # padding in the middle
    [4.0, 1.0, 0.0, 0.0, 0.0, 2.0, 1.0],
])
scores = np.random.default_rng(0).normal(size=labels.shape).astype(np.float32)
scores[3, 2:5] = 0.5                          # ties
scores = tf.constant(scores)
item_weights = tf.constant(np.random.default_rng(1).uniform(0.5, 2.0, labels.shape), tf.float32)
out = {"keras": tfrx.backend.KERAS_VERSION}
for name in tfrx.losses.names(tf_ranking=False):
    kwargs = {"seed": 3} if "seed" in tfrx.losses.get(name).get_config() else {}
    loss = tfrx.losses.get(name, **kwargs)
    first = float(loss(labels, scores))
    with tf.GradientTape() as tape:
        tape.watch(scores)
        value = loss(labels, scores, sample_weight=item_weights)
    gradient = tape.gradient(value, scores)
    out[name] = [first, float(value)] + gradient.numpy().ravel().tolist()
for metric in ("ndcg", "ap", "precision", "nerr"):
    for rule in ("zero", "exclude", "one"):
        for weights in (None, item_weights[:, :1], item_weights):
            m = tfrx.metrics.RankingMetric(metric, topn=3, no_relevant=rule)
            m.update_state(labels, scores, sample_weight=weights)
            key = f"metric/{metric}/{rule}/{'none' if weights is None else weights.shape[1]}"
            out[key] = float(m.result())
print("RESULT" + json.dumps(out))
"""


def numbers(python=None, env=None):
    proc = subprocess.run([python or sys.executable, "-c", NUMBERS], capture_output=True,
                          text=True, timeout=300, cwd=str(REPO), env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.split("RESULT", 1)[1])


@pytest.mark.skipif(THIS_STACK != "keras3",
                    reason="compares the two stacks of TensorFlow 2.21, both sides in a "
                           "subprocess: it runs once, on keras3")
def test_keras_2_and_keras_3_give_the_same_losses_gradients_and_metrics():
    other = "tf221"
    theirs = numbers(*stack_python(other))
    ours = numbers()
    versions = {THIS_STACK: ours.pop("keras"), other: theirs.pop("keras")}
    assert versions["keras3"].startswith("3.") and versions["tf221"].startswith("2.21.")
    assert set(ours) == set(theirs)
    assert sum(not key.startswith("metric/") for key in ours) >= 27  # every loss name
    for key in ours:
        np.testing.assert_allclose(ours[key], theirs[key], rtol=TOLERANCE, atol=TOLERANCE,
                                   err_msg=key)
        assert np.all(np.isfinite(ours[key])), key
