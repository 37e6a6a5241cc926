"""A whole input made ready for the batch-mode commands (``batch``, ``compare``).

The rows go through the same reader (:mod:`ipfi_cli.io.readers`) and the same row checks
(:class:`~ipfi_cli.run.rows.RowChecker`) as ``ipfi explain``: one file means the same
values and the same bad rows to every command, with the same messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ipfi_cli.core.losses import Loss
from ipfi_cli.errors import InputError, RunError
from ipfi_cli.models.loading import LoadedModel
from ipfi_cli.run.checks import check_inputs, labels_match_nothing
from ipfi_cli.run.report import Reporter


@dataclass
class Dataset:
    """A whole data file made ready for the core: the model, its columns, rows and labels."""

    loaded: LoadedModel
    frame: Any  # pandas DataFrame of the model's columns
    targets: list[Any]
    columns: list[str]
    features: list[str] | None
    groups: dict[str, list[str]]
    loss: Loss
    classification: bool
    source: str


def load_dataset(data: str | None, loaded: LoadedModel, target: str, reporter: Reporter, *,
                 format: str | None = None, na_values: Sequence[str] | None = None, no_default_na: bool = False,
                 delimiter: str | None = None, task: str = "auto", loss: str | None = None,
                 features: Sequence[str] | None = None, drop: Sequence[str] | None = None,
                 groups: dict[str, list[str]] | None = None, learn: bool = False, on_bad_row: str = "fail",
                 verbose: bool = False) -> Dataset:
    """Read the whole input for ``loaded``: check columns, options and rows, convert the labels.

    ``data`` is a path, or ``None``/``-`` for stdin; ``format``, ``na_values``, ``no_default_na``
    and ``delimiter`` are the reader's options (:func:`~ipfi_cli.io.values.reader_options`). Bad rows stop with their
    :class:`~ipfi_cli.errors.InputError` (``on_bad_row="fail"``) or are counted and left out.
    """
    from ipfi_cli.io.readers import open_rows
    from ipfi_cli.io.values import reader_options
    from ipfi_cli.run import setup
    from ipfi_cli.run.rows import RowChecker, read_good_rows, rows_frame

    groups = dict(groups or {})
    for line in loaded.warnings:
        reporter.message(line, "warning")
    classification = setup.choose_task(loaded, task)
    chosen_loss = setup.choose_loss(loaded, classification, loss)
    matcher = setup.label_matcher(loaded, classification, learn)
    with open_rows(None if data == "-" else data, format=format, hint=False,
                   **reader_options(na_values, no_default_na, delimiter)) as reader:
        source = reader.name
        notes: list[str] = []
        input_columns = reader.columns
        if not input_columns:
            bad = [row.error for row in reader]
            if bad and on_bad_row == "fail" and bad[0] is not None:
                raise bad[0]
            raise InputError("no data rows" + (f" ({len(bad):,} bad row(s); the first: {bad[0]})" if bad else ""),
                             source=source)
        if reader.format == "jsonl":
            known = loaded.predictor.columns
            input_columns = [*(known or [c for c in input_columns if c != target]), target]
        columns = setup.model_columns(loaded, input_columns, target, source, features=features, drop=drop,
                                      groups=groups, notes=notes)
        selected, groups = setup.explained_columns(loaded, columns, features, drop, groups)
        check_inputs(loaded, columns, source)
        for line in notes:
            reporter.message(line, "note")

        def on_skip(error: Any) -> None:
            if verbose:
                reporter.message(f"skipped {error}", "warning")

        checker = RowChecker(source=source, target=target, columns=columns, to_label=matcher,
                             check_columns=reader.format == "jsonl", learn=learn, on_bad_row=on_bad_row,
                             on_skip=on_skip, on_first_row=setup.first_row_hook(loaded, matcher, columns))
        rows = read_good_rows(reader, checker)
        noted = reader.noted_missing_summary()
        if noted:
            reporter.message(noted, "note")
    skipped = checker.skipped_summary()
    if skipped:
        reporter.message(skipped, "warning")
    unknown = matcher.unknown_summary()
    if unknown:
        reporter.message(unknown, "warning")
    if matcher.none_matched:
        raise RunError(f"{source}: {labels_match_nothing(matcher)}")
    if len(rows) < 2:
        why = f"all {checker.skipped:,} row(s) were bad" if checker.skipped and not rows else \
            f"{len(rows)} good row(s); batch PFI needs at least 2"
        raise RunError(f"{source}: no data to explain: {why}")
    return Dataset(loaded, rows_frame(rows, columns), [r.label for r in rows], columns, selected, groups,
                   chosen_loss, classification, source)
