"""What an ``ipfi explain`` session is asked to do, how it ended, and what changes as it runs.

:class:`ExplainSettings` is made of one value per help panel (as black's ``Mode``): the model
(:class:`ModelSpec`), the input (:class:`~ipfi_cli.run.plan.InputSpec`), what is explained
(:class:`~ipfi_cli.run.plan.Selection`), the method (:class:`MethodSpec`,
:class:`~ipfi_cli.core.params.PFIParams`), the traces (:class:`OutputSpec`), and the optional
parts: :class:`StateSpec`, :class:`~ipfi_cli.run.watch.WatchSettings`,
:class:`~ipfi_cli.run.monitor.MonitorSettings`, :class:`LateLabels`, :class:`KeySpec`.

>>> settings = ExplainSettings(ModelSpec("model.pkl", learn=True), Selection(target="class"),
...                            params=PFIParams(alpha=0.01), output=OutputSpec(every=100))
>>> settings.params.alpha, settings.output.every, settings.state is None
(0.01, 100, True)
>>> flat = settings.flat()   # --meta's "settings": one name per option
>>> flat["learn"], flat["alpha"], flat["every"], flat["checkpoint_every"]
(True, 0.01, 100, 10000)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from ipfi_cli.core.params import PFIParams
from ipfi_cli.run.plan import InputSpec, Selection
from ipfi_cli.run.watch import ChangeWatch, WatchSettings

if TYPE_CHECKING:
    from ipfi_cli.core.explainer import Explainer
    from ipfi_cli.models.http_options import HttpOptions
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


@dataclass(frozen=True)
class ModelSpec:
    """The model (the Model panel): a file or URI, or a served model's address (``http``)."""

    path: str  # --model (a served model: its URL; a Python object: <ClassName>)
    trust: Sequence[str] | None = None  # --trust: modules a pickled model may load
    http: HttpOptions | None = None  # a served model (--model-url); --meta gets it without header values
    learn: bool = False  # --learn: explain each row, then learn it
    save_model: str | None = None  # --save-model: with learn, where the learned model goes at the end
    instance: Any = None  # a model object (explain_stream), used instead of loading ``path``


@dataclass(frozen=True)
class MethodSpec:
    """How importance is measured and smoothed, besides :class:`~ipfi_cli.core.params.PFIParams`
    (the Estimator panel)."""

    name: str = "pfi"  # --method: a key of ipfi_cli.core.explainer.METHODS
    smoothing: str = "exponential"  # or "mean"
    removal: str = "marginal"  # "conditional", or "both" (both values and their gap per feature)
    conditional_sampler: str = "gaussian"  # or "tree" (pfi only)
    inner: int | None = None  # sage: imputations per coalition (None: by the loss, see core.sage_game.default_inner)
    empty_coalition: str = "imputed"  # sage: how the empty coalition is scored (--empty-coalition)
    time_column: str | None = None  # --time-column: smoothing by event time (with half_life, in seconds)
    half_life: float | None = None
    running_mean: bool = False  # --running-mean: every row weighs alike (mergeable)

    @property
    def merges(self) -> bool:
        """Smoothing whose state merges (``ipfi merge``): by event time, or the running mean."""
        return self.half_life is not None or self.running_mean


@dataclass(frozen=True)
class OutputSpec:
    """Where the traces go and what they hold (the Output panel)."""

    path: str | None = None  # --output (None or "-": standard output)
    format: str | None = None  # --output-format (None: by the file's extension)
    every: int = 1  # a record every this many rows
    bounds: bool = False  # --bounds: each importance's error bound too
    delta: float = 0.05  # the bounds' probability of being exceeded
    bounds_method: str = "chebyshev"
    meta: str | None = None  # --meta: the run's sidecar (JSON)


@dataclass(frozen=True)
class ReadSpec:
    """How the rows are taken in: micro-batches, and what a bad row does."""

    batch_size: int = 1000  # at most this many rows per micro-batch (and model call)
    on_bad_row: str = "fail"  # or "skip"


@dataclass(frozen=True)
class Display:
    """What the run says on stderr (the Display panel)."""

    verbose: bool = False
    quiet: bool = False
    live: bool = True  # the live table (--no-live: a summary at the end)
    debug: bool = False


@dataclass(frozen=True)
class StateSpec:
    """``--state``: where the checkpoints go and how a continued run reads its input again."""

    path: str
    checkpoint_every: int = CHECKPOINT_EVERY
    skip_seen: bool = True  # --no-skip-seen: the input starts after the rows the state has seen


@dataclass(frozen=True)
class LateLabels:
    """``--labels``: labels that come later than their rows, joined to them by an id column."""

    source: str  # --labels: a file or a named pipe
    id_column: str  # --id
    wait: str = DEFAULT_LABEL_WAIT  # --label-wait: rows, or seconds with a unit
    follow: bool = False  # --labels-follow: read the labels' file as it grows


@dataclass(frozen=True)
class KeySpec:
    """How the keys of ``--by`` (``Selection.by``) are run: live explainers kept, Dask workers."""

    max_keys: int | None = None  # the most keys kept live; the others saved as plain data
    workers: int | None = None  # spread the keys over a local Dask cluster of this many workers
    scheduler: str | None = None  # spread the keys over this running Dask cluster


@dataclass(frozen=True)
class ExplainSettings:
    """Everything ``ipfi explain`` was asked to do, one value per help panel (``--meta``'s
    ``"settings"`` is :meth:`flat`)."""

    model: ModelSpec
    selection: Selection  # the target, task, loss, features, groups, key columns (--by)
    inputs: InputSpec = InputSpec()
    method: MethodSpec = MethodSpec()
    params: PFIParams = PFIParams()  # --alpha, --repeats, --sampling, --reservoir-size
    output: OutputSpec = OutputSpec()
    reading: ReadSpec = ReadSpec()
    display: Display = Display()
    seed: int | None = None  # None: drawn at the start (and reported)
    state: StateSpec | None = None
    watch: WatchSettings | None = None  # change detection (--detect and its options)
    #: a MonitorSettings (ipfi_cli.run.monitor, which imports this module's defaults): metrics and the webhook
    monitor: Any = None
    max_lost: int | None = None  # --max-lost: more rows given up (late labels) + posts undelivered: exit 4
    labels: LateLabels | None = None
    keys: KeySpec = KeySpec()
    #: the command's options as ``--config`` tables (ipfi_cli.cli.config; the seed None when drawn): --meta's "config"
    config: dict[str, dict[str, Any]] | None = None

    def flat(self) -> dict[str, Any]:
        """The settings under the one flat name per option that ``--meta``'s ``"settings"`` has
        always had (``http``, ``watch``, ``monitor`` as plain data; ``config`` apart)."""
        model, inputs, chosen, method, params = self.model, self.inputs, self.selection, self.method, self.params
        output, state, labels = self.output, self.state, self.labels
        return {
            "model": model.path, "target": chosen.target, "input": inputs.path, "trust": _listed(model.trust),
            "format": inputs.format, "na_values": _listed(inputs.na_values), "no_default_na": inputs.no_default_na,
            "delimiter": inputs.delimiter, "decimal": inputs.decimal, "text": _listed(inputs.text),
            "skip_initial_space": inputs.skip_initial_space, "task": chosen.task, "loss": chosen.loss,
            "learn": model.learn, "save_model": model.save_model, "method": method.name,
            "smoothing": method.smoothing, "removal": method.removal,
            "conditional_sampler": method.conditional_sampler, "inner": method.inner,
            "empty_coalition": method.empty_coalition, "alpha": params.alpha, "time_column": method.time_column,
            "half_life": method.half_life, "running_mean": method.running_mean, "repeats": params.n_repeats,
            "sampling": params.sampling, "reservoir_size": params.reservoir_size, "seed": self.seed,
            "features": _listed(chosen.features), "drop": _listed(chosen.drop),
            "groups": {name: list(columns) for name, columns in chosen.groups.items()},
            "output": output.path, "output_format": output.format, "every": output.every, "bounds": output.bounds,
            "delta": output.delta, "bounds_method": output.bounds_method, "meta": output.meta,
            "batch_size": self.reading.batch_size, "on_bad_row": self.reading.on_bad_row,
            "state": state.path if state is not None else None,
            "checkpoint_every": state.checkpoint_every if state is not None else CHECKPOINT_EVERY,
            "skip_seen": state.skip_seen if state is not None else True,
            "verbose": self.display.verbose, "quiet": self.display.quiet, "live": self.display.live,
            "debug": self.display.debug,
            "watch": asdict(self.watch) if self.watch is not None else None,
            "http": self.model.http.for_meta() if self.model.http is not None else None,  # never a header's value
            "max_lost": self.max_lost,
            "monitor": asdict(self.monitor) if self.monitor is not None else None,
            "labels": labels.source if labels is not None else None,
            "id_column": labels.id_column if labels is not None else None,
            "label_wait": labels.wait if labels is not None else DEFAULT_LABEL_WAIT,
            "labels_follow": labels.follow if labels is not None else False,
            "allow_unknown_categories": chosen.allow_unknown_categories,
            "by": list(chosen.by) or None, "max_keys": self.keys.max_keys, "workers": self.keys.workers,
            "scheduler": self.keys.scheduler,
        }


def _listed(names: Sequence[str] | None) -> list[str] | None:
    return list(names) if names is not None else None


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
    reader: Any = None  # the input's reader (with --labels, the join that counts the late labels)
