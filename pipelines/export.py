"""Export a trained ``.keras`` scorer as a TF Serving SavedModel: ``tfrx-export``.

    tfrx-export runs/<name>/model.keras saved_models/<name>/1
    python -m pipelines.export runs/<name>/model.keras saved_models/<name>/1   # a checkout

A training run on any Keras 3 backend saves its scorer as ``model.keras``
(:func:`save_model`). TF Serving needs a SavedModel, which TensorFlow writes: this
job loads the ``.keras`` file on Keras's TensorFlow backend and writes it with
:func:`tfr_extensions.serving.export`'s signatures (ELWC, ``tf.Example``,
dense), the scores equal to the trained model's. It needs TensorFlow with Keras 3
(the ``keras3`` stack); started under another Keras backend it runs itself again
with ``KERAS_BACKEND=tensorflow``. :func:`export_in_tensorflow` is what a run on
JAX or PyTorch does with ``--export-dir``: this job in its own process where
TensorFlow is installed beside, else it prints the command.
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
from typing import Any, Mapping, Optional

from tfr_extensions import backend
from tfr_extensions.data import durable

#: this job as a command (the installed console script)
COMMAND = "tfrx-export"


def save_model(model, path: str) -> str:
    """``model`` saved as a ``.keras`` file at ``path``, atomically and durably (Keras 3):
    the file and its folder are ``fsync``ed around the rename that publishes it."""
    stem, suffix = os.path.splitext(path)
    temp_path = f"{stem}.tmp-{os.getpid()}{suffix}"  # Keras wants the .keras suffix
    try:
        model.save(temp_path)
        durable.replace_durably(temp_path, path)
    finally:
        if os.path.exists(temp_path):
            os.remove(temp_path)
    return path


def command(model_file: str, export_dir: str) -> str:
    """The command line that exports ``model_file`` to ``export_dir``."""
    return f"{COMMAND} {model_file} {export_dir}"


def tensorflow_installed() -> bool:
    """Whether TensorFlow is installed in this environment (imported or not)."""
    if backend.HAS_TENSORFLOW:
        return True
    try:
        return importlib.util.find_spec("tensorflow") is not None
    except ValueError:  # sys.modules["tensorflow"] is None: blocked in this process
        return False


def export_in_tensorflow(model_file: str, export_dir: str,
                         metadata: Optional[Mapping[str, Any]] = None) -> Optional[str]:
    """Exports ``model_file`` in a process of its own on Keras's TensorFlow backend,
    where TensorFlow is installed beside; returns ``export_dir``. Without TensorFlow,
    prints the command that does it and returns None."""
    if not tensorflow_installed():
        print(f"TensorFlow is not installed here: export the trained model in a TensorFlow "
              f"environment with\n    {command(model_file, export_dir)}")
        return None
    args = [sys.executable, "-m", f"{__package__}.export", model_file, export_dir,
            "--overwrite", "--metadata", json.dumps(dict(metadata or {}), allow_nan=False)]
    env = dict(os.environ, KERAS_BACKEND="tensorflow")
    env.pop("TF_USE_LEGACY_KERAS", None)
    subprocess.run(args, env=env, check=True)
    return export_dir


def export(model_file: str, export_dir: str, *, overwrite: bool = False,
           metadata: Optional[Mapping[str, Any]] = None) -> str:
    """Loads ``model_file`` (a scorer saved as ``.keras``) and writes its TF Serving
    SavedModel to ``export_dir`` (:func:`tfr_extensions.serving.export`). Needs Keras 3
    on its TensorFlow backend."""
    if not backend.IS_KERAS_3 or not backend.uses_tensorflow_ops():
        raise RuntimeError(f"{COMMAND} needs Keras 3 on its TensorFlow backend; this process "
                           f"runs {backend.describe()}.")
    from tfr_extensions import serving  # pylint: disable=import-outside-toplevel
    from tfr_extensions.backend import keras  # pylint: disable=import-outside-toplevel
    model = keras.models.load_model(model_file, compile=False)
    return serving.export(model, export_dir, overwrite=overwrite,
                          metadata={"model_file": os.path.abspath(model_file),
                                    **dict(metadata or {})})


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0])
    parser.add_argument("model_file", help="the trained scorer, a .keras file (a run's "
                                           "model.keras)")
    parser.add_argument("export_dir", help="the SavedModel version folder, e.g. "
                                           "saved_models/<name>/1")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a non-empty export_dir")
    parser.add_argument("--metadata", default="{}",
                        help="JSON facts written to assets.extra/tfrx.json")
    return parser


def _rerun_on_tensorflow(argv) -> None:
    """Runs this job again in a process on Keras's TensorFlow backend (never returns)."""
    if not tensorflow_installed():
        raise SystemExit(f"{COMMAND}: error: it needs TensorFlow with Keras 3, which is not "
                         "installed here: pip install 'tfr_extensions[keras3]' -c "
                         "stacks/keras3.txt, then run it there.")
    env = dict(os.environ, KERAS_BACKEND="tensorflow")
    env.pop("TF_USE_LEGACY_KERAS", None)
    args = [sys.executable, "-m", f"{__package__}.export", *argv]
    raise SystemExit(subprocess.run(args, env=env, check=False).returncode)


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    if not os.path.isfile(args.model_file):
        raise SystemExit(f"{COMMAND}: error: no model file {args.model_file!r}.")
    if not (backend.IS_KERAS_3 and backend.uses_tensorflow_ops()):
        _rerun_on_tensorflow(argv)
    try:
        metadata = json.loads(args.metadata)
        path = export(args.model_file, args.export_dir, overwrite=args.overwrite,
                      metadata=metadata)
    except (ValueError, json.JSONDecodeError) as error:
        raise SystemExit(f"{COMMAND}: error: {error}") from error
    print(f"exported {args.model_file} to {path}")


if __name__ == "__main__":
    main()
