"""Command-line jobs over ``tfr_extensions``: ``python -m pipelines.<job> --help``.

For example:

* ``pipelines.train``: a neural ranker with any registered loss (or an IRGAN).
* ``pipelines.lambdamart``: LightGBM's lambdarank, or the twin-sigmoid objective,
  on the same files.
* ``pipelines.cross_validate``: the paper's protocol over many methods and folds.
* ``pipelines.demo``: both, end to end, on the embedded synthetic data.

Each job has a frozen config dataclass, built from flags only in ``main``
(:mod:`pipelines.flags` generates the flags from the class), and a
``run(config)`` that other jobs call. :mod:`pipelines.common` holds what the
jobs share (data splits, strict atomic files, printed summaries).
"""
import sys as _sys

if _sys.argv[:1] == ["-m"]:  # `python -m pipelines.<job>` is locating its job
    from .console import check_jobs_extra as _check_jobs_extra

    _job = next((_sys.orig_argv[i + 1] for i, arg in enumerate(_sys.orig_argv[:-1])
                 if arg == "-m"), __name__)
    _check_jobs_extra(f"python -m {_job}")
