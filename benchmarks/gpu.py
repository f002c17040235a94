"""The prepared GPU script: ``tfrx-train`` and the losses on JAX and PyTorch, no TensorFlow.

    python -m benchmarks.gpu --out gpu_results            # the GPU run (about 6 minutes)
    python -m benchmarks.gpu --tiny --out /tmp/gpu_tiny   # the same code, tiny, on a CPU

It runs unchanged on a machine with JAX and PyTorch and no TensorFlow (the lent GPU
machine: Python 3.12, JAX 0.11 with CUDA, PyTorch 2.11; carry Keras, its missing
needs and Rax as wheels, and this repository). Each part runs in a process of its
own (Keras picks its backend once), and each writes its JSON to ``--out`` as it
ends, so that a cut-off run still returns what it measured.

**Training** (:func:`train_part`), per backend and loss: MSLR-WEB30K-shaped
synthetic data generated here (``--queries`` queries of 20..200 documents, 136
features; 60/20/20 train/validation/test), trained through the real job,
:func:`pipelines.train.run`: ``R4.L`` with ``twin_ndcg_type3`` and, for the ratio,
``approx_ndcg``, batches of ``--batch`` lists, ``--epochs`` epochs of ``--steps``
steps (the first compiles each padded list size). Reported from the last epoch:
its seconds, steps/s and lists/s, the fraction of training time spent waiting for
input (:attr:`pipelines.keras_runtime.TrainingStream.wait_seconds`), peak device
memory (JAX's ``peak_bytes_in_use``, ``torch.cuda.max_memory_allocated``), the
loss's share of a step (forward and backward of the loss alone on a batch of the
training shape, compiled as the step is, against the step's time), and test nDCG@5;
on PyTorch, the synchronizing CUDA calls of that pass (:func:`cuda_synchronizations`).

**Loss throughput** (:mod:`benchmarks.backend_throughput`): at GPU-sized batches
(256 lists at L = 128, 512 and 1024, and 1024 lists at L = 128), ours against Rax's
ApproxNDCG on JAX and the port of TF-Ranking's ApproxNDCG on PyTorch (eager and
``torch.compile``, with the graph breaks), with the fraction of the fused pair-pass
limit. Skipped, saying so, where the peer is not installed.

**Training steps** (:mod:`benchmarks.backend_train_step`): ``fit`` steps per second of
the job's model with ours against the peer loss (MSLR-shaped synthetic data, batches of
128 queries).

**Memory** (:mod:`benchmarks.backend_memory`): peak device memory of one forward and
backward pass at 256 lists of 1024, ours against the peer.

The parts run in this order (``--parts``): throughput, steps, memory, train; a part
that would start after ``--budget`` seconds is skipped, saying so.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOSSES = ("twin_ndcg_type3", "approx_ndcg")
FULL = {"queries": 20000, "list_range": (20, 200), "batch": 128, "steps": 60, "epochs": 2,
        "sizes": [128, 512, 1024], "lists": 256, "big_lists": 1024, "torch_modes": ["eager",
                                                                                   "compile"],
        "step_args": ["--queries", "4000", "--batch", "128", "--steps", "20", "--rounds", "2"],
        "memory_args": ["--size", "1024", "--lists", "256"]}
TINY = {"queries": 120, "list_range": (5, 12), "batch": 8, "steps": 3, "epochs": 2,
        "sizes": [32], "lists": 4, "big_lists": 8, "torch_modes": ["eager"],
        "step_args": ["--queries", "60", "--batch", "8", "--steps", "2", "--rounds", "1"],
        "memory_args": ["--size", "32", "--lists", "4"]}


def synthetic_splits(queries: int, list_range=(20, 200), seed: int = 0):
    """MSLR-WEB30K-shaped synthetic data (136 features), split 60/20/20 by query."""
    from pipelines import common  # pylint: disable=import-outside-toplevel
    import tfr_extensions as tfrx  # pylint: disable=import-outside-toplevel
    data = tfrx.data.synthetic(num_queries=queries, num_features=136, seed=seed,
                               list_size=tuple(list_range))
    return common.Splits(*common.split_queries(data, (0.6, 0.2, 0.2), seed))


def peak_memory(backend: str) -> Dict[str, object]:
    """The device and its peak memory in bytes so far (None where not reported)."""
    if backend == "jax":
        import jax  # pylint: disable=import-outside-toplevel
        device = jax.devices()[0]
        stats = device.memory_stats() or {}
        return {"device": f"{device.platform}:{device.device_kind}",
                "peak_bytes": stats.get("peak_bytes_in_use")}
    import torch  # pylint: disable=import-outside-toplevel
    if torch.cuda.is_available():
        return {"device": f"cuda:{torch.cuda.get_device_name()}",
                "peak_bytes": int(torch.cuda.max_memory_allocated())}
    return {"device": "cpu", "peak_bytes": None}


def loss_seconds(backend: str, loss, labels, scores, repeats: int = 10) -> float:
    """Seconds of one forward and backward pass of ``loss`` alone on ``(labels, scores)``
    (NumPy), compiled as the training step is on that backend (``jax.jit``; eager on
    PyTorch), after a warm-up."""
    from keras import ops  # pylint: disable=import-outside-toplevel
    if backend == "jax":
        import jax  # pylint: disable=import-outside-toplevel
        grad = jax.jit(jax.value_and_grad(lambda s, y: loss(y, s)))
        y, s = ops.convert_to_tensor(labels), ops.convert_to_tensor(scores)

        def once():
            value, g = grad(s, y)
            g.block_until_ready()
    else:
        import torch  # pylint: disable=import-outside-toplevel
        y = ops.convert_to_tensor(labels)
        s = ops.convert_to_tensor(scores).requires_grad_(True)

        def once():
            value = loss(y, s)
            value.backward()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
    once()
    start = time.perf_counter()
    for _ in range(repeats):
        once()
    return (time.perf_counter() - start) / repeats


def cuda_synchronizations(loss, labels, scores) -> object:
    """The synchronizing CUDA calls of one forward and backward pass of ``loss`` on
    ``(labels, scores)`` (NumPy), as PyTorch's sync debug mode reports them (a copy
    from host memory, a value read back; ``tests/neutral/test_torch_host_round_trips.py``
    checks their CPU counterparts), or None off a CUDA device."""
    import warnings  # pylint: disable=import-outside-toplevel
    import torch  # pylint: disable=import-outside-toplevel
    from keras import ops  # pylint: disable=import-outside-toplevel
    if not torch.cuda.is_available():
        return None
    y = ops.convert_to_tensor(labels)
    s = ops.convert_to_tensor(scores).requires_grad_(True)
    loss(y, s).backward()  # (first call: imports, compiles)
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            loss(y, s).backward()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchronizing CUDA operation" in str(w.message) for w in caught)


def train_part(backend: str, loss_name: str, size: Dict, out: str) -> Dict:
    """One training run of the job on this process's backend (see the module docstring)."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    from pipelines import train  # pylint: disable=import-outside-toplevel
    import tfr_extensions as tfrx  # pylint: disable=import-outside-toplevel
    start = time.perf_counter()
    splits = synthetic_splits(size["queries"], size["list_range"])
    data_seconds = time.perf_counter() - start
    output_dir = tempfile.mkdtemp(prefix=f"gpu_{backend}_{loss_name}_")
    config = train.TrainConfig(
        name=f"gpu_{backend}_{loss_name}", loss=loss_name, scorer="R4.L",
        epochs=size["epochs"], batch_size=size["batch"], steps_per_epoch=size["steps"],
        seed=0, output_dir=output_dir, tensorboard=False, verbose=0)
    result = train.run(config, splits=splits, overwrite=True)
    last = result.timing["epochs"][-1]
    row = {"backend": backend, "loss": loss_name, "queries": size["queries"],
           "batch": size["batch"], "steps_per_epoch": size["steps"],
           "data_seconds": data_seconds, "epoch_seconds": result.epoch_seconds,
           "last_epoch_steps_per_s": last["steps_per_second"],
           "last_epoch_lists_per_s": last["steps_per_second"] * size["batch"],
           "last_epoch_input_wait_fraction": last["input_wait_fraction"],
           "input_wait_fraction": result.timing["input_wait_fraction"],
           "test_ndcg_5": result.test.summary["ndcg@5"],
           **peak_memory(backend)}
    # the loss alone on a batch of the training shape, against the step
    batches = train.training_batches(config, splits.train)
    _, labels = batches.batch(0, 0)
    scores = np.random.default_rng(0).normal(size=labels.shape).astype(np.float32)
    loss = tfrx.losses.get(loss_name)
    seconds = loss_seconds(backend, lambda y, s: loss(y, s), labels, scores)
    row.update(loss_seconds=seconds, list_size=int(labels.shape[1]),
               loss_share_of_step=seconds * last["steps_per_second"])
    if backend == "torch":
        row["loss_cuda_synchronizations"] = cuda_synchronizations(
            lambda y, s: loss(y, s), labels, scores)
    with open(os.path.join(out, f"train_{backend}_{loss_name}.json"), "w") as f:
        json.dump(row, f, indent=1)
    return row


def installed(module: str) -> bool:
    import importlib.util  # pylint: disable=import-outside-toplevel
    return importlib.util.find_spec(module) is not None


def throughput_shapes(spec, backend: str, size: Dict) -> List[tuple]:
    """``(list size, lists)`` pairs to time on ``backend``: from ``--shapes`` entries
    ``LISTSxL`` (every backend) or ``BACKEND:LISTSxL``, else the size table's default.

    >>> throughput_shapes(["256x128", "torch:64x512"], "jax", TINY)
    [(128, 256)]
    >>> throughput_shapes(["256by128"], "jax", TINY)
    Traceback (most recent call last):
    ValueError: --shapes: '256by128' is not LISTSxL or BACKEND:LISTSxL (e.g. 256x128, torch:64x512)
    """
    if not spec:
        return [(n, size["lists"]) for n in size["sizes"]] + [(size["sizes"][0],
                                                              size["big_lists"])]
    shapes = []
    for entry in spec:
        owner, _, shape = entry.rpartition(":")
        if owner and owner != backend:
            continue
        try:
            lists, list_size = (int(n) for n in shape.split("x"))
        except ValueError:
            raise ValueError(f"--shapes: {entry!r} is not LISTSxL or BACKEND:LISTSxL "
                             "(e.g. 256x128, torch:64x512)") from None
        shapes.append((list_size, lists))
    return shapes


def run_child(args: List[str], backend: str, timeout: float) -> subprocess.CompletedProcess:
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    env.pop("TF_USE_LEGACY_KERAS", None)
    return subprocess.run([sys.executable, "-m", "benchmarks.gpu", *args], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def run_module(args: List[str], backend: str, timeout: float) -> subprocess.CompletedProcess:
    """``python -m <args>`` on ``backend``, in the repository."""
    env = dict(os.environ, KERAS_BACKEND=backend,
               PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", *args], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def main(argv=None) -> Dict[str, list]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="gpu_results")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes (a CPU check)")
    parser.add_argument("--backends", nargs="+", default=["jax", "torch"],
                        choices=["jax", "torch"])
    parser.add_argument("--parts", nargs="+", default=["throughput", "steps", "memory", "train"],
                        choices=["throughput", "steps", "memory", "train"])
    parser.add_argument("--losses", nargs="+", default=list(LOSSES), choices=LOSSES)
    parser.add_argument("--budget", type=float, default=420.0,
                        help="seconds; parts that would start after it are skipped")
    parser.add_argument("--shapes", nargs="+",
                        help="throughput shapes as LISTSxL or BACKEND:LISTSxL (default: "
                             "256 lists at each size and 1024 lists at the first)")
    parser.add_argument("--part-timeout", type=float, default=600.0,
                        help="seconds one part's process may run (a hung process costs no more)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--loss", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    size = TINY if args.tiny else FULL
    os.makedirs(args.out, exist_ok=True)
    if args.child == "train":
        row = train_part(os.environ["KERAS_BACKEND"], args.loss, size, args.out)
        print("ROW" + json.dumps(row), flush=True)
        return {}
    start = time.perf_counter()
    rows: Dict[str, list] = {"train": [], "throughput": [], "steps": [], "memory": [],
                             "skipped": []}
    backends = [b for b in args.backends if installed(b)]
    rows["skipped"] += [f"{b}: not installed" for b in args.backends if b not in backends]

    def budget_left(part: str) -> float:
        left = args.budget - (time.perf_counter() - start)
        if left <= 0:
            rows["skipped"].append(f"{part}: over the --budget")
        return left

    def module_rows(part: str, backend: str, module_args: List[str]):
        """What ``python -m <module_args> --json <file>`` wrote, or None (said in skipped)."""
        left = budget_left(f"{part} {backend}")
        if left <= 0:
            return None
        path = os.path.join(args.out, f"{part.replace(' ', '_')}_{backend}.json")
        try:
            timeout = min(left + 60, args.part_timeout)
            proc = run_module([*module_args, "--json", path], backend, timeout=timeout)
        except subprocess.TimeoutExpired:
            rows["skipped"].append(f"{part} {backend}: cut off after {timeout:.0f} s")
            return None
        print(f"{part} {backend}: rc {proc.returncode} at {time.perf_counter() - start:.0f} s",
              flush=True)
        if proc.returncode or not os.path.exists(path):
            rows["skipped"].append(f"{part} {backend}: failed: {proc.stderr[-2000:]}")
            return None
        with open(path) as f:
            return json.load(f)

    if "throughput" in args.parts:
        peers = {"jax": "rax", "torch": "torch"}
        for backend in backends:
            if not installed(peers[backend]):
                rows["skipped"].append(f"throughput {backend}: its peer {peers[backend]} is "
                                       "not installed")
                continue
            # one process per shape, so that a shape that fails costs only its own rows
            shapes = throughput_shapes(args.shapes, backend, size)
            for list_size, lists in shapes:
                rows["throughput"] += module_rows(
                    f"throughput {lists} lists of {list_size}", backend,
                    ["benchmarks.backend_throughput", "--backends", backend,
                     "--sizes", str(list_size), "--lists", str(lists),
                     "--losses", *args.losses, "--torch-modes", *size["torch_modes"],
                     "--steps-per-call", "5", "--windows", "2", "--seconds", "0.25"]) or []
    if "steps" in args.parts:
        for backend in backends:
            rows["steps"] += module_rows("steps", backend, [
                "benchmarks.backend_train_step", "--shapes", "mslr", *size["step_args"]]) or []
    if "memory" in args.parts:
        for backend in backends:
            peak = module_rows("memory", backend, [
                "benchmarks.backend_memory", "--backends", backend, *size["memory_args"]])
            if peak:
                rows["memory"].append({"backend": backend, "peak_bytes": peak[backend],
                                       **dict(zip(("size", "lists"),
                                                  map(int, size["memory_args"][1::2])))})
    if "train" in args.parts:
        for backend in backends:
            for loss_name in args.losses:
                left = budget_left(f"train {backend} {loss_name}")
                if left <= 0:
                    continue
                timeout = min(left + 60, args.part_timeout)
                try:
                    proc = run_child(["--child", "train", "--loss", loss_name, "--out",
                                      args.out] + (["--tiny"] if args.tiny else []), backend,
                                     timeout=timeout)
                except subprocess.TimeoutExpired:
                    rows["skipped"].append(f"train {backend} {loss_name}: cut off after "
                                           f"{timeout:.0f} s")
                    continue
                lines = [l for l in proc.stdout.splitlines() if l.startswith("ROW")]
                if proc.returncode or not lines:
                    rows["skipped"].append(f"train {backend} {loss_name}: failed: "
                                           + proc.stderr[-2000:])
                    continue
                rows["train"].append(json.loads(lines[-1][3:]))
                print(f"train {backend} {loss_name}: done at "
                      f"{time.perf_counter() - start:.0f} s", flush=True)
    with open(os.path.join(args.out, "gpu.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print_summary(rows)
    print(f"finished in {time.perf_counter() - start:.0f} s")
    return rows


def print_summary(rows: Dict[str, list]) -> None:
    """The tables of the closing note."""
    train_rows = rows["train"]
    if train_rows:
        print(f"training ({train_rows[0].get('device')}):")
        print(f"{'backend':<7}{'loss':<17}{'epoch s':>9}{'steps/s':>9}{'lists/s':>9}"
              f"{'wait':>7}{'peak MiB':>10}{'loss/step':>10}{'test nDCG@5':>12}")
        for r in train_rows:
            peak = r["peak_bytes"] / 2**20 if r["peak_bytes"] else float("nan")
            print(f"{r['backend']:<7}{r['loss']:<17}{r['epoch_seconds'][-1]:>9.1f}"
                  f"{r['last_epoch_steps_per_s']:>9.2f}{r['last_epoch_lists_per_s']:>9.0f}"
                  f"{r['last_epoch_input_wait_fraction']:>7.1%}{peak:>10.0f}"
                  f"{r['loss_share_of_step']:>10.2f}{r['test_ndcg_5']:>12.4f}")
        for backend in dict.fromkeys(r["backend"] for r in train_rows):
            by_loss = {r["loss"]: r for r in train_rows if r["backend"] == backend}
            if set(LOSSES) <= set(by_loss):
                ratio = (by_loss["twin_ndcg_type3"]["last_epoch_steps_per_s"]
                         / by_loss["approx_ndcg"]["last_epoch_steps_per_s"])
                print(f"{backend}: steps with twin_ndcg_type3 / steps with approx_ndcg = "
                      f"{ratio:.2f}")
        for r in train_rows:
            if r.get("loss_cuda_synchronizations") is not None:
                print(f"{r['backend']} {r['loss']}: {r['loss_cuda_synchronizations']} "
                      f"synchronizing CUDA calls in the loss's forward and backward")
    for r in rows["throughput"]:
        breaks = "" if r.get("graph_breaks") is None else f", {r['graph_breaks']} graph breaks"
        print(f"throughput {r['backend']} {r['mode']} L={r['size']} lists={r['lists']} "
              f"{r['loss']}: {r['lists_per_s']:.3g} lists/s, {r['limit_fraction']:.2f} of limit"
              f"{breaks}")
    for r in rows["steps"]:
        rates = r["steps_per_s"]
        print(f"steps {r['backend']} ({r['device']}) {r['shape']} {r['mode']}: "
              + ", ".join(f"{name} {rate:.2f}/s" for name, rate in rates.items())
              + f"; twin / peer {rates['twin_ndcg_type3'] / rates['peer']:.2f}")
    for r in rows["memory"]:
        peak = r["peak_bytes"]
        peer = peak.get("rax_approx_ndcg") or peak.get("torch_approx_ndcg")
        print(f"memory {r['backend']} {r['lists']} lists of {r['size']}: "
              + ", ".join(f"{name} {value / 2**20:.1f} MiB "
                          f"({value / peer if peer else float('nan'):.2f})"
                          for name, value in peak.items()))
    for line in rows["skipped"]:
        print(f"skipped: {line.splitlines()[0] if line else line}")


if __name__ == "__main__":
    main()
