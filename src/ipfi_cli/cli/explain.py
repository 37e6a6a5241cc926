"""``ipfi explain``: stream rows in, write importance traces out.

This module only parses options: its signature is its panels' option lists
(:mod:`ipfi_cli.cli.signature`), each panel's module has the builder of its value, and
:class:`~ipfi_cli.run.explain.ExplainSession` does the work with the
:class:`~ipfi_cli.run.settings.ExplainSettings` they make, reporting through
:class:`~ipfi_cli.cli.ui.TerminalReporter`; its status becomes the exit code here. Heavy
libraries are imported inside the run, so ``ipfi --help`` stays fast.
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from ipfi_cli.cli.change_options import CHANGE_OPTIONS, watch_settings
from ipfi_cli.cli.config import running_config
from ipfi_cli.cli.errors import EXIT_CHANGED, EXIT_ERROR, EXIT_LOST, interrupted, reporting, say
from ipfi_cli.cli.explain_checks import check_bounds_options, check_files, check_label_options
from ipfi_cli.cli.explainer_options import ESTIMATOR_OPTIONS, method_spec
from ipfi_cli.cli.key_options import KEY_OPTIONS, key_spec
from ipfi_cli.cli.label_options import LABEL_OPTIONS, late_labels
from ipfi_cli.cli.learn_options import MODEL_OPTIONS, SERVED_MODEL_OPTIONS, check_save_model, model_spec
from ipfi_cli.cli.monitor_options import (
    MaxLostOpt,
    MetricsAddrOpt,
    MetricsLabelOpt,
    MetricsPortOpt,
    MetricsTextfileOpt,
    PushgatewayOpt,
    PushJobOpt,
    PushLabelOpt,
    WebhookCooldownOpt,
    WebhookFormatOpt,
    WebhookOpt,
    WebhookRetriesOpt,
    monitor_settings,
)
from ipfi_cli.cli.options import PICKLE_WARNING, input_spec, pfi_params, selection, value
from ipfi_cli.cli.reading_options import DISPLAY_OPTIONS, INPUT_ARGUMENT, INPUT_OPTIONS, display, read_spec
from ipfi_cli.cli.signature import build, option, with_options
from ipfi_cli.cli.state_options import STATE_OPTIONS, state_spec
from ipfi_cli.cli.trace_options import OUTPUT_OPTIONS, output_spec
from ipfi_cli.cli.ui import TerminalReporter, live_display_allowed, stream_is_terminal
from ipfi_cli.run.explain import ExplainSession, interrupted_before_rows, new_session
from ipfi_cli.run.settings import (
    DEFAULT_METRICS_ADDR,
    DEFAULT_PUSH_JOB,
    DEFAULT_WEBHOOK_COOLDOWN,
    DEFAULT_WEBHOOK_FORMAT,
    DEFAULT_WEBHOOK_RETRIES,
    ExplainSettings,
    RunStatus,
)

HELP = f"""Explain a model on a stream: incremental permutation feature importance (iPFI) per row.

Reads rows (CSV with a header, or JSONL) from INPUT or standard input, explains each with the model, and writes one trace record per row: the row number, then the current importance of every feature (the smoothed increase of the loss when that feature's value is replaced by an earlier row's). Traces go to standard output (or --output); a live table goes to stderr when it is a terminal and the traces do not.

Examples:

  cat data.csv | ipfi explain -m model.joblib -t class > traces.csv

  ipfi explain stream.csv -m river_model.pkl -t class --learn --every 1000

  ipfi explain stream.csv -m model.pkl -t class --learn -o traces.csv --state run.state

With --state the run can stop at any time (Ctrl-C, SIGTERM, a crash) and continue: run the same command again. The traces file then ends exactly as one uninterrupted run would have written it.

{PICKLE_WARNING}
"""


#: the "Monitoring" panel as explain declares it (its options and builder: ipfi_cli.cli.monitor_options)
MONITOR_OPTIONS = [
    option("metrics_port", MetricsPortOpt, None), option("metrics_addr", MetricsAddrOpt, DEFAULT_METRICS_ADDR),
    option("metrics_textfile", MetricsTextfileOpt, None), option("metrics_label", MetricsLabelOpt, None),
    option("pushgateway", PushgatewayOpt, None), option("push_job", PushJobOpt, DEFAULT_PUSH_JOB),
    option("push_label", PushLabelOpt, None), option("webhook", WebhookOpt, None),
    option("webhook_format", WebhookFormatOpt, DEFAULT_WEBHOOK_FORMAT),
    option("webhook_cooldown", WebhookCooldownOpt, DEFAULT_WEBHOOK_COOLDOWN),
    option("webhook_retries", WebhookRetriesOpt, DEFAULT_WEBHOOK_RETRIES), option("max_lost", MaxLostOpt, None)]


@with_options(INPUT_ARGUMENT, MODEL_OPTIONS, SERVED_MODEL_OPTIONS, INPUT_OPTIONS, ESTIMATOR_OPTIONS, OUTPUT_OPTIONS,
              DISPLAY_OPTIONS, STATE_OPTIONS, CHANGE_OPTIONS, MONITOR_OPTIONS, KEY_OPTIONS, LABEL_OPTIONS)
def explain(**o: Any) -> None:
    try:  # the checks of the options: a Ctrl-C here leaves what there was
        shown = build(display, o)
        params = pfi_params(o["alpha"], o["repeats"], o["sampling"], o["reservoir_size"])
        check_bounds_options(bounds=o["bounds"], bounds_method=value(o["bounds_method"]), delta=o["delta"],
                             repeats=o["repeats"], method=value(o["method"]), smoothing=value(o["smoothing"]),
                             running_mean=o["running_mean"], half_life=o["half_life"], alpha=params.alpha)
        build(check_save_model, o)
        state = build(state_spec, o)
        build(check_files, o)
        by, keys = build(key_spec, o)
        build(check_label_options, o)
        method = build(method_spec, o)
        monitor = build(monitor_settings, o)
        watch = build(watch_settings, o)
        live = (shown.live and live_display_allowed(shown.quiet)
                and not (o["output"] in (None, "-") and stream_is_terminal(sys.stdout)))
    except KeyboardInterrupt:
        raise interrupted(interrupted_before_rows(None, o["state"])) from None
    session: ExplainSession | None = None
    with reporting(shown.debug):
        try:
            inputs = input_spec(o["input"], o["input_format"], o["na_values"], o["no_default_na"], o["delimiter"],
                                o["text"], o["decimal"], o["skip_initial_space"])
            chosen = selection(o["target"], o["task"], o["loss"], o["features"], o["drop"], o["group"],
                               o["allow_unknown_categories"], by=by)
            settings = ExplainSettings(
                model=build(model_spec, o), inputs=inputs, selection=chosen, method=method, params=params,
                output=build(output_spec, o), reading=build(read_spec, o), display=shown, seed=o["seed"], state=state,
                watch=watch, monitor=monitor, max_lost=o["max_lost"], labels=build(late_labels, o), keys=keys,
                config=running_config())
            reporter = TerminalReporter(live=live, quiet=shown.quiet)
            if by and (keys.workers is not None or keys.scheduler is not None):
                from ipfi_cli.run.keyed_spread import SpreadKeyedSession

                session = SpreadKeyedSession(settings, reporter)
            else:
                session = new_session(settings, reporter)
            status = session.run()
        except KeyboardInterrupt:  # before the first row: the run's loop says the rest itself
            raise interrupted(interrupted_before_rows(session, o["state"])) from None
    if status is RunStatus.INTERRUPTED:  # the run said how it ended
        raise interrupted(None)
    lost = session.lost_beyond() if status in (RunStatus.OK, RunStatus.STOPPED_ON_CHANGE) else None
    if lost is not None:  # before a change's 3: the numbers the change was found in are incomplete
        say(lost, "error")
        raise typer.Exit(EXIT_LOST)
    if status is RunStatus.STOPPED_ON_CHANGE or (
            status is RunStatus.OK and o["fail_on_change"] and session.watch is not None and session.watch.events):
        raise typer.Exit(EXIT_CHANGED)
    if status is not RunStatus.OK:
        raise typer.Exit(EXIT_ERROR)


explain.__doc__ = HELP
