"""Start-up: a plain ``ipfi explain`` imports only what its run needs (issue: the cost of a row).

A fresh interpreter runs the command in-process on two rows of the bundled sample, then lists the
modules it imported. The libraries of options the run did not ask for (served models, metrics,
Parquet, Dask, plots, MLflow, ONNX) and ipfi's own modules for them stay out; so do the other
commands' modules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"

#: modules a plain run on a model file must not import: each belongs to an option it did not use
NOT_NEEDED = [
    "prometheus_client", "scipy.signal", "dask", "distributed", "matplotlib", "mlflow", "onnxruntime", "skops",
    "http.client",
    "ipfi_cli.models.http", "ipfi_cli.run.metrics", "ipfi_cli.run.webhook", "ipfi_cli.run.keyed_spread",
    "ipfi_cli.run.distributed", "ipfi_cli.io.spill", "ipfi_cli.core.sage", "ipfi_cli.core.pdp", "ipfi_cli.run.pdp",
    "ipfi_cli.run.batch", "ipfi_cli.evaluation", "ipfi_cli.plotting", "ipfi_cli.run.late_labels",
]


@pytest.mark.parametrize("n_rows", [2, 600])
def test_a_plain_explain_imports_only_what_it_uses(tmp_path, n_rows):
    """Two rows (start-up), and enough for micro-batches whose smoothing runs the compiled
    recursion (core/linear_filter.py: scipy's routine without ``import scipy.signal``)."""
    rows = (SAMPLE / "agrawal_static.csv").read_text().splitlines()[:n_rows + 1]
    assert len(rows) == n_rows + 1
    data = tmp_path / "two.csv"
    data.write_text("\n".join(rows) + "\n")
    code = ("import sys, json\n"
            f"sys.argv = ['ipfi', 'explain', {str(data)!r}, '-m', {str(SAMPLE / 'agrawal_hgb.joblib')!r}, "
            "'-t', 'class', '-q', '-o', " + repr(str(tmp_path / "out.csv")) + "]\n"
            "from ipfi_cli.__main__ import main\n"
            "try:\n    main()\nexcept SystemExit as end:\n    code = end.code\n"
            "print(json.dumps([code, sorted(sys.modules)]), file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    status, modules = json.loads(result.stderr.strip().splitlines()[-1])
    assert status in (0, None), result.stderr
    assert (tmp_path / "out.csv").read_text().count("\n") == n_rows + 1  # the header and every row: it really ran
    imported = [name for name in NOT_NEEDED if name in modules]
    assert imported == []
