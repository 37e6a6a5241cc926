"""A predictor every process uses as unpickled from one snapshot (:class:`Snapshot`).

A river model's sets of names are rebuilt when it is unpickled, and where their strings'
hashes collide the rebuilt set iterates in another order than the original (and a copy of
the copy in the first order again): the model's sums then run in another order, and its
last digits change. A run spread over processes sends the model pickled (joblib's ``-j``,
Dask's scatter and its copies between workers), so its processes would compute with models
that differ in the last digits from each other and from this process's. A snapshot pickles
the predictor once; this process and every other one predict with a model unpickled from
those same bytes, and only the bytes travel, so every copy sums in one order.

>>> import numpy as np
>>> from ipfi_cli.models import FunctionPredictor
>>> copy = Snapshot(FunctionPredictor(np.sum))
>>> import pickle
>>> pickle.loads(pickle.dumps(copy)).snapshot == copy.snapshot
True
"""

from __future__ import annotations

import pickle
from typing import Any


class Snapshot:
    """The wrapped predictor as unpickled from :attr:`snapshot` (pickled once, here), in this
    process and in every process this object is sent to; attributes are the predictor's."""

    def __init__(self, predictor: Any) -> None:
        self.snapshot = pickle.dumps(predictor, protocol=pickle.HIGHEST_PROTOCOL)
        self._predictor: Any = None

    @property
    def predictor(self) -> Any:
        if self._predictor is None:
            self._predictor = pickle.loads(self.snapshot)  # noqa: S301 (ipfi's own bytes of a model loaded above)
        return self._predictor

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("snapshot", "_predictor"):  # not set yet: while unpickling
            raise AttributeError(name)
        return getattr(self.predictor, name)

    def __getstate__(self) -> dict[str, Any]:
        return {"snapshot": self.snapshot}  # the bytes travel, never a copy of a copy

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.snapshot = state["snapshot"]
        self._predictor = None
