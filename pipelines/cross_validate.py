"""Cross-validated comparison of ranking methods on a LETOR dataset with folds
(by default the embedded synthetic data, whose five folds rotate like LETOR's).

    python -m pipelines.cross_validate --data ../shared/data/MQ2008 --folds 1,2,3,4,5 \\
        --methods ranknet,lambdarank,twin_ndcg_type3,lambdamart --epochs 30 \\
        --grid 'twin_ndcg_*:learning_rate=0.001,0.01' --report-dir docs/results

The paper's protocol: for each method (a preset of
:data:`pipelines.cv_presets.METHODS`: a ``tfrx.losses.get`` loss with its
arguments and a scorer, an IRGAN mode, or LightGBM trees), each point of its
hyperparameter grid and each fold, it trains on the fold's train split, keeps
the epoch (trees: iteration) with the best validation nDCG@5, and evaluates
validation and test per query with :mod:`tfr_extensions.evaluation` (lists
without relevant documents excluded unless ``--no-relevant`` says otherwise).
Per fold the grid point with the best validation nDCG@5 is selected; its
per-query test results, pooled over folds, give the report (Markdown and CSV
tables with significance tests, learning curves): :mod:`pipelines.cv_report`.

Runs live in ``<output-dir>/<method>/<config>/fold<k>/`` and end with a
``done.json`` marker that records the run's identity (the method preset, the
grid point and the run's whole resolved config). A second invocation skips the
runs whose marker matches, resumes an interrupted neural run from its backup,
and retrains the runs whose settings changed; the report (also rebuilt alone
with ``--report-only``) uses only runs whose identity matches the command's:
:mod:`pipelines.cv_runner`.
"""
import argparse
import shlex
import sys
import time
from typing import Any, Dict, Tuple

from . import cv_report
from . import cv_runner
from . import flags


def build_parser() -> argparse.ArgumentParser:
    """The command line: a flag per :class:`pipelines.cv_runner.CVConfig` field, and
    ``--report-only``."""
    parser = argparse.ArgumentParser(prog="python -m pipelines.cross_validate",
                                     description=__doc__.split("\n\n")[0])
    flags.add_config_flags(parser, cv_runner.CVConfig)
    parser.add_argument("--report-only", action="store_true",
                        help="rebuild the report from finished runs, train nothing")
    return parser


def parse_args(argv=None) -> Tuple[cv_runner.CVConfig, argparse.Namespace]:
    """Flags -> (:class:`pipelines.cv_runner.CVConfig`, the parsed flags); only ``main``
    calls this."""
    args = build_parser().parse_args(argv)
    return flags.config_from_args(cv_runner.CVConfig, args), args


def main(argv=None) -> Dict[str, Any]:
    """Trains what is missing (unless ``--report-only``), then writes the report; returns
    the report's paths and table, and the counts of runs trained and skipped."""
    argv = sys.argv[1:] if argv is None else list(argv)
    config, args = parse_args(argv)
    start = time.perf_counter()
    counts = {"trained": 0, "skipped": 0}
    if not args.report_only:
        counts = cv_runner.run_all(config, log=lambda line: print(line, flush=True))
        print(f"{counts['trained']} runs trained, {counts['skipped']} skipped", flush=True)
    wall = time.perf_counter() - start
    report = cv_report.write_report(
        config, wall_seconds=None if args.report_only else wall,
        command=shlex.join(["python", "-m", "pipelines.cross_validate", *argv]))
    metric = cv_runner.SELECTION_METRIC
    columns = ["label", metric, f"wilcoxon_p_{metric}"]
    print(report["table"][columns].to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    print(f"report: {report['markdown']}, {report['csv']}, {len(report['plots'])} plots")
    return {**report, "counts": counts}


if __name__ == "__main__":
    main()
