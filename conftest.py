"""pytest set-up shared by ``tests/`` and the package's doctests (``--doctest-modules``).

Without TF-Ranking (the tf221 stack), ``tfr_extensions/pipeline.py`` cannot be
imported, so its doctests are not collected; the end of the report says so.
"""
from tfr_extensions import compat

NEEDS_TF_RANKING = ("tfr_extensions/pipeline.py",)

collect_ignore = [] if compat.has_tf_ranking() else list(NEEDS_TF_RANKING)


def pytest_terminal_summary(terminalreporter):
    if collect_ignore:
        terminalreporter.write_line(
            f"TF-Ranking does not import here: the doctests of {', '.join(collect_ignore)} "
            "were not collected (they need it).")
