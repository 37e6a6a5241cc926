"""A trace writer's ``write_many`` writes the bytes of ``write`` called row by row.

``write`` formats with Python's ``repr``; ``write_many`` takes orjson's text for floats of
magnitude in [1e-4, 1e15) and zeros. The expected bytes always come from ``write``.
"""

from __future__ import annotations

import io

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from ipfi_cli.io.writers import CsvTraceWriter, JsonlTraceWriter


def _bytes(writer_class, values, rows=None, many=True, **options):
    out = io.BytesIO()
    writer = writer_class(out, [f"f{j}" for j in range(values.shape[1])], **options)
    rows = list(range(1, len(values) + 1)) if rows is None else rows
    if many:
        writer.write_many(rows, values)
    else:
        for row, record in zip(rows, values.tolist()):
            writer.write(row, record)
    return out.getvalue(), writer.records


def _same(values, **options):
    for writer_class in (CsvTraceWriter, JsonlTraceWriter):
        assert _bytes(writer_class, values, **options) == _bytes(writer_class, values, many=False, **options)


def test_a_million_floats_of_every_magnitude():
    """Random bit patterns, log-uniform magnitudes (1e-320 to 1e300) and short decimals (fixed seed)."""
    rng = np.random.default_rng(20261125)
    bits = rng.integers(0, 2**63, size=300_000, dtype=np.int64).view(np.float64)
    spread = (rng.random(400_000) * 2 - 1) * 10.0 ** rng.uniform(-320, 300, 400_000)
    near = (rng.random(200_000) * 2 - 1) * 10.0 ** rng.uniform(-6, 17, 200_000)  # around the two edges
    short = np.round(rng.uniform(-1e5, 1e5, 100_000), 3)
    values = np.concatenate([bits, spread, near, short, [0.0, -0.0, 1e-4, -1e-4, 1e15, -1e15, 0.0001 * 0.9999,
                                                         999999999999999.9, np.nan, np.inf, -np.inf]])
    values = np.resize(values, (len(values) // 10 + 1) * 10).reshape(-1, 10)
    got, _ = _bytes(CsvTraceWriter, values)
    expected, _ = _bytes(CsvTraceWriter, values, many=False)
    assert got == expected


@settings(max_examples=300, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(1, 6), st.integers(1, 4)),
              elements=st.floats(allow_nan=True, allow_infinity=True, width=64)))
def test_any_block(values):
    _same(values)


def test_rows_need_not_be_consecutive():
    values = np.arange(12, dtype=float).reshape(4, 3) / 7
    _same(values, rows=[3, 10, 11, 400])
    _same(values, rows=range(5, 9))  # the numbers of a block's rows, sliced at the records due
    _same(values, rows=range(2, 14, 3))


def test_bounds_go_with_every_record():
    values = np.arange(6, dtype=float).reshape(3, 2) / 3
    out = io.BytesIO()
    CsvTraceWriter(out, ["a", "b"], bounds=True).write_many([1, 2, 3], values, [0.5, 0.125])
    assert out.getvalue().decode().splitlines()[1:] == [f"{r},{a!r},{b!r},0.5,0.125" for r, (a, b) in
                                                      zip([1, 2, 3], values.tolist())]
