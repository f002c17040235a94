"""Command-line jobs over ``tfr_extensions``: ``python -m pipelines.<job> --help``.

For example:

* ``pipelines.train``: a neural ranker with any registered loss.
* ``pipelines.lambdamart``: LightGBM's lambdarank on the same files.
* ``pipelines.demo``: both, end to end, on the embedded synthetic data.

Each job has a frozen config dataclass built from flags only in ``main`` and a
``run(config)`` that other jobs call.
"""
