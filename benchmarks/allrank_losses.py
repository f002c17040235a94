"""NeuralNDCG and LambdaLoss on PyTorch against their authors' own code, allRank 1.4.3.

The peers are allRank's functions as ``tests/support`` vendors them verbatim
(``reference_allrank_neural_ndcg.neuralNDCG`` and ``neuralNDCG_transposed``,
``reference_allrank_lambda.lambdaLoss``), called as allRank's training loop calls them
(``loss(y_pred, y_true)``, padding labelled -1 at the end of each list). Ours is the
Keras class a user compiles (``tfrx.losses.get(name)``), called as Keras calls it
(``loss(labels, scores)``: the bad-input screening, the PyTorch body the spec picks and
Keras's reduction). Both see the same batches: those of
:mod:`benchmarks.backend_throughput` (MSLR-like graded labels, 0-10% padding, 64 lists
of 32 and of 128 documents).

Throughput is lists per second of ``loss + d loss / d scores``, eager (as allRank trains;
its Sinkhorn loop stops on a test read back to the host, a graph break under
``torch.compile``),
the best of ``--windows`` timing windows in which ours and allRank alternate, each of
about ``--seconds``; the ratio is ours / allRank (> 1: ours is faster). The best window
keeps load that comes and goes on a shared machine from favouring either; on a machine
busy with other work, ``--threads 1 --clock cpu`` times each window by this process's CPU
time, which the other processes do not lengthen.

Needs PyTorch and Keras 3 on its PyTorch backend, no TensorFlow::

    KERAS_BACKEND=torch python -m benchmarks.allrank_losses
    KERAS_BACKEND=torch python -m benchmarks.allrank_losses --cases neural_ndcg --sizes 128
    KERAS_BACKEND=torch python -m benchmarks.allrank_losses --threads 1 --clock cpu
"""
import argparse
import json
import os
import sys
import time
from typing import Callable, Dict, List, Tuple

from benchmarks.backend_throughput import best_rates, make_batch

_TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
if _TESTS not in sys.path:  # the vendored allRank code lives with the tests
    sys.path.insert(0, _TESTS)

SIZES = (32, 128)
LISTS = 64

#: case -> (our registry name and options, allRank's function and keyword arguments)
CASES: Dict[str, Tuple[str, dict, str, dict]] = {
    "neural_ndcg": ("neural_ndcg", {}, "neuralNDCG", {}),
    "neural_ndcg_transposed": ("neural_ndcg_transposed", {}, "neuralNDCG_transposed", {}),
    "lambda_loss": ("lambda_loss", {}, "lambdaLoss", {"weighing_scheme": "ndcgLoss2PP_scheme"}),
    "lambda_ranknet": ("lambda_ranknet", {}, "lambdaLoss", {}),
}
DEFAULT_CASES = ("neural_ndcg", "lambda_loss")


def allrank_loss(function: str, kwargs: dict) -> Callable:
    """``(labels, scores) -> scalar``: allRank's loss ``function`` (``y_pred, y_true``)."""
    from support import reference_allrank_lambda, reference_allrank_neural_ndcg  # pylint: disable=import-outside-toplevel
    module = (reference_allrank_lambda if function == "lambdaLoss"
              else reference_allrank_neural_ndcg)
    fn = getattr(module, function)
    return lambda labels, scores: fn(scores, labels, **kwargs)


def our_loss(name: str, kwargs: dict) -> Callable:
    """``(labels, scores) -> scalar``: our Keras loss ``name``, called as Keras calls it."""
    import tfr_extensions as tfrx  # pylint: disable=import-outside-toplevel
    return tfrx.losses.get(name, **kwargs)


def step(loss: Callable) -> Callable:
    """One forward and backward pass of ``loss`` on a fresh leaf of ``scores``."""
    def run(labels, scores):
        leaf = scores.detach().requires_grad_(True)
        value = loss(labels, leaf)
        value.backward()
        return leaf.grad
    return run


#: the clocks a window is timed by: wall time, or this process's CPU time (with one
#: thread, what the other processes of a loaded machine cannot lengthen)
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def main(argv=None) -> List[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--cases", nargs="+", default=list(DEFAULT_CASES), choices=list(CASES))
    parser.add_argument("--sizes", nargs="+", type=int, default=list(SIZES))
    parser.add_argument("--lists", type=int, default=LISTS)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.5)
    parser.add_argument("--threads", type=int,
                        help="torch.set_num_threads (default: PyTorch's); 1 keeps a loaded "
                             "machine's other processes from stalling PyTorch's thread pool")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="time windows by wall time or by this process's CPU time "
                             "(with --threads 1: a loaded machine's other processes then "
                             "lengthen neither side)")
    parser.add_argument("--json", help="write every row here")
    args = parser.parse_args(argv)
    os.environ.setdefault("KERAS_BACKEND", "torch")  # (before Keras is first imported)
    import torch  # pylint: disable=import-outside-toplevel
    if args.threads:
        torch.set_num_threads(args.threads)
    import keras  # pylint: disable=import-outside-toplevel
    if keras.backend.backend() != "torch":
        raise SystemExit(f"Run with KERAS_BACKEND=torch (Keras runs {keras.backend.backend()}).")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, eager, "
          f"forward+backward, best of {args.windows} windows of {args.seconds} s "
          f"({args.clock} time)", flush=True)
    print(f"{'case':24s} {'L':>4s} {'ours lists/s':>13s} {'allRank lists/s':>16s} "
          f"{'ours/allRank':>12s}", flush=True)
    rows = []
    for size in args.sizes:
        labels_np, scores_np = make_batch(size, lists=args.lists)
        labels, scores = torch.from_numpy(labels_np), torch.from_numpy(scores_np)
        for case in args.cases:
            name, kwargs, function, peer_kwargs = CASES[case]
            runs = {"ours": step(our_loss(name, kwargs)),
                    "allrank": step(allrank_loss(function, peer_kwargs))}
            rates = best_rates(runs, {name: (labels, scores) for name in runs},
                               labels.shape[0], args.windows, args.seconds, CLOCKS[args.clock])
            ratio = rates["ours"] / rates["allrank"]
            rows.append({"case": case, "size": size, "lists": args.lists, "clock": args.clock,
                         "threads": torch.get_num_threads(),
                         "ours_lists_per_s": rates["ours"],
                         "allrank_lists_per_s": rates["allrank"], "ratio": ratio})
            print(f"{case:24s} {size:4d} {rates['ours']:13.0f} {rates['allrank']:16.0f} "
                  f"{ratio:12.2f}", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
