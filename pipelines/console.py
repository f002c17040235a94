"""The installed console scripts (``setup.py``'s ``CONSOLE_SCRIPTS``): one function per job.

Each script calls its job's ``main`` with the command line and exits 0 when it
returns (a job's ``main`` may return its results, for callers in Python; a
console script must not hand them to ``sys.exit``). ``setup.py`` maps this folder
to ``tfr_extensions.pipelines``, so an installed wheel has one top-level package.
"""
import importlib


def _run(job: str) -> None:
    importlib.import_module(f"{__package__}.{job}").main()


def train() -> None:
    _run("train")


def lambdamart() -> None:
    _run("lambdamart")


def cross_validate() -> None:
    _run("cross_validate")


def demo() -> None:
    _run("demo")


def rank_accuracy() -> None:
    _run("rank_accuracy")


def sampled_ranking_quality() -> None:
    _run("sampled_ranking_quality")
