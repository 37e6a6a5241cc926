"""``ipfi explain``: stream rows in, write importance traces out.

This module only parses options: :class:`~ipfi_cli.run.explain.ExplainSession` does the
work, reporting through :class:`~ipfi_cli.cli.ui.TerminalReporter`, and its status becomes
the exit code here. Heavy libraries are imported inside the run, so ``ipfi --help`` stays fast.
"""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from ipfi_cli.cli.change_options import (
    ChangeDeltaOpt,
    DetectOpt,
    EventsOpt,
    FailOnChangeOpt,
    MinChangeOpt,
    NdcgThresholdOpt,
    ReferenceOpt,
    StopOnChangeOpt,
    TopKOpt,
    watch_settings,
)
from ipfi_cli.cli.config import running_config
from ipfi_cli.cli.errors import EXIT_CHANGED, EXIT_ERROR, EXIT_LOST, interrupted, reporting, say, usage_error
from ipfi_cli.cli.explain_checks import (
    check_bounds_options,
    check_files,
    check_label_options,
    check_state_options,
    half_life_seconds_of,
    key_columns_of,
)
from ipfi_cli.cli.explainer_options import (
    AlphaOpt,
    ConditionalSamplerOpt,
    ExplainMethodOpt,
    HalfLifeOpt,
    RemovalOpt,
    ReservoirSizeOpt,
    RunningMeanOpt,
    SamplingOpt,
    SmoothingOpt,
    TimeColumnOpt,
)
from ipfi_cli.cli.key_options import ByOpt, KeySchedulerOpt, KeyWorkersOpt, MaxKeysOpt
from ipfi_cli.cli.label_options import IdOpt, LabelsFollowOpt, LabelsOpt, LabelWaitOpt
from ipfi_cli.cli.model_options import (
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_ANSWER_MB,
    DEFAULT_MAX_REQUEST_ROWS,
    DEFAULT_MODEL_WAIT,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    ClassesOpt,
    ConcurrencyOpt,
    HeaderOpt,
    MaxAnswerMbOpt,
    MaxRequestRowsOpt,
    ModelOpt,
    ModelUrlOpt,
    ModelWaitOpt,
    Protocol,
    ProtocolOpt,
    RetriesOpt,
    TimeoutOpt,
    model_source,
)
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
from ipfi_cli.cli.options import (
    PANEL_DISPLAY,
    PANEL_INPUT,
    PANEL_MODEL,
    PICKLE_WARNING,
    AllowUnknownCategoriesOpt,
    DebugOpt,
    DecimalOpt,
    DelimiterOpt,
    DropOpt,
    EmptyCoalitionOpt,
    FeaturesOpt,
    FormatOpt,
    GroupOpt,
    InnerOpt,
    InputArg,
    LossOpt,
    NaValuesOpt,
    NoDefaultNaOpt,
    OnBadRowOpt,
    OutputFormatOpt,
    OutputOpt,
    QuietOpt,
    RepeatsOpt,
    SeedOpt,
    SkipInitialSpaceOpt,
    TargetOpt,
    TaskOpt,
    TextOpt,
    ThreadsOpt,
    TrustOpt,
    VerboseOpt,
    input_spec,
    parse_groups,
    pfi_params,
    selection,
    split_names,
    value,
)
from ipfi_cli.cli.state_options import CheckpointEveryOpt, SkipSeenOpt, StateOpt
from ipfi_cli.cli.trace_options import BoundsMethodOpt, BoundsOpt, DeltaOpt, EveryOpt, MetaOpt
from ipfi_cli.cli.ui import TerminalReporter, live_display_allowed, stream_is_terminal
from ipfi_cli.core.params import DEFAULT_ALPHA, DEFAULT_REPEATS, DEFAULT_RESERVOIR_SIZE, DEFAULT_SAMPLING
from ipfi_cli.run.explain import ExplainSession, interrupted_before_rows, new_session
from ipfi_cli.run.settings import (
    CHECKPOINT_EVERY,
    DEFAULT_LABEL_WAIT,
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


def explain(
    input: InputArg = None,
    model: ModelOpt = None,
    target: TargetOpt = None,
    trust: TrustOpt = None,
    model_url: ModelUrlOpt = None,
    protocol: ProtocolOpt = Protocol.auto,
    header: HeaderOpt = None,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT,
    max_request_rows: MaxRequestRowsOpt = DEFAULT_MAX_REQUEST_ROWS,
    max_answer_mb: MaxAnswerMbOpt = DEFAULT_MAX_ANSWER_MB,
    retries: RetriesOpt = DEFAULT_RETRIES,
    model_wait: ModelWaitOpt = DEFAULT_MODEL_WAIT,
    concurrency: ConcurrencyOpt = DEFAULT_CONCURRENCY,
    classes: ClassesOpt = None,
    threads: ThreadsOpt = None,
    input_format: FormatOpt = None,
    na_values: NaValuesOpt = None,
    no_default_na: NoDefaultNaOpt = False,
    delimiter: DelimiterOpt = None,
    decimal: DecimalOpt = None,
    text: TextOpt = None,
    skip_initial_space: SkipInitialSpaceOpt = False,
    allow_unknown_categories: AllowUnknownCategoriesOpt = False,
    task: TaskOpt = "auto",
    loss: LossOpt = None,
    learn: Annotated[bool, typer.Option(
        "--learn", help="Prequential learning: explain each row with the current model, then learn it "
        "(river models, learn_one).", rich_help_panel=PANEL_MODEL)] = False,
    save_model: Annotated[Optional[str], typer.Option(
        "--save-model", help="With --learn: write the learned model here at the end (joblib, atomic).",
        rich_help_panel=PANEL_MODEL, show_default=False, metavar="PATH")] = None,
    method: ExplainMethodOpt = "pfi",
    removal: RemovalOpt = "marginal",
    conditional_sampler: ConditionalSamplerOpt = "gaussian",
    smoothing: SmoothingOpt = "exponential",
    inner: InnerOpt = None,
    empty_coalition: EmptyCoalitionOpt = "imputed",
    alpha: AlphaOpt = DEFAULT_ALPHA,
    time_column: TimeColumnOpt = None,
    half_life: HalfLifeOpt = None,
    running_mean: RunningMeanOpt = False,
    repeats: RepeatsOpt = DEFAULT_REPEATS,
    sampling: SamplingOpt = DEFAULT_SAMPLING,
    reservoir_size: ReservoirSizeOpt = DEFAULT_RESERVOIR_SIZE,
    seed: SeedOpt = None,
    features: FeaturesOpt = None,
    drop: DropOpt = None,
    group: GroupOpt = None,
    output: OutputOpt = None,
    output_format: OutputFormatOpt = None,
    every: EveryOpt = 1,
    bounds: BoundsOpt = False,
    bounds_method: BoundsMethodOpt = "chebyshev",
    delta: DeltaOpt = 0.05,
    meta: MetaOpt = None,
    batch_size: Annotated[int, typer.Option(
        "--batch-size", min=1, help="At most this many rows per model call for a static model, and per "
        "micro-batch (rows already waiting are batched; a slow stream is never held back; with --learn the "
        "model still learns row by row).", rich_help_panel=PANEL_INPUT)] = 1000,
    on_bad_row: OnBadRowOpt = "fail",
    state: StateOpt = None,
    checkpoint_every: CheckpointEveryOpt = CHECKPOINT_EVERY,
    skip_seen: SkipSeenOpt = True,
    detect: DetectOpt = False,
    change_delta: ChangeDeltaOpt = 0.002,
    min_change: MinChangeOpt = 0.01,
    events: EventsOpt = None,
    reference: ReferenceOpt = None,
    ndcg_threshold: NdcgThresholdOpt = 0.9,
    top_k: TopKOpt = None,
    fail_on_change: FailOnChangeOpt = False,
    stop_on_change: StopOnChangeOpt = False,
    metrics_port: MetricsPortOpt = None,
    metrics_addr: MetricsAddrOpt = DEFAULT_METRICS_ADDR,
    metrics_textfile: MetricsTextfileOpt = None,
    metrics_label: MetricsLabelOpt = None,
    pushgateway: PushgatewayOpt = None,
    push_job: PushJobOpt = DEFAULT_PUSH_JOB,
    push_label: PushLabelOpt = None,
    webhook: WebhookOpt = None,
    webhook_format: WebhookFormatOpt = DEFAULT_WEBHOOK_FORMAT,
    webhook_cooldown: WebhookCooldownOpt = DEFAULT_WEBHOOK_COOLDOWN,
    webhook_retries: WebhookRetriesOpt = DEFAULT_WEBHOOK_RETRIES,
    max_lost: MaxLostOpt = None,
    by: ByOpt = None,
    max_keys: MaxKeysOpt = None,
    workers: KeyWorkersOpt = None,
    scheduler: KeySchedulerOpt = None,
    labels: LabelsOpt = None,
    id_column: IdOpt = None,
    label_wait: LabelWaitOpt = DEFAULT_LABEL_WAIT,
    labels_follow: LabelsFollowOpt = False,
    verbose: VerboseOpt = False,
    quiet: QuietOpt = False,
    no_live: Annotated[bool, typer.Option(
        "--no-live", help="No live table on stderr; a summary table at the end instead.",
        rich_help_panel=PANEL_DISPLAY)] = False,
    debug: DebugOpt = False,
) -> None:
    try:  # the checks of the options: a Ctrl-C here leaves what there was
        if quiet and verbose:
            raise usage_error("use either --quiet or --verbose, not both", "--quiet")
        params = pfi_params(alpha, repeats, sampling, reservoir_size)
        check_bounds_options(bounds=bounds, bounds_method=value(bounds_method), delta=delta, repeats=repeats,
                             method=value(method), smoothing=value(smoothing), running_mean=running_mean,
                             half_life=half_life, alpha=params.alpha)
        if save_model and not learn:
            raise usage_error("needs --learn (without it the model does not change)", "--save-model")
        check_state_options(state=state, checkpoint_every=checkpoint_every, skip_seen=skip_seen)
        check_files(input=input, model=model, labels=labels, reference=reference, state=state, output=output, meta=meta,
                    events=events, save_model=save_model, metrics_textfile=metrics_textfile)
        key_columns = key_columns_of(by, max_keys)
        check_label_options(labels=labels, id_column=id_column, labels_follow=labels_follow, label_wait=label_wait,
                            state=state, input=input)
        half_life_seconds = half_life_seconds_of(time_column, half_life, running_mean)
        monitor = monitor_settings(metrics_port=metrics_port, metrics_addr=metrics_addr, metrics_textfile=metrics_textfile,
                                   metrics_label=metrics_label, pushgateway=pushgateway, push_job=push_job,
                                   push_label=push_label, webhook=webhook, webhook_format=webhook_format,
                                   webhook_cooldown=webhook_cooldown, webhook_retries=webhook_retries)
        watch = watch_settings(detect=detect, change_delta=change_delta, min_change=min_change, events=events,
                               reference=reference, ndcg_threshold=ndcg_threshold, top_k=top_k,
                               fail_on_change=fail_on_change, stop_on_change=stop_on_change, webhook=webhook)

        live = (not no_live and live_display_allowed(quiet)
                and not (output in (None, "-") and stream_is_terminal(sys.stdout)))
    except KeyboardInterrupt:
        raise interrupted(interrupted_before_rows(None, state)) from None
    session: ExplainSession | None = None
    with reporting(debug):
        try:
            inputs = input_spec(input, input_format, na_values, no_default_na, delimiter, text, decimal,
                                skip_initial_space)
            chosen = selection(target, task, loss, features, drop, group, allow_unknown_categories)
            model, http = model_source(model, model_url, protocol=protocol, header=header, timeout=timeout,
                                       max_request_rows=max_request_rows, max_answer_mb=max_answer_mb,
                                       retries=retries, model_wait=model_wait, concurrency=concurrency, classes=classes)
            settings = ExplainSettings(
                model=model, target=chosen.target, input=inputs.path, trust=split_names(trust), format=inputs.format,
                na_values=na_values, no_default_na=inputs.no_default_na, delimiter=inputs.delimiter,
                decimal=inputs.decimal, skip_initial_space=inputs.skip_initial_space,
                allow_unknown_categories=allow_unknown_categories,
                text=split_names(text), task=chosen.task, loss=chosen.loss, learn=learn, save_model=save_model,
                method=value(method), alpha=params.alpha, time_column=time_column, half_life=half_life_seconds,
                running_mean=running_mean, repeats=params.n_repeats,
                smoothing=value(smoothing), removal=value(removal), conditional_sampler=value(conditional_sampler),
                inner=inner, empty_coalition=value(empty_coalition), sampling=params.sampling,
                reservoir_size=params.reservoir_size, seed=seed, features=split_names(features), drop=split_names(drop),
                groups=parse_groups(group), output=output, output_format=value(output_format),
                every=every, bounds=bounds, delta=delta, bounds_method=value(bounds_method), meta=meta,
                batch_size=batch_size, on_bad_row=value(on_bad_row),
                verbose=verbose, quiet=quiet, live=not no_live, debug=debug, state=state,
                checkpoint_every=checkpoint_every, skip_seen=skip_seen, watch=watch, http=http,
                max_lost=max_lost, monitor=monitor, labels=labels, id_column=id_column, label_wait=label_wait, labels_follow=labels_follow,
                by=key_columns, max_keys=max_keys, workers=workers, scheduler=scheduler, config=running_config())
            reporter = TerminalReporter(live=live, quiet=quiet)
            if key_columns and (workers is not None or scheduler is not None):
                from ipfi_cli.run.keyed_spread import SpreadKeyedSession

                session = SpreadKeyedSession(settings, reporter)
            else:
                session = new_session(settings, reporter)
            status = session.run()
        except KeyboardInterrupt:  # before the first row: the run's loop says the rest itself
            raise interrupted(interrupted_before_rows(session, state)) from None
    if status is RunStatus.INTERRUPTED:  # the run said how it ended
        raise interrupted(None)
    lost = session.lost_beyond() if status in (RunStatus.OK, RunStatus.STOPPED_ON_CHANGE) else None
    if lost is not None:  # before a change's 3: the numbers the change was found in are incomplete
        say(lost, "error")
        raise typer.Exit(EXIT_LOST)
    if status is RunStatus.STOPPED_ON_CHANGE or (
            status is RunStatus.OK and fail_on_change and session.watch is not None and session.watch.events):
        raise typer.Exit(EXIT_CHANGED)
    if status is not RunStatus.OK:
        raise typer.Exit(EXIT_ERROR)


explain.__doc__ = HELP
