"""ipfi from Python: explain a river model, a scikit-learn estimator or pipeline, or a plain
function, on a stream or on a table, without the command line.

* :class:`IncrementalPFI`: ``explain_one(x, y)`` per row, river style, returns the current
  importance of every feature as a dict.
* :func:`batch_pfi`: permutation importance of a fixed model on a whole table, returned as
  scikit-learn's ``permutation_importance`` returns it (``importances_mean``,
  ``importances_std``, ``importances``).
* :class:`IntervalPFI`: batch PFI over consecutive windows of a stream.
* :func:`load_model`: any model the command line takes (a file, an MLflow URI, a served URL).
* :func:`explain_stream`: ``ipfi explain`` from Python: rows (mappings) in, the command's traces
  out, set by the values the command builds from its options (:class:`PFIParams`,
  :class:`MethodSpec`, :class:`OutputSpec`, :class:`StateSpec`, :class:`WatchSettings`,
  :class:`KeySpec`, :class:`ReadSpec`, :class:`Selection`).

Models are wrapped with :func:`ipfi_cli.models.as_predictor` (river: ``predict_one``;
scikit-learn: ``predict``; an adapter from :func:`load_model` or any other
:class:`~ipfi_cli.core.predictor.Predictor` as it is; otherwise a function of a 2-D array).
The loss defaults from the model: zero-one for a classifier, absolute error otherwise.

The contract is the command line's, with the same one-line messages as exceptions: a loss
that cannot measure the model is refused when the explainer is made
(:class:`~ipfi_cli.errors.ModelError`); labels are matched to the model's classes as the
command line matches them (``'True'``, ``'yes'`` and ``1`` find the class ``True``; ``1``
finds ``'1'``); labels none of which are the model's classes, every row at the loss's
maximum, or a loss that is not finite raise :class:`~ipfi_cli.errors.ModelError`
(:func:`batch_pfi` at once; :class:`IncrementalPFI` as soon as it is certain, see
:meth:`IncrementalPFI.check`).

>>> from river import datasets, linear_model, preprocessing
>>> from ipfi_cli import IncrementalPFI
>>> model = preprocessing.StandardScaler() | linear_model.LogisticRegression()
>>> explainer = IncrementalPFI(model, alpha=0.01, n_repeats=3, seed=0)
>>> for x, y in datasets.Phishing():
...     importances = explainer.explain_one(x, y)
...     model.learn_one(x, y)
>>> sorted(importances, key=importances.get)[-1]   # the feature the model relies on most
'empty_server_form_handler'
"""

from __future__ import annotations

from ipfi_cli.api.loading import load_model
from ipfi_cli.api.pdp import IncrementalPDP
from ipfi_cli.api.sage import IncrementalSAGE
from ipfi_cli.api.streams import IncrementalPFI
from ipfi_cli.api.tables import IntervalPFI, batch_pfi, batch_sage
from ipfi_cli.core.params import PFIParams
from ipfi_cli.run.explain import explain_stream
from ipfi_cli.run.plan import Selection
from ipfi_cli.run.settings import KeySpec, MethodSpec, OutputSpec, ReadSpec, StateSpec
from ipfi_cli.run.watch import WatchSettings

__all__ = ["IncrementalPDP", "IncrementalPFI", "IncrementalSAGE", "IntervalPFI", "KeySpec", "MethodSpec", "OutputSpec",
           "PFIParams", "ReadSpec", "Selection", "StateSpec", "WatchSettings", "batch_pfi", "batch_sage",
           "explain_stream", "load_model"]
