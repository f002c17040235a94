"""The installed console scripts (``setup.py``'s ``CONSOLE_SCRIPTS``): one function per job.

Each script calls its job's ``main`` with the command line and exits 0 when it
returns (a job's ``main`` may return its results, for callers in Python; a
console script must not hand them to ``sys.exit``). ``setup.py`` maps this folder
to ``tfr_extensions.pipelines``, so an installed wheel has one top-level package.
"""
import importlib


def _script(job: str):
    """The console script of ``job``: its ``main`` on the command line, exit status 0."""
    def script() -> None:
        importlib.import_module(f"{__package__}.{job}").main()

    script.__name__ = script.__qualname__ = job
    return script


train = _script("train")
lambdamart = _script("lambdamart")
cross_validate = _script("cross_validate")
demo = _script("demo")
rank_accuracy = _script("rank_accuracy")
sampled_ranking_quality = _script("sampled_ranking_quality")
export = _script("export")
