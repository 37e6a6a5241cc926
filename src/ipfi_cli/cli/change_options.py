"""The "Change detection" panel of ``ipfi explain``: its options and their one value,
:class:`~ipfi_cli.run.watch.WatchSettings` (:func:`watch_settings`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ipfi_cli.cli.explain_checks import check_change_options
from ipfi_cli.cli.signature import option
from ipfi_cli.run.watch import WatchSettings

if TYPE_CHECKING:
    from ipfi_cli.run.watch import WatchSettings

PANEL_CHANGES = "Change detection"

DetectOpt = Annotated[bool, typer.Option(
        "--detect", help="Watch for changes: an ADWIN test per feature (and on the model's loss) on the per-row "
        "contributions, with a false-alarm bound (see --change-delta). Changes are listed at the end and marked "
        "in the live table. Implied by the other options of this panel.", rich_help_panel=PANEL_CHANGES)]
ChangeDeltaOpt = Annotated[float, typer.Option(
        "--change-delta", help="ADWIN's confidence: the false-alarm probability of one test (smaller: fewer false "
        "alarms, later detections).", rich_help_panel=PANEL_CHANGES)]
MinChangeOpt = Annotated[float, typer.Option(
        "--min-change", min=0.0, help="The smallest change of a mean importance (or loss) worth an event, in "
        "importance units.", rich_help_panel=PANEL_CHANGES)]
EventsOpt = Annotated[Optional[str], typer.Option(
        "--events", help="Write each change as one JSON line, at once, to FILE ('-': stderr).",
        rich_help_panel=PANEL_CHANGES, show_default=False, metavar="FILE")]
ReferenceOpt = Annotated[Optional[str], typer.Option(
        "--reference", help="An importance vector to compare the ranking with: the CSV of `ipfi batch`, or a trace "
        "file (its last record). An event when nDCG@k falls below --ndcg-threshold.",
        rich_help_panel=PANEL_CHANGES, show_default=False, metavar="FILE")]
NdcgThresholdOpt = Annotated[float, typer.Option(
        "--ndcg-threshold", help="With --reference: the nDCG@k below which the ranking has departed (Clarify's 0.9).",
        rich_help_panel=PANEL_CHANGES)]
TopKOpt = Annotated[Optional[int], typer.Option(
        "--top-k", min=1, help="With --reference: how many top features the nDCG scores (default: 10, or all if "
        "fewer).", rich_help_panel=PANEL_CHANGES, show_default=False)]
FailOnChangeOpt = Annotated[bool, typer.Option(
        "--fail-on-change", help="Exit with code 3 after the stream ends if a change was detected "
        "(`ipfi explain ... --fail-on-change || page-oncall`).", rich_help_panel=PANEL_CHANGES)]
StopOnChangeOpt = Annotated[bool, typer.Option(
        "--stop-on-change", help="Stop at the first change (after flushing, and with --state saving the state) and "
        "exit with code 3.", rich_help_panel=PANEL_CHANGES)]



def watch_settings(*, detect: bool, change_delta: float, min_change: float, events: str | None,
                   reference: str | None, ndcg_threshold: float, top_k: int | None, fail_on_change: bool,
                   stop_on_change: bool, webhook: str | None) -> WatchSettings | None:
    """The change watch the options ask for (``None``: none; every option of the panel, and
    ``--webhook``, implies ``--detect``), checked."""
    check_change_options(change_delta, ndcg_threshold)
    if not (detect or events or reference or fail_on_change or stop_on_change or webhook):
        return None

    return WatchSettings(delta=change_delta, min_change=min_change, events=events, reference=reference,
                         ndcg_threshold=ndcg_threshold, top_k=top_k, fail_on_change=fail_on_change,
                         stop_on_change=stop_on_change)


CHANGE_OPTIONS = [option("detect", DetectOpt, False), option("change_delta", ChangeDeltaOpt, 0.002),
                  option("min_change", MinChangeOpt, 0.01), option("events", EventsOpt, None),
                  option("reference", ReferenceOpt, None), option("ndcg_threshold", NdcgThresholdOpt, 0.9),
                  option("top_k", TopKOpt, None), option("fail_on_change", FailOnChangeOpt, False),
                  option("stop_on_change", StopOnChangeOpt, False)]
