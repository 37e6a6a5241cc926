"""What an ``ipfi explain`` session is asked to do, how it ended, and what changes as it runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from ipfi_cli.run.plan import InputSpec, Selection
from ipfi_cli.run.watch import ChangeWatch, WatchSettings

if TYPE_CHECKING:
    from ipfi_cli.core.explainer import Explainer
    from ipfi_cli.run.observers import EventsFile
    from ipfi_cli.run.rows import RowChecker

CHECKPOINT_EVERY = 10_000
#: how long a row waits for its late label (--label-wait): rows, or seconds with a unit (30s)
DEFAULT_LABEL_WAIT = "10000"
# the defaults of the monitoring options (ipfi_cli.run.monitor.MonitorSettings; the command line's too)
DEFAULT_METRICS_ADDR = "127.0.0.1"
DEFAULT_PUSH_JOB = "ipfi"
DEFAULT_WEBHOOK_FORMAT = "json"
DEFAULT_WEBHOOK_COOLDOWN = 60.0
DEFAULT_WEBHOOK_RETRIES = 3


@dataclass
class ExplainSettings:
    """Everything ``ipfi explain`` was asked to do (also written to ``--meta``)."""

    model: str
    target: str | None  # None: no label column (--loss prediction-shift)
    input: str | None = None
    trust: list[str] | None = None
    format: str | None = None
    na_values: list[str] | None = None
    no_default_na: bool = False
    delimiter: str | None = None
    decimal: str | None = None  # --decimal: the CSV numbers' decimal mark ("." when None)
    text: list[str] | None = None  # CSV columns read as text (--text)
    skip_initial_space: bool = False  # CSV: spaces after a separator are not the field's (--skip-initial-space)
    task: str = "auto"
    loss: str | None = None
    learn: bool = False
    save_model: str | None = None
    method: str = "pfi"  # a key of ipfi_cli.core.explainer.METHODS
    smoothing: str = "exponential"  # or "mean"
    removal: str = "marginal"  # "conditional", or "both" (both values and their gap per feature)
    conditional_sampler: str = "gaussian"  # or "tree" (pfi only)
    inner: int | None = None  # sage: imputations per coalition (None: by the loss, see core.sage_game.default_inner)
    empty_coalition: str = "imputed"  # sage: how the empty coalition is scored (--empty-coalition)
    alpha: float = 0.001
    time_column: str | None = None  # --time-column: smoothing by event time (with half_life, in seconds)
    half_life: float | None = None
    running_mean: bool = False  # --running-mean: every row weighs alike (mergeable)
    repeats: int = 10
    sampling: str = "geometric"
    reservoir_size: int = 100
    seed: int | None = None
    features: list[str] | None = None
    drop: list[str] | None = None
    groups: dict[str, list[str]] = field(default_factory=dict)
    output: str | None = None
    output_format: str | None = None
    every: int = 1
    bounds: bool = False
    delta: float = 0.05
    bounds_method: str = "chebyshev"
    meta: str | None = None
    batch_size: int = 1000
    on_bad_row: str = "fail"
    state: str | None = None
    checkpoint_every: int = CHECKPOINT_EVERY
    skip_seen: bool = True
    verbose: bool = False
    quiet: bool = False
    live: bool = True
    debug: bool = False
    watch: WatchSettings | None = None  # change detection (--detect and its options)
    http: Any = None  # HttpOptions of a served model (--model-url); --meta gets it without header values
    max_lost: int | None = None  # --max-lost: more rows given up (late labels) + posts undelivered: exit 4
    monitor: Any = None  # MonitorSettings: Prometheus metrics and the webhook (ipfi_cli.run.monitor, .webhook)
    labels: str | None = None  # late labels: their source (--labels), joined to the input by id_column
    id_column: str | None = None
    label_wait: str = DEFAULT_LABEL_WAIT
    labels_follow: bool = False
    allow_unknown_categories: bool = False  # --allow-unknown-categories
    by: list[str] | None = None  # --by: one explainer (and change watch) per value of these key columns
    max_keys: int | None = None  # --max-keys: the most keys kept live; the others saved as plain data
    workers: int | None = None  # with by: spread the keys over a local Dask cluster of this many workers
    scheduler: str | None = None  # with by: spread the keys over this running Dask cluster
    #: the command's options as ``--config`` tables (ipfi_cli.cli.config; the seed None when drawn): --meta's "config"
    config: dict[str, dict[str, Any]] | None = None

    @property
    def inputs(self) -> InputSpec:
        """Where the rows come from and how they are read."""
        return InputSpec(path=self.input, format=self.format, na_values=self.na_values,
                         no_default_na=self.no_default_na, delimiter=self.delimiter, decimal=self.decimal,
                         text=self.text, skip_initial_space=self.skip_initial_space)

    @property
    def selection(self) -> Selection:
        """What is explained, against what."""
        return Selection(target=self.target, task=self.task, loss=self.loss, features=self.features,
                         drop=self.drop, groups=self.groups, by=tuple(self.by or ()),
                         allow_unknown_categories=self.allow_unknown_categories)


class StopOnChange(Exception):
    """Raised between micro-batches to stop the run at its first change (``stop_on_change``)."""


class RunStatus(str, Enum):
    """How a run ended (``starting``/``running`` while it has not)."""

    STARTING = "starting"
    RUNNING = "running"
    OK = "ok"
    INTERRUPTED = "interrupted"
    STOPPED_ON_CHANGE = "stopped-on-change"
    BROKEN_PIPE = "broken-pipe"
    ERROR = "error"


@dataclass
class Progress:
    """The counters a run keeps (and a checkpoint saves)."""

    rows: int = 0  # good rows processed
    input_rows: int = 0  # input rows handled, good and bad: where a resumed run starts
    last_written: int = 0  # row number of the last record written
    last: tuple[int, list[float]] | None = None  # the last row's number and estimates


@dataclass
class RunParts:
    """What changes as a session streams: the pieces its collaborators (the row steps, the state
    keeper, ``--meta``) receive, beside the immutable :class:`~ipfi_cli.run.plan.RunPlan`."""

    explainer: Explainer
    progress: Progress
    checker: RowChecker
    watch: ChangeWatch | None = None  # change detection, with --detect
    writer: Any = None  # the trace writer
    events_file: EventsFile | None = None  # --events
