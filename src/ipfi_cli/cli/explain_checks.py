"""``ipfi explain``'s options checked against each other, before anything is read.

Each function takes the options it checks and raises Typer's usage error (exit 2) naming the
option at fault; the ones that turn an option's text into a value return it.
"""

from __future__ import annotations

from ipfi_cli.cli.errors import usage_error
from ipfi_cli.cli.options import check_outputs, split_names
from ipfi_cli.errors import UsageError
from ipfi_cli.io.targets import data_files
from ipfi_cli.run.settings import CHECKPOINT_EVERY, DEFAULT_LABEL_WAIT


def check_bounds_options(*, bounds: bool, bounds_method: str, delta: float, repeats: int, method: str,
                         smoothing: str, running_mean: bool, half_life: str | None, alpha: float) -> None:
    """``--bounds``, ``--bounds-method`` and ``--delta`` against the estimator they bound."""
    from ipfi_cli.core.bounds import check_bounds_alpha, check_delta

    try:
        check_delta(delta)
    except ValueError as error:
        raise usage_error(str(error).removeprefix("delta "), "--delta") from None
    if bounds_method == "realisations" and repeats < 2:
        raise usage_error("realisations measures the spread of the M realisations: it needs --repeats 2 or more",
                          "--bounds-method")
    if bounds_method == "realisations" and (method != "pfi" or smoothing != "exponential"):
        raise usage_error("realisations is measured for --method pfi with --smoothing exponential; other "
                          "methods and smoothings give the Chebyshev or the normal bound", "--bounds-method")
    if bounds_method == "normal" and method != "pfi":
        # iPFI's, smoothed either way (--smoothing mean is the running mean --running-mean merges)
        raise usage_error("normal is measured for --method pfi; other methods give the Chebyshev bound",
                          "--bounds-method")
    if ((bounds or bounds_method == "realisations") and smoothing == "exponential"
            and not running_mean and half_life is None):
        try:
            check_bounds_alpha(alpha)
        except ValueError as error:
            raise usage_error(f"{error}; choose a smaller --alpha, or drop --bounds", "--alpha") from None


def check_state_options(*, state: str | None, checkpoint_every: int, skip_seen: bool) -> None:
    """``--state`` and the options that need it."""
    if not state and checkpoint_every != CHECKPOINT_EVERY:
        raise usage_error("needs --state (where to save the checkpoints)", "--checkpoint-every")
    if not state and not skip_seen:
        raise usage_error("needs --state (it says how to continue from one)", "--no-skip-seen")


def check_files(*, input: str | None, model: str | None, labels: str | None, reference: str | None,
                state: str | None, output: str | None, meta: str | None, events: str | None,
                save_model: str | None, metrics_textfile: str | None) -> None:
    """No file ``explain`` writes is a file it reads or another file it writes. An existing
    ``--state`` is both: the run continues from it and writes it back, on purpose; no other option
    may name it."""
    import os


    resumed = state if state and os.path.exists(state) else None
    check_outputs({"--output": output, "--state": state, "--meta": meta, "--events": events,
                   "--save-model": save_model, "--metrics-textfile": metrics_textfile},
                  {"INPUT": data_files(input), "--model": model, "--labels": labels, "--reference": reference,
                   "--state": resumed}, written_at_end=("--meta", "--metrics-textfile"))


def key_columns_of(by: str | None, max_keys: int | None) -> list[str] | None:
    """``--by``'s key columns (``None`` without it), checked with ``--max-keys``."""
    if max_keys is not None and not by:
        raise usage_error("needs --by (it bounds the keys' explainers kept live)", "--max-keys")
    key_columns = split_names([by]) if by is not None else None
    if by is not None and not key_columns:
        raise usage_error("give the key column(s): COL or COL,COL", "--by")
    if key_columns and len(set(key_columns)) < len(key_columns):
        raise usage_error("a key column is named twice", "--by")
    return key_columns


def check_label_options(*, labels: str | None, id_column: str | None, labels_follow: bool, label_wait: str,
                        state: str | None, input: str | None) -> None:
    """``--labels`` (late labels) and the options that go with it."""
    if labels is None and (id_column is not None or labels_follow or label_wait != DEFAULT_LABEL_WAIT):
        raise usage_error("needs --labels (where the late labels come from)",
                          "--id" if id_column is not None else "--labels-follow" if labels_follow else "--label-wait")
    if labels is None:
        return
    from ipfi_cli.run.late_labels import LabelWait

    if not id_column:
        raise usage_error("needs --id (the column that joins the rows and their labels)", "--labels")
    if state:
        raise usage_error("cannot be used with --state yet (the rows waiting for labels are not checkpointed)",
                          "--labels")
    if labels == "-" and input in (None, "-"):
        raise usage_error("the input is standard input already: give the labels a file or a named pipe",
                          "--labels")
    try:
        LabelWait.parse(label_wait)
    except UsageError as error:
        raise usage_error(error.message, "--label-wait") from None


def half_life_seconds_of(time_column: str | None, half_life: str | None, running_mean: bool) -> float | None:
    """``--half-life`` in seconds (``None`` without it), checked with ``--time-column`` and
    ``--running-mean``."""
    if (time_column is None) != (half_life is None):
        raise usage_error("--time-column and --half-life go together (smoothing by event time needs both)",
                          "--half-life" if half_life is None else "--time-column")
    if running_mean and half_life is not None:
        raise usage_error("is one smoothing and --half-life another: choose one", "--running-mean")
    if half_life is None:
        return None
    from ipfi_cli.core.decay import parse_duration

    try:
        return parse_duration(half_life)
    except ValueError as error:
        raise usage_error(str(error), "--half-life") from None


def check_change_options(change_delta: float, ndcg_threshold: float) -> None:
    """The change watch's ``--change-delta`` and ``--ndcg-threshold``."""
    if not 0.0 < change_delta < 1.0:
        raise usage_error(f"must be in (0, 1), got {change_delta}", "--change-delta")
    if not 0.0 < ndcg_threshold <= 1.0:
        raise usage_error(f"must be in (0, 1], got {ndcg_threshold}", "--ndcg-threshold")
