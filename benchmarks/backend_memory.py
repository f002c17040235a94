"""Peak memory of one forward and backward pass of a loss, ours against the
framework's peer, on JAX and PyTorch (no TensorFlow needed).

The batch is :func:`benchmarks.backend_throughput.make_batch`'s (``--lists`` lists of
``--size`` documents, 10% padding); the pass is ``value_and_grad`` of the mean loss
with respect to the scores, as :mod:`benchmarks.backend_throughput` times it. The
losses are ours (the bodies the specs pick on the backend) and the peer: Rax's
ApproxNDCG on JAX, the port of TF-Ranking's ApproxNDCG on PyTorch.

* **JAX**: the working memory XLA allocates for the compiled pass
  (``compiled.memory_analysis().temp_size_in_bytes``; on CPU and GPU alike).
* **PyTorch on a GPU**: ``torch.cuda.max_memory_allocated`` during the pass, less what
  was allocated before it.
* **PyTorch on a CPU**: the growth of the process's peak resident memory
  (``ru_maxrss``) over the pass, each loss in a process of its own after a warm-up on
  a small batch; PyTorch's CPU allocator keeps no statistics, and its tensors are not
  Python objects that ``tracemalloc`` sees.

    python -m benchmarks.backend_memory [--backends jax torch] [--size 1024] [--lists 16]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
from typing import Dict

LOSSES = ("twin_ndcg_type3", "approx_ndcg", "listnet")
PEERS = {"jax": "rax_approx_ndcg", "torch": "torch_approx_ndcg"}


def jax_bytes(name: str, size: int, lists: int) -> int:
    import jax  # pylint: disable=import-outside-toplevel
    from benchmarks import backend_throughput as bt  # pylint: disable=import-outside-toplevel
    loss = bt.jax_competitors([name] if name in bt.OURS else [])[name]
    labels, scores = (jax.numpy.asarray(a) for a in bt.make_batch(size, lists=lists))
    compiled = jax.jit(jax.value_and_grad(loss, argnums=1)).lower(labels, scores).compile()
    return int(compiled.memory_analysis().temp_size_in_bytes)


def torch_bytes(name: str, size: int, lists: int) -> int:
    import torch  # pylint: disable=import-outside-toplevel
    from benchmarks import backend_throughput as bt  # pylint: disable=import-outside-toplevel
    loss = bt.torch_competitors([name] if name in bt.OURS else [])[name]
    device = "cuda" if torch.cuda.is_available() else "cpu"

    def one_pass(length, batch):
        labels, scores = (torch.as_tensor(a, device=device)
                          for a in bt.make_batch(length, lists=batch))
        scores.requires_grad_(True)
        loss(labels, scores).backward()
        return scores.grad

    one_pass(16, 2)  # warm-up: lazy imports and kernels, not the pass's memory
    if device == "cuda":
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        one_pass(size, lists)
        torch.cuda.synchronize()
        return int(torch.cuda.max_memory_allocated() - before)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    one_pass(size, lists)
    return int((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)


def measure(backend: str, size: int, lists: int) -> Dict[str, int]:
    """Peak bytes of each loss on ``backend``, each in a process of its own."""
    out = {}
    for name in (*LOSSES, PEERS[backend]):
        command = [sys.executable, "-m", "benchmarks.backend_memory", "--worker", backend,
                   "--loss", name, "--size", str(size), "--lists", str(lists)]
        proc = subprocess.run(command, env={**os.environ, "KERAS_BACKEND": backend},
                              capture_output=True, text=True, check=False)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("BYTES")]
        if proc.returncode or not lines:
            raise SystemExit(f"{backend} {name} failed:\n{proc.stderr[-3000:]}")
        out[name] = int(lines[-1][5:])
    return out


def main(argv=None) -> Dict[str, Dict[str, int]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", nargs="+", default=["jax", "torch"])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--lists", type=int, default=16)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--loss", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        measure_one = jax_bytes if args.worker == "jax" else torch_bytes
        print(f"BYTES{measure_one(args.loss, args.size, args.lists)}", flush=True)
        return {}
    results = {}
    for backend in args.backends:
        r = results[backend] = measure(backend, args.size, args.lists)
        peer = r[PEERS[backend]]
        print(f"{backend}: {args.lists} lists of {args.size}, peak MiB (/ peer)")
        for name, value in r.items():
            ratio = value / peer if peer else float("nan")
            print(f"  {name:20s} {value / 2**20:9.1f}  {ratio:6.2f}", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(results, file, indent=1)
    return results


if __name__ == "__main__":
    main()
