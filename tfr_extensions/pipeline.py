"""Deprecated: the old name of :mod:`tfr_extensions.tfranking` (TF-Ranking's pipelines).

``import tfr_extensions.pipeline`` gives :mod:`tfr_extensions.tfranking` itself
(so every name is the same object) and warns with a ``DeprecationWarning``; so do
``from tfr_extensions import pipeline`` and ``tfrx.pipeline``
(``tfr_extensions.__getattr__``). Import :mod:`tfr_extensions.tfranking` instead.
"""
import sys
import warnings

import tfr_extensions
from tfr_extensions import tfranking

warnings.warn(tfr_extensions._renamed_message("pipeline"),  # pylint: disable=protected-access
              DeprecationWarning, stacklevel=2)  # at the importing line
sys.modules[__name__] = tfranking
