"""``ipfi plot``: PNGs from compare and explain traces; a clear message without matplotlib."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ipfi_cli.cli.app import app

runner = CliRunner()
PNG = b"\x89PNG\r\n\x1a\n"


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_plot_compare_traces(tmp_path):
    traces = tmp_path / "traces.csv"
    lines = ["method,row,a,b,c"]
    lines += [f"ipfi-geometric-0.001,{r},{0.3 + r / 1000},{0.1},{-0.01}" for r in range(1, 201)]
    lines += [f"ipfi-uniform-0.001,{r},{0.3},{0.1 + r / 2000},{0.0}" for r in range(1, 201)]
    lines += ["interval,100,0.35,0.12,0.0", "interval,200,0.4,0.1,0.0"]
    traces.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.png"
    result = invoke("plot", traces, "-o", out, "--drift-at", "100", "--top-k", "2", "--title", "demo")
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == PNG
    assert "2 panel(s)" in result.stderr


def test_plot_explain_traces_with_bounds_and_separate_interval_file(tmp_path):
    traces = tmp_path / "explain.csv"
    traces.write_text("row,a,b,a_bound,b_bound\n1,,,,\n2,0.5,0.1,0.2,0.1\n3,0.4,0.2,0.2,0.1\n")
    interval = tmp_path / "interval.csv"
    interval.write_text("row,a,b\n3,0.45,0.15\n")
    out = tmp_path / "explain.png"
    result = invoke("plot", traces, "-o", out, "--interval-traces", interval, "-q")
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == PNG and result.stderr == ""


def test_a_feature_named_method_in_explains_traces_is_a_feature(tmp_path):
    """Traces of explain (written before a feature named 'method' was refused): a method column after row is
    a feature, not compare's method column (ipfi plot once drew 299 panels, one per distinct value)."""
    traces = tmp_path / "explain.csv"
    traces.write_text("row,method,b\n1,,\n" + "".join(f"{r},{0.5 + r / 1000},0.1\n" for r in range(2, 300)))
    out = tmp_path / "explain.png"
    result = invoke("plot", traces, "-o", out)
    assert result.exit_code == 0, result.output
    assert "wrote" in result.stderr and "(1 panel(s), 2 features)" in result.stderr


def test_plot_errors(tmp_path):
    missing = invoke("plot", tmp_path / "none.csv", "-o", tmp_path / "x.png")
    assert missing.exit_code == 1 and "no such file" in missing.stderr
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    result = invoke("plot", bad, "-o", tmp_path / "x.png")
    assert result.exit_code == 1 and "no 'row' column" in result.stderr


def test_plot_without_matplotlib_says_how_to_install(tmp_path, monkeypatch):
    import ipfi_cli.plotting as plotting

    def unavailable():
        raise plotting.PlottingUnavailable(plotting.INSTALL_HINT)

    monkeypatch.setattr(plotting, "pyplot", unavailable)
    traces = tmp_path / "t.csv"
    traces.write_text("row,a\n1,0.1\n")
    result = invoke("plot", traces, "-o", tmp_path / "x.png")
    assert result.exit_code == 1
    assert "pip install 'ipfi-cli[plot]'" in result.stderr


def test_plot_takes_ipfi_batch_records_as_the_dashed_reference(tmp_path, monkeypatch):
    """`ipfi batch`'s records (feature,importance,...,n_rows), CSV or JSONL, are one dashed level per
    feature over every row: the values drawn are the records' importances."""
    import csv
    import io
    from pathlib import Path

    import ipfi_cli.plotting as plotting

    sample = Path(__file__).resolve().parents[2] / "sample_data"
    data = tmp_path / "rows.csv"
    data.write_text("".join(open(sample / "agrawal_static.csv").readlines()[:41]))
    common = ["-m", sample / "agrawal_hgb.joblib", "-t", "class", "--seed", "1", "-M", "2", "-q"]
    traces = invoke("explain", data, *common, "--no-live")
    assert traces.exit_code == 0, traces.stderr
    (tmp_path / "traces.csv").write_text(traces.stdout)
    drawn = []
    original = plotting.plot_importance

    def recording(path, names, panels, **kw):
        drawn.append((list(names), kw["interval"]))
        return original(path, names, panels, **kw)

    monkeypatch.setattr(plotting, "plot_importance", recording)
    for fmt in ("csv", "jsonl"):
        batch = invoke("batch", data, *common, "-F", fmt)
        assert batch.exit_code == 0, batch.stderr
        records = tmp_path / f"batch.{fmt}"
        records.write_text(batch.stdout)
        out = tmp_path / f"{fmt}.png"
        result = invoke("plot", tmp_path / "traces.csv", "-o", out, "--interval-traces", records)
        assert result.exit_code == 0, result.stderr
        assert out.read_bytes()[:8] == PNG
    expected = {r["feature"]: float(r["importance"]) for r in csv.DictReader(io.StringIO(
        (tmp_path / "batch.csv").read_text()))}
    for names, reference in drawn:
        assert reference.label == "batch PFI" and reference.rows.tolist() == [40]
        assert dict(zip(names, reference.values[0].tolist())) == expected
    bad = tmp_path / "other.csv"
    bad.write_text("feature,importance\nnot_a_feature,0.5\n")
    result = invoke("plot", tmp_path / "traces.csv", "-o", tmp_path / "x.png", "--interval-traces", bad)
    assert result.exit_code == 1 and "no feature(s) salary" in result.stderr, result.stderr


def _plot_in_a_process(*args) -> subprocess.CompletedProcess[bytes]:
    """``ipfi plot`` in its own process: matplotlib's warnings are shown once per process, so an
    in-process run could miss them."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root / "src"))
    env.pop("PYTHONWARNINGS", None)
    return subprocess.run([sys.executable, "-m", "ipfi_cli", "plot", *map(str, args)], capture_output=True,
                          env=env, timeout=120)


@pytest.mark.process  # the command in a process (its warnings as a user sees them)
def test_names_with_control_characters_and_dollars_are_drawn_escaped_without_raw_warnings(tmp_path):
    """A feature (and method, title) holding ESC and BEL: no glyph warning with a raw ESC, no
    'UserWarning' with a source path; a name with a mathtext command is drawn as text."""
    hostile = "w\x1b[2J\x1b]0;pwned\x07"
    traces = tmp_path / "traces.csv"
    lines = [f'method,row,"{hostile}",cost $\\nope$,c']
    lines += [f"ipfi-{hostile},{r},{0.3 + r / 100},{0.2},{0.1}" for r in range(1, 21)]
    traces.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.png"
    result = _plot_in_a_process(traces, "-o", out, "--title", f"t{hostile}")
    assert result.returncode == 0, result.stderr
    assert out.read_bytes()[:8] == PNG
    assert b"\x1b" not in result.stderr and b"\x07" not in result.stderr
    assert b"UserWarning" not in result.stderr and b"plotting.py" not in result.stderr, result.stderr
    result = _plot_in_a_process(traces, "-o", tmp_path / "quiet.png", "-q")
    assert result.returncode == 0 and result.stderr == b"", result.stderr


@pytest.mark.process  # the command in a process (its warnings as a user sees them)
def test_matplotlibs_warnings_are_said_escaped_once(tmp_path):
    """A glyph no font has (a CJK name) still warns: one ``ipfi: warning:`` line, escaped."""
    traces = tmp_path / "traces.csv"
    traces.write_text("row,\u4e2d\u6587,b\n1,0.1,0.2\n2,0.2,0.3\n", encoding="utf-8")
    result = _plot_in_a_process(traces, "-o", tmp_path / "out.png")
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.decode().splitlines() if not line.startswith("ipfi: wrote ")]
    assert warnings and all(line.startswith("ipfi: warning: ") for line in warnings), warnings
    assert len(warnings) == len(set(warnings))
    assert "UserWarning" not in result.stderr.decode()


def test_a_keyed_trace_is_plotted_one_key_at_a_time(tmp_path, monkeypatch):
    """The traces of `explain --by region` interleave the keys' rows: drawn as one line they zigzag
    between keys. Without --key the plot is refused naming the key columns; with it, that key's rows
    are the ones drawn (the line's points are checked, through the plotting function)."""
    import ipfi_cli.plotting as plotting

    traces = tmp_path / "keyed.csv"
    traces.write_text("region,row,a,b\nus,1,0.1,0.0\neu,1,0.9,0.5\nus,2,0.2,0.0\neu,2,0.8,0.5\n")
    refused = invoke("plot", traces, "-o", tmp_path / "x.png")
    assert refused.exit_code == 1 and "--key region=us" in refused.stderr, refused.stderr
    drawn = []
    original = plotting.plot_importance
    monkeypatch.setattr(plotting, "plot_importance",
                        lambda output, names, panels, **kw: (drawn.extend(panels), original(output, names, panels,
                                                                                            **kw))[1])
    result = invoke("plot", traces, "-o", tmp_path / "eu.png", "--key", "region=eu")
    assert result.exit_code == 0, result.output
    assert drawn[0].rows.tolist() == [1, 2] and drawn[0].values.tolist() == [[0.9, 0.5], [0.8, 0.5]]
    assert invoke("plot", traces, "-o", tmp_path / "y.png", "--key", "region=mars").exit_code == 1
    assert invoke("plot", traces, "-o", tmp_path / "y.png", "--key", "city=x").exit_code == 2


def test_compare_records_are_told_apart_from_its_traces(tmp_path, drift_small, hoeffding):
    """The records of compare (method,feature,...,row,...) once got a message about explain --by keys."""
    records = tmp_path / "compare.csv"
    traces = tmp_path / "traces.csv"
    result = invoke("compare", drift_small, "-m", hoeffding, "-t", "class", "--learn", "--interval", "100", "-M", "1",
                    "--seed", "0", "-q", "-o", records, "--traces", traces)
    assert result.exit_code == 0, result.output
    for args in ((records,), (traces, "--interval-traces", records)):
        refused = invoke("plot", *args, "-o", tmp_path / "x.png")
        assert refused.exit_code == 1
        line, = refused.stderr.strip().splitlines()
        assert "these are the records of `ipfi compare`" in line and "--traces FILE" in line, line
        assert "explain --by" not in line
    drawn = invoke("plot", traces, "-o", tmp_path / "x.png", "-q")
    assert drawn.exit_code == 0, drawn.output


def test_a_one_row_trace_is_drawn_as_a_point(tmp_path):
    """One explained row (the first row is NaN: nothing to compare with) drew empty axes."""
    traces = tmp_path / "one.csv"
    traces.write_text("row,a\n1,\n2,0.5\n")
    out = tmp_path / "one.svg"
    result = invoke("plot", traces, "-o", out, "-q")
    assert result.exit_code == 0, result.output
    # a line of one point draws nothing; a marker is a filled path in the first highlighted colour
    assert "fill: #e69f00" in out.read_text().lower()


def test_a_key_is_matched_as_explain_by_keyed_the_rows_and_named_in_the_title(tmp_path, monkeypatch):
    """explain --by shop takes 7, 07 and 7.0 for one key (as numbers); plot --key shop=7.0 found no rows."""
    import joblib
    import numpy as np
    from sklearn.linear_model import LinearRegression

    import ipfi_cli.plotting as plotting

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    shops = ["7", "07", "7.0", "12"] * 10
    data = tmp_path / "shops.csv"
    data.write_text("shop,a,b,y\n" + "".join(f"{s},{a!r},{b!r},{2 * a!r}\n" for s, (a, b) in zip(shops, X.tolist())))
    joblib.dump(LinearRegression().fit(X, 2 * X[:, 0]), tmp_path / "m.joblib")
    traces = tmp_path / "keyed.csv"
    result = invoke("explain", data, "-m", tmp_path / "m.joblib", "-t", "y", "--by", "shop", "--loss", "squared",
                    "--features", "a,b", "--seed", "0", "-q", "-o", traces)
    assert result.exit_code == 0, result.output
    drawn = []
    original = plotting.plot_importance
    monkeypatch.setattr(plotting, "plot_importance",
                        lambda output, names, panels, **kw: (drawn.append((panels, kw["title"])),
                                                             original(output, names, panels, **kw))[1])
    for spelled in ("7", "07", "7.0", " 7 "):
        result = invoke("plot", traces, "-o", tmp_path / "seven.png", "--key", f"shop={spelled}", "-q")
        assert result.exit_code == 0, (spelled, result.output)
        panels, title = drawn[-1]
        assert panels[0].rows.tolist() == list(range(1, 31)), spelled  # 30 rows of shop 7, numbered by key
        assert title == "shop=7", title
    result = invoke("plot", traces, "-o", tmp_path / "twelve.png", "--key", "shop=12", "--title", "mine", "-q")
    assert result.exit_code == 0 and drawn[-1][0][0].rows.tolist() == list(range(1, 11)) and drawn[-1][1] == "mine"


def test_text_keys_keep_their_spelling(tmp_path, monkeypatch):
    """explain --by shop --text shop keeps 07 and 7 apart; plot read the traces' key 07 back as 7, so
    --key shop=07 drew both keys' rows as one line and titled it shop=7."""
    import joblib
    import numpy as np
    from sklearn.linear_model import LinearRegression

    import ipfi_cli.plotting as plotting

    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 2))
    shops = ["07", "7"] * 20
    data = tmp_path / "shops.csv"
    data.write_text("shop,a,b,y\n" + "".join(f"{s},{a!r},{b!r},{2 * a!r}\n" for s, (a, b) in zip(shops, X.tolist())))
    joblib.dump(LinearRegression().fit(X, 2 * X[:, 0]), tmp_path / "m.joblib")
    traces = tmp_path / "keyed.csv"
    result = invoke("explain", data, "-m", tmp_path / "m.joblib", "-t", "y", "--by", "shop", "--text", "shop",
                    "--loss", "squared", "--features", "a,b", "--seed", "0", "-q", "-o", traces)
    assert result.exit_code == 0, result.output
    assert {line.split(",")[0] for line in traces.read_text().splitlines()[1:]} == {"07", "7"}
    drawn = []
    original = plotting.plot_importance
    monkeypatch.setattr(plotting, "plot_importance",
                        lambda output, names, panels, **kw: (drawn.append((panels, kw["title"])),
                                                             original(output, names, panels, **kw))[1])
    for spelled in ("07", "7"):
        result = invoke("plot", traces, "-o", tmp_path / "shop.png", "--key", f"shop={spelled}", "-q")
        assert result.exit_code == 0, (spelled, result.output)
        panels, title = drawn[-1]
        assert panels[0].rows.tolist() == list(range(1, 21)), spelled  # 20 rows per key, numbered by key
        assert title == f"shop={spelled}", title


@pytest.mark.parametrize("name", ["drift", "drift."])
def test_an_output_without_extension_is_named_as_written(tmp_path, name):
    """matplotlib saves ``-o drift`` (and ``drift.``) as ``drift.png``: the line says that file, and the
    collision check sees it (before: "wrote drift", a file that does not exist, and the traces
    ``t.png`` could be overwritten by ``-o t``)."""
    traces = tmp_path / "explain.csv"
    traces.write_text("row,a,b\n1,,\n2,0.5,0.1\n3,0.4,0.2\n")
    result = invoke("plot", traces, "-o", tmp_path / name)
    assert result.exit_code == 0, result.output
    written = tmp_path / "drift.png"
    assert written.read_bytes()[:8] == PNG and not (tmp_path / name).exists()
    assert result.stderr == f"ipfi: wrote {written} (1 panel(s), 2 features)\n"
    curves = tmp_path / "curves.csv"
    curves.write_text("row,feature,grid,pd\n3,a,0.0,0.1\n3,a,1.0,0.3\n")
    result = invoke("plot", curves, "-o", tmp_path / "pd")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "pd.png").read_bytes()[:8] == PNG
    assert result.stderr == f"ipfi: wrote {tmp_path / 'pd.png'} (1 partial-dependence panel(s))\n"
    image_named_traces = tmp_path / "t.png"
    image_named_traces.write_bytes(traces.read_bytes())
    result = invoke("plot", image_named_traces, "-o", tmp_path / "t")
    assert result.exit_code == 2 and "is the same file as TRACES" in result.stderr, result.output
    assert image_named_traces.read_bytes() == traces.read_bytes()
