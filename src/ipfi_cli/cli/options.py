"""The options every command shares, defined once: one spelling and one help text everywhere.

Typer needs every parameter in each command's signature, so the commands repeat the
parameters (with the defaults defined here and in :mod:`ipfi_cli.core.params`; a test checks
that the shared ones have the same names, aliases, defaults and help in every command) and
turn them into the run layer's option groups with one builder per group:
:func:`input_spec` (:class:`~ipfi_cli.run.plan.InputSpec`), :func:`selection`
(:class:`~ipfi_cli.run.plan.Selection`) and :func:`pfi_params`
(:class:`~ipfi_cli.core.params.PFIParams`), which check them once.

The choices of ``--method``, ``--loss`` and ``--sampling`` are built from the core's registries
(:mod:`ipfi_cli.core.choices`), so a loss added to the core is an option value at once.
Nothing heavy is imported here: ``ipfi --help`` stays fast.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any, Optional, TypeAlias

import typer

from ipfi_cli.cli.errors import usage_error
from ipfi_cli.core.choices import BOUNDS_METHODS, EMPTY_COALITION_NAMES, LOSS_NAMES, METHOD_NAMES, SAMPLING_NAMES
from ipfi_cli.core.params import PFIParams
from ipfi_cli.errors import UsageError
from ipfi_cli.io.targets import input_clash, target_problem
from ipfi_cli.run.plan import InputSpec, Selection

PICKLE_WARNING = ("Loading a joblib/pickle model file runs code stored in it: only load files you trust "
                  "(a .skops file loads safely, see --trust).")


# -- choices ----------------------------------------------------------------------------------
def _choices(name: str, values: Sequence[str]) -> Any:
    """A ``str`` Enum for Typer whose values are ``values`` (``zero-one`` -> member ``zero_one``)."""
    return Enum(name, [(value.replace("-", "_"), value) for value in values], type=str)


if TYPE_CHECKING:  # to a type checker each choice is the string it carries
    Task: TypeAlias = str
    MethodName: TypeAlias = str
    LossName: TypeAlias = str
    Sampling: TypeAlias = str
    BoundsMethod: TypeAlias = str
    InputFormat: TypeAlias = str
    OutputFormat: TypeAlias = str
    OnBadRow: TypeAlias = str
    EmptyCoalition: TypeAlias = str
else:
    Task = _choices("Task", ("auto", "classification", "regression"))
    MethodName = _choices("MethodName", METHOD_NAMES)
    LossName = _choices("LossName", LOSS_NAMES)
    Sampling = _choices("Sampling", SAMPLING_NAMES)
    BoundsMethod = _choices("BoundsMethod", BOUNDS_METHODS)
    InputFormat = _choices("InputFormat", ("csv", "jsonl", "parquet"))
    OutputFormat = _choices("Format", ("csv", "jsonl"))
    OnBadRow = _choices("OnBadRow", ("fail", "skip"))
    EmptyCoalition = _choices("EmptyCoalition", EMPTY_COALITION_NAMES)


def value(choice: Any) -> Any:
    """The string an Enum choice carries (``None`` stays ``None``)."""
    return choice.value if isinstance(choice, Enum) else choice


# -- option panels and shared options --------------------------------------------------------
PANEL_INPUT = "Input"
PANEL_MODEL = "Model"
PANEL_ESTIMATOR = "Estimator"
PANEL_OUTPUT = "Output"
PANEL_DISPLAY = "Display and errors"

InputArg = Annotated[Optional[str], typer.Argument(
    help="CSV or JSONL file to read (.gz, .bz2, .xz allowed), or Parquet (a file, a folder of partitions, or a quoted "
    "glob). '-' or nothing reads standard input.",
    show_default=False, metavar="INPUT")]
NaValuesOpt = Annotated[Optional[list[str]], typer.Option(
    "--na-values", help="Also read these values as missing (comma-separated, repeatable), besides empty fields "
    "and the default tokens NA, N/A, NaN, nan, null, NULL, None, ?, #N/A and the rest of pandas' list.",
    rich_help_panel=PANEL_INPUT, show_default=False, metavar="TOKENS")]
NoDefaultNaOpt = Annotated[bool, typer.Option(
    "--no-default-na", help="Only empty fields and --na-values are missing (NA, None, ? ... stay text).",
    rich_help_panel=PANEL_INPUT)]
TextOpt = Annotated[Optional[list[str]], typer.Option(
    "--text", help="Read these CSV columns as text even where a value looks like a number (zip codes such as "
    "02139, category codes a model learned as strings); comma-separated, repeatable.", rich_help_panel=PANEL_INPUT,
    show_default=False, metavar="COLS")]
DelimiterOpt = Annotated[Optional[str], typer.Option(
    "--delimiter", "-d", help="CSV field separator: one character, or tab, semicolon, pipe. Default: a comma, "
    "unless the header has none and has ';', tab or '|'; tab for .tsv.", rich_help_panel=PANEL_INPUT,
    show_default=False, metavar="SEP")]
DecimalOpt = Annotated[Optional[str], typer.Option(
    "--decimal", help="The decimal mark of a CSV file's numbers: '.' (the default) or ',' (12,8 as European "
    "spreadsheets export it, with ';' between fields; a field with a '.' is then text). JSONL and Parquet "
    "numbers are typed: it does not apply to them.", rich_help_panel=PANEL_INPUT, show_default=False,
    metavar="MARK")]
SkipInitialSpaceOpt = Annotated[bool, typer.Option(
    "--skip-initial-space", help="CSV: a space right after a separator is not part of the field, so "
    "'39, State-gov' reads 'State-gov', as UCI's files need (pandas' skipinitialspace).",
    rich_help_panel=PANEL_INPUT)]
AllowUnknownCategoriesOpt = Annotated[bool, typer.Option(
    "--allow-unknown-categories", help="Run on when the first rows' values of a column are none of the categories "
    "the model's encoder learned, but would be without their spaces (' State-gov'): refused by default, as the "
    "column's importance would be 0 whatever the data hold.", rich_help_panel=PANEL_MODEL)]
FormatOpt = Annotated[Optional[InputFormat], typer.Option(
    "--format", "-f", help="Input format. Default: from the file extension (Parquet also for a folder, a glob "
    "or a file that starts with PAR1); on stdin and for other names (.txt), JSONL if the first line is a JSON "
    "object ({...}), else CSV.",
    rich_help_panel=PANEL_INPUT, show_default=False)]
TrustOpt = Annotated[Optional[list[str]], typer.Option(
    "--trust", help="For a .skops model: allow this type, which skops does not trust by default "
    "(repeatable or comma-separated; the error for a refused file lists the types).",
    rich_help_panel=PANEL_MODEL, show_default=False, metavar="TYPE")]
TargetOpt = Annotated[Optional[str], typer.Option(
    "--target", "-t", help="Name of the label column in the input (--loss prediction-shift needs none: leave it "
    "out for a stream without labels).", rich_help_panel=PANEL_MODEL,
    show_default=False, metavar="COL")]
TaskOpt = Annotated[Task, typer.Option(
    "--task", help="classification or regression; auto asks the model.", rich_help_panel=PANEL_MODEL)]
LossOpt = Annotated[Optional[LossName], typer.Option(
    "--loss", help="Loss whose increase measures importance. Default: zero-one for classification, "
    "absolute for regression. log needs predicted probabilities.", rich_help_panel=PANEL_MODEL,
    show_default=False)]
RepeatsOpt = Annotated[int, typer.Option(
    "--repeats", "-M", min=1, help="Permutations averaged per row and feature (M; the paper uses 10). "
    "Cost grows linearly with it.", rich_help_panel=PANEL_ESTIMATOR)]
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def limit_model_threads(threads: int | None) -> int | None:
    """Cap the threads of the model's numeric libraries (OpenMP, BLAS) at ``threads``.

    The environment variables reach libraries loaded later (a model file loads
    scikit-learn); threadpoolctl caps the ones already loaded. Predictions do not depend
    on it, only speed: small blocks on a busy machine are often much faster on one thread.
    """
    if threads is None:
        return None
    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)
    if "sklearn" in sys.modules or "numpy" in sys.modules:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=threads)
    return threads


ThreadsOpt = Annotated[Optional[int], typer.Option(
    "--threads", min=1, callback=limit_model_threads, help="Cap the model's compute threads "
    "(OpenMP/BLAS) at N. With small micro-batches or on a busy machine, 1 is often much faster for "
    "scikit-learn's HistGradientBoosting. Results do not depend on it. Default: the libraries' choice.",
    rich_help_panel=PANEL_MODEL, show_default=False, metavar="N")]
SeedOpt = Annotated[Optional[int], typer.Option(
    "--seed", min=0, help="Random seed; the same seed and input give byte-identical output. "
    "Default: a random seed, reported with --verbose and in --meta.", rich_help_panel=PANEL_ESTIMATOR,
    show_default=False)]
FeaturesOpt = Annotated[Optional[list[str]], typer.Option(
    "--features", help="Explain only these columns (comma-separated, repeatable). A model that does not name "
    "its inputs (river, a function, scikit-learn fitted on an array) gets only these (and --group's). "
    "Default: every model input.",
    rich_help_panel=PANEL_ESTIMATOR, show_default=False, metavar="COLS")]
DropOpt = Annotated[Optional[list[str]], typer.Option(
    "--drop", help="Do not explain these columns (comma-separated, repeatable). A model that names its "
    "inputs still gets them; any other model (river, a function, scikit-learn fitted on an array) does not: "
    "drop ids and dates.",
    rich_help_panel=PANEL_ESTIMATOR, show_default=False, metavar="COLS")]
GroupOpt = Annotated[Optional[list[str]], typer.Option(
    "--group", "-g", help="NAME=col1,col2: permute these columns jointly and report them as NAME "
    "(repeatable). Grouped columns are not reported alone.", rich_help_panel=PANEL_ESTIMATOR,
    show_default=False, metavar="NAME=COLS")]
OutputOpt = Annotated[Optional[str], typer.Option(
    "--output", "-o", help="Write to this file instead of standard output (overwritten).",
    rich_help_panel=PANEL_OUTPUT, show_default=False, metavar="FILE")]
OutputFormatOpt = Annotated[Optional[OutputFormat], typer.Option(
    "--output-format", "-F", help="csv or jsonl (strict JSON, NaN as null). Default: jsonl for an "
    "--output ending in .jsonl/.ndjson, else csv.", rich_help_panel=PANEL_OUTPUT, show_default=False)]
DataArg = Annotated[str, typer.Argument(
    help="CSV or JSONL file (.gz, .bz2, .xz allowed), or Parquet (a file, a folder of partitions, or a quoted "
    "glob), read whole; '-' reads standard input.", show_default=False,
    metavar="DATA")]
NJobsOpt = Annotated[Optional[int], typer.Option(
    "--n-jobs", "-j", help="Parallel workers (joblib) for the permutations, one feature per task; -1: all "
    "cores. Results do not depend on it.", rich_help_panel=PANEL_ESTIMATOR, show_default=False)]
#: rows batch and compare hold at most by default (about 100-400 bytes each, with the model's inputs)
DEFAULT_MAX_ROWS = 1_000_000
MaxRowsOpt = Annotated[int, typer.Option(
    "--max-rows", min=2, help="Keep at most N good rows in memory: a larger input is explained on a uniform "
    "sample of N of its rows (drawn with --seed, kept in input order, and said in a note). Memory grows with N, "
    "not with the input. compare --learn streams every row (a sample would move --drift-at).", metavar="N")]
InnerOpt = Annotated[Optional[int], typer.Option(
    "--inner", min=1, help="With --method sage: imputations per coalition, their predictions averaged (with the "
    "log loss their probability vectors). Default: 2 with the squared loss (the values then estimate Covert et "
    "al.'s SAGE without bias), else 1 (the Shapley values of the loss under one random imputation; with the log "
    "loss far above Covert's, which about 16 approach). compare uses it for iSAGE and batch SAGE alike.",
    rich_help_panel=PANEL_ESTIMATOR, show_default=False, metavar="K")]
EmptyCoalitionOpt = Annotated[EmptyCoalition, typer.Option(
    "--empty-coalition", help="With --method sage: how the loss with no feature known is measured. imputed: as "
    "every other coalition's, every feature imputed (a feature the model never reads gets 0); mean: by the "
    "smoothed mean prediction, as iXAI's IncrementalSage (which gives the first feature of each ordering a share "
    "of the imputations' noise: unused features come out negative).", rich_help_panel=PANEL_ESTIMATOR)]
PermutationsOpt = Annotated[int, typer.Option(
    "--permutations", min=2, help="With --method sage: batch SAGE's sampled (row, feature ordering) pairs.",
    rich_help_panel=PANEL_ESTIMATOR)]
WorkersOpt = Annotated[Optional[int], typer.Option(
    "--workers", min=1, help="Spread the work over a local Dask cluster of N worker processes (127.0.0.1): batch's "
    "permutations, explain --by's keys. The same seed gives the same bytes. Needs ipfi-cli[dask].",
    show_default=False, metavar="N")]
SchedulerOpt = Annotated[Optional[str], typer.Option(
    "--scheduler", help="Spread the work over a running Dask cluster (tcp://HOST:PORT); its workers need ipfi and "
    "the model's libraries, and explain --by's workers read the input and model files themselves.",
    show_default=False, metavar="ADDRESS")]
OnBadRowOpt = Annotated[OnBadRow, typer.Option(
    "--on-bad-row", help="fail: stop at the first unreadable row (exit 1). skip: skip it and report "
    "the count at the end.", rich_help_panel=PANEL_DISPLAY)]
VerboseOpt = Annotated[bool, typer.Option(
    "--verbose", "-v", help="Print the settings (seed included), the model and columns used, and each "
    "skipped row.", rich_help_panel=PANEL_DISPLAY)]
QuietOpt = Annotated[bool, typer.Option(
    "--quiet", "-q", help="No live table, summary, notes or warnings; errors are still printed.",
    rich_help_panel=PANEL_DISPLAY)]
DebugOpt = Annotated[bool, typer.Option(
    "--debug", help="Show Python tracebacks for errors.", rich_help_panel=PANEL_DISPLAY)]


# -- option parsing helpers --------------------------------------------------------------------
def split_names(values: Sequence[str] | None) -> list[str] | None:
    """``["a,b", "c"]`` -> ``["a", "b", "c"]``; ``None`` stays ``None``.

    >>> split_names(["age, salary", "elevel"])
    ['age', 'salary', 'elevel']
    """
    if values is None:
        return None
    names = [name.strip() for value in values for name in value.split(",")]
    return [n for n in names if n]


def parse_groups(specs: Sequence[str] | None, option: str = "--group") -> dict[str, list[str]]:
    """``["loc=zipcode,hvalue"]`` -> ``{"loc": ["zipcode", "hvalue"]}``; bad syntax is a usage error.

    >>> parse_groups(["money=salary,commission", "home = hvalue, hyears"])
    {'money': ['salary', 'commission'], 'home': ['hvalue', 'hyears']}
    """
    groups: dict[str, list[str]] = {}
    for spec in specs or []:
        name, sep, members = spec.partition("=")
        name = name.strip()
        columns = split_names([members]) if sep else None
        if not sep or not name or not columns:
            raise UsageError(f"expected NAME=col1,col2, got {spec!r}", option)
        if name in groups:
            raise UsageError(f"group {name!r} is given twice", option)
        groups[name] = columns
    return groups




# -- option groups -------------------------------------------------------------------------------
def input_spec(path: str | None, input_format: Any, na_values: Sequence[str] | None, no_default_na: bool,
               delimiter: str | None, text: Sequence[str] | None, decimal: str | None = None,
               skip_initial_space: bool = False) -> InputSpec:
    """The input options as one value; bad reader options are usage errors, before any work."""
    spec = InputSpec(path=path, format=value(input_format), na_values=na_values, no_default_na=no_default_na,
                     delimiter=delimiter, decimal=decimal, text=split_names(text),
                     skip_initial_space=skip_initial_space)
    spec.check()
    return spec


def selection(target: str | None, task: Any, loss: Any, features: Sequence[str] | None, drop: Sequence[str] | None,
              group: Sequence[str] | None, allow_unknown_categories: bool = False, *,
              by: Sequence[str] = ()) -> Selection:
    """What to explain against what, as one value (``--group`` parsed; ``by``: explain's key columns); no
    ``--target`` with a loss that needs labels is a usage error, before the model is loaded."""
    if target is None and value(loss) != "prediction-shift":
        from ipfi_cli.run.setup import no_target_message

        raise UsageError(no_target_message(value(loss)))
    return Selection(target=target, task=value(task), loss=value(loss), features=split_names(features),
                     drop=split_names(drop), groups=parse_groups(group), by=tuple(by),
                     allow_unknown_categories=allow_unknown_categories)


def pfi_params(alpha: float, repeats: int, sampling: Any, reservoir_size: int) -> PFIParams:
    """iPFI's settings, checked once; a bad one is a usage error naming its option (Typer's, exit 2)."""
    try:
        return PFIParams(alpha=alpha, n_repeats=repeats, sampling=value(sampling), reservoir_size=reservoir_size)
    except ValueError as error:  # "alpha must be ...": the option, then what it must be
        name, rule = str(error).split(" ", 1)
        raise usage_error(rule, "--repeats" if name == "n_repeats" else "--" + name.replace("_", "-")) from None


def draw_seed(seed: int | None) -> int:
    """``seed``, or a new random one when none is given (each command reports the seed it used)."""
    import secrets

    return seed if seed is not None else secrets.randbelow(2**31)


#: the outputs for which '-' is a stream: the records on standard output (and compare's --traces), --events
#: on standard error; every other output is a file
STREAM_OUTPUTS = ("--output", "--traces", "--events")


def check_outputs(outputs: dict[str, str | None], inputs: dict[str, str | Sequence[str] | None], *,
                  written_at_end: Sequence[str] = (), streams: Sequence[str] = STREAM_OUTPUTS) -> None:
    """Refuse (usage error, exit 2) an output that is one of the command's inputs, or another
    output, before anything is opened for writing; files are compared by identity
    (:func:`~ipfi_cli.io.targets.input_clash`). Every command that writes files calls this.

    ``outputs`` and ``inputs`` map each option (as the help names it) to its path; a data input
    (``INPUT``, ``DATA``) is given as :func:`~ipfi_cli.io.targets.data_files`'s list. The outputs
    named in ``written_at_end`` are first written after the work (``--meta``, a batch's records):
    a target that cannot be written there (a missing folder, a directory) is refused now, so a long
    run never fails at its end. ``streams`` are the outputs that ``-`` may name (a command whose
    ``--output`` is a file, such as ``merge``, gives none): for any other, ``-`` is refused, as it
    would make a file named ``-``.
    """
    from ipfi_cli.cli.errors import usage_error

    for option, path in outputs.items():
        if path == "-" and option not in streams:
            raise usage_error("'-' is no file here: this option writes a file (./- names a file '-')", option)

    for option in written_at_end:
        path = outputs.get(option)
        problem = target_problem(path) if path and path != "-" else None
        if problem:
            raise usage_error(f"{path}: cannot write there ({problem})", option)
    clash = input_clash(outputs, inputs)
    if clash is None:
        return
    option, path, other = clash
    if inputs.get(other):
        raise usage_error(f"is the same file as {other}, an input ({path}): writing it would destroy the input",
                          option)
    raise usage_error(f"is the same file as {other} ({path}): one would overwrite the other; choose another file",
                      option)
