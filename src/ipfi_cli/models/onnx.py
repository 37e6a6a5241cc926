"""ONNX models run with onnxruntime (``pip install 'ipfi-cli[onnx]'``).

Loading an ``.onnx`` file runs no Python code: the file is a graph of standard operators, so
it is safe to load from strangers (a malicious graph can at worst use memory and time).

The graph says what it takes and gives:

* **inputs**: either one tensor of shape ``[N, k]`` (the model takes the input's columns by
  position, like a scikit-learn model fitted on an array) or one input per column, each of
  shape ``[N, 1]`` and named after its column (skl2onnx's export of a DataFrame pipeline).
  Each input's element type (float, double, int64, string, bool) is read from the graph and
  every column is converted to it; a value that does not convert stops the run with one line
  naming the column.
* **outputs**: a classifier (skl2onnx, onnxmltools) gives a label tensor first and then the
  probabilities, either as a sequence of maps ``{class: p}`` (ZipMap) or as a float tensor
  ``[N, n_classes]``; a regressor gives one float tensor. The class labels are read from the
  graph's classifier or ZipMap node (with the ``onnx`` package), so the log loss works.

Float graphs compute in float32: predictions match the original scikit-learn model's to
float32 precision (labels of tree models are exactly equal in practice).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ipfi_cli.core.losses import Output
from ipfi_cli.errors import ModelError
from ipfi_cli.models.adapters import _proba_of, predict_records_as_block
from ipfi_cli.models.files import ModelFileError

ONNX_MISSING = "running .onnx models needs onnxruntime: pip install 'ipfi-cli[onnx]' (or: pip install onnxruntime)"

#: ONNX tensor element types -> numpy dtypes the inputs are converted to
_DTYPES: dict[str, Any] = {
    "tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int16)": np.int16, "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_, "tensor(string)": np.str_,
}
_LABEL_TYPES = ("tensor(int64)", "tensor(int32)", "tensor(string)", "tensor(bool)")
_FLOAT_TYPES = ("tensor(float)", "tensor(double)", "tensor(float16)")


@dataclass(frozen=True)
class GraphInput:
    """One input of the graph: its name, ONNX type, numpy dtype and width (``None``: not fixed)."""

    name: str
    type: str
    dtype: Any
    width: int | None


def _width(shape: Sequence[Any]) -> int | None:
    if len(shape) < 2:
        return 1
    return shape[1] if isinstance(shape[1], int) else None


def graph_classes(path: str) -> list[Any] | None:
    """The class labels a classifier graph declares (ZipMap first, else a classifier node), or ``None``.

    Needs the ``onnx`` package; without it, ``None``.
    """
    try:
        import onnx
    except ImportError:
        return None
    graph = onnx.load(path, load_external_data=False).graph
    found: list[Any] | None = None
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.name in ("classlabels_int64s", "classlabels_ints") and attribute.ints:
                labels: list[Any] = [int(v) for v in attribute.ints]
            elif attribute.name == "classlabels_strings" and attribute.strings:
                labels = [v.decode("utf-8") for v in attribute.strings]
            else:
                continue
            if node.op_type == "ZipMap":
                return labels
            found = found or labels
    return found


class OnnxPredictor:
    """An ONNX graph behind the :class:`~ipfi_cli.core.predictor.Predictor` interface.

    ``session`` is an ``onnxruntime.InferenceSession``; ``classes`` the class labels the
    graph declares (see :func:`graph_classes`).
    """

    supports_batch = True
    can_learn = False

    def __init__(self, session: Any, classes: Sequence[Any] | None = None, source: str = "the ONNX model") -> None:
        self.session = session
        self.source = source
        self.inputs = [GraphInput(i.name, i.type, _DTYPES.get(i.type), _width(i.shape)) for i in session.get_inputs()]
        unsupported = [i for i in self.inputs if i.dtype is None]
        if unsupported:
            raise ModelError(f"the ONNX input {unsupported[0].name!r} has type {unsupported[0].type}, "
                             "which ipfi cannot feed (it feeds numeric, string and bool tensors)")
        if not self.inputs:
            raise ModelError("the ONNX graph has no inputs")
        #: one input per column (named after it), or one tensor taking the columns by position
        self.per_column = len(self.inputs) > 1
        if self.per_column:
            wide = [i for i in self.inputs if i.width not in (1, None)]
            if wide:
                raise ModelError(f"the ONNX graph has {len(self.inputs)} inputs and {wide[0].name!r} is "
                                 f"{wide[0].width} wide; ipfi feeds one tensor, or one [N, 1] input per column")
            self.columns: list[str] | None = [i.name for i in self.inputs]
            self.n_features: int | None = None
        else:
            self.columns = None
            self.n_features = self.inputs[0].width
        outputs = session.get_outputs()
        self.output_names = [o.name for o in outputs]
        first = outputs[0].type if outputs else ""
        self._label = 0 if first in _LABEL_TYPES else None
        self._proba: int | None = None
        for index, output in enumerate(outputs):
            if index == self._label:
                continue
            if output.type.startswith("seq(map(") or (self._label is not None and output.type in _FLOAT_TYPES):
                self._proba = index
                break
        self._value = 0 if first in _FLOAT_TYPES else None
        self._classes = list(classes) if classes else None
        self._zipmap = self._proba is not None and outputs[self._proba].type.startswith("seq(map(")

    @property
    def is_classifier(self) -> bool:
        return self._label is not None

    @property
    def has_proba(self) -> bool:
        return self._proba is not None and (self._classes is not None or self._zipmap)

    @property
    def classes(self) -> list[Any] | None:
        return list(self._classes) if self._classes is not None else None

    # -- inputs -----------------------------------------------------------------------------------
    def _convert(self, values: np.ndarray, graph_input: GraphInput, column: str) -> np.ndarray:
        """``values`` (one column, or the whole block) as the input's element type; errors name the column."""
        dtype = graph_input.dtype
        try:
            if dtype is np.str_:
                return np.array([str(v) for v in values.ravel().tolist()], dtype=object).reshape(values.shape)
            converted = np.asarray(values, dtype=np.float64 if values.dtype == object else None)
            return converted.astype(dtype, copy=False)
        except (TypeError, ValueError):
            for value in values.ravel().tolist():
                try:
                    np.asarray([value], dtype=np.float64)
                except (TypeError, ValueError):
                    break
            else:
                value = values.ravel()[0]
            raise ModelError(f"column {column!r} holds {value!r}, which is not a number, and the ONNX input "
                             f"{graph_input.name!r} takes {graph_input.type}") from None

    def feeds(self, block: np.ndarray, columns: Sequence[str]) -> dict[str, np.ndarray]:
        """The ``session.run`` inputs for ``block`` (columns in ``columns`` order)."""
        if not self.per_column:
            graph_input = self.inputs[0]
            if graph_input.dtype is not np.str_ and block.dtype == object:
                for j, column in enumerate(columns):  # find the column that does not convert
                    self._convert(block[:, j], graph_input, column)
            return {graph_input.name: self._convert(block, graph_input, ", ".join(columns))}
        index = {c: j for j, c in enumerate(columns)}
        return {i.name: self._convert(block[:, index[i.name]].reshape(-1, 1), i, i.name) for i in self.inputs}

    def check_columns(self, values: dict[str, Any]) -> None:
        """Convert one row as the graph needs it, so a column of the wrong type is named before any output."""
        columns = list(values)
        block = np.empty((1, len(columns)), dtype=object)
        block[0, :] = [values[c] for c in columns]
        self.feeds(block, columns)

    # -- outputs ----------------------------------------------------------------------------------
    def _run(self, block: np.ndarray, columns: Sequence[str], output: int) -> Any:
        try:
            return self.session.run([self.output_names[output]], self.feeds(block, columns))[0]
        except ModelError:
            raise
        except Exception as error:  # noqa: BLE001 - onnxruntime raises its own exception types
            text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise ModelError(f"{self.source}: onnxruntime failed: {text}") from None

    def probabilities(self, block: np.ndarray, columns: Sequence[str]) -> tuple[np.ndarray, list[Any]]:
        """Class probabilities ``[N, n_classes]`` and the classes, in the graph's order."""
        if self._proba is None:
            raise ModelError("the log loss needs probabilities, and this ONNX graph gives none")
        result = self._run(block, columns, self._proba)
        if self._zipmap:
            classes = self._classes if self._classes is not None else list(result[0]) if len(result) else []
            matrix = np.array([[row.get(c, 0.0) for c in classes] for row in result], dtype=np.float64)
            return matrix.reshape(len(result), len(classes)), list(classes)
        if self._classes is None:
            raise ModelError("the ONNX graph gives probabilities but does not name its classes (install the onnx "
                             "package to read them)")
        return np.asarray(result, dtype=np.float64).reshape(len(block), -1), list(self._classes)

    def predict_block(self, block: np.ndarray, columns: Sequence[str], output: Output,
                      targets: np.ndarray | None) -> np.ndarray:
        if len(block) == 0:
            return np.empty(0)
        if output is Output.PROBA:
            matrix, classes = self.probabilities(block, columns)
            return _proba_of(matrix, classes, targets)
        index = self._label if self._label is not None else self._value
        if index is None:
            index = 0
        result = np.asarray(self._run(block, columns, index)).reshape(len(block), -1)[:, 0]
        if output is Output.VALUE:
            return result.astype(np.float64) if result.dtype.kind in "fiub" else result
        return result

    def predict_records(self, records: list[dict[str, Any]], output: Output, target: Any) -> np.ndarray:
        return predict_records_as_block(self, records, output, target)

    def learn_one(self, x: dict[str, Any], y: Any) -> None:
        raise ModelError("an ONNX model cannot learn")


def load_onnx(path: str) -> tuple[Any, OnnxPredictor]:
    """Open ``path`` with onnxruntime (CPU); returns ``(session, predictor)``.

    The session's intra-op threads follow ``OMP_NUM_THREADS`` when set (``--threads`` sets it).
    """
    try:
        import onnxruntime as ort
    except ImportError:
        raise ModelFileError(path, ONNX_MISSING) from None
    if not os.path.isfile(path):
        raise ModelFileError(path, "no such model file")
    options = ort.SessionOptions()
    threads = os.environ.get("OMP_NUM_THREADS", "")
    if threads.isdigit():
        options.intra_op_num_threads = int(threads)
    options.log_severity_level = 3  # errors only: onnxruntime's warnings are not the user's business
    try:
        session = ort.InferenceSession(path, sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as error:  # noqa: BLE001 - onnxruntime raises its own exception types
        text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ModelFileError(path, f"not an ONNX model onnxruntime can run ({text})") from None
    try:
        classes = graph_classes(path)
    except Exception:  # noqa: BLE001 - the classes are a bonus: the graph already loaded
        classes = None
    try:
        return session, OnnxPredictor(session, classes, source=path)
    except ModelError as error:
        raise ModelFileError(path, str(error)) from None
