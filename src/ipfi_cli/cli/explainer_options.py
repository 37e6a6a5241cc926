"""The "Estimator" panel's options that choose the explainer: method, feature removal, smoothing (built from the
core's names), and ``ipfi explain``'s smoothing rate, event-time half-life, sampling and reservoir."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Optional, TypeAlias

import typer

from ipfi_cli.cli.explain_checks import half_life_seconds_of
from ipfi_cli.cli.options import (
    PANEL_ESTIMATOR,
    DropOpt,
    EmptyCoalitionOpt,
    FeaturesOpt,
    GroupOpt,
    InnerOpt,
    MethodName,
    RepeatsOpt,
    Sampling,
    SeedOpt,
    _choices,
    value,
)
from ipfi_cli.cli.signature import option
from ipfi_cli.core.choices import CONDITIONAL_SAMPLER_NAMES, REMOVAL_NAMES, SMOOTHING_NAMES
from ipfi_cli.core.params import DEFAULT_ALPHA, DEFAULT_REPEATS, DEFAULT_RESERVOIR_SIZE, DEFAULT_SAMPLING
from ipfi_cli.run.settings import MethodSpec

if TYPE_CHECKING:
    Smoothing: TypeAlias = str
    Removal: TypeAlias = str
    ConditionalSampler: TypeAlias = str
else:
    Smoothing = _choices("Smoothing", SMOOTHING_NAMES)
    Removal = _choices("Removal", (*REMOVAL_NAMES, "both"))
    ConditionalSampler = _choices("ConditionalSampler", CONDITIONAL_SAMPLER_NAMES)

SmoothingOpt = Annotated[Smoothing, typer.Option(
    "--smoothing", help="exponential: each row weighs --alpha, older rows fade (follows a changing model); mean: "
    "every row weighs alike (a static model: converges to the batch value; --alpha unused).",
    rich_help_panel=PANEL_ESTIMATOR)]
RemovalOpt = Annotated[Removal, typer.Option(
    "--removal", help="How a feature is removed: marginal (an earlier row's value: does the model use it?), "
    "conditional (drawn given the row's other features: could they stand in for it?; numeric inputs), or both "
    "(per feature both values and their gap, <feature>_conditional and <feature>_gap).",
    rich_help_panel=PANEL_ESTIMATOR)]
ConditionalSamplerOpt = Annotated[ConditionalSampler, typer.Option(
    "--conditional-sampler", help="With --removal conditional/both: gaussian (running mean and covariance) or "
    "tree (a river tree per feature: non-linear dependence; PFI only; not with --state or --max-keys: river "
    "saves trees only by pickle).", rich_help_panel=PANEL_ESTIMATOR)]

ExplainMethodOpt = Annotated[MethodName, typer.Option(
        "--method", help="The explaining method: pfi, incremental permutation feature importance (how much the "
        "loss grows without a feature); sage, incremental SAGE (the loss the model explains shared out among the "
        "features: the values add up to the explained loss, said at the end and in --meta).",
        rich_help_panel=PANEL_ESTIMATOR)]
AlphaOpt = Annotated[float, typer.Option(
        "--alpha", "-a", help="Smoothing: the weight of the newest row, in (0, 1]. The estimate averages "
        "roughly the last 2/alpha rows.", rich_help_panel=PANEL_ESTIMATOR)]
TimeColumnOpt = Annotated[Optional[str], typer.Option(
        "--time-column", help="With --half-life: the column of each row's event time (seconds, or ISO 8601 "
        "text such as 2024-05-01 13:00:00, UTC unless it has an offset).", rich_help_panel=PANEL_ESTIMATOR,
        show_default=False, metavar="COL")]
HalfLifeOpt = Annotated[Optional[str], typer.Option(
        "--half-life", help="Smooth by event time instead of by rows (forward decay): a row half-life older "
        "weighs half as much, whatever the rows' rate (90s, 30m, 1h, 2d). Replaces --alpha; the state of "
        "shards merges (ipfi merge).", rich_help_panel=PANEL_ESTIMATOR, show_default=False,
        metavar="DURATION")]
RunningMeanOpt = Annotated[bool, typer.Option(
        "--running-mean", help="Every row weighs alike (the static setting's estimator) instead of --alpha's "
        "smoothing; the state of shards merges (ipfi merge).", rich_help_panel=PANEL_ESTIMATOR)]
SamplingOpt = Annotated[Sampling, typer.Option(
        "--sampling", "-s", help="Which earlier rows replace a feature's value: geometric prefers recent rows "
        "(follows drift); uniform treats all rows alike.", rich_help_panel=PANEL_ESTIMATOR)]
ReservoirSizeOpt = Annotated[int, typer.Option(
        "--reservoir-size", "-L", min=1, help="Earlier rows remembered per permutation.",
        rich_help_panel=PANEL_ESTIMATOR)]


ESTIMATOR_OPTIONS = [
    option("method", ExplainMethodOpt, "pfi"), option("removal", RemovalOpt, "marginal"),
    option("conditional_sampler", ConditionalSamplerOpt, "gaussian"), option("smoothing", SmoothingOpt, "exponential"),
    option("inner", InnerOpt, None), option("empty_coalition", EmptyCoalitionOpt, "imputed"),
    option("alpha", AlphaOpt, DEFAULT_ALPHA), option("time_column", TimeColumnOpt, None),
    option("half_life", HalfLifeOpt, None), option("running_mean", RunningMeanOpt, False),
    option("repeats", RepeatsOpt, DEFAULT_REPEATS), option("sampling", SamplingOpt, DEFAULT_SAMPLING),
    option("reservoir_size", ReservoirSizeOpt, DEFAULT_RESERVOIR_SIZE), option("seed", SeedOpt, None),
    option("features", FeaturesOpt, None), option("drop", DropOpt, None), option("group", GroupOpt, None)]


def method_spec(method: Any, removal: Any, conditional_sampler: Any, smoothing: Any, inner: int | None,
                empty_coalition: Any, time_column: str | None, half_life: str | None, running_mean: bool) -> MethodSpec:
    """The explainer's method and smoothing as one value (``--half-life`` read as seconds, checked with
    ``--time-column`` and ``--running-mean``); iPFI's own settings are :func:`~ipfi_cli.cli.options.pfi_params`."""
    return MethodSpec(name=value(method), smoothing=value(smoothing), removal=value(removal),
                      conditional_sampler=value(conditional_sampler), inner=inner,
                      empty_coalition=value(empty_coalition), time_column=time_column,
                      half_life=half_life_seconds_of(time_column, half_life, running_mean), running_mean=running_mean)
