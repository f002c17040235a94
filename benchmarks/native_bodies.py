"""End to end: does a loss's PyTorch-native body (``tfr_extensions/torch_ops``) speed up a
training step? Keras 3 on PyTorch, one process, the two alternated.

For each loss: ``R4.L`` (width 128) on ``--lists`` lists of L documents with 136 features,
Adam, ``train_on_batch``. One-second rounds alternate between the loss's PyTorch path
(:attr:`LossSpec.torch`: a native body, or its math under the PyTorch screening) and its
``keras.ops`` body under the generic screening; each gets the best of its ``--rounds``
rounds. A native path that does not lift this ratio above noise has not earned its place.

    KERAS_BACKEND=torch python -m benchmarks.native_bodies [--losses twin_ndcg_type3 ranknet]
        [--sizes 32 200] [--lists 16] [--rounds 5]
"""
import argparse
import time
from typing import Callable, Dict, List

FEATURES = 136
LOSSES = ("twin_ndcg_type3", "approx_ndcg", "ranknet", "lambda_loss", "neural_ndcg")


def steps_per_second(step: Callable[[], object]) -> float:
    """Steps/s of one round of ``step``: at least one second and three steps."""
    steps, start = 0, time.perf_counter()
    while steps < 3 or time.perf_counter() - start < 1.0:
        step()
        steps += 1
    return steps / (time.perf_counter() - start)


def training_step(loss_name: str, size: int, lists: int) -> Callable[[], object]:
    """One ``train_on_batch`` of a fresh ``R4.L`` with the loss as its spec says now."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    import keras  # pylint: disable=import-outside-toplevel
    import tfr_extensions as tfrx  # pylint: disable=import-outside-toplevel
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    features = rng.normal(size=(lists, size, FEATURES)).astype(np.float32)
    labels = rng.integers(0, 3, size=(lists, size)).astype(np.float32)
    model = tfrx.models.scorer("R4.L", FEATURES, hidden_units=128)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=tfrx.losses.get(loss_name))
    return lambda: model.train_on_batch(features, labels)


def compare(loss_name: str, size: int, lists: int, rounds: int) -> Dict:
    """Steps/s with the loss's PyTorch path and with its ``keras.ops`` body."""
    import tfr_extensions as tfrx  # pylint: disable=import-outside-toplevel
    spec = type(tfrx.losses.get(loss_name)).spec
    native = spec.torch
    step = training_step(loss_name, size, lists)  # (the spec's body is read at every call)
    rates = {"native": 0.0, "keras_ops": 0.0}
    try:
        for round_ in range(rounds + 1):  # the first round of each: a warm-up
            for label, torch_path in (("native", native), ("keras_ops", None)):
                object.__setattr__(spec, "torch", torch_path)  # (a frozen dataclass)
                rate = steps_per_second(step)
                if round_:
                    rates[label] = max(rates[label], rate)
    finally:
        object.__setattr__(spec, "torch", native)
    return {"loss": loss_name, "size": size, "torch": native, **rates,
            "ratio": rates["native"] / rates["keras_ops"]}


def main(argv=None) -> List[Dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--losses", nargs="+", default=list(LOSSES))
    parser.add_argument("--sizes", nargs="+", type=int, default=[32, 200])
    parser.add_argument("--lists", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    import keras  # pylint: disable=import-outside-toplevel
    if keras.backend.backend() != "torch":
        raise SystemExit("Run with KERAS_BACKEND=torch: the native bodies are PyTorch's.")
    rows = []
    for loss_name in args.losses:
        for size in args.sizes:
            row = compare(loss_name, size, args.lists, args.rounds)
            rows.append(row)
            print(f"{loss_name:>16} L={size:<4} PyTorch path {row['torch'] or 'none'}: "
                  f"{row['native']:.1f} steps/s, keras.ops body {row['keras_ops']:.1f} steps/s, "
                  f"ratio {row['ratio']:.2f}", flush=True)
    return rows


if __name__ == "__main__":
    main()
