"""``ipfi plot``: importance over rows, from a trace file, as a PNG (the paper's figure style).

Reads the curves ``ipfi pdp`` writes (``row,feature,grid,pd``: one panel per feature), or
the traces ``ipfi explain`` writes (``row`` then one column per feature, bound
columns ignored) or ``ipfi compare --traces`` writes (``method,row,<features>``: every
``ipfi-*`` method becomes a panel, ``interval``/``batch`` rows are drawn dashed), CSV
or JSONL. ``--interval-traces`` adds interval PFI from another file of the same shape
(its ``row`` is each window's last row), or the records ``ipfi batch`` writes
(``feature,importance,...,n_rows``: one value per feature for the whole file, drawn as one
dashed level over every row).
"""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from ipfi_cli.cli.errors import EXIT_ERROR, reporting, say, usage_error
from ipfi_cli.cli.options import DebugOpt, QuietOpt, check_outputs, split_names
from ipfi_cli.errors import InputError, OutputError
from ipfi_cli.io.readers import open_rows
from ipfi_cli.io.values import parse_value

REFERENCE_METHODS = ("interval", "batch")
#: fields that only the records of ``ipfi compare`` have together (see ipfi_cli.evaluation.records)
COMPARE_RECORDS = {"method", "feature", "importance", "reference", "abs_diff", "error"}

TracesArg = Annotated[str, typer.Argument(
    help="Trace file (CSV or JSONL) from `ipfi explain` or `ipfi compare --traces`.", show_default=False,
    metavar="TRACES")]
PlotOutputOpt = Annotated[str, typer.Option(
    "--output", "-o", help="Image to write (PNG; the extension picks the format, e.g. .svg, .pdf; a name without one gets .png).",
    show_default=False, metavar="FILE")]
PlotDriftOpt = Annotated[Optional[int], typer.Option(
    "--drift-at", help="Draw a vertical line at this row.", show_default=False, metavar="ROW")]
TopKOpt = Annotated[int, typer.Option(
    "--top-k", "-k", min=0, help="Colour the K features with the largest mean importance; the others are grey.")]
IntervalTracesOpt = Annotated[Optional[str], typer.Option(
    "--interval-traces", help="Interval or batch PFI to draw dashed: a file with row (each window's last "
    "row) and one column per feature, or the records of `ipfi batch` (one level over every row).",
    show_default=False, metavar="FILE")]
TitleOpt = Annotated[Optional[str], typer.Option("--title", help="Figure title.", show_default=False)]
KeyOpt = Annotated[Optional[list[str]], typer.Option(
    "--key", help="For the traces of explain --by: the key to plot, NAME=VALUE (repeatable, one per key column).",
    show_default=False, metavar="NAME=VALUE")]
PlotFeaturesOpt = Annotated[Optional[list[str]], typer.Option(
    "--features", help="Plot only these features (comma-separated, repeatable).", show_default=False,
    metavar="COLS")]


def read_traces(path: str, *, batch: bool = False) -> Any:
    """A trace file as a DataFrame, read through the one reader of every command (CSV or
    JSONL, by name or content, gzip allowed); an unreadable row stops with its location.
    ``batch``: ``ipfi batch``'s records (``feature``, ``importance``) are taken too."""
    import pandas as pd


    with open_rows(path, hint=False) as reader:
        columns = reader.columns
        if "row" in columns:  # explain --by's key columns come before row: keys as written (07 stays 07)
            reader.keep_as_text([c for c in columns[:columns.index("row")] if c != "method"])
        records = []
        for row in reader:
            if row.error is not None:
                raise row.error
            records.append(row.values)
    if COMPARE_RECORDS <= set(columns):
        raise InputError("these are the records of `ipfi compare` (one per method and feature), not traces: "
                         "write its traces with `ipfi compare ... --traces FILE` and plot that file", source=path)
    if "row" not in columns and not (batch and {"feature", "importance"} <= set(columns)):
        raise InputError("no 'row' column; expected the traces of `ipfi explain` or `ipfi compare --traces`"
                         + (" (or the records of `ipfi batch`)" if batch else ""), source=path)
    if not records:
        raise InputError("no trace rows", source=path)
    return pd.DataFrame.from_records(records, columns=columns)


def has_methods(frame: Any) -> bool:
    """Whether the traces have compare's ``method`` field: a ``method`` column before ``row``
    (compare writes ``method,row,...``); one after ``row`` is a feature of explain's traces."""
    columns = list(frame.columns)
    return "method" in columns[:columns.index("row")] if "row" in columns else "method" in columns


def one_key(frame: Any, keys: list[str] | None, path: str) -> Any:
    """The rows of one key of an ``explain --by`` trace (its key columns come before ``row``), chosen
    by ``--key NAME=VALUE`` (a value matches as explain --by keyed the rows: ``7``, ``07`` and ``7.0``
    are one key), with the key as the traces spell it in ``attrs["key"]``; a keyed trace without
    ``--key`` is refused (its keys' rows would be drawn as one zigzag line). Other traces are returned
    as they are."""
    columns = list(frame.columns)
    key_columns = [c for c in columns[:columns.index("row")] if c != "method"] if "row" in columns else []
    if not key_columns:
        if keys:
            raise usage_error("the traces have no key columns (they are not of explain --by)", "--key")
        return frame
    chosen: dict[str, str] = {}
    for spec in keys or []:
        name, sep, wanted = spec.partition("=")
        if not sep or name.strip() not in key_columns:
            raise usage_error(f"expected NAME=VALUE with NAME one of {', '.join(key_columns)}, got {spec!r}", "--key")
        chosen[name.strip()] = wanted.strip()
    missing = [c for c in key_columns if c not in chosen]
    if missing:
        first = frame.iloc[0]
        example = " ".join(f"--key {c}={first[c]}" for c in key_columns)
        raise InputError(f"the traces of `explain --by` ({', '.join(key_columns)}): plot one key at a time, "
                         f"e.g. {example}", source=path)

    mask: Any = True
    for name, wanted in chosen.items():
        # the key as written (explain --by --text keeps 07 and 7 apart); else as explain --by keyed the
        # rows without --text: the value a field reads as (7, 07 and 7.0 are one key)
        match = frame[name].map(lambda v, wanted=wanted: isinstance(v, str) and v.strip() == wanted.strip())
        if not match.any():
            value = parse_value(wanted)
            match = frame[name].map(lambda v, value=value, wanted=wanted: _same_key(v, value, wanted))
        mask = match & mask
    part = frame[mask.astype(bool)]
    if part.empty:
        raise InputError("no trace rows for " + ", ".join(f"{k}={v}" for k, v in chosen.items()), source=path)
    part.attrs["key"] = ", ".join(f"{c}={part[c].iloc[0]}" for c in key_columns)  # the key as the traces spell it
    return part.drop(columns=key_columns)


def _same_key(found: Any, value: Any, text: str) -> bool:
    """Whether a key column's value is the key ``--key`` gives (as ``text``, read as ``value``)."""
    if isinstance(value, float) and value != value:  # a missing value: no key of explain --by
        return False
    if isinstance(found, str):
        from ipfi_cli.io.values import parse_value

        found = parse_value(found)
    try:
        if found == value:
            return True
    except (TypeError, ValueError):
        pass
    return str(found) == text


def feature_columns(frame: Any, path: str) -> list[str]:
    """The importance columns: numeric, not row/method, not a ``<name>_bound`` of another column."""
    fields = ("row", "method") if has_methods(frame) else ("row",)
    names = [c for c in frame.columns if c not in fields]
    names = [c for c in names if not (c.endswith("_bound") and c[: -len("_bound")] in names)]
    import pandas as pd

    names = [c for c in names if pd.api.types.is_numeric_dtype(frame[c]) or frame[c].isna().all()]
    if not names:
        raise InputError("no importance columns besides 'row'", source=path)
    return names


def plot(
    traces: TracesArg,
    output: PlotOutputOpt,
    drift_at: PlotDriftOpt = None,
    top_k: TopKOpt = 5,
    interval_traces: IntervalTracesOpt = None,
    features: PlotFeaturesOpt = None,
    title: TitleOpt = None,
    key: KeyOpt = None,
    quiet: QuietOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Plot importance over rows from a trace file as an image.

    Solid lines for iPFI (one panel per iPFI trace), dashed for interval or batch PFI, a vertical line at --drift-at, the --top-k features coloured and the others grey. Needs matplotlib: pip install 'ipfi-cli\\[plot]'.
    """
    from ipfi_cli.plotting import figure_path

    if output != "-":  # refused below: the image is a file
        output = str(figure_path(output))  # the file written: 'drift' is saved as drift.png
    check_outputs({"--output": output}, {"TRACES": traces, "--interval-traces": interval_traces}, streams=())
    with reporting(debug):
        from ipfi_cli.plotting import PlottingUnavailable, Series, plot_importance, pyplot

        try:
            pyplot()
        except PlottingUnavailable as error:
            say(str(error), "error")
            raise typer.Exit(EXIT_ERROR) from None
        frame = read_traces(traces)
        if {"feature", "grid", "pd"} <= set(frame.columns):
            _plot_curves(frame, output, split_names(features), title, quiet)
            return
        frame = one_key(frame, key, traces)
        if title is None and frame.attrs.get("key"):
            title = frame.attrs["key"]
        names = feature_columns(frame, traces)
        wanted = split_names(features)
        if wanted:
            unknown = [n for n in wanted if n not in names]
            if unknown:
                raise usage_error(f"not in the traces: {', '.join(unknown)} (they have: {', '.join(names)})",
                                  "--features")
            names = wanted
        panels, reference = [], None
        if has_methods(frame):
            for method, part in frame.groupby("method", sort=False):
                label = f"{method} PFI" if str(method) in REFERENCE_METHODS else str(method)
                series = Series(label, part["row"].to_numpy(), part[names].to_numpy(dtype=float))
                if str(method) in REFERENCE_METHODS:
                    reference = series if reference is None else reference
                else:
                    panels.append(series)
        else:
            panels.append(Series("iPFI", frame["row"].to_numpy(), frame[names].to_numpy(dtype=float)))
        if interval_traces:
            last = max((float(p.rows[-1]) for p in panels if len(p.rows)), default=0.0)
            reference = reference_series(interval_traces, names, last)
        if not panels:
            raise InputError(f"no iPFI traces (only {', '.join(REFERENCE_METHODS)} rows)", source=traces)
        try:
            path = plot_importance(output, names, panels, interval=reference, drift_at=drift_at, top_k=top_k,
                                   title=title, warn=_warner(quiet))
        except (ValueError, OSError) as error:
            raise OutputError(f"{output}: cannot write the figure ({error})") from None
        if not quiet:
            say(f"wrote {path} ({len(panels)} panel(s), {len(names)} features)")


def _warner(quiet: bool) -> Any:
    """Where matplotlib's warnings go: one ``ipfi: warning:`` line each (escaped), none when quiet."""
    return (lambda message: None) if quiet else (lambda message: say(message, "warning"))


def reference_series(path: str, names: list[str], last_row: float) -> Any:
    """``--interval-traces``: interval PFI (``row`` and a column per feature), or ``ipfi batch``'s
    records (one value per feature for the whole file, held from row 0 to its ``n_rows`` or the
    traces' last row, whichever is further)."""
    import numpy as np

    from ipfi_cli.plotting import Series

    other = read_traces(path, batch=True)
    if "row" not in other.columns:  # ipfi batch: feature,importance,...,n_rows
        values = dict(zip(other["feature"].astype(str), other["importance"]))
        missing = [n for n in names if n not in values]
        if missing:
            raise InputError(f"no feature(s) {', '.join(missing)} of the traces in these batch records", source=path)
        rows = other["n_rows"].max() if "n_rows" in other.columns else 0
        end = max(float(rows) if rows == rows else 0.0, last_row)
        label = "batch SAGE" if "explained_loss" in other.columns else "batch PFI"
        try:
            level = np.array([[float(values[n]) for n in names]])
        except (TypeError, ValueError):
            raise InputError("the 'importance' column is not numbers", source=path) from None
        return Series(label, np.array([end]), level)
    if has_methods(other):
        other = other[other["method"].isin(REFERENCE_METHODS)]
    missing = [n for n in names if n not in other.columns]
    if missing:
        raise InputError(f"no column(s) {', '.join(missing)} of the traces", source=path)
    return Series("interval PFI", other["row"].to_numpy(), other[names].to_numpy(dtype=float))


def _plot_curves(frame: Any, output: str, wanted: list[str] | None, title: str | None, quiet: bool) -> None:
    """``ipfi pdp``'s records: per feature, the curve after each recorded row."""
    from ipfi_cli.plotting import plot_partial_dependence

    names = list(dict.fromkeys(frame["feature"].tolist()))
    if wanted:
        unknown = [n for n in wanted if n not in names]
        if unknown:
            raise usage_error(f"not in the curves: {', '.join(unknown)} (they have: {', '.join(names)})",
                              "--features")
        names = wanted
    curves = {name: [(int(row), part["grid"].to_numpy(dtype=float), part["pd"].to_numpy(dtype=float))
                     for row, part in frame[frame["feature"] == name].groupby("row", sort=True)]
              for name in names}
    try:
        path = plot_partial_dependence(output, curves, title=title, warn=_warner(quiet))
    except (ValueError, OSError) as error:
        raise OutputError(f"{output}: cannot write the figure ({error})") from None
    if not quiet:
        say(f"wrote {path} ({len(names)} partial-dependence panel(s))")
