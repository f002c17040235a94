"""SavedModel export of a scorer with TF Serving signatures.

:func:`export` writes ``<export_dir>`` (by convention
``saved_models/<name>/<version>``, the layout TF Serving polls) with these
signatures; every one takes *raw* features, since the per-query
normalization is a layer of the model:

* ``tensorflow/serving/predict`` and ``serving_default``: a batch of serialized
  ``ExampleListWithContext`` protos (input ``inputs``, string ``[B]``), one
  query each, every document carrying its feature vector as a float list
  ``features`` of length F. Output ``outputs``: float32 ``[B, L]`` with L the
  longest list of the batch (entries beyond a list's length are meaningless).
  This is TF-Ranking's ``Signatures.predict_tf_function``
  (``tensorflow_ranking/python/keras/saved_model.py``) as
  :func:`elwc_predict_function` (so export needs no TF-Ranking): it parses
  ELWC (:func:`tfr_extensions.data.elwc.parse_elwc`) into ``{"features":
  [B, L, F], "mask": [B, L]}`` and calls the model.
* ``tensorflow/serving/regress``: a batch of serialized ``tf.Example``
  (input ``inputs``, string ``[N]``), each a document with ``features``.
  Output ``outputs``: float32 ``[N]``. Unlike TF-Ranking's regress signature,
  which scores each ``tf.Example`` as a list of one, the N documents of a
  request are scored as **one query's list**: with per-query z-scoring inside
  the model a list of one would give every document the same score. Its
  ``method_name`` is set to ``tensorflow/serving/regress`` so TF Serving's
  Regress API accepts it (``tf.saved_model.save`` marks every signature as a
  predict signature).
* ``predict_dense``: for REST/JSON clients, ``features`` float32 ``[B, L, F]``
  and ``list_lengths`` int32 ``[B]``; output ``scores`` float32 ``[B, L]``
  (entries at or beyond ``list_lengths`` are meaningless). Inputs are checked
  in the graph, so TF Serving (which feeds tensors without checking their
  shapes against the signature) answers a bad request with an
  ``INVALID_ARGUMENT`` that names the input and the expected shape: ``features``
  must have rank 3 and F features, ``list_lengths`` one length in ``[0, L]``
  per list.

Bad inputs, every signature: a document with a NaN or infinite feature is
scored NaN, and only it: it takes no part in its list's normalization, so the
other documents get exactly the scores they would get without it
(:func:`tfr_extensions.data.query_zscore`). Bytes that are not a serialized
``ExampleListWithContext`` (``tf.Example``) fail with ``INVALID_ARGUMENT`` or
``DATA_LOSS`` at the node ``parse_inputs_as_ExampleListWithContext``
(TensorFlow's own ``Could not parse example input`` for ``tf.Example``).

Loading needs nothing but TensorFlow: ``tf.saved_model.load(path).signatures[...]``.
A REST client of TF Serving posts raw features to ``predict_dense``, e.g. two
lists of 3 and 2 documents with F = 2 features (padding rows are ignored)::

    POST /v1/models/<name>:predict
    {"signature_name": "predict_dense",
     "inputs": {"features": [[[0.1, 3.0], [0.5, 1.0], [0.2, 2.0]],
                             [[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]],
                "list_lengths": [3, 2]}}
"""
import json
import os
import shutil
from typing import Callable, Dict, Optional

import tensorflow as tf

from tfr_extensions import backend
from tfr_extensions.backend import keras
from tfr_extensions.data import durable
from tfr_extensions.data import elwc
from tfr_extensions.data.elwc import FeatureSpec, feature_spec
from tfr_extensions.ops import validation

PREDICT = tf.saved_model.PREDICT_METHOD_NAME      # "tensorflow/serving/predict"
REGRESS = tf.saved_model.REGRESS_METHOD_NAME      # "tensorflow/serving/regress"
DEFAULT = tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY  # "serving_default"
#: the key of the signature that scores dense ``[B, L, F]`` features with list lengths
PREDICT_DENSE = "predict_dense"
#: the signature keys of an exported SavedModel
SIGNATURE_KEYS = (DEFAULT, PREDICT, REGRESS, PREDICT_DENSE)


def elwc_predict_function(model: Callable, context_feature_spec: Optional[FeatureSpec],
                          example_feature_spec: FeatureSpec,
                          mask_feature_name: str) -> tf.types.experimental.GenericFunction:
    """A TF Serving predict function over serialized ELWCs.

    TF-Ranking's ``tfr.keras.saved_model.Signatures(...).predict_tf_function()``:
    input ``inputs``, string ``[B]``; the features of
    :func:`tfr_extensions.data.elwc.parse_elwc` (with the mask under
    ``mask_feature_name``) go to ``model(features, training=False)``; a tensor
    output is returned as ``{"outputs": ...}``, a dict output as it is.
    """
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string,
                                                name=tf.saved_model.PREDICT_INPUTS)])
    def predict(serialized_elwcs):
        features = elwc.parse_elwc(serialized_elwcs, context_feature_spec,
                                   example_feature_spec, mask_feature_name=mask_feature_name)
        outputs = model(features, training=False)
        if isinstance(outputs, dict):
            return outputs
        if isinstance(outputs, tf.Tensor):
            return {tf.saved_model.PREDICT_OUTPUTS: outputs}
        raise TypeError("The model's outputs must be a tensor or a dict of tensors; got "
                        f"{type(outputs).__name__}.")

    return predict


class _ServingModule(tf.Module):
    """The model and its serving functions, as one trackable object."""

    def __init__(self, model: keras.Model, num_features: int, feature_name: str,
                 mask_feature_name: str):
        super().__init__()
        # Only the variables are saved (tracked); the Keras model itself stays an
        # untracked Python reference, so saving traces just the signatures
        # instead of serializing every Keras layer's call functions.
        self.__dict__["_model"] = model
        self.model_variables = list(model.variables)
        self._num_features = num_features
        self._feature_name = feature_name
        self._mask_feature_name = mask_feature_name

    def _score(self, features, mask):
        scores = self._model({"features": features, "mask": mask}, training=False)
        return tf.cast(scores, tf.float32)

    def signatures(self) -> Dict[str, tf.types.experimental.ConcreteFunction]:
        num_features = self._num_features
        spec = feature_spec(num_features, self._feature_name)
        elwc_model = _RenamedInputs(self._score, self._feature_name,
                                    self._mask_feature_name)
        predict = elwc_predict_function(
            elwc_model, context_feature_spec={}, example_feature_spec=spec,
            mask_feature_name=self._mask_feature_name)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
        def regress(serialized_examples):
            parsed = tf.io.parse_example(serialized_examples, spec)
            features = parsed[self._feature_name][tf.newaxis]  # [1, N, F]: one list
            mask = tf.ones(tf.shape(features)[:2], tf.bool)
            return {tf.saved_model.REGRESS_OUTPUTS: self._score(features, mask)[0]}

        # Shapes are left open here and checked in the graph (TF Serving does not
        # check fed shapes against the signature: a wrong F failed inside a MatMul).
        @tf.function(input_signature=[
            tf.TensorSpec(None, tf.float32, name="features"),
            tf.TensorSpec(None, tf.int32, name="list_lengths")])
        def predict_dense(features, list_lengths):
            features, list_lengths = check_dense_inputs(features, list_lengths, num_features)
            mask = tf.sequence_mask(list_lengths, tf.shape(features)[1])
            return {"scores": self._score(features, mask)}

        predict_fn = predict.get_concrete_function()
        return {DEFAULT: predict_fn, PREDICT: predict_fn,
                REGRESS: regress.get_concrete_function(),
                PREDICT_DENSE: predict_dense.get_concrete_function()}


def check_dense_inputs(features: tf.Tensor, list_lengths: tf.Tensor,
                       num_features: int):
    """``predict_dense``'s inputs, checked: ``features`` ``[B, L, F]`` and
    ``list_lengths`` ``[B]`` with values in ``[0, L]``; else an
    ``InvalidArgumentError`` that names the input, the expected shape and the
    shape (or values) it got.

    Every check is safe to run on any input (dimensions are read from shapes
    padded with -1), so whichever fails first names a real problem.
    """
    shape, lengths_shape = tf.shape(features), tf.shape(list_lengths)
    batch, list_size, width = tf.unstack(
        tf.concat([shape, -tf.ones([3], tf.int32)], axis=0)[:3], num=3)
    checks = [
        tf.debugging.Assert(
            tf.logical_and(tf.equal(tf.size(shape), 3), tf.equal(width, num_features)),
            [f"predict_dense: `features` must be float32 [batch, list_size, {num_features}]; "
             "got shape", shape]),
        tf.debugging.Assert(
            tf.reduce_all(tf.equal(lengths_shape, tf.reshape(batch, [1]))),
            ["predict_dense: `list_lengths` must be int32 [batch], one length per list of "
             "`features`; got shape", lengths_shape, "and `features` of shape", shape]),
        tf.debugging.Assert(
            tf.reduce_all(tf.logical_and(list_lengths >= 0, list_lengths <= list_size)),
            ["predict_dense: `list_lengths` must be in [0, list_size] with list_size =",
             list_size, "(dimension 1 of `features`); got", list_lengths]),
    ]
    with tf.control_dependencies(checks):
        return (tf.ensure_shape(tf.identity(features), [None, None, num_features]),
                tf.ensure_shape(tf.identity(list_lengths), [None]))


class _RenamedInputs:
    """Calls ``score(features, mask)`` on TF-Ranking's parsed feature dict."""

    def __init__(self, score, feature_name: str, mask_feature_name: str):
        self._score, self._feature_name = score, feature_name
        self._mask_feature_name = mask_feature_name

    def __call__(self, inputs, training=False):
        return self._score(inputs[self._feature_name], inputs[self._mask_feature_name])


def _set_regress_method_name(export_dir: str) -> None:
    """Marks the regress signature as a Regress-API signature in saved_model.pb."""
    from tensorflow.core.protobuf import saved_model_pb2  # pylint: disable=g-import-not-at-top
    path = os.path.join(export_dir, "saved_model.pb")
    proto = saved_model_pb2.SavedModel()
    with tf.io.gfile.GFile(path, "rb") as f:
        proto.ParseFromString(f.read())
    for meta_graph in proto.meta_graphs:
        if REGRESS in meta_graph.signature_def:
            meta_graph.signature_def[REGRESS].method_name = REGRESS
    with tf.io.gfile.GFile(path, "wb") as f:
        f.write(proto.SerializeToString())


def export(model: keras.Model, export_dir: str, num_features: Optional[int] = None,
           feature_name: str = "features", mask_feature_name: str = "mask",
           overwrite: bool = False, metadata: Optional[dict] = None) -> str:
    """Writes a TF Serving SavedModel of a dict-input scorer.

    Args:
      model: a Keras model over ``{"features": [B, L, F], "mask": [B, L]}``
        returning scores ``[B, L]`` (e.g. :func:`tfr_extensions.models.scorer`).
      export_dir: the version directory, e.g. ``saved_models/demo/1``.
      num_features: F; default the model's ``num_features`` config entry.
      feature_name: the float-list feature name in ELWC / ``tf.Example`` inputs.
      mask_feature_name: the key of the list mask among the features that the
        ELWC signature parses (TF-Ranking's ``mask_feature_name``); the model
        itself is called on ``{"features", "mask"}`` whatever the names.
      overwrite: replace an existing non-empty ``export_dir`` (else ValueError).
      metadata: extra JSON-able facts written to ``assets.extra/tfrx.json``.

    Returns:
      ``export_dir``.

    A local ``export_dir`` is written whole into a temporary sibling folder,
    ``fsync``ed and renamed into place (its parent ``fsync``ed too), so that TF
    Serving, or a power loss, never sees half a version; the old version it
    replaces is deleted only then. A remote one (``gs://...``) is written in place.
    """
    backend.require_tensorflow_backend("tfrx.serving.export")
    if num_features is None:  # the model's config entry
        num_features = getattr(model, "get_config", dict)().get("num_features")
    num_features = validation.validate_int(num_features, "num_features", minimum=1)
    exists = tf.io.gfile.exists(export_dir) and bool(tf.io.gfile.listdir(export_dir))
    if exists and not overwrite:
        raise ValueError(f"`export_dir` {export_dir!r} exists and is not empty; pass "
                         "overwrite=True or a new version number.")
    local = "://" not in export_dir
    if not local and exists:
        tf.io.gfile.rmtree(export_dir)
    target = f"{os.path.abspath(export_dir)}.tmp-{os.getpid()}" if local else export_dir
    try:
        _write_saved_model(model, target, num_features, feature_name, mask_feature_name,
                           metadata)
        if local:
            if os.path.isdir(export_dir):
                shutil.rmtree(export_dir)
            durable.replace_durably(target, export_dir)
    finally:
        if local and os.path.isdir(target):
            shutil.rmtree(target, ignore_errors=True)
    return export_dir


def _write_saved_model(model: keras.Model, export_dir: str, num_features: int,
                       feature_name: str, mask_feature_name: str,
                       metadata: Optional[dict]) -> None:
    """The SavedModel of :func:`export` in ``export_dir``, with ``assets.extra/tfrx.json``."""
    module = _ServingModule(model, num_features, feature_name, mask_feature_name)
    tf.saved_model.save(module, export_dir, signatures=module.signatures())
    _set_regress_method_name(export_dir)
    facts = {"num_features": num_features, "feature_name": feature_name,
             "signatures": list(SIGNATURE_KEYS), **(metadata or {})}
    tf.io.gfile.makedirs(os.path.join(export_dir, "assets.extra"))
    with tf.io.gfile.GFile(os.path.join(export_dir, "assets.extra", "tfrx.json"), "w") as f:
        json.dump(facts, f, indent=2, default=str)

#: the public names, in the order a user meets them (the API reference documents these)
__all__ = [
    "export",
    "elwc_predict_function",
    "check_dense_inputs",
    "SIGNATURE_KEYS",
    "PREDICT_DENSE",
]
