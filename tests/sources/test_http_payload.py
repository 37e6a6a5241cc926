"""A served model's request bodies: numbers go as numpy arrays (no Python object per value) and are
the same bytes as their Python values; a request holds at most MAX_REQUEST_VALUES values."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pytest

from ipfi_cli.core.losses import Output
from ipfi_cli.models.http import HttpOptions, HttpPredictor
from ipfi_cli.models.http_mlflow import MlflowProtocol
from ipfi_cli.models.http_options import MAX_REQUEST_VALUES
from ipfi_cli.models.http_v2 import V2Protocol

COLUMNS = ["a", "b", "c"]
OPTIONS = HttpOptions(url="http://127.0.0.1:9/v2/models/m")


def blocks() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    floats = rng.normal(size=(40, 3)) * 10.0 ** rng.integers(-12, 12, size=(40, 3))
    floats[0] = [np.nan, -0.0, 70.0]
    floats[1] = [46218.78, 1e16, 0.1]
    return {"float64": floats, "float32": floats.astype(np.float32),
            "int64": rng.integers(-2**62, 2**62, size=(40, 3)),
            "uint8": rng.integers(0, 255, size=(40, 3), dtype=np.uint8),
            "bool": rng.random((40, 3)) < 0.5, "object": floats.astype(object)}


def python_value(value: Any) -> Any:
    """What the body held for a value before numbers went as arrays: its Python value, floats as float."""
    return float(value) if isinstance(value, float) else value


def dumped(payload: Any) -> bytes:
    return orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY)


@pytest.mark.parametrize("kind", list(blocks()))
def test_v2_columns_are_the_bytes_of_their_python_values(kind):
    block = blocks()[kind]
    protocol = V2Protocol(OPTIONS)
    sent, columns, types = protocol.arrange(block, COLUMNS)
    body = dumped(protocol.payload(sent, columns, types, Output.LABEL))
    datatype = {"bool": "BOOL", "int64": "INT64", "uint8": "INT64"}.get(kind, "FP64")
    expected = {"inputs": [{"name": c, "datatype": datatype, "shape": [40],
                            "data": [python_value(v) for v in block[:, j].tolist()]} for j, c in enumerate(COLUMNS)],
                "parameters": {"content_type": "pd"}}
    assert body == orjson.dumps(expected)


@pytest.mark.parametrize("kind", list(blocks()))
def test_a_v2_tensor_is_flat_and_the_bytes_of_its_floats(kind):
    block = blocks()[kind]
    protocol = V2Protocol(OPTIONS)
    protocol.mode, protocol.input, protocol.content_type = "tensor", ("input-0", "FP64"), None
    body = dumped(protocol.payload(block, COLUMNS, [], Output.PROBA))
    expected = {"inputs": [{"name": "input-0", "datatype": "FP64", "shape": [40, 3],
                            "data": [float(v) for row in block.tolist() for v in row]}],
                "outputs": [{"name": "predict_proba"}]}
    assert body == orjson.dumps(expected)


@pytest.mark.parametrize("kind", list(blocks()))
def test_mlflow_rows_are_the_bytes_of_their_python_values(kind):
    block = blocks()[kind]
    body = dumped(MlflowProtocol(OPTIONS).payload(block, COLUMNS, [], Output.LABEL))
    expected = {"dataframe_split": {"columns": COLUMNS,
                                    "data": [[python_value(v) for v in row] for row in block.tolist()]}}
    assert body == orjson.dumps(expected)


def test_wide_rows_go_fewer_per_request():
    predictor = HttpPredictor(HttpOptions(url="http://127.0.0.1:9/invocations", max_request_rows=20_000))
    narrow = predictor._chunks(50_000, 9)
    assert [part.stop - part.start for part in narrow] == [20_000, 20_000, 10_000]
    wide = predictor._chunks(5_000, 1_000)  # 5 million values: ~1,048 rows a request
    per_request = MAX_REQUEST_VALUES // 1_000
    assert [part.stop - part.start for part in wide] == [per_request] * 4 + [5_000 - 4 * per_request]
    assert predictor._chunks(3, 10 * MAX_REQUEST_VALUES) == [slice(0, 1), slice(1, 2), slice(2, 3)]
