"""The "Late labels" panel of ``ipfi explain``: ``--labels`` and the options that go with it (checked by
:func:`~ipfi_cli.cli.explain_checks.check_label_options`)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ipfi_cli.cli.signature import option
from ipfi_cli.run.settings import DEFAULT_LABEL_WAIT, LateLabels

PANEL_LABELS = "Late labels"

LabelsOpt = Annotated[Optional[str], typer.Option(
        "--labels", help="Labels that arrive late: read the --target column from this file or named pipe (CSV or "
        "JSONL, with the --id column too), joined to the input's rows by --id. Each row waits for its label and rows "
        "are explained in the input's order, so the traces are those of the same rows with their labels inline.",
        rich_help_panel=PANEL_LABELS, show_default=False, metavar="SOURCE")]
IdOpt = Annotated[Optional[str], typer.Option(
        "--id", help="With --labels: the column that identifies a row in both streams (read as text).",
        rich_help_panel=PANEL_LABELS, show_default=False, metavar="COL")]
LabelWaitOpt = Annotated[str, typer.Option(
        "--label-wait", help="With --labels: how long a row waits for its label, in rows (at most N rows wait, and "
        "N labels ahead of their rows) or seconds (30s, 5m). A row whose label does not come is counted, never "
        "explained.", rich_help_panel=PANEL_LABELS, metavar="N|SECONDS")]
LabelsFollowOpt = Annotated[bool, typer.Option(
        "--labels-follow", help="With --labels: the labels file grows while ipfi runs; read it as `tail -f` does.",
        rich_help_panel=PANEL_LABELS)]


LABEL_OPTIONS = [option("labels", LabelsOpt, None), option("id_column", IdOpt, None),
                 option("label_wait", LabelWaitOpt, DEFAULT_LABEL_WAIT),
                 option("labels_follow", LabelsFollowOpt, False)]


def late_labels(labels: str | None, id_column: str | None, label_wait: str, labels_follow: bool) -> LateLabels | None:
    """The panel as one value (``None``: no ``--labels``), after
    :func:`~ipfi_cli.cli.explain_checks.check_label_options` has checked the options together."""
    if labels is None or id_column is None:
        return None
    return LateLabels(labels, id_column, wait=label_wait, follow=labels_follow)
