"""Seeded losses across frameworks: the same seed on Keras's TensorFlow, JAX and PyTorch
backends, each in a process of its own, and the largest differences between them.

    python -m benchmarks.seeded_agreement            # twin_sigmoid_loss, nDCG, type3, seed 0

Each backend computes ``twin_sigmoid_loss(labels, scores, metric="ndcg", gradient="type3",
seed=0)`` and its gradient on 16 lists of 10 documents whose scores are rounded normals
(many ties, so tie breaking decides the ranks); the report gives the mean loss per backend
and the largest per-list loss and gradient differences between any two.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

BACKENDS = ("tensorflow", "jax", "torch")


def _worker() -> None:
    import tfr_extensions as tfrx  # pylint: disable=import-outside-toplevel
    from tfr_extensions import backend  # pylint: disable=import-outside-toplevel
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, (16, 10)).astype(np.float32)
    scores = np.round(rng.normal(size=(16, 10))).astype(np.float32)

    def loss(s):
        return tfrx.losses.twin_sigmoid_loss(labels, s, metric="ndcg", gradient="type3", seed=0)

    name = backend.backend_name()
    if name == "tensorflow":
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        s = tf.constant(scores)
        with tf.GradientTape() as tape:
            tape.watch(s)
            values, weights = loss(s)
            total = tf.reduce_sum(values * weights)
        grad, values, weights = tape.gradient(total, s).numpy(), values.numpy(), weights.numpy()
    elif name == "jax":
        import jax  # pylint: disable=import-outside-toplevel
        import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
        grad = np.asarray(jax.grad(lambda s: jnp.sum(jnp.prod(jnp.stack(loss(s)), 0)))(
            jnp.asarray(scores)))
        values, weights = (np.asarray(x) for x in loss(jnp.asarray(scores)))
    else:
        import torch  # pylint: disable=import-outside-toplevel
        s = torch.tensor(scores, requires_grad=True)
        values, weights = loss(s)
        (values * weights).sum().backward()
        grad, values, weights = s.grad.numpy(), values.detach().numpy(), weights.numpy()
    print(json.dumps({"losses": (values * weights).tolist(), "grad": grad.tolist()}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker()
        return
    results = {}
    for name in BACKENDS:
        done = subprocess.run([sys.executable, "-m", "benchmarks.seeded_agreement", "--worker"],
                              env={**os.environ, "KERAS_BACKEND": name, "TF_CPP_MIN_LOG_LEVEL": "3"},
                              capture_output=True, text=True, check=True)
        results[name] = {k: np.array(v) for k, v in json.loads(done.stdout.splitlines()[-1]).items()}
        print(f"{name:10s} mean loss {results[name]['losses'].mean():.6f}")
    for i, a in enumerate(BACKENDS):
        for b in BACKENDS[i + 1:]:
            print(f"{a} ~ {b}: losses within {np.abs(results[a]['losses'] - results[b]['losses']).max():.2g}, "
                  f"gradients within {np.abs(results[a]['grad'] - results[b]['grad']).max():.2g}")


if __name__ == "__main__":
    main()
