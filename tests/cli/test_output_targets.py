"""Output targets through the real command: --save-model refused before the first row when it could
not be written at the end, and full disks named with exit 1."""

from __future__ import annotations

import os
import pickle
import stat
import sys

import pytest

LEARN = ["-t", "class", "--seed", "1", "-M", "2", "--no-live", "--learn"]


def test_save_model_in_a_missing_folder_is_refused_before_the_first_row(run, drift_csv, hoeffding, tmp_path):
    output = tmp_path / "traces.csv"
    result = run("explain", drift_csv, "-m", hoeffding, *LEARN, "-o", output,
                 "--save-model", tmp_path / "no" / "such" / "model.joblib")
    assert result.exit_code == 2, result.stderr
    assert "--save-model" in result.stderr and "no such directory" in result.stderr
    assert not output.exists()  # refused before any row, not after the run


def test_save_model_on_a_directory_is_refused_before_the_first_row(run, drift_csv, hoeffding, tmp_path):
    result = run("explain", drift_csv, "-m", hoeffding, *LEARN, "--save-model", tmp_path)
    assert result.exit_code == 2 and "is a directory" in result.stderr, result.stderr
    assert result.stdout == ""


def test_save_model_as_skops_that_skops_cannot_hold_is_refused_before_the_first_row(run, drift_csv, hoeffding,
                                                                                      tmp_path):
    sio = pytest.importorskip("skops.io")
    try:
        sio.dumps(pickle.loads(open(hoeffding, "rb").read()))
    except Exception:  # noqa: BLE001 - whatever skops raises is what the command must foresee
        pass
    else:
        pytest.skip("this skops version can save the river tree")
    result = run("explain", drift_csv, "-m", hoeffding, *LEARN, "--save-model", tmp_path / "tree.skops")
    assert result.exit_code == 2 and "save it as .joblib" in result.stderr, result.stderr
    assert result.stdout == "" and list(tmp_path.iterdir()) == []


def test_save_model_as_skops_without_skops_is_refused_before_the_first_row(run, drift_csv, hoeffding, tmp_path,
                                                                           monkeypatch):
    monkeypatch.setitem(sys.modules, "skops", None)  # import skops.io now raises ImportError
    monkeypatch.setitem(sys.modules, "skops.io", None)
    result = run("explain", drift_csv, "-m", hoeffding, *LEARN, "--save-model", tmp_path / "tree.skops")
    assert result.exit_code == 2 and "pip install" in result.stderr, result.stderr
    assert result.stdout == ""


def test_save_model_to_a_device_is_written_in_place(run, drift_csv, hoeffding, tmp_path):
    result = run("explain", drift_csv, "-m", hoeffding, *LEARN, "-q", "--save-model", os.devnull)
    assert result.exit_code == 0, result.stderr
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    saved = tmp_path / "learned.joblib"
    result = run("explain", drift_csv, "-m", hoeffding, *LEARN, "-q", "--save-model", saved)
    assert result.exit_code == 0, result.stderr
    import joblib

    assert type(joblib.load(saved)).__name__ == "HoeffdingAdaptiveTreeClassifier"


@pytest.mark.parametrize(("command", "option"), [
    ("explain", "--meta"), ("explain", "--metrics-textfile"), ("batch", "--output"), ("compare", "--output"),
    ("compare", "--traces"), ("batch", "--metrics-textfile")])
@pytest.mark.parametrize("target", ["missing folder", "directory"])
def test_an_output_written_at_the_end_is_refused_before_the_work(run, static_csv, hgb, tmp_path, command, option,
                                                                  target):
    """Files first written after the work (a batch's records, --meta, a textfile) in a folder that does
    not exist, or naming a directory, were found only at the end: exit 1 after the whole run."""
    path = tmp_path / "no" / "such" / "file.out" if target == "missing folder" else tmp_path
    result = run(command, static_csv, "-m", hgb, "-t", "class", "--seed", "1", "-q", option, path)
    assert result.exit_code == 2, result.stderr
    assert result.stdout == ""  # refused before any record
    assert len(result.stderr.splitlines()) == 1 and option in result.stderr
    assert ("no such directory" if target == "missing folder" else "is a directory") in result.stderr


# -- full disks ------------------------------------------------------------------------------------
FULL = "/dev/full"
needs_dev_full = pytest.mark.skipif(not os.path.exists(FULL), reason="needs /dev/full (Linux)")


@pytest.mark.process  # a shell pipeline into /dev/full
@needs_dev_full
def test_events_on_a_full_disk_are_named_and_exit_1(tmp_path):
    """--events /dev/full: the option and file named, exit 1, the traces written so far complete."""
    from .conftest import run_shell

    traces = tmp_path / "traces.csv"
    result = run_shell(f"python -m ipfi_cli explain sample_data/agrawal_drift.csv -m sample_data/agrawal_hoeffding.pkl "
                       f"-t class --learn --seed 1 -M 2 --no-live -q --detect --events {FULL} -o {traces}"
                       .replace("python", sys.executable, 1))
    stderr = result.stderr.decode()
    assert result.returncode == 1, stderr
    assert stderr.strip() == f"ipfi: error: --events {FULL}: cannot write (No space left on device)", stderr
    lines = traces.read_text().splitlines()
    assert len(lines) > 2 and all(line.count(",") == lines[0].count(",") for line in lines)


@pytest.mark.process  # a shell pipeline into /dev/full
@needs_dev_full
@pytest.mark.parametrize("command", ["batch", "compare", "explain"])
def test_stdout_on_a_full_disk_is_named_and_exit_1(command, static_csv):
    from .conftest import run_shell

    extra = " --no-live" if command == "explain" else ""
    result = run_shell(f"{sys.executable} -m ipfi_cli {command} {static_csv} -m sample_data/agrawal_hgb.joblib "
                       f"-t class --seed 1 -M 2 -q{extra} > {FULL}")
    stderr = result.stderr.decode()
    assert result.returncode == 1, stderr
    assert stderr.strip() == "ipfi: error: <stdout>: cannot write (No space left on device)", stderr
