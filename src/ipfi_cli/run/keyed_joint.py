"""Every key's rows of a micro-batch in one model call (``ipfi explain --by``).

:class:`JointKeys` explains the keys of a micro-batch together: each key's explainer draws and
lays out its rows' evaluation blocks (:meth:`~ipfi_cli.core.incremental.IPFIEstimator.prepare`),
the blocks go to the model in one call, and each key folds its own predictions in
(:meth:`~ipfi_cli.core.incremental.IPFIEstimator.finish`) in the order the keys came. The model is
static and predicts each row on its own, so a key's numbers are those of its own ``explain_many``
(and each key's call counts are too: the state file holds them), and a run costs about what a
plain run on the same rows costs, not one model call per key.

The first row of a key only fills its reservoir and is not predicted; that the model takes it is
checked once for all the new keys of a micro-batch (one call per label), not once per key.

Where the rows need more than that (a probe or a prepare that fails, a model call that fails, a
label the loss cannot take, a key whose explainer is not a plain iPFI or iSAGE estimator), the keys
not yet finished go the one-key-at-a-time way (:class:`~ipfi_cli.run.steps.RowSteps`), which finds
the row and names it, as before: the explainers are all or nothing per call, so what was cancelled
leaves no trace. With ``--max-keys`` the keys go in groups of at most that many, all live while
their blocks are pending.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ipfi_cli.errors import IpfiError, ServiceError

if TYPE_CHECKING:
    from ipfi_cli.core.micro_batch import PendingRows, Traces
    from ipfi_cli.run.key_runs import Key, KeyedExplainer, KeyRun
    from ipfi_cli.run.keyed_steps import KeyedSteps
    from ipfi_cli.run.rows import GoodRow

#: a key's part of the micro-batch: its pieces, its rows numbered as the key's, and the input's rows
KeyPart = tuple["Key", "KeyRun", list["GoodRow"], list["GoodRow"]]


def joinable(explainer: Any) -> bool:
    """Whether ``explainer``'s ``explain_many`` is ``prepare`` + one predict + ``finish``: the plain iPFI
    and iSAGE estimators (not a subclass with its own ``explain_many``) with a block predictor, no
    event times."""
    from ipfi_cli.core.incremental import IPFIEstimator

    return (isinstance(explainer, IPFIEstimator) and type(explainer).explain_many is IPFIEstimator.explain_many
            and bool(explainer.use_batch) and getattr(explainer, "time_column", None) is None)


class JointKeys:
    """Explain keys' parts of a micro-batch with one model call (see the module docstring).

    ``steps`` are the run's keyed steps (the probe, the emission, the one-key fallback);
    ``one_key(key, run, own, rows)`` explains a key's part the one-key-at-a-time way;
    ``emitting(key, run, own, rows)`` points the steps at a key's pieces and returns the function that
    puts them back."""

    def __init__(self, keyed: KeyedExplainer, steps: KeyedSteps,
                 one_key: Callable[[KeyPart], None], emitting: Callable[[KeyPart], Callable[[], None]]) -> None:
        self.keyed = keyed
        self.steps = steps
        self.one_key = one_key
        self.emitting = emitting
        self.model_calls = 0  # the joint calls made
        self.probed: set[Key] = set()  # the micro-batch's new keys whose first row the model takes

    def explain(self, parts: list[KeyPart]) -> None:
        """Explain the keys' parts, in their order; stops after a key with the run's failure."""
        if not self._probe_first_rows(parts):
            self._one_by_one(parts)
            return
        pending: list[tuple[KeyPart, PendingRows | None]] = []
        try:
            for part in parts:
                explainer = part[1].explainer
                if (not joinable(explainer) or len(part[2]) > _rows_per_call(explainer)
                        or self.steps.settings.output.bounds and not self.steps._bounds_per_row(explainer)):
                    pending.append((part, None))  # its own calls (with --bounds, cut at its records)
                    continue
                pending.append((part, explainer.prepare([r.values for r in part[2]], [r.label for r in part[2]])))
            predictions = self._predict([p for _, p in pending if p is not None and len(p.targets)])
        except IpfiError as error:  # a value an explainer cannot take, or a row the model fails on: found key by key
            self._cancel(pending)
            if isinstance(error, ServiceError):  # the model cannot be reached: about no row
                raise
            self._one_by_one(parts)
            return
        except BaseException:
            self._cancel(pending)
            raise
        self._finish(pending, predictions)

    def _finish(self, pending: list[tuple[KeyPart, PendingRows | None]], predictions: dict[int, Any]) -> None:
        """Fold each key's predictions in and write its records, in the keys' order."""
        for at, (part, ready) in enumerate(pending):
            if ready is None:
                self.one_key(part)
                if self.steps.failure is not None:
                    self._cancel(pending[at + 1:])
                    return
                continue
            explainer = part[1].explainer
            asked = self.steps.bounds_asked(len(part[2]), explainer, part[1].progress.rows)  # its due records'
            try:
                traces = explainer.finish(ready, predictions.get(id(ready)), **asked)
            except IpfiError:  # a label the loss cannot take (finish cancelled this key): found row by row
                self._cancel(pending[at + 1:])
                self._one_by_one([p for p, _ in pending[at:]])
                return
            except BaseException:
                self._cancel(pending[at + 1:])
                raise
            if len(ready.targets):  # what the key's own explain_many would have counted
                explainer.n_model_calls += 1
                explainer.n_predictions += len(ready.block)
            try:
                self._emit(part, traces, explainer.last_row_bounds if asked else None)
            except BaseException:  # a non-finite loss stops the run here: the later keys saw nothing
                self._cancel(pending[at + 1:])
                raise

    def _emit(self, part: KeyPart, traces: Traces, row_bounds: Any = None) -> None:
        """A key's records (``row_bounds``: the bounds after each row, with ``--bounds``) and change events, as
        :meth:`~ipfi_cli.run.steps.RowSteps._explain_part` writes them."""
        steps, own = self.steps, part[2]
        restore = self.emitting(part)
        try:
            watch = steps.parts.watch
            steps._emit(own, traces.estimates, row_bounds)
            if watch is not None:
                events = watch.rows([p.number for p in own], traces.contributions, traces.losses, traces.estimates)
                if events:
                    steps.report_events(events)
        finally:
            restore()

    def _one_by_one(self, parts: Sequence[KeyPart]) -> None:
        for part in parts:
            self.one_key(part)
            if self.steps.failure is not None:
                return

    @staticmethod
    def _cancel(pending: Sequence[tuple[KeyPart, PendingRows | None]]) -> None:
        for part, ready in reversed(pending):
            if ready is not None:
                part[1].explainer.cancel(ready)

    def _predict(self, pending: list[PendingRows]) -> dict[int, Any]:
        """Every pending block's predictions (by ``id``), from one model call (more only when the blocks
        together pass the explainer's ``max_block_cells``)."""

        if not pending:
            return {}
        out: dict[int, Any] = {}
        by_kind: dict[Any, list[PendingRows]] = {}  # blocks of floats and of objects are not joined
        for p in pending:
            by_kind.setdefault(p.block.dtype, []).append(p)
        for group in by_kind.values():
            predictions = self._predict_joined(group)
            begin = 0
            for p in group:
                out[id(p)] = predictions[begin:begin + len(p.block)]
                begin += len(p.block)
        return out

    def _predict_joined(self, pending: list[PendingRows]) -> Any:
        import numpy as np

        prototype = self.keyed.prototype
        model, columns, output = prototype.model, prototype.columns, pending[0].output
        block = pending[0].block if len(pending) == 1 else np.concatenate([p.block for p in pending])
        row_targets = None if pending[0].row_targets is None else np.concatenate([p.row_targets for p in pending])
        per_call = max(1, int(prototype.max_block_cells) // max(1, len(columns)))
        found = []
        for start in range(0, len(block), per_call):
            self.model_calls += 1
            found.append(np.asarray(model.predict_block(
                block[start:start + per_call], columns, output,
                None if row_targets is None else row_targets[start:start + per_call])))
        return found[0] if len(found) == 1 else np.concatenate(found)

    def probe(self, firsts: dict[Key, GoodRow]) -> None:
        """Check the first rows of the micro-batch's new keys together (before they are split into groups
        of ``--max-keys``): the keys whose first row the model takes are not probed again."""
        self.probed = set(firsts) if firsts and self._takes(list(firsts.values())) else set()

    def _probe_first_rows(self, parts: list[KeyPart]) -> bool:
        """Whether the model takes the first row of every key that has none yet (one call per label:
        the run asks the model for the label's probability); ``False`` sends the keys one by one,
        where each first row is probed alone and named if the model refuses it."""
        return self._takes([own[0] for key, run, own, _ in parts
                            if run.explainer.n_seen == 0 and own and key not in self.probed])

    def _takes(self, rows: list[GoodRow]) -> bool:
        steps = self.steps
        firsts: dict[Any, list[dict[str, Any]]] = {}
        for row in rows:
            try:
                hash(row.label)
            except TypeError:
                return False
            firsts.setdefault(row.label, []).append({c: row.values[c] for c in steps.columns})
        for label, records in firsts.items():
            try:
                steps.predictor.predict_records(records, steps.output, label)
            except ServiceError:
                raise
            except IpfiError:
                return False
        return True


def _rows_per_call(explainer: Any) -> int:
    """The rows ``explain_many`` puts in one model call (``max_block_cells``): a key with more goes alone."""
    return max(1, int(explainer.max_block_cells) // (int(explainer.block_rows) * max(1, len(explainer.columns))))
