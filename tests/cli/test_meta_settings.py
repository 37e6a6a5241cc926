"""``--meta``'s "settings" keep the flat names and values they had before the settings became one
value per help panel (``ExplainSettings.flat``): the expected objects here were written by the
command before that change, on the same options."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from ipfi_cli.cli.app import app
from ipfi_cli.run.plan import Selection
from ipfi_cli.run.settings import ExplainSettings, KeySpec, LateLabels, ModelSpec, StateSpec

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"


def _meta(tmp_path, *args):
    meta = tmp_path / "meta.json"
    result = CliRunner().invoke(app, ["explain", *map(str, args), "--meta", str(meta), "--no-live", "-q"])
    assert result.exit_code == 0, result.stderr
    return json.loads(meta.read_text())


def test_a_learning_runs_meta_settings_are_the_flat_ones_of_before(tmp_path):
    rows = tmp_path / "rows.csv"
    rows.write_text("".join((SAMPLE / "agrawal_drift.csv").read_text().splitlines(keepends=True)[:301]))
    model, meta_path = str(SAMPLE / "agrawal_hoeffding.pkl"), str(tmp_path / "meta.json")
    meta = _meta(tmp_path, rows, "-m", model, "-t", "class", "--learn", "-M", "2", "--seed", "1", "--bounds",
                 "--every", "50", "--detect", "--alpha", "0.01")
    expected = {
        "model": model, "target": "class", "input": str(rows), "trust": None, "format": None, "na_values": None,
        "no_default_na": False, "delimiter": None, "decimal": None, "text": None, "skip_initial_space": False,
        "task": "classification", "loss": "zero-one", "learn": True, "save_model": None, "method": "pfi",
        "smoothing": "exponential", "removal": "marginal", "conditional_sampler": "gaussian", "inner": None,
        "empty_coalition": "imputed", "alpha": 0.01, "time_column": None, "half_life": None, "running_mean": False,
        "repeats": 2, "sampling": "geometric", "reservoir_size": 100, "seed": 1, "features": None, "drop": None,
        "groups": {}, "output": None, "output_format": None, "every": 50, "bounds": True, "delta": 0.05,
        "bounds_method": "chebyshev", "meta": meta_path, "batch_size": 1000, "on_bad_row": "fail", "state": None,
        "checkpoint_every": 10000, "skip_seen": True, "verbose": False, "quiet": True, "live": False, "debug": False,
        "watch": {"delta": 0.002, "min_change": 0.01, "events": None, "reference": None, "ndcg_threshold": 0.9,
                  "top_k": None, "fail_on_change": False, "stop_on_change": False},
        "http": None, "max_lost": None, "monitor": None, "labels": None, "id_column": None, "label_wait": "10000",
        "labels_follow": False, "allow_unknown_categories": False, "by": None, "max_keys": None, "workers": None,
        "scheduler": None}
    assert list(meta["settings"]) == list(expected)
    assert meta["settings"] == expected


def test_a_runs_state_reading_and_monitoring_settings_are_the_flat_ones_of_before(tmp_path):
    rows = tmp_path / "rows.csv"
    rows.write_text("".join((SAMPLE / "elec2_excerpt.csv").read_text().splitlines(keepends=True)[:301]))
    state, textfile = tmp_path / "run.state", tmp_path / "m.prom"
    meta = _meta(tmp_path, rows, "-m", SAMPLE / "elec2_hgb.joblib", "-t", "class", "-M", "2", "--seed", "3",
                 "--state", state, "--checkpoint-every", "100", "--na-values", "?",
                 "--na-values", "-", "--features", "nswprice,vicprice", "--group",
                 "demand=nswdemand,vicdemand", "-F", "jsonl", "--metrics-textfile", textfile, "--metrics-label", "a=b")
    settings = meta["settings"]
    assert {key: settings[key] for key in ("by", "max_keys", "workers", "scheduler", "state", "checkpoint_every",
                                           "skip_seen", "na_values", "features", "groups",
                                           "output_format")} == {
        "by": None, "max_keys": None, "workers": None, "scheduler": None, "state": str(state),
        "checkpoint_every": 100, "skip_seen": True, "na_values": ["?", "-"],
        "features": ["nswprice", "vicprice"], "groups": {"demand": ["nswdemand", "vicdemand"]},
        "output_format": "jsonl"}
    assert settings["monitor"] == {
        "metrics_port": None, "metrics_addr": "127.0.0.1", "metrics_textfile": str(textfile), "pushgateway": None,
        "push_job": "ipfi", "push_grouping": {}, "labels": {"a": "b"}, "webhook": None, "webhook_format": "json",
        "webhook_cooldown": 60.0, "webhook_retries": 3, "webhook_timeout": 5.0, "webhook_queue": 1000,
        "webhook_wait": 10.0, "interval": 1.0}


def test_the_optional_groups_flatten_to_their_options():
    settings = ExplainSettings(ModelSpec("m.pkl"), Selection(target="y", by=("k",)),
                               labels=LateLabels("labels.csv", "id", wait="30s", follow=True),
                               keys=KeySpec(max_keys=5), state=StateSpec("s", checkpoint_every=7, skip_seen=False))
    flat = settings.flat()
    assert {key: flat[key] for key in ("labels", "id_column", "label_wait", "labels_follow", "by", "max_keys",
                                       "state", "checkpoint_every", "skip_seen")} == {
        "labels": "labels.csv", "id_column": "id", "label_wait": "30s", "labels_follow": True, "by": ["k"],
        "max_keys": 5, "state": "s", "checkpoint_every": 7, "skip_seen": False}
