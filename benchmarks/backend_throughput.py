"""Our ``keras.ops`` losses on JAX and PyTorch against each framework's own peer.

One process per backend (Keras picks its backend once, at import), each timing in
one process ours and the peers on the same random batch (the batches of
:mod:`benchmarks.loss_throughput`: MSLR-like graded labels, 10% padding; 64 lists
of 32 and 128 documents, 16 of 512 and 1024):

* **JAX**, under ``jax.jit``: ours (``tfrx.keras_ops``, the bodies the Keras
  classes run on JAX) against Rax 0.4's ApproxNDCG,
  ``rax.approx_t12n(rax.ndcg_metric)`` (as a loss: minus it), and Rax's
  ``softmax_loss``.
* **PyTorch**, eager and under ``torch.compile``: ours (the PyTorch-native bodies of
  :mod:`tfr_extensions.torch_ops` the specs pick there; ``--with-keras-ops`` adds
  the ``keras.ops`` bodies) against a direct port of TF-Ranking's ApproxNDCG
  (:func:`torch_approx_ndcg`, the computation of
  :class:`benchmarks.peers.PortedApproxNDCGLoss`, pairs by broadcasting); under
  ``torch.compile`` the graph breaks of each of ours (``torch._dynamo.explain``).
* **TensorFlow** (``--with-tensorflow``, where it imports): our TensorFlow
  implementation of the same loss (``tfrx.losses.get``), in graph mode and under
  XLA, timed in the JAX process, so that the keras.ops body is compared with
  the TensorFlow path on the same CPU in the same process.
* **limit**: the cheapest fused O(L^2) pass (one sigmoid and one multiply-add per
  pair, :math:`\\sum_j \\sigma(s_k - s_j) u_j`) compiled by the same compiler (on
  JAX in the column blocks of ``keras_ops.pairs.row_sums``, which XLA fuses);
  ``pairs/s`` of each loss is reported as a fraction of it.

Throughput is lists per second of ``loss + d loss / d scores`` (the mean of the
per-list losses), the best of ``--windows`` timing windows in which the
competitors alternate; a timed call runs ``--steps-per-call`` passes (a
``fori_loop`` under ``jax.jit``; a Python loop on PyTorch) on scores shifted by
a step-dependent amount. Ratios are ours / peer (> 1: ours is faster).

The script needs no TensorFlow (a GPU machine with JAX and PyTorch only runs it
unchanged: the backend's default device is used, a GPU where there is one)::

    python -m benchmarks.backend_throughput                      # jax and torch
    python -m benchmarks.backend_throughput --backends jax --sizes 128 512
    python -m benchmarks.backend_throughput --backends jax --with-tensorflow
    python -m benchmarks.backend_throughput --json results.json
"""
import argparse
import json
import os
import subprocess
import sys
import time
from typing import Callable, Dict, List

import numpy as np

BATCH_FOR_SIZE = {32: 64, 128: 64, 512: 16, 1024: 16}
SIZES = (32, 128, 512, 1024)
#: our losses timed: name -> (the public function of ``tfrx.losses``, options)
OURS = {
    "twin_ndcg_type3": ("twin_sigmoid_loss",
                        dict(metric="ndcg", topn=None, gradient="type3", alpha_b=1.0,
                             tie_break=True, seed=0)),
    "twin_ap_type3": ("twin_sigmoid_loss",
                      dict(metric="ap", topn=None, gradient="type3", alpha_b=1.0,
                           tie_break=True, seed=0)),
    "approx_ndcg": ("approx_ndcg_loss", dict(temperature=0.1)),
    "listnet": ("listnet_loss", {}),
    "ranknet": ("ranknet_loss", {}),
}


def make_batch(list_size: int, seed: int = 0, lists: int = None):
    """NumPy ``(labels, scores)`` float32: the batches of ``benchmarks.loss_throughput``
    (``lists`` lists where given)."""
    batch = lists or BATCH_FOR_SIZE.get(list_size, 16)
    rng = np.random.default_rng(seed)
    labels = rng.choice(5, size=(batch, list_size), p=[0.5, 0.3, 0.13, 0.05, 0.02])
    lengths = rng.integers(int(0.9 * list_size), list_size + 1, size=batch)
    labels = np.where(np.arange(list_size)[None] < lengths[:, None], labels, -1)
    return labels.astype(np.float32), rng.normal(size=(batch, list_size)).astype(np.float32)


def our_loss(name: str, which: str = None) -> Callable:
    """``(labels, scores) -> mean weighted loss`` of our loss ``name``, with the
    bad-input screening the Keras classes apply (no TensorFlow involved): the body the
    spec picks on this backend (the PyTorch-native one on PyTorch), or implementation
    ``which`` (``"keras_ops"``)."""
    from keras import ops  # pylint: disable=import-outside-toplevel
    import tfr_extensions as tfrx  # pylint: disable=import-outside-toplevel
    function, options = OURS[name]
    spec = getattr(tfrx.losses, function).spec
    checked = spec.check_options(**options)
    spec.compute(*(ops.zeros((1, 2)),) * 2, None, checked, which)  # imports, not when traced

    def loss(labels, scores):
        losses, weights, _ = spec.compute(labels, scores, None, checked, which)
        return ops.mean(losses * weights)
    return loss


# --- JAX ------------------------------------------------------------------------

def import_rax():
    """Rax 0.4 (its last release) as it runs on today's JAX.

    Rax's transformations (``approx_t12n`` and the like) decorate with
    ``jax.util.wraps``, which JAX 0.5 removed: only that naming helper is supplied
    here (it sets the wrapper's ``__name__`` and ``__doc__``); Rax's computation is
    its own.
    """
    import functools  # pylint: disable=import-outside-toplevel
    import types  # pylint: disable=import-outside-toplevel
    import jax  # pylint: disable=import-outside-toplevel
    try:
        jax.util.wraps  # pylint: disable=pointless-statement
    except AttributeError:
        def wraps(wrapped, namestr=None, docstr=None, **_):
            def decorate(fun):
                functools.update_wrapper(fun, wrapped)
                name = getattr(wrapped, "__name__", "fun")
                if namestr is not None:
                    fun.__name__ = namestr.format(fun=name)
                if docstr is not None:
                    fun.__doc__ = docstr.format(fun=name, doc=wrapped.__doc__ or "")
                return fun
            return decorate
        jax.util = types.SimpleNamespace(wraps=wraps)
    import rax  # pylint: disable=import-outside-toplevel
    return rax


def jax_competitors(names: List[str]) -> Dict[str, Callable]:
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    rax = import_rax()
    approx_ndcg = rax.approx_t12n(rax.ndcg_metric)

    def rax_approx_ndcg(labels, scores):
        where = labels >= 0
        return -approx_ndcg(scores, jnp.maximum(labels, 0.0), where=where)

    def rax_softmax(labels, scores):
        return rax.softmax_loss(scores, jnp.maximum(labels, 0.0), where=labels >= 0)

    out = {name: our_loss(name) for name in names}
    out.update({"rax_approx_ndcg": rax_approx_ndcg, "rax_softmax": rax_softmax,
                "limit": jax_limit})
    return out


def jax_limit(labels, scores):
    """The fused-pass limit: sum_j sigmoid(s_k - s_j) u_j, summed, with the pairs in
    column blocks (:func:`tfr_extensions.keras_ops.pairs.row_sums`): written with
    broadcasting, XLA:CPU (JAX 0.10) stores the pairs before reducing them, which
    measures memory, not the pass."""
    import jax  # pylint: disable=import-outside-toplevel
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    from tfr_extensions.keras_ops import pairs  # pylint: disable=import-outside-toplevel
    weights = jnp.where(labels >= 0, 1.0 / (1.0 + jnp.abs(scores)), 0.0)
    rows = scores[:, :, None]
    sums = pairs.row_sums(lambda s, w: jax.nn.sigmoid(rows - s) * w, [scores, weights],
                          [0.0, 0.0])
    return jnp.sum(sums)


def jax_step(loss: Callable, steps: int, forward_only: bool) -> Callable:
    import jax  # pylint: disable=import-outside-toplevel
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    value_and_grad = jax.value_and_grad(loss, argnums=1)

    def one_pass(labels, scores):
        if forward_only:
            return loss(labels, scores), jnp.zeros_like(scores)
        return value_and_grad(labels, scores)

    @jax.jit
    def step(labels, scores):
        def body(i, carry):
            value, grads = one_pass(labels, scores + i.astype(scores.dtype) * 1e-6)
            return carry[0] + value, carry[1] + grads
        return jax.lax.fori_loop(0, steps, body, (jnp.zeros((), scores.dtype),
                                                  jnp.zeros_like(scores)))

    def run(labels, scores):
        return jax.block_until_ready(step(labels, scores))
    return run


# --- PyTorch --------------------------------------------------------------------

def torch_approx_ndcg(labels, scores, temperature: float = 0.1, per_list: bool = False):
    """TF-Ranking's ApproxNDCG (``benchmarks.peers.PortedApproxNDCGLoss``) in PyTorch:
    approximate ranks from all pairs by broadcasting, gains ``(2^y - 2^-max) / 2^max``
    (TF-Ranking's safe gains), minus nDCG per list (``per_list``) or its mean over the
    batch."""
    import torch  # pylint: disable=import-outside-toplevel
    logits = scores / temperature
    mask = labels >= 0
    labels = torch.where(mask, labels, torch.zeros_like(labels))
    low = logits.min(dim=-1, keepdim=True).values - 1e3
    logits = torch.where(mask, logits, low)
    nonzero = labels.sum(dim=1) > 0
    labels = torch.where(nonzero[:, None], labels, torch.full_like(labels, 1e-10))

    def gains(y):
        top = y.max(dim=-1, keepdim=True).values
        return torch.pow(2.0, y - top) - torch.pow(2.0, -top)

    ranks = 0.5 + torch.sigmoid(logits[:, None, :] - logits[:, :, None]).sum(dim=-1)
    dcg = (gains(labels) / torch.log1p(ranks)).sum(dim=-1)
    ideal_gains = gains(torch.sort(labels, dim=-1, descending=True).values)
    positions = torch.arange(1, labels.shape[1] + 1, dtype=labels.dtype, device=labels.device)
    ideal = (ideal_gains / torch.log1p(positions)).sum(dim=-1)
    inverse = torch.where(ideal > 0, 1.0 / ideal, torch.zeros_like(ideal))
    losses = -dcg * inverse * nonzero.to(dcg.dtype)
    return losses if per_list else losses.mean()


def torch_limit(labels, scores):
    import torch  # pylint: disable=import-outside-toplevel
    weights = torch.where(labels >= 0, 1.0 / (1.0 + scores.abs()), torch.zeros_like(scores))
    return (torch.sigmoid(scores[:, :, None] - scores[:, None, :]) * weights[:, None, :]).sum()


def torch_competitors(names: List[str], with_keras_ops: bool = False) -> Dict[str, Callable]:
    """Ours (the PyTorch-native bodies where a loss has one; with ``with_keras_ops`` its
    ``keras.ops`` body as well, as ``<name>@keras_ops``), the port and the limit."""
    out = {name: our_loss(name) for name in names}
    if with_keras_ops:
        out.update({f"{name}@keras_ops": our_loss(name, "keras_ops") for name in names})
    out.update({"torch_approx_ndcg": torch_approx_ndcg, "limit": torch_limit})
    return out


def torch_graph_breaks(loss: Callable, labels, scores) -> int:
    """Graph breaks of ``torch.compile`` in ``loss`` (``torch._dynamo.explain``)."""
    import torch  # pylint: disable=import-outside-toplevel
    torch._dynamo.reset()  # pylint: disable=protected-access
    explained = torch._dynamo.explain(loss)(  # pylint: disable=protected-access
        labels, scores.detach().clone().requires_grad_(True))
    return int(explained.graph_break_count)


def torch_step(loss: Callable, steps: int, forward_only: bool, compiled: bool) -> Callable:
    import torch  # pylint: disable=import-outside-toplevel
    fn = torch.compile(loss, dynamic=False) if compiled else loss

    def run(labels, scores):
        total = torch.zeros((), device=scores.device)
        for i in range(steps):
            shifted = (scores + i * 1e-6).detach().requires_grad_(not forward_only)
            value = fn(labels, shifted)
            if not forward_only:
                value.backward()
            total = total + value.detach()
        if scores.is_cuda:
            torch.cuda.synchronize()
        return total
    return run


# --- TensorFlow (our TF implementation, in the same process) --------------------

def tensorflow_competitors(names: List[str]) -> Dict[str, Callable]:
    """Our TensorFlow losses (the pure functions behind ``tfrx.losses.get``, whatever
    Keras's backend), graph mode and XLA: mean of the weighted per-list losses."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import tfr_extensions as tfrx  # pylint: disable=import-outside-toplevel
    registry = {"twin_ndcg_type3": ("twin_ndcg_type3", {"seed": 0}),
                "twin_ap_type3": ("twin_ap_type3", {"seed": 0}),
                "approx_ndcg": ("approx_ndcg", {}), "listnet": ("listnet", {}),
                "ranknet": ("ranknet", {})}
    out = {}
    for name in names:
        key, kwargs = registry[name]
        instance = tfrx.losses.get(key, **kwargs)

        def loss_fn(labels, scores, function=instance.spec.function, options=instance.options):
            losses, weights = function(labels, scores, **options)
            return tf.reduce_mean(losses * weights)
        for xla in (False, True):
            out[f"tf_{name}_{'xla' if xla else 'graph'}"] = (loss_fn, xla)
    return out


def tensorflow_step(loss_and_xla, steps: int) -> Callable:
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    loss, xla = loss_and_xla

    @tf.function(jit_compile=xla)
    def step(labels, scores):
        def body(i, value, grads):
            shifted = scores + tf.cast(i, scores.dtype) * 1e-6
            with tf.GradientTape() as tape:
                tape.watch(shifted)
                loss_value = loss(labels, shifted)
            return i + 1, value + loss_value, grads + tape.gradient(loss_value, shifted)
        return tf.while_loop(lambda i, *_: i < steps, body,
                             (tf.constant(0), tf.zeros([]), tf.zeros_like(scores)))[1:]

    def run(labels, scores):
        value, grads = step(labels, scores)
        return value.numpy(), grads.numpy()
    return run


# --- timing ---------------------------------------------------------------------

def best_rates(runs: Dict[str, Callable], args_for: Dict[str, tuple], lists_per_call: int,
               windows: int, seconds: float,
               clock: Callable[[], float] = time.perf_counter) -> Dict[str, float]:
    """Lists per second of each run: competitors alternate, ``windows`` windows of
    about ``seconds`` each (by ``clock``), best window kept."""
    for name, run in runs.items():
        run(*args_for[name])  # compile / warm up
    best = {name: 0.0 for name in runs}
    for _ in range(windows):
        for name, run in runs.items():
            calls, start = 0, clock()
            while True:
                run(*args_for[name])
                calls += 1
                elapsed = clock() - start
                if elapsed >= seconds:
                    break
            best[name] = max(best[name], calls * lists_per_call / elapsed)
    return best


def run_backend(backend: str, sizes, names, modes, steps, windows, seconds,
                with_tensorflow: bool, lists: int = None,
                with_keras_ops: bool = False) -> List[dict]:
    import keras  # pylint: disable=import-outside-toplevel
    from keras import ops  # pylint: disable=import-outside-toplevel
    assert keras.backend.backend() == backend, (keras.backend.backend(), backend)
    device = _device(backend)
    rows, breaks = [], {}
    for size in sizes:
        labels_np, scores_np = make_batch(size, lists=lists)
        labels, scores = ops.convert_to_tensor(labels_np), ops.convert_to_tensor(scores_np)
        lists_per_call = labels_np.shape[0] * steps
        for mode in modes:
            if backend == "jax":
                competitors = jax_competitors(names)
                runs = {n: jax_step(f, steps, forward_only=n == "limit")
                        for n, f in competitors.items()}
            else:
                competitors = torch_competitors(names, with_keras_ops)
                if mode == "compile":
                    for name in names:
                        breaks[name] = torch_graph_breaks(competitors[name], labels, scores)
                        print(f"torch compile L={size}: {name}: {breaks[name]} graph breaks",
                              flush=True)
                runs = {n: torch_step(f, steps, forward_only=n == "limit",
                                      compiled=mode == "compile")
                        for n, f in competitors.items()}
            args_for = {n: (labels, scores) for n in runs}
            if with_tensorflow and mode == modes[0]:
                import tensorflow as tf  # pylint: disable=import-outside-toplevel
                tf_labels, tf_scores = tf.constant(labels_np), tf.constant(scores_np)
                for n, spec in tensorflow_competitors(names).items():
                    runs[n] = tensorflow_step(spec, steps)
                    args_for[n] = (tf_labels, tf_scores)
            rates = best_rates(runs, args_for, lists_per_call, windows, seconds)
            limit_pairs = rates.pop("limit") * size * size
            for name, rate in rates.items():
                rows.append({"backend": backend, "device": device, "mode": mode, "size": size,
                             "lists": labels_np.shape[0], "loss": name, "lists_per_s": rate,
                             "pairs_per_s": rate * size * size,
                             "limit_fraction": rate * size * size / limit_pairs,
                             "limit_pairs_per_s": limit_pairs,
                             "graph_breaks": breaks.get(name) if mode == "compile" else None})
            _print_size(backend, mode, size, rates, limit_pairs)
    return rows


def _device(backend: str) -> str:
    if backend == "jax":
        import jax  # pylint: disable=import-outside-toplevel
        return str(jax.devices()[0].device_kind)
    import torch  # pylint: disable=import-outside-toplevel
    return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"


PEER_OF = {"jax": ("rax_approx_ndcg", "rax_softmax"), "torch": ("torch_approx_ndcg",)}


def _print_size(backend, mode, size, rates, limit_pairs):
    peers = [p for p in PEER_OF[backend] if p in rates]
    print(f"{backend} {mode} L={size}: limit {limit_pairs:.3g} pairs/s", flush=True)
    for name, rate in sorted(rates.items()):
        ratios = " ".join(f"/{p} {rate / rates[p]:.2f}" for p in peers if p != name)
        print(f"  {name:28s} {rate:12.0f} lists/s  {rate * size * size / limit_pairs:6.2f} "
              f"of limit  {ratios}", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", nargs="+", default=["jax", "torch"])
    parser.add_argument("--sizes", nargs="+", type=int, default=list(SIZES))
    parser.add_argument("--losses", nargs="+", default=list(OURS))
    parser.add_argument("--torch-modes", nargs="+", default=["eager", "compile"])
    parser.add_argument("--lists", type=int,
                        help="lists per batch at every size (default: 64 up to L = 128, "
                             "then 16); a GPU needs more to be filled")
    parser.add_argument("--steps-per-call", type=int, default=10)
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=0.5)
    parser.add_argument("--with-keras-ops", action="store_true",
                        help="on PyTorch, also time each loss's keras.ops body (NAME@keras_ops)")
    parser.add_argument("--with-tensorflow", action="store_true",
                        help="also time our TensorFlow implementation (in the JAX process)")
    parser.add_argument("--json", help="write every row here")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:  # one backend, in this process
        os.environ["KERAS_BACKEND"] = args.worker
        modes = ["jit"] if args.worker == "jax" else args.torch_modes
        rows = run_backend(args.worker, args.sizes, args.losses, modes, args.steps_per_call,
                           args.windows, args.seconds,
                           args.with_tensorflow and args.worker == "jax", args.lists,
                           args.with_keras_ops)
        print("ROWS" + json.dumps(rows), flush=True)
        return
    rows = []
    for backend in args.backends:
        command = [sys.executable, "-m", "benchmarks.backend_throughput", "--worker", backend,
                   "--sizes", *map(str, args.sizes), "--losses", *args.losses,
                   "--torch-modes", *args.torch_modes,
                   "--steps-per-call", str(args.steps_per_call), "--windows", str(args.windows),
                   "--seconds", str(args.seconds)] + (
                       ["--with-tensorflow"] if args.with_tensorflow else []) + (
                       ["--with-keras-ops"] if args.with_keras_ops else []) + (
                       ["--lists", str(args.lists)] if args.lists else [])
        env = {**os.environ, "KERAS_BACKEND": backend}
        proc = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        for line in proc.stdout.splitlines():
            if line.startswith("ROWS"):
                rows += json.loads(line[4:])
            else:
                print(line, flush=True)
        if proc.returncode:
            print(proc.stderr[-4000:], file=sys.stderr)
            raise SystemExit(f"the {backend} run failed")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(rows, file, indent=1)


if __name__ == "__main__":
    main()
