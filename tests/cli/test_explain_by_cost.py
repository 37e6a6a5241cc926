"""``ipfi explain --by`` at about a plain run's cost: every key's rows of a micro-batch go to the model in
one call (not one per key), the first rows of new keys are checked together, and a row the model fails on
in that joint call is still found, named and skipped, each key's traces those of a run on its rows alone.

The model's calls are counted where ipfi hands them to the scikit-learn model (the adapter), in-process.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ipfi_cli.models.adapters import SklearnPredictor
from tests.cli.conftest import SAMPLE
from tests.cli.test_explain_by import key_files, of_key

N_KEYS = 20
ROWS = 400  # 4 micro-batches of 100, 5 rows of each key in each


@pytest.fixture
def keyed_data(tmp_path) -> Path:
    """Agrawal rows with a key ``shop`` that alternates row by row (the hardest case for the micro-batches)."""
    lines = (SAMPLE / "agrawal_static.csv").read_text().splitlines()
    path = tmp_path / "keyed.csv"
    path.write_text("\n".join([lines[0] + ",shop", *(f"{line},s{i % N_KEYS}"
                                                      for i, line in enumerate(lines[1:1 + ROWS]))]) + "\n")
    return path


@pytest.fixture
def counted(monkeypatch) -> dict[str, int]:
    """The calls to the model: blocks (the explained rows) and records (the check of a key's first row,
    which the adapter predicts as a block: not counted as one)."""
    counts = {"block": 0, "records": 0}
    inside = []
    block, records = SklearnPredictor.predict_block, SklearnPredictor.predict_records

    def counted_block(self, *args, **kwargs):
        counts["block"] += not inside
        return block(self, *args, **kwargs)

    def counted_records(self, *args, **kwargs):
        counts["records"] += 1
        inside.append(True)
        try:
            return records(self, *args, **kwargs)
        finally:
            inside.pop()

    monkeypatch.setattr(SklearnPredictor, "predict_block", counted_block)
    monkeypatch.setattr(SklearnPredictor, "predict_records", counted_records)
    return counts


def _explain(run, data, hgb, *options):
    result = run("explain", data, "-m", hgb, "-t", "class", "--seed", "5", "--no-live", "-q", "--by", "shop",
                 "--batch-size", "100", *options)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_one_model_call_per_micro_batch_for_every_key(run, keyed_data, hgb, counted):
    """20 keys in each of 4 micro-batches: 4 block calls (one per key per micro-batch made 80), and the
    first rows of the 20 new keys checked in one call per label (2 classes), not one per key (20)."""
    traces = _explain(run, keyed_data, hgb)
    assert counted["block"] == ROWS // 100, counted
    assert counted["records"] <= 2, counted
    assert traces.count("\n") == 1 + ROWS  # a record per row (--every 1)


def test_with_max_keys_one_call_per_group_of_live_keys_and_the_same_bytes(run, keyed_data, hgb, counted):
    """--max-keys 5: the keys go in groups of 5 (all live while their blocks are out): 4 calls per
    micro-batch (one per key made 20), the first rows of the new keys checked in one call per label for
    the whole micro-batch, and the traces of the run without eviction."""
    whole = _explain(run, keyed_data, hgb, "--every", "3")
    counted["block"] = counted["records"] = 0
    evicting = _explain(run, keyed_data, hgb, "--every", "3", "--max-keys", "5")
    assert counted["block"] == (ROWS // 100) * (N_KEYS // 5), counted
    assert counted["records"] <= 2, counted  # the new keys' first rows: checked together, not per group
    assert evicting == whole


def test_a_row_the_model_fails_on_in_the_joint_call_is_skipped_as_one_key_would(run, keyed_data, hgb, tmp_path,
                                                                               monkeypatch):
    """The model fails on one row (row 137, key s16): the joint call fails, each key of its micro-batch goes
    alone, the row is found, named and skipped; every key's traces are a run's on its rows alone (that key's
    run skips the same row), byte for byte."""
    lines = keyed_data.read_text().splitlines()
    bad = [float(v) for v in lines[137].split(",")[:-2]]  # its features (not the label, not the key)
    block = SklearnPredictor.predict_block

    def failing(self, data, columns, output, targets):
        if np.any(np.all(np.asarray(data, dtype=np.float64) == bad, axis=1)):
            raise ValueError("cannot predict this row")
        return block(self, data, columns, output, targets)

    monkeypatch.setattr(SklearnPredictor, "predict_block", failing)
    result = run("explain", keyed_data, "-m", hgb, "-t", "class", "--seed", "5", "--no-live", "--by", "shop",
                 "--batch-size", "100", "--every", "2", "--on-bad-row", "skip")
    assert result.exit_code == 0, result.stderr
    assert "row 137" in result.stderr
    keys = [(f"s{k}",) for k in range(N_KEYS)]
    for key, path in key_files(keyed_data, ["shop"], keys, tmp_path).items():
        alone = run("explain", path, "-m", hgb, "-t", "class", "--seed", "5", "--no-live", "-q", "--drop", "shop",
                    "--batch-size", "100", "--every", "2", "--on-bad-row", "skip")
        assert alone.exit_code == 0, alone.stderr
        assert of_key(result.stdout, 1, key) == alone.stdout, key
