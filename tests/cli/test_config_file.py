"""``--config FILE`` (TOML, one table per help panel) and ``--print-config``: a run from a config file
writes the bytes of the same flags; flags override the file; a bad key or value is one usage line
naming it and the file; a printed config (or a ``--meta`` file) runs the same settings again."""

from __future__ import annotations

import json
import tomllib

import pytest
from typer.testing import CliRunner

from ipfi_cli.cli.app import app

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def _ok(result):
    assert result.exit_code == 0, result.stderr
    return result.stdout


@pytest.fixture
def write(tmp_path):
    def write(text: str, name: str = "run.toml"):
        path = tmp_path / name
        path.write_text(text)
        return path
    return write


CASES = {
    # the options as flags; the same options as a file (written by hand: the expected side of the test)
    "explain": (
        ["-M", "3", "--seed", "7", "--features", "age,salary", "--features", "loan", "--every", "4", "-F", "jsonl"],
        """
        [model]
        model = "{model}"
        target = "class"
        [estimator]
        repeats = 3
        seed = 7
        features = ["age,salary", "loan"]
        [output]
        every = 4
        output-format = "jsonl"
        """),
    "explain-learn": (
        ["--learn", "-M", "2", "--seed", "3", "--sampling", "uniform", "--alpha", "0.05", "--bounds", "--running-mean",
         "--no-live"],
        """
        [model]
        model = "{model}"
        target = "class"
        learn = true
        [estimator]
        repeats = 2
        seed = 3
        sampling = "uniform"
        alpha = 0.05
        running-mean = true
        [output]
        bounds = true
        [display-and-errors]
        no-live = true
        """),
    "batch": (
        ["-M", "2", "--seed", "4", "--drop", "car,zipcode", "-g", "money=salary,commission", "--max-rows", "250"],
        """
        [model]
        model = "{model}"
        target = "class"
        [estimator]
        repeats = 2
        seed = 4
        drop = "car,zipcode"
        group = ["money=salary,commission"]
        [options]
        max-rows = 250
        """),
    "compare": (
        ["-M", "1", "--seed", "2", "--orderings", "2", "--sampling", "uniform", "--alpha", "0.01", "--alpha", "0.1"],
        """
        [model]
        model = "{model}"
        target = "class"
        [estimator]
        repeats = 1
        seed = 2
        alpha = [0.01, 0.1]
        [comparison]
        orderings = 2
        sampling = "uniform"
        """),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_config_file_writes_the_bytes_of_the_same_flags(case, write, static_csv, drift_csv, agrawal_small, hgb,
                                                          hoeffding):
    command, data, model = {"explain": ("explain", static_csv, hgb), "explain-learn": ("explain", drift_csv, hoeffding),
                            "batch": ("batch", agrawal_small, hgb), "compare": ("compare", static_csv, hgb)}[case]
    flags, toml = CASES[case]
    config = write("\n".join(line.strip() for line in toml.format(model=model).splitlines()))
    from_flags = _ok(invoke(command, data, "-m", model, "-t", "class", "-q", *flags))
    assert from_flags.count("\n") >= 7
    assert _ok(invoke(command, data, "--config", config, "-q")) == from_flags
    # the input in the file too ([input] input / data)
    table = "input" if command == "explain" else "data"
    with_input = write(f'[input]\n{table} = "{data}"\n' + config.read_text(), "with-input.toml")
    assert _ok(invoke(command, "--config", with_input, "-q")) == from_flags


def test_flags_override_the_file(write, static_csv, hgb):
    config = write(f'[model]\nmodel = "{hgb}"\ntarget = "class"\n[estimator]\nrepeats = 3\nseed = 7\n')
    overridden = _ok(invoke("explain", static_csv, "--config", config, "-M", "2", "-q"))
    assert overridden == _ok(invoke("explain", static_csv, "-m", hgb, "-t", "class", "-M", "2", "--seed", "7", "-q"))
    assert overridden != _ok(invoke("explain", static_csv, "--config", config, "-q"))
    # the file's position on the line does not matter (it is read first)
    assert _ok(invoke("explain", static_csv, "-M", "2", "--config", config, "-q")) == overridden


@pytest.mark.parametrize(("text", "said"), [
    ("[estimator]\nrepetas = 3\n", "[estimator] repetas: no such option of ipfi explain (did you mean repeats?)"),
    ("[estimatr]\nrepeats = 3\n", "no table [estimatr] in ipfi explain's options (did you mean estimator?)"),
    ("[served-model]\nmax_request_rows = 9\n",
     "[served-model] max_request_rows: no such option of ipfi explain (it is max-request-rows in [served-model])"),
    ("[model]\nrepeats = 3\n", "[model] repeats: no such option of ipfi explain (it is repeats in [estimator])"),
    ("[estimator]\nrepeats = \"3\"\n", "[estimator] repeats: expected a whole number, got '3'"),
    ("[estimator]\nalpha = true\n", "[estimator] alpha: expected a number, got True"),
    ("[model]\nlearn = 1\n", "[model] learn: expected true or false, got 1"),
    ("[estimator]\nfeatures = [1, 2]\n", "[estimator] features: expected a string or a list of them, got 1"),
    ("repeats = 3\n", "no table [repeats] in ipfi explain's options (repeats is a key of [estimator])"),
    ("[estimator\n", "is not TOML"),
])
def test_a_bad_key_or_value_is_one_line_naming_it_and_the_file(text, said, write, static_csv, hgb):
    config = write(text)
    result = invoke("explain", static_csv, "-m", hgb, "-t", "class", "--config", config)
    assert result.exit_code == 2 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert f"'{config}'" in result.stderr and said in result.stderr


def test_a_value_the_option_refuses_is_named_by_its_key_and_file(write, static_csv, hgb):
    config = write("[estimator]\nrepeats = 0\nsampling = \"uniform\"\n")
    result = invoke("explain", static_csv, "-m", hgb, "-t", "class", "--config", config)
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1
    assert f"'repeats' in [estimator] of '{config}'" in result.stderr
    # given as a flag, the same value is the flag's error
    flag = invoke("explain", static_csv, "-m", hgb, "-t", "class", "-M", "0")
    assert flag.exit_code == 2 and "'--repeats'" in flag.stderr and str(config) not in flag.stderr


def test_print_config_round_trips_and_leaves_secrets_out(tmp_path, static_csv, hgb, write):
    flags = ["-m", hgb, "-t", "class", "-M", "2", "--seed", "5", "--features", "age,salary,loan", "--smoothing", "mean"]
    printed = invoke("explain", static_csv, *flags, "-H", "Authorization: Bearer s3cret",
                     "--webhook", "https://hooks.example.com/services/T0/TOKEN", "--print-config")
    text = _ok(printed)
    assert "s3cret" not in text and "TOKEN" not in text
    assert "# left out, [served-model] header: its values are secrets" in text
    assert "# left out, [monitoring] webhook: the URL's path is often its token" in text
    tables = tomllib.loads(text)
    assert tables["estimator"]["repeats"] == 2 and tables["estimator"]["seed"] == 5
    assert tables["estimator"]["smoothing"] == "mean" and tables["model"]["target"] == "class"
    assert tables["input"]["input"] == str(static_csv) and "header" not in tables["served-model"]
    config = write(text, "printed.toml")
    assert (_ok(invoke("explain", "--config", config, "-q"))
            == _ok(invoke("explain", static_csv, *flags, "-q")))


def test_print_config_runs_nothing(tmp_path, static_csv, hgb):
    out = tmp_path / "traces.csv"
    result = invoke("explain", static_csv, "-m", hgb, "-t", "class", "-o", out, "--print-config")
    assert result.exit_code == 0 and not out.exists() and result.stderr == ""
    assert tomllib.loads(result.stdout)["output"]["output"] == str(out)
    assert "# seed not given: each run draws one" in result.stdout


def test_the_meta_file_records_the_config_with_the_drawn_seed(tmp_path, drift_csv, hoeffding, write):
    """No --seed: the run draws one, and --meta's "config" holds it; --config META (or the config
    printed from it) runs the same bytes again."""
    first, meta = tmp_path / "first.csv", tmp_path / "run.meta.json"
    _ok(invoke("explain", drift_csv, "-m", hoeffding, "-t", "class", "--learn", "-M", "2", "-o", first, "--meta", meta,
               "-q"))
    document = json.loads(meta.read_text())
    assert document["config"]["estimator"]["seed"] == document["seed"]
    assert document["config"]["model"] == {"model": hoeffding, "target": "class", "learn": True, "task": "auto",
                                           "allow-unknown-categories": False}
    again = tmp_path / "again.csv"
    _ok(invoke("explain", "--config", meta, "-o", again, "--meta", tmp_path / "again.json", "-q"))
    assert again.read_bytes() == first.read_bytes()
    printed = write(_ok(invoke("explain", "--config", meta, "--print-config")), "from-meta.toml")
    third = tmp_path / "third.csv"
    _ok(invoke("explain", "--config", printed, "-o", third, "--meta", tmp_path / "third.json", "-q"))
    assert third.read_bytes() == first.read_bytes()


def test_a_json_file_must_be_a_meta_file(write, static_csv, hgb):
    config = write('{"settings": {}}', "other.json")
    result = invoke("explain", static_csv, "-m", hgb, "-t", "class", "--config", config)
    assert result.exit_code == 2 and "must be an ipfi --meta file" in result.stderr


def test_every_option_of_every_panel_is_a_key():
    """The keys come from the commands' parameters (no list kept by hand): every option but
    --config/--print-config/--help is one key, and no key is in two tables."""
    import typer.main

    from ipfi_cli.cli.config import keys_of

    group = typer.main.get_command(app)
    for name in ("explain", "batch", "compare", "pdp"):
        command = group.commands[name]  # type: ignore[attr-defined]
        keys = keys_of(command)
        options = [p for p in command.params if p.name not in ("config", "print_config", "help")]
        assert len(keys) == len(options) and len({k.key for k in keys}) == len(keys)
        assert {"--config", "--print-config"} <= {o for p in command.params for o in p.opts}
    explain = {(k.table, k.key) for k in keys_of(group.commands["explain"])}  # type: ignore[attr-defined]
    assert {("served-model", "max-request-rows"), ("checkpoints-and-resume", "skip-seen"), ("input", "input"),
            ("monitoring", "webhook"), ("one-explainer-per-key", "by"), ("late-labels", "id")} <= explain


def test_the_hash_seed_decision_reads_the_model_from_the_config(tmp_path, hgb, hoeffding, write):
    from ipfi_cli.cli.hash_seed import hash_seed_needed

    sklearn_config = write(f'[model]\nmodel = "{hgb}"\n', "sklearn.toml")
    river_config = write(f'[model]\nmodel = "{hoeffding}"\n', "river.toml")
    assert not hash_seed_needed(["ipfi", "explain", "data.csv", "--config", str(sklearn_config)])
    assert hash_seed_needed(["ipfi", "explain", "data.csv", f"--config={river_config}"])
    # a -m on the command line wins, as in the run
    assert hash_seed_needed(["ipfi", "batch", "data.csv", "--config", str(sklearn_config), "-m", hoeffding])
