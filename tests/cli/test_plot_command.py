"""``ipfi plot``: PNGs from compare and explain traces; a clear message without matplotlib."""

from __future__ import annotations

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
