"""The installed console scripts (``setup.py``'s ``CONSOLE_SCRIPTS``): one function per job.

Each script calls its job's ``main`` with the command line and exits 0 when it
returns (a job's ``main`` may return its results, for callers in Python; a
console script must not hand them to ``sys.exit``). ``setup.py`` maps this folder
to ``tfr_extensions.pipelines``, so an installed wheel has one top-level package.

The jobs need the ``jobs`` extra (:data:`JOBS_EXTRA`) beside the core: a job started
without it, as a console script or as ``python -m pipelines.<job>``
(``pipelines/__init__.py``), exits at once with one line that names what is missing
and the command that installs it, and status 1 (:func:`check_jobs_extra`).
"""
import importlib
import importlib.util
import os
import sys
from typing import Optional, Sequence

#: the modules the jobs import beyond the core (NumPy, Keras and a backend), which
#: ``pip install 'tfr_extensions[jobs]'`` installs (setup.py's ``jobs`` extra: the
#: same names, checked by tests/test_packaging.py)
JOBS_EXTRA = ("pandas", "scipy", "matplotlib", "lightgbm")
INSTALL_JOBS = "pip install 'tfr_extensions[jobs]'"


def missing_jobs_modules(modules: Sequence[str] = JOBS_EXTRA) -> list:
    """The modules of ``modules`` that are not installed (found, not imported)."""
    return [name for name in modules if importlib.util.find_spec(name) is None]


def check_jobs_extra(job: str, modules: Optional[Sequence[str]] = None) -> None:
    """Exits with one line (status 1, no traceback) when a module of the ``jobs`` extra
    is missing: ``<job> needs <modules> (the jobs extra): pip install ...``.

    >>> check_jobs_extra("tfrx-train", modules=("json",))  # installed: returns
    >>> check_jobs_extra("tfrx-train", modules=("no_such_module_here",))
    Traceback (most recent call last):
    ...
    SystemExit: tfrx-train needs no_such_module_here, which the jobs extra installs: pip install 'tfr_extensions[jobs]'
    """
    missing = missing_jobs_modules(JOBS_EXTRA if modules is None else modules)
    if missing:
        raise SystemExit(f"{job} needs {', '.join(missing)}, which the jobs extra installs: "
                         f"{INSTALL_JOBS}")


def _script(job: str):
    """The console script of ``job``: its ``main`` on the command line, exit status 0."""
    def script() -> None:
        name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else job
        check_jobs_extra(name)
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
