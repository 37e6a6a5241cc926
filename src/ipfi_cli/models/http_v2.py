"""The Open Inference Protocol (KServe v2) for a served model (:class:`~ipfi_cli.models.http.HttpPredictor`).

``POST .../v2/models/NAME[/versions/V]/infer`` (KServe, Seldon MLServer, Triton). The model's
metadata (``GET .../v2/models/NAME``) is read first: when it declares one input of shape
``[-1, k]`` the rows go as that one tensor (columns by position); several inputs are columns
named after them; no declared inputs (MLServer's default) sends one input per column with the
``pd`` content type, which MLServer decodes to a DataFrame. The label is the first output;
probabilities are asked as the output ``predict_proba`` (MLServer's scikit-learn runtime;
``proba_output`` to change it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ipfi_cli.core.losses import Output
from ipfi_cli.models.http_options import HttpModelError, HttpOptions


def _column_datatype(values: list[Any]) -> str:
    """The v2 datatype pandas' ``infer_objects`` would give this column."""
    kinds = {type(v) for v in values if v is not None}
    if kinds and kinds <= {bool, np.bool_}:
        return "BOOL"
    if kinds and all(issubclass(k, (int, np.integer)) and not issubclass(k, (bool, np.bool_)) for k in kinds) \
            and None not in values:
        return "INT64"
    if all(issubclass(k, (int, float, np.integer, np.floating)) and not issubclass(k, (bool, np.bool_))
           for k in kinds):
        return "FP64"
    return "BYTES"


#: the v2 datatype of a column whose numpy type says it (a number or bool column, as _column_datatype finds)
_KIND_DATATYPE = {"f": "FP64", "i": "INT64", "u": "INT64", "b": "BOOL"}


def _numbers(values: np.ndarray) -> np.ndarray:
    """Values of a number or bool type as they are sent: serialized by orjson as Python's floats, ints
    and bools would be (the same bytes), without a Python object per value."""
    return np.ascontiguousarray(values, dtype=np.float64 if values.dtype.kind == "f" else None)


def _plain(values: list[Any], datatype: str) -> list[Any]:
    if datatype == "FP64":
        return [None if v is None else float(v) for v in values]
    if datatype == "BYTES":
        return ["" if v is None else str(v) for v in values]
    return values


class V2Protocol:
    """The request bodies and answers of ``.../infer``, shaped by the inputs the model declares."""

    def __init__(self, options: HttpOptions) -> None:
        self.options = options
        #: "columns" (one input per column), "tensor" (one [N, k] input) and that input's name and type
        self.mode = "columns"
        self.content_type: str | None = "pd"
        self.input: tuple[str, str] = ("input-0", "FP64")
        self.names: list[str] | None = None

    # -- metadata -------------------------------------------------------------------------------------
    def read_metadata(self, request: Callable[[str, str], Any], path: str) -> tuple[list[str] | None, int | None]:
        """Ask the model's declared inputs (``GET .../v2/models/NAME``); a server that has none is fine.
        Returns the columns and the number of features the model declares (``None`` when it does not)."""
        metadata_path = path[: -len("/infer")]
        try:
            metadata = request("GET", metadata_path)
        except HttpModelError as error:
            if ": HTTP 404" in str(error):
                raise HttpModelError(f"{self.options.display_url}: the server has no such model "
                                     f"({str(error).split(': ', 1)[1]})") from None
            raise
        try:
            return self._use_metadata(metadata)
        except (TypeError, ValueError, KeyError, AttributeError, IndexError):
            raise HttpModelError(f"{self.options.display_url}: the model's metadata is malformed (each declared "
                                 "input needs a name, and a shape that is a list of numbers)") from None

    def _use_metadata(self, metadata: Any) -> tuple[list[str] | None, int | None]:
        inputs = metadata.get("inputs") or [] if isinstance(metadata, dict) else []
        if not isinstance(inputs, list) or not all(isinstance(i, dict) and isinstance(i.get("name"), str)
                                                    for i in inputs):
            raise ValueError("inputs")
        if len(inputs) == 1 and len(inputs[0].get("shape") or []) == 2 and inputs[0]["shape"][1] not in (1, -1):
            self.mode = "tensor"
            self.input = (inputs[0]["name"], inputs[0].get("datatype", "FP64"))
            n_features = int(inputs[0]["shape"][1])
            self.content_type = None
            return None, n_features
        if len(inputs) >= 1:
            columns = [i["name"] for i in inputs]
            self.names = list(columns)
            self.content_type = None
            return columns, None
        return None, None

    # -- requests and answers ---------------------------------------------------------------------------
    def arrange(self, block: np.ndarray, columns: Sequence[str]) -> tuple[np.ndarray, Sequence[str], list[str]]:
        """The block and its columns as they are sent (in the order of the declared inputs), and
        each column's datatype (one input per column; found once for the whole block)."""
        if self.names is not None and list(columns) != self.names:
            index = {c: j for j, c in enumerate(columns)}
            block, columns = block[:, [index[c] for c in self.names]], self.names
        types = [_KIND_DATATYPE.get(block.dtype.kind) or _column_datatype(block[:, j].tolist())
                 for j in range(block.shape[1])] if self.mode == "columns" else []
        return block, columns, types

    def payload(self, rows: np.ndarray, columns: Sequence[str], types: list[str], output: Output) -> dict[str, Any]:
        n = len(rows)
        numeric = rows.dtype.kind in _KIND_DATATYPE  # flat "data" of numbers: what MLServer decodes fastest
        if self.mode == "tensor":
            name, datatype = self.input
            if numeric and datatype != "BYTES":
                data: Any = _numbers(rows.astype(np.float64, copy=False)).ravel()
            else:
                listed = rows.tolist()
                data = listed if datatype == "BYTES" else [float(v) if v is not None else None
                                                           for row in listed for v in row]
            inputs = [{"name": name, "datatype": datatype, "shape": [n, rows.shape[1]], "data": data}]
        else:
            inputs = []
            for j, column in enumerate(columns):
                values: Any = _numbers(rows[:, j]) if numeric else _plain(rows[:, j].tolist(), types[j])
                item: dict[str, Any] = {"name": column, "datatype": types[j], "shape": [n], "data": values}
                if types[j] == "BYTES":
                    item["parameters"] = {"content_type": "str"}
                inputs.append(item)
        payload: dict[str, Any] = {"inputs": inputs}
        if self.content_type:
            payload["parameters"] = {"content_type": self.content_type}
        if output is Output.PROBA:
            payload["outputs"] = [{"name": self.options.proba_output}]
        return payload

    def predictions(self, answer: Any, output: Output, n_rows: int) -> Any:
        """The asked output's data: one value per row, or probabilities as ``[N, C]``; an answer of
        another shape is a ``ValueError`` or the like (see :meth:`expected`)."""
        outputs = answer.get("outputs") if isinstance(answer, dict) else None
        if not outputs or not isinstance(outputs, list) or not all(isinstance(o, dict) for o in outputs):
            raise HttpModelError(f"{self.options.display_url}: the answer has no outputs")
        chosen = outputs[0]
        if output is Output.PROBA:
            chosen = next((o for o in outputs if o.get("name") == self.options.proba_output), chosen)
        data = chosen.get("data", [])
        if not isinstance(data, list):
            raise ValueError("data")
        shape = chosen.get("shape") or [len(data)]
        if output is Output.PROBA:
            return np.asarray(data, dtype=np.float64).reshape(n_rows, -1)
        if len(shape) > 1 and int(np.prod(shape[1:])) != 1:
            raise HttpModelError(f"{self.options.display_url}: the output {chosen.get('name')!r} has shape {shape}, "
                                 "not one value per row (ask for the label or value output)")
        return data

    def expected(self, n_rows: int) -> str:
        """What a well-formed answer holds, for a message."""
        return f"outputs with data for {n_rows} rows"
