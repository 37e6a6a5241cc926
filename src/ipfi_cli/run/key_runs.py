"""The pieces ``ipfi explain --by`` keeps per key (see :mod:`ipfi_cli.run.keyed`): a key's explainer,
change watch and counters (:class:`KeyRun`), all keys as the run's one explainer
(:class:`KeyedExplainer`, what the state file and ``--meta`` see), the change events of all keys
(:class:`KeyedWatch`) and a key's view of the trace writer (:class:`KeyWriter`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

from ipfi_cli.core.keyed import KeyedExplainers
from ipfi_cli.io.writers import key_values
from ipfi_cli.run.rows import missing_key
from ipfi_cli.run.settings import Progress

if TYPE_CHECKING:
    from collections.abc import Callable

    from ipfi_cli.run.watch import ChangeWatch

Key = tuple[Any, ...]


def row_key(values: dict[str, Any] | None, by: Sequence[str]) -> Key | None:
    """The key of a row (its values in the key columns), or ``None`` if one is missing.

    >>> row_key({"region": "eu", "x": 1.0}, ["region"]), row_key({"x": 1.0}, ["region"])
    (('eu',), None)
    """
    if values is None:
        return None
    key = tuple(values.get(c) for c in by)
    return None if any(missing_key(v) for v in key) else key


def key_label(by: Sequence[str], key: Key) -> str:
    """How the display names a key.

    >>> key_label(["region", "shop"], ("eu", 3))
    'region=eu, shop=3'
    """
    return ", ".join(f"{c}={v}" for c, v in zip(by, key))


class KeyRun:
    """One key's pieces: its explainer, change watch and counters (those of a run on its rows alone)."""

    def __init__(self, explainer: Any, watch: ChangeWatch | None) -> None:
        self.explainer = explainer
        self.watch = watch
        self.progress = Progress()

    def state_version(self) -> tuple[Any, ...] | None:
        """What changes whenever the key's state does: the rows its explainer has taken and the model calls
        it counts (a call that failed too), and its counters (``None``: an explainer that does not count
        its rows, which is serialised at every eviction)."""
        e, p = self.explainer, self.progress
        seen = getattr(e, "n_seen", None)
        if not isinstance(seen, int):
            return None
        return (seen, getattr(e, "n_model_calls", None), getattr(e, "n_predictions", None), p.rows, p.last_written,
                p.last is None, None if self.watch is None else len(self.watch.events))

    def state_dict(self) -> dict[str, Any]:
        p = self.progress
        return {"explainer": self.explainer.state_dict(),
                "watch": None if self.watch is None else self.watch.state_dict(),
                "rows": p.rows, "last_written": p.last_written,
                "last": None if p.last is None else [p.last[0], [float(v) for v in p.last[1]]]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.explainer.load_state_dict(state["explainer"])
        if self.watch is not None:
            if state["watch"] is None:
                raise ValueError("the key's state has no change detection")
            self.watch.load_state_dict(state["watch"])
        last = state["last"]
        self.progress = Progress(rows=int(state["rows"]), last_written=int(state["last_written"]),
                                 last=None if last is None else (int(last[0]), list(last[1])))


class KeyedExplainer:
    """Every key's :class:`KeyRun` as the run's one explainer: what the state file, the trace writer
    and the display see. ``names``, ``columns``, ``model`` and ``params()`` are the run's; the
    figures (``importance_array()``, ``n_explained``...) are those of the key last explained."""

    def __init__(self, prototype: Any, factory: Callable[[Hashable], KeyRun], max_keys: int | None) -> None:
        self.prototype = prototype  # built like every key's explainer, never fed
        self.names = prototype.names
        self.columns = prototype.columns
        self.model = prototype.model
        # the evicted keys' states go to files of a temporary folder: memory holds the live ones only
        saved = None
        if max_keys is not None:
            from ipfi_cli.io.spill import SpillStore

            saved = SpillStore()
        self.keyed = KeyedExplainers(factory, max_keys=max_keys, saved=saved)
        self.numbered: dict[Hashable, int] = {}  # key -> its input rows so far (the numbers of its rows)
        self.current: KeyRun | None = None  # the key last explained (always live: the most recent)
        self.current_key: Key | None = None

    def params(self) -> dict[str, Any]:
        return dict(self.prototype.params())

    def number(self, key: Key) -> int:
        """Count one more input row of ``key``; its number among the key's rows."""
        n = self.numbered.get(key, 0) + 1
        self.numbered[key] = n
        return n

    def get(self, key: Key) -> KeyRun:
        """``key``'s pieces (live, restored or new), and it becomes the key shown."""
        run: KeyRun = self.keyed.get(key)
        self.current, self.current_key = run, key
        return run

    def peek(self, key: Key) -> KeyRun:
        """``key``'s pieces, to read (the key shown stays as it is): an evicted key's are restored from
        its saved state and not kept, so reading every key evicts and writes nothing."""
        run: KeyRun = self.keyed.peek(key)
        return run

    def keys(self) -> list[Key]:
        """The keys explained, in the order they first came."""
        return self.keyed.keys()  # type: ignore[return-value]

    @property
    def n_keys(self) -> int:
        return len(self.keys())

    def state_dict(self) -> dict[str, Any]:
        return {"keyed": self.keyed.state_dict(), "numbered": [[k, n] for k, n in self.numbered.items()]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        keys = state["keyed"]["keys"]
        if keys:  # a key's state loads when the key comes back: the first one is tried now, so that a
            # state this explainer cannot continue (another ipfi's) is refused before any row
            import copy

            copy.deepcopy(self.prototype, {id(self.model): self.model}).load_state_dict(keys[0][1]["explainer"])
        self.keyed.load_state_dict(state["keyed"])
        self.numbered = {tuple(k): int(n) for k, n in state["numbered"]}
        self.current, self.current_key = None, None

    # -- the key last explained (the display, the labels check) ---------------------------------
    @property
    def _shown(self) -> Any:
        return self.current.explainer if self.current is not None else self.prototype

    @property
    def n_explained(self) -> int:
        return int(self._shown.n_explained)

    @property
    def n_seen(self) -> int:
        return int(self._shown.n_seen)

    @property
    def mean_loss(self) -> float:
        return float(self._shown.mean_loss)

    @property
    def loss_sum(self) -> float:
        from ipfi_cli.core.explainer import loss_sum

        return loss_sum(self._shown)

    def importance_array(self) -> Any:
        return self._shown.importance_array()

    def bound_array(self, delta: float = 0.05) -> Any:
        return self._shown.bound_array(delta)

    def summaries(self, by: Sequence[str], delta: float) -> list[dict[str, Any]]:
        """Every key's figures (``--meta``), in the order the keys first came (those the end of the run
        gathered, when it did: each evicted key is restored once at the end)."""
        if self.final_summaries is not None:
            return self.final_summaries
        return [self.summary(key, self.peek(key), by, delta) for key in self.keys()]

    #: every key's :meth:`summary`, gathered at the end of a run (``None`` before)
    final_summaries: list[dict[str, Any]] | None = None

    def summary(self, key: Key, run: KeyRun, by: Sequence[str], delta: float) -> dict[str, Any]:
        """``key``'s figures as ``--meta`` writes them."""
        explainer = run.explainer
        out = {"key": key_values(dict(zip(by, key))), "rows": run.progress.rows,
               "explained": explainer.n_explained,
               "importances": dict(zip(self.names, explainer.importance_array().tolist())),
               "bounds": dict(zip(self.names, explainer.bound_array(delta).tolist())),
               "mean_loss": explainer.mean_loss,
               "changes": [] if run.watch is None else [e.to_dict() for e in run.watch.events]}
        if getattr(explainer, "explained_loss", None) is not None:  # SAGE: what the key's values add up to
            out.update(explained_loss=explainer.explained_loss, marginal_loss=explainer.marginal_loss,
                       model_loss=explainer.model_loss)
        return out


class KeyedEvent:
    """A key's change event as the events file and ``--meta`` write it: ``{"key": {...}, **event}``
    (a key value that is a number but not finite as its text, see :func:`~ipfi_cli.io.writers.key_value`)."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = fields
        self.row = fields.get("row")

    def to_dict(self) -> dict[str, Any]:
        fields = dict(self.fields)
        if isinstance(fields.get("key"), dict):
            fields["key"] = key_values(fields["key"])
        return fields


class KeyedWatch:
    """Change detection over every key (each key has its own :class:`ChangeWatch` in its
    :class:`KeyRun`): the events of all keys in the order they were found, and how many the
    events file holds (both in the state)."""

    def __init__(self, prototype: ChangeWatch) -> None:
        self.settings = prototype.settings
        self.detector = prototype.detector  # a key's detector as it starts (the state keeper checks it saves)
        self.events: list[KeyedEvent] = []
        self.written = 0

    def marks(self) -> dict[str, str]:
        """Marks are a key's (the session shows the key last explained's)."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {"written": self.written, "events": [e.to_dict() for e in self.events]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.written = int(state["written"])
        self.events = [KeyedEvent(dict(fields)) for fields in state["events"]]


class KeyWriter:
    """The trace writer as one key's steps see it: its records, kept with the input row of each, until the
    micro-batch's records are written in the input's order (``_write_pending``)."""

    def __init__(self, pending: list[tuple[int, Key, int, Sequence[float], Sequence[float] | None]], key: Key,
                 input_rows: dict[int, int]) -> None:
        self.pending = pending
        self.key = key
        self.input_rows = input_rows

    def write(self, row: int, values: Sequence[float], bounds: Sequence[float] | None = None) -> None:
        self.pending.append((self.input_rows[row], self.key, row, values, bounds))

    def write_many(self, rows: Sequence[int], values: Any, bounds: Any = None) -> None:
        """One record per row of the 2-D float array ``values``; ``bounds`` one record's (the same for
        every record) or a 2-D array with one row per record, as the trace writers take them."""
        import numpy as np

        records = values.tolist()
        each = (np.asarray(bounds, dtype=np.float64).tolist() if bounds is not None and np.ndim(bounds) == 2
                else [bounds] * len(records))
        for row, record, bound in zip(rows, records, each):
            self.write(row, record, bound)

    def flush(self) -> None:
        pass
