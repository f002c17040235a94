"""Every public name has a docstring: the namespaces of ``tfrx.__all__`` (the API
reference's top page) each define ``__all__``, and each name there is documented
itself (a docstring, or for a constant a ``#:`` comment above its assignment, which
is what pdoc shows), so the reference never shows a bare name. Imports no TensorFlow."""
import importlib
import inspect
import pathlib
import re
import types

import pytest

import tfr_extensions as tfrx

NAMESPACES = [name for name in tfrx.__all__ if name != "backend"]


def _constant_is_documented(module: types.ModuleType, name: str) -> bool:
    """A ``#:`` comment right above ``name``'s assignment in the module that defines
    it (the module itself, or the one it was imported from)."""
    for candidate in [module] + _sources(module):
        try:
            lines = inspect.getsource(importlib.import_module(candidate) if isinstance(
                candidate, str) else candidate).splitlines()
        except (OSError, TypeError, ImportError):  # (a TensorFlow module without TensorFlow)
            continue
        for i, line in enumerate(lines):
            if re.match(rf"^{re.escape(name)}\s*(:[^=]*)?=", line):
                if any(above.startswith("#:") for above in lines[max(0, i - 3):i]):
                    return True
    return False


def _sources(module):
    """The modules a module imports names from (``from X import ...``)."""
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):
        return []
    return sorted(set(re.findall(r"^\s*from (tfr_extensions[\w.]*) import", source, re.M)))


def test_the_top_page_names_the_public_namespaces_in_order():
    assert tfrx.__all__[:4] == ["losses", "metrics", "models", "data"]
    assert all(inspect.ismodule(getattr(tfrx, name)) for name in tfrx.__all__)


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_every_public_name_has_a_docstring(namespace):
    module = getattr(tfrx, namespace)
    assert inspect.getdoc(module), f"tfrx.{namespace} has no docstring"
    assert hasattr(module, "__all__"), f"tfrx.{namespace} lists its public names in __all__"
    missing = []
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.ismodule(value) or inspect.isclass(value) or inspect.isroutine(value):
            documented = bool(inspect.getdoc(value))
            if inspect.isclass(value):  # its own docstring, not an inherited one
                documented = bool(value.__dict__.get("__doc__"))
        else:
            documented = _constant_is_documented(module, name)
        if not documented:
            missing.append(name)
    assert not missing, f"tfrx.{namespace}: no docstring for {missing}"


def test_the_losses_page_leads_with_get_and_each_class_beside_its_function():
    names = tfrx.losses.__all__
    assert names[:2] == ["get", "names"]
    for cls in tfrx.losses.registry.classes().values():
        i = names.index(cls.__name__)
        assert names[i + 1] == cls.spec.function.__name__
    # the method this package is for first, in the paper's order of the seed methods
    assert names[2:4] == ["TwinSigmoidLoss", "twin_sigmoid_loss"]


def test_no_math_role_is_broken_over_lines():
    """pdoc renders ``:math:`...``` only on one line (a role broken over lines shows as
    written); a formula longer than a line is a ``.. math::`` block."""
    root = pathlib.Path(tfrx.__file__).resolve().parents[1]
    broken = [f"{path.relative_to(root)}: :math:`{role[:40]}...`"
              for folder in ("tfr_extensions", "pipelines")
              for path in sorted((root / folder).rglob("*.py"))
              for role in re.findall(r":math:`([^`]*)`", path.read_text())
              if "\n" in role]
    assert not broken, broken
