"""What every ``ipfi`` command shares: option definitions, error reporting, model loading,
feature selection, task and loss choice.

Commands import the option aliases (``ModelOpt``, ``TargetOpt``, ``SeedOpt``...) so that a
flag has one spelling and one help text everywhere, and call the helpers so that a
mistake gives the same one-line message in every command. Nothing heavy (numpy,
scikit-learn, river, pandas) is imported at module level: ``ipfi --help`` stays fast.

Errors: raise :class:`CliError` (exit 1, one line on stderr) for data and model problems
and :func:`usage_error` (exit 2) for bad option values; run the command body inside
:func:`reporting`, which turns known exceptions into those one-liners (tracebacks only
with ``--debug``).
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import traceback
from dataclasses import dataclass, field
from enum import Enum
from typing import Annotated, Any, Callable, Iterator, Optional, Sequence

import typer

# -- exit codes -----------------------------------------------------------------------------
EXIT_OK = 0
EXIT_ERROR = 1  # data, model or runtime error; also: the output pipe was closed (e.g. `| head`)
EXIT_USAGE = 2  # bad command line
EXIT_INTERRUPTED = 130  # Ctrl-C

EXIT_CODES_HELP = (
    "Exit codes: 0 success; 1 data or model error (or the output pipe closed early, as with "
    "`| head`); 2 usage error; 130 interrupted (Ctrl-C)."
)
PICKLE_WARNING = ("Loading a joblib/pickle model file runs code stored in it: only load files you trust "
                  "(a .skops file loads safely, see --trust).")

PROG = "ipfi"


# -- choices ----------------------------------------------------------------------------------
class Task(str, Enum):
    auto = "auto"
    classification = "classification"
    regression = "regression"


class LossName(str, Enum):
    zero_one = "zero-one"
    absolute = "absolute"
    squared = "squared"
    log = "log"


class Sampling(str, Enum):
    geometric = "geometric"
    uniform = "uniform"


class InputFormat(str, Enum):
    csv = "csv"
    jsonl = "jsonl"


class OutputFormat(str, Enum):
    csv = "csv"
    jsonl = "jsonl"


class OnBadRow(str, Enum):
    fail = "fail"
    skip = "skip"


# -- option panels and shared options --------------------------------------------------------
PANEL_INPUT = "Input"
PANEL_MODEL = "Model"
PANEL_ESTIMATOR = "Estimator"
PANEL_OUTPUT = "Output"
PANEL_DISPLAY = "Display and errors"

InputArg = Annotated[Optional[str], typer.Argument(
    help="CSV or JSONL file to read (.gz allowed). '-' or nothing reads standard input.",
    show_default=False, metavar="INPUT")]
NaValuesOpt = Annotated[Optional[list[str]], typer.Option(
    "--na-values", help="Also read these values as missing (comma-separated, repeatable), besides empty fields "
    "and the default tokens NA, N/A, NaN, nan, null, NULL, None, ?, #N/A and the rest of pandas' list.",
    rich_help_panel=PANEL_INPUT, show_default=False, metavar="TOKENS")]
NoDefaultNaOpt = Annotated[bool, typer.Option(
    "--no-default-na", help="Only empty fields and --na-values are missing (NA, None, ? ... stay text).",
    rich_help_panel=PANEL_INPUT)]
DelimiterOpt = Annotated[Optional[str], typer.Option(
    "--delimiter", "-d", help="CSV field separator: one character, or tab, semicolon, pipe. Default: a comma, "
    "unless the header has none and has ';', tab or '|'; tab for .tsv.", rich_help_panel=PANEL_INPUT,
    show_default=False, metavar="SEP")]


def read_options(na_values: Sequence[str] | None, no_default_na: bool, delimiter: str | None) -> dict[str, Any]:
    """The reader's ``na_values`` and ``delimiter`` from the options (usage errors, exit 2)."""
    from ipfi_cli.io.readers import na_tokens, parse_delimiter

    tokens = na_tokens([t for value in na_values or [] for t in value.split(",")], defaults=not no_default_na)
    try:
        separator = parse_delimiter(delimiter) if delimiter is not None else None
    except ValueError as error:
        raise usage_error(str(error), "--delimiter") from None
    return {"na_values": tokens, "delimiter": separator}


FormatOpt = Annotated[Optional[InputFormat], typer.Option(
    "--format", "-f", help="Input format. Default: from the file extension; on stdin, JSONL if the "
    "first line is a JSON object ({...}), else CSV.", rich_help_panel=PANEL_INPUT, show_default=False)]
ModelOpt = Annotated[str, typer.Option(
    "--model", "-m", help="Model file: .skops (loaded safely with skops.io; needs ipfi-cli\\[safe]) or "
    "joblib/pickle (scikit-learn or river, pipelines included). " + PICKLE_WARNING,
    rich_help_panel=PANEL_MODEL, show_default=False, metavar="PATH")]
TrustOpt = Annotated[Optional[list[str]], typer.Option(
    "--trust", help="For a .skops model: allow this type, which skops does not trust by default "
    "(repeatable or comma-separated; the error for a refused file lists the types).",
    rich_help_panel=PANEL_MODEL, show_default=False, metavar="TYPE")]
TargetOpt = Annotated[str, typer.Option(
    "--target", "-t", help="Name of the label column in the input.", rich_help_panel=PANEL_MODEL,
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
    "--seed", help="Random seed; the same seed and input give byte-identical output. "
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


# -- messages and errors ----------------------------------------------------------------------
class CliError(Exception):
    """A data or model problem: printed as one ``ipfi: error: ...`` line, exit code ``code``."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def usage_error(message: str, option: str | None = None) -> typer.BadParameter:
    """An exception to raise for a bad option value (Typer prints it; exit 2)."""
    return typer.BadParameter(message, param_hint=f"'{option}'" if option else None)


def say(message: str, kind: str | None = None) -> None:
    """One line on stderr, prefixed ``ipfi:`` (and ``error:``/``warning:`` when given)."""
    prefix = f"{PROG}: {kind}: " if kind else f"{PROG}: "
    try:
        print(prefix + message, file=sys.stderr, flush=True)
    except (OSError, ValueError):  # stderr closed: nothing more we can do
        pass


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def describe_error(error: BaseException) -> tuple[str, int] | None:
    """The one-line message and exit code of a known error type, else ``None``."""
    from ipfi_cli.io.model_files import ModelFileError
    from ipfi_cli.io.readers import InputError

    if isinstance(error, CliError):
        return error.message, error.code
    if isinstance(error, (InputError, ModelFileError)):
        return str(error), EXIT_ERROR
    if "ipfi_cli.core" in sys.modules or "ipfi_cli.models" in sys.modules:
        from ipfi_cli.core import LossMismatchError, RowError
        from ipfi_cli.models.adapters import ModelError

        if isinstance(error, (ModelError, LossMismatchError, RowError)):
            return first_line(error), EXIT_ERROR
    return None


def quiet_broken_pipe() -> None:
    """After EPIPE on stdout: point stdout at /dev/null so the interpreter's final flush is silent."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


@contextlib.contextmanager
def reporting(debug: bool = False) -> Iterator[None]:
    """Run a command body: known errors become one stderr line and an exit code.

    ``CliError``, input and model-file errors -> exit 1; a closed output pipe -> quiet
    exit 1; an unexpected exception -> one line naming its type (the traceback with
    ``--debug``). ``typer.Exit`` and usage errors pass through.
    """
    try:
        yield
    except (typer.Exit, typer.Abort, typer.BadParameter, KeyboardInterrupt):
        raise
    except BrokenPipeError:
        quiet_broken_pipe()
        raise typer.Exit(EXIT_ERROR) from None
    except Exception as error:  # noqa: BLE001 - this is the command's last line of defence
        known = describe_error(error)
        if debug:
            traceback.print_exc()
        if known is None:
            say(f"unexpected {type(error).__name__}: {first_line(error)} (run with --debug for the traceback)",
                "error")
            raise typer.Exit(EXIT_ERROR) from None
        say(known[0], "error")
        raise typer.Exit(known[1]) from None


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
            raise usage_error(f"expected NAME=col1,col2, got {spec!r}", option)
        if name in groups:
            raise usage_error(f"group {name!r} is given twice", option)
        groups[name] = columns
    return groups


# -- models -------------------------------------------------------------------------------------
@dataclass
class LoadedModel:
    """A loaded model file and its predictor."""

    path: str
    model: Any
    predictor: Any
    kind: str  # "scikit-learn", "river" or "function"
    warnings: list[str] = field(default_factory=list)

    @property
    def description(self) -> str:
        return f"{self.kind} {type(self.model).__name__}"


def load_predictor(path: str, *, learn: bool = False, trust: Sequence[str] | None = None,
                   http: Any = None) -> LoadedModel:
    """Load a model file and wrap it for the core; errors name the file (exit 1).

    With ``learn``, the model must learn one row at a time (river's ``learn_one``).
    ``trust``: the ``--trust`` values (types a ``.skops`` file may hold).
    ``http``: the served model's :class:`~ipfi_cli.models.http.HttpOptions` (``--model-url``).
    """
    from ipfi_cli.io.model_files import load_model
    from ipfi_cli.models.adapters import ModelError, RiverPredictor, SklearnPredictor, as_predictor
    from ipfi_cli.models.sources import open_model

    opened = open_model(path, http=http)  # ONNX, MLflow or served models; None for a model file
    if opened is not None:
        if learn:
            raise CliError(f"{path}: --learn needs a model that learns one row at a time (river's learn_one); "
                           f"this {opened[2]} model cannot")
        return LoadedModel(path, *opened)
    model, warnings = load_model(path, split_names(trust) or ())
    try:
        predictor = as_predictor(model)
    except ModelError as error:
        raise CliError(f"{path}: {first_line(error)}") from None
    kind = ("river" if isinstance(predictor, RiverPredictor)
            else "scikit-learn" if isinstance(predictor, SklearnPredictor) else "function")
    if learn and not predictor.can_learn:
        raise CliError(f"{path}: --learn needs a model that learns one row at a time (river's learn_one); "
                       f"this {kind} {type(model).__name__} cannot")
    return LoadedModel(path, model, predictor, kind, warnings)


def choose_task(loaded: LoadedModel, task: Task) -> bool:
    """True for classification: ``task`` if given, else what the model says it is."""
    if task is Task.classification:
        return True
    if task is Task.regression:
        return False
    return bool(loaded.predictor.is_classifier)


def choose_loss(loaded: LoadedModel, classification: bool, loss: LossName | str | None) -> Any:
    """The core ``Loss``: ``loss`` if given, else the paper's default for the task.

    A loss that cannot measure this model (zero-one or log loss on a regressor, absolute or
    squared error on text classes) is refused here, before the first row, naming the fix.
    """
    from ipfi_cli.core.losses import default_loss, get_loss
    from ipfi_cli.run.labels import LossFitError, check_loss, declared_task

    chosen = get_loss(loss.value if isinstance(loss, LossName) else loss) if loss else default_loss(classification)
    classes = loaded.predictor.classes
    try:
        check_loss(chosen, classification, declared_task(loaded.model), classes,
                   loaded.predictor.has_proba)
    except LossFitError as error:
        raise CliError(f"{loaded.path}: {error}") from None
    return chosen


def label_matcher(loaded: LoadedModel, classification: bool, learn: bool) -> Any:
    """A :class:`~ipfi_cli.run.labels.LabelMatcher` for the model's classes (scikit-learn's
    ``classes_``; a river classifier's are asked on the first row, see :func:`first_row_hook`)."""
    from ipfi_cli.run.labels import LabelMatcher

    return LabelMatcher(classification=classification, classes=loaded.predictor.classes,
                        fixed=not learn)


def first_row_hook(loaded: LoadedModel, matcher: Any,
                   columns: Sequence[str]) -> Callable[[dict[str, Any]], None] | None:
    """For a river classifier with no known classes: learn them from its answer on the first row."""
    if not matcher.classification or matcher.classes is not None or loaded.kind != "river":
        return None
    from ipfi_cli.run.labels import model_classes_from_first_row

    def learn_classes(values: dict[str, Any]) -> None:
        classes = model_classes_from_first_row(loaded.model, {c: values[c] for c in columns if c in values})
        if classes:
            matcher.learn_classes(classes)
    return learn_classes


# -- columns ------------------------------------------------------------------------------------
def model_columns(loaded: LoadedModel, input_columns: Sequence[str], target: str, source: str,
                  *, check_target: bool = True, features: Sequence[str] | None = None,
                  drop: Sequence[str] | None = None, groups: dict[str, list[str]] | None = None,
                  notes: list[str] | None = None) -> list[str]:
    """The model's input columns, checked against the input's columns up front.

    A model that names its inputs (``feature_names_in_``) gets exactly those, and every
    one must be in the input. A model without a schema (river, a function, scikit-learn
    fitted on an array) gets the columns chosen by ``--features`` (with the ``--group``
    members) or else every input column but the target and the ``--drop`` columns; one
    fitted on an array takes them by position, so the count must match (``notes`` gets a
    line saying so).
    """
    inputs = list(input_columns)
    if check_target and target not in inputs:
        hint = ""
        for delimiter, name in ((";", "';'"), ("\t", "tab"), ("|", "'|'")):
            if any(delimiter in c for c in inputs):
                hint = f" (the header holds {name}: is the file separated by it? use --delimiter)"
                break
        raise CliError(f"{source}: no column {target!r} (the --target); the columns are: {', '.join(inputs)}{hint}")
    known = loaded.predictor.columns
    if known:
        if target in known:
            raise CliError(f"{loaded.path}: the model takes the target column {target!r} as an input")
        missing = [c for c in known if c not in inputs]
        if missing:
            raise CliError(f"{source}: the model needs column(s) {', '.join(missing)}, which the input lacks "
                           f"(the model's inputs: {', '.join(known)})")
        return list(known)
    available = [c for c in inputs if c != target]
    for option, names in (("--features", features or []), ("--drop", drop or []),
                          ("--group", [c for members in (groups or {}).values() for c in members])):
        unknown = [n for n in names if n not in available]
        if unknown:
            raise usage_error(f"no such input column: {', '.join(unknown)} (the columns: {', '.join(available)})",
                              option)
    dropped = set(drop or [])
    if features:
        chosen = set(features) | {c for members in (groups or {}).values() for c in members}
        columns = [c for c in available if c in chosen and c not in dropped]
    else:
        columns = [c for c in available if c not in dropped]
    expected = loaded.predictor.n_features
    if expected is not None and expected != len(columns):
        raise CliError(f"{source}: the model was fitted on {expected} unnamed features and takes columns by "
                       f"position, but it would get {len(columns)}: {', '.join(columns)} (choose them with "
                       "--features or --drop, in the order the model was fitted on)")
    if not columns:
        raise CliError(f"{source}: the input has no columns besides the target {target!r}")
    if features and notes is not None and len(columns) < len(available) - len(dropped):
        notes.append(f"the model does not name its inputs, so it gets only the columns --features and --group "
                     f"choose ({', '.join(columns[:6])}{', ...' if len(columns) > 6 else ''}); to give it every "
                     "other column, leave out the ones it must not see with --drop instead")
    if expected is not None and notes is not None:
        notes.append("the model was fitted without column names: it gets the input's columns by position "
                     f"({', '.join(columns[:6])}{', ...' if len(columns) > 6 else ''}); --verbose shows the mapping")
    return columns


def select_features(columns: Sequence[str], features: Sequence[str] | None, drop: Sequence[str] | None,
                    groups: dict[str, list[str]]) -> tuple[list[str] | None, dict[str, list[str]]]:
    """Check ``--features``/``--drop``/``--group`` against the model's columns (usage errors, exit 2).

    Returns the ``features`` and ``groups`` arguments for the core estimators. (A ``--drop``
    column that the model does not get, because it has no schema, is already left out.)
    """
    known = set(columns)
    for option, names in (("--features", features or []), ("--drop", drop or []),
                          ("--group", [c for members in groups.values() for c in members])):
        unknown = [n for n in names if n not in known]
        if unknown:
            raise usage_error(f"not a model input: {', '.join(unknown)} (the model's inputs: {', '.join(columns)})",
                              option)
    selected: list[str] | None = list(features) if features else None
    if drop:
        base = selected if selected is not None else list(columns)
        selected = [c for c in base if c not in set(drop)]
        if not selected and not groups:
            raise usage_error("every feature is dropped: nothing left to explain", "--drop")
    from ipfi_cli.core.groups import resolve_groups

    try:
        resolve_groups(list(columns), selected, groups)
    except ValueError as error:
        raise usage_error(str(error), "--group" if groups else "--features") from None
    return selected, groups


# -- environment --------------------------------------------------------------------------------
def stream_is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def live_display_allowed(quiet: bool, no_live: bool) -> bool:
    """A live display on stderr only for a real terminal, not ``TERM=dumb``, not quiet."""
    return (not quiet and not no_live and stream_is_terminal(sys.stderr)
            and os.environ.get("TERM", "") != "dumb")


def library_versions() -> dict[str, str]:
    """Versions of Python and the libraries a run depends on (for --meta)."""
    import platform
    from importlib import metadata

    versions = {"python": platform.python_version()}
    for name in ("ipfi-cli", "numpy", "scikit-learn", "river", "pandas", "joblib"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions
