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

Seeds: ``--seed S`` (default 0) trains one run per (method, grid point,
fold) with seed S; ``--seeds 0,1,2`` instead trains every neural method once
per seed (and a tree method whose seed changes its trees: a twin-sigmoid
objective, which breaks ties at random, or LightGBM's bagging, feature
sampling or extra trees; LambdaMART's deterministic ``lambdarank`` trains
once), each seed selecting its own grid points. The two flags exclude each
other. The report then averages each query's values over the seeds before
the means and the significance tests, and adds per method each seed's mean
and their mean, standard deviation and range. ``--reference METHOD`` tests
every method against METHOD (a method, an IRGAN player's row or an fnmatch
pattern such as ``'twin_*'``, whose best method of each column is the
reference) instead of against the best method of each column.

    python -m pipelines.cross_validate --data ../shared/data/MQ2008 --seeds 0,1,2 \\
        --methods lambdamart,twin_ndcg_type3,twin_ap_type2 --reference 'twin_*'

Runs live in ``<output-dir>/<method>/<config>/fold<k>/`` (with ``--seeds``:
``<output-dir>/<method>/<config>/seed<s>/fold<k>/``) and end with a
``done.json`` marker that records the run's identity (the method preset, the
grid point and the run's whole resolved config, its seed included). A second
invocation skips the runs whose marker matches, resumes an interrupted neural
run from its backup, and retrains the runs whose settings changed; the report
(also rebuilt alone with ``--report-only``, seeds and reference included) uses
only runs whose identity matches the command's: :mod:`pipelines.cv_runner`.
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
    """The command line: a flag per :class:`pipelines.cv_config.CVConfig` field, and
    ``--report-only``."""
    parser = argparse.ArgumentParser(prog="python -m pipelines.cross_validate",
                                     description=__doc__.split("\n\n")[0])
    flags.add_config_flags(parser, cv_runner.CVConfig)
    parser.add_argument("--report-only", action="store_true",
                        help="rebuild the report from finished runs, train nothing")
    return parser


def parse_args(argv=None) -> Tuple[cv_runner.CVConfig, argparse.Namespace]:
    """Flags -> (:class:`pipelines.cv_config.CVConfig`, the parsed flags); only ``main``
    calls this. ``--seed`` and ``--seeds`` together are an error (exit status 2)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if hasattr(args, "seed") and hasattr(args, "seeds"):
        seeds = ",".join(map(str, args.seeds))
        parser.error(f"--seed and --seeds exclude each other: --seeds {seeds} trains each "
                     f"method once per seed (in seed<s>/ folders), --seed {args.seed} once "
                     f"with that seed; give one of them.")
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
    table = report["table"]
    columns = ["label", metric, *[f"seed_{s}_{metric}" for s in ("mean", "std", "min", "max")
                                  if f"seed_{s}_{metric}" in table], f"wilcoxon_p_{metric}"]
    print(table[columns].to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    print(f"report: {report['markdown']}, {report['csv']}, {len(report['plots'])} plots")
    return {**report, "counts": counts}


if __name__ == "__main__":
    main()
