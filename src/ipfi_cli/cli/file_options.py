"""The panels ``ipfi batch`` and ``ipfi compare`` share (commands that read a whole file, then write
their records once): the data, the static model, what is explained, how the file is read, the
metrics published at the end, and what the command says. Each list's builder is beside it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ipfi_cli.cli.learn_options import model_spec
from ipfi_cli.cli.model_options import ModelOpt
from ipfi_cli.cli.monitor_options import MetricsLabelOpt, MetricsTextfileOpt, PushgatewayOpt, PushJobOpt, PushLabelOpt
from ipfi_cli.cli.options import (
    AllowUnknownCategoriesOpt,
    DataArg,
    DebugOpt,
    DecimalOpt,
    DelimiterOpt,
    DropOpt,
    FeaturesOpt,
    FormatOpt,
    GroupOpt,
    LossOpt,
    NaValuesOpt,
    NoDefaultNaOpt,
    OnBadRowOpt,
    QuietOpt,
    SkipInitialSpaceOpt,
    TargetOpt,
    TaskOpt,
    TextOpt,
    ThreadsOpt,
    TrustOpt,
    VerboseOpt,
    input_spec,
    selection,
    value,
)
from ipfi_cli.cli.signature import option
from ipfi_cli.run.plan import InputSpec, Selection
from ipfi_cli.run.settings import DEFAULT_PUSH_JOB, Display, ModelSpec

if TYPE_CHECKING:
    from ipfi_cli.run.batch import BatchRows

DATA_ARGUMENT = [option("data", DataArg)]
FILE_MODEL_OPTIONS = [option("model", ModelOpt, None), option("target", TargetOpt, None),
                      option("trust", TrustOpt, None)]
THREADS_OPTIONS = [option("threads", ThreadsOpt, None)]  # applied by its callback as it is parsed
SELECTION_OPTIONS = [
    option("features", FeaturesOpt, None), option("drop", DropOpt, None), option("group", GroupOpt, None),
    option("loss", LossOpt, None), option("task", TaskOpt, "auto")]
FILE_INPUT_OPTIONS = [
    option("input_format", FormatOpt, None), option("na_values", NaValuesOpt, None),
    option("no_default_na", NoDefaultNaOpt, False), option("delimiter", DelimiterOpt, None),
    option("decimal", DecimalOpt, None), option("text", TextOpt, None),
    option("skip_initial_space", SkipInitialSpaceOpt, False),
    option("allow_unknown_categories", AllowUnknownCategoriesOpt, False), option("on_bad_row", OnBadRowOpt, "fail")]
END_MONITOR_OPTIONS = [
    option("metrics_textfile", MetricsTextfileOpt, None), option("metrics_label", MetricsLabelOpt, None),
    option("pushgateway", PushgatewayOpt, None), option("push_job", PushJobOpt, DEFAULT_PUSH_JOB),
    option("push_label", PushLabelOpt, None)]
FILE_DISPLAY_OPTIONS = [option("quiet", QuietOpt, False), option("verbose", VerboseOpt, False),
                        option("debug", DebugOpt, False)]


def file_model(o: dict[str, Any], *, learn: bool = False) -> ModelSpec:
    """The model panel and the served model's (``SERVED_MODEL_OPTIONS``) as one value."""
    return model_spec(o["model"], o["model_url"], o["protocol"], o["header"], o["timeout"], o["max_request_rows"],
                      o["max_answer_mb"], o["retries"], o["model_wait"], o["concurrency"], o["classes"], o["trust"],
                      learn=learn, save_model=None)


def file_input(o: dict[str, Any]) -> InputSpec:
    """The data and how it is read, as one value (bad reader options are usage errors)."""
    return input_spec(o["data"], o["input_format"], o["na_values"], o["no_default_na"], o["delimiter"], o["text"],
                      o["decimal"], o["skip_initial_space"])


def file_selection(o: dict[str, Any]) -> Selection:
    """What is explained, against what."""
    return selection(o["target"], o["task"], o["loss"], o["features"], o["drop"], o["group"],
                     o["allow_unknown_categories"])


def file_rows(max_rows: int, on_bad_row: Any) -> BatchRows:
    """How much of the file is kept (--max-rows), and what a bad row does."""
    from ipfi_cli.run.batch import BatchRows

    return BatchRows(max_rows=max_rows, on_bad_row=value(on_bad_row))


def file_display(quiet: bool, verbose: bool, debug: bool) -> Display:
    """What the command says on stderr (a table at the end; no live view)."""
    return Display(quiet=quiet, verbose=verbose, live=False, debug=debug)
