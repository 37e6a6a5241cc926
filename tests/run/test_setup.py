"""``ipfi_cli.run.setup``: a model's named inputs matched to the input's header."""

from __future__ import annotations

import csv
import io
import unicodedata

import joblib
import numpy as np
import pandas as pd
from sklearn.linear_model import LinearRegression
from typer.testing import CliRunner

from ipfi_cli.cli.app import app

NFC = unicodedata.normalize("NFC", "café")  # one code point for é, as most tools write it
NFD = unicodedata.normalize("NFD", "café")  # e and a combining accent, as macOS writes file names and some exports


def _run(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_a_header_name_in_another_unicode_form_is_the_models_column(tmp_path):
    """A model fitted on 'café' (NFC) and a header that spells it in NFD: the two look alike, and were
    refused with "the model needs column(s) 'café', which the input lacks". They are matched (a note
    says so) and the run gives the numbers of the same file with an NFC header (y = 2 café + b, an
    exact linear model: café's importance about twice b's)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 2))
    frame = pd.DataFrame({NFC: x[:, 0], "b": x[:, 1], "y": 2 * x[:, 0] + x[:, 1]})
    model = tmp_path / "cafe.joblib"
    joblib.dump(LinearRegression().fit(frame[[NFC, "b"]], frame["y"]), model)
    composed, decomposed = tmp_path / "nfc.csv", tmp_path / "nfd.csv"
    frame.to_csv(composed, index=False)
    frame.rename(columns={NFC: NFD}).to_csv(decomposed, index=False)
    options = ("-m", model, "-t", "y", "--seed", "0", "--no-live", "--running-mean", "--every", "1000")
    reference = _run("explain", composed, *options)
    result = _run("explain", decomposed, *options)
    assert reference.exit_code == 0 and result.exit_code == 0, result.stderr
    assert "matched to the input's header names" in result.stderr and "Unicode" in result.stderr
    [ref] = list(csv.DictReader(io.StringIO(reference.stdout)))
    [got] = list(csv.DictReader(io.StringIO(result.stdout)))
    assert list(got) == ["row", NFD, "b"]  # the traces name the input's columns, as the header spells them
    assert [got["row"], got[NFD], got["b"]] == [ref["row"], ref[NFC], ref["b"]]
    assert 1.6 < float(got[NFD]) / float(got["b"]) < 2.4  # absolute loss: E|2a - 2a'| / E|b - b'| = 2
