"""The options that choose the explainer: method, feature removal, smoothing (built from the core's names)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, TypeAlias

import typer

from ipfi_cli.cli.options import PANEL_ESTIMATOR, _choices
from ipfi_cli.core.choices import CONDITIONAL_SAMPLER_NAMES, REMOVAL_NAMES, SMOOTHING_NAMES

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
