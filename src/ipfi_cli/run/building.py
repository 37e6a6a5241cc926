"""What an ``ipfi explain`` run builds before its first row: the model, the explainer, the writer, its lines.

:class:`~ipfi_cli.run.explain.ExplainSession` calls these once, in order: :func:`load_model` (the
model file or object, a resumed run's learned copy), :func:`run_selection` (the columns that are
not inputs: a late labels' id, the event time), :func:`join_labels` (``--labels``),
:func:`build_explainer` (with the method registry's settings, :func:`method_settings`),
:func:`open_writer`, and :func:`describe` for ``--verbose``. :func:`run_title` names the run in the
live table and the summary.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ipfi_cli.errors import OutputError, UsageError
from ipfi_cli.io.values import reader_options
from ipfi_cli.io.writers import open_trace_writer

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ipfi_cli.core.explainer import Explainer
    from ipfi_cli.io.readers import RowReader
    from ipfi_cli.models.loading import LoadedModel
    from ipfi_cli.run.plan import RunPlan, Selection
    from ipfi_cli.run.resume import StateKeeper
    from ipfi_cli.run.settings import ExplainSettings


def load_model(s: ExplainSettings, state: StateKeeper | None) -> LoadedModel:
    """The run's model: ``s.model.instance`` (a Python object) or the file ``s.model.path``; a learning
    one is a canonical copy of the resumed run's learned model, or of the loaded one."""
    from ipfi_cli.models.loading import load_predictor, wrap_model

    loaded = (wrap_model(s.model.instance, name=s.model.path, learn=s.model.learn) if s.model.instance is not None
              else load_predictor(s.model.path, learn=s.model.learn, trust=s.model.trust, http=s.model.http))
    if s.model.learn:
        # a learning model is checkpointed and unpickled on resume: the sets inside it (river's
        # Select) must iterate in the same order in both copies (see ipfi_cli.run.canonical)
        from ipfi_cli.run.canonical import canonical_copy

        saved = state.saved_model() if state is not None else None
        loaded.rewrap(canonical_copy(saved if saved is not None else loaded.model))
    if s.model.save_model:  # refused now rather than after the whole run
        from ipfi_cli.models.files import check_save_model

        check_save_model(s.model.save_model, loaded.model)
    return loaded


def run_selection(s: ExplainSettings, loaded: LoadedModel) -> Selection:
    """``s.selection`` with the columns that are not inputs dropped (unless the model names them):
    the late labels' id, and the event time (unless ``--features`` names it)."""
    selection, labels = s.selection, s.labels
    if labels is not None and s.selection.target is None:
        raise UsageError("Missing option '--target': --labels gives the labels of the column --target names")
    if labels is not None and not loaded.predictor.columns and labels.id_column not in (selection.drop or []):
        # an id is not an input (unless the model names it)
        selection = replace(selection, drop=[*(selection.drop or []), labels.id_column])
    if s.method.time_column is not None:
        if s.method.time_column == s.selection.target:
            raise UsageError(f"the target {s.selection.target!r} cannot be the event time too", "--time-column")
        if not loaded.predictor.columns and s.method.time_column not in (selection.drop or []) \
                and s.method.time_column not in (selection.features or []):
            # the event time is not an input either (unless the model names it, or --features does)
            selection = replace(selection, drop=[*(selection.drop or []), s.method.time_column])
    return selection


def join_labels(s: ExplainSettings) -> Callable[[RowReader], Any] | None:
    """With ``--labels``: how the input is joined with the labels by ``--id``
    (see :mod:`ipfi_cli.run.late_labels`)."""
    late = s.labels
    if late is None:
        return None

    def join(features: RowReader) -> Any:
        from ipfi_cli.io.labels import LabelStream
        from ipfi_cli.run.late_labels import JoinedReader, LabelWait

        labels = LabelStream(late.source, late.id_column, s.selection.target or "", follow=late.follow,
                             reader_options=reader_options(s.inputs.na_values, s.inputs.no_default_na, None))
        try:
            return JoinedReader(features, labels, late.id_column, s.selection.target or "", LabelWait.parse(late.wait))
        except BaseException:
            labels.close()
            raise

    return join


def build_explainer(plan: RunPlan, s: ExplainSettings, seed: int, reader: RowReader | None) -> Explainer:
    """A new explainer with the run's settings and seed (no row seen)."""
    from ipfi_cli.core.explainer import make_explainer

    if s.method.half_life is not None or s.method.running_mean:  # smoothing whose state merges (ipfi merge)
        if s.method.name != "pfi" or s.method.removal != "marginal" or s.method.smoothing != "exponential" \
                or s.output.bounds_method == "realisations":
            raise UsageError("smoothing that merges is iPFI's with marginal removal and the chebyshev or normal "
                             "bound: drop --method, --removal and --smoothing, and choose one of those bounds",
                             "--half-life" if s.method.half_life is not None else "--running-mean")
        from ipfi_cli.core.mergeable import MergeablePFI
        from ipfi_cli.run.setup import check_readable

        check_readable(reader, [s.method.time_column])
        time_column = s.method.time_column
        if time_column is not None and plan.input_columns and time_column not in plan.input_columns:
            raise UsageError(f"no such input column: {s.method.time_column} (the columns: "
                             f"{', '.join(plan.input_columns)})", "--time-column")
        return MergeablePFI(
            plan.predictor, plan.columns, loss=plan.loss, n_repeats=s.params.n_repeats, sampling=s.params.sampling,
            reservoir_size=s.params.reservoir_size, features=plan.features, groups=plan.groups or None,
            seed=seed, half_life=s.method.half_life, time_column=s.method.time_column,
            bounds_method=s.output.bounds_method)
    return make_explainer(
        s.method.name, plan.predictor, plan.columns, loss=plan.loss, alpha=s.params.alpha,
        n_repeats=s.params.n_repeats,
        sampling=s.params.sampling, reservoir_size=s.params.reservoir_size, features=plan.features,
        groups=plan.groups or None, seed=seed, **method_settings(s))


def method_settings(s: ExplainSettings) -> dict[str, Any]:
    """The method's own settings, passed only where they differ from the paper's iPFI."""
    own: dict[str, Any] = {}
    if s.method.smoothing != "exponential":
        own["smoothing"] = s.method.smoothing
    if s.method.removal != "marginal":
        own["removal"] = s.method.removal
        own["conditional_sampler"] = s.method.conditional_sampler
    if s.method.name == "sage":
        own["n_inner"] = s.method.inner
        own["empty"] = s.method.empty_coalition
    if s.output.bounds_method != "chebyshev":
        own["bounds_method"] = s.output.bounds_method
    return own


def check_saveable(explainer: Explainer, option: str) -> None:
    """The state is plain data: refuse before the first row an explainer whose state it cannot hold."""
    try:
        explainer.state_dict()
    except (ValueError, NotImplementedError) as error:
        hint = "; use --conditional-sampler gaussian" \
            if explainer.params().get("conditional_sampler") == "tree" else ""
        raise UsageError(f"cannot save this explainer's state as data: {error}{hint}", option) from None


def open_writer(s: ExplainSettings, names: Sequence[str]) -> Any:
    """The trace writer of a run without ``--state``, its header flushed (for ``tail -f``)."""
    try:
        writer = open_trace_writer(s.output.path, names, format=s.output.format, bounds=s.output.bounds,
                                   key_columns=s.selection.by or ())
        writer.flush()  # the header, for `tail -f`
    except OSError as error:
        if isinstance(error, BrokenPipeError):
            raise
        raise OutputError(f"{s.output.path}: cannot write the output file ({error.strerror or error})") from None
    return writer


def run_title(s: ExplainSettings, plan: RunPlan) -> str:
    """``ipfi explain · <model type> · static|learning · <loss> loss`` (and the method, the removal)."""
    mode = "learning" if s.model.learn else "static"
    method = "" if s.method.name == "pfi" else f" · {s.method.name}"  # the paper's iPFI: the title it always had
    removal = "" if s.method.removal == "marginal" else f" · {s.method.removal} removal"
    return (f"ipfi explain · {type(plan.loaded.model).__name__} · {mode} · {plan.loss.name} loss"
            f"{method}{removal}")


def describe(s: ExplainSettings, plan: RunPlan, explainer: Explainer, seed: int,
             say: Callable[[str], None]) -> None:
    """``--verbose``: the model, the input, the columns, the method and its parameters, the seed."""
    names, loaded, columns = explainer.names, plan.loaded, plan.columns
    task = "classification" if plan.classification else "regression"
    mode = "learning (explain each row, then learn it)" if s.model.learn else "static"
    say(f"model {s.model.path}: {loaded.description}; {task}, loss {plan.loss.name}; {mode}")
    unused = [c for c in plan.input_columns if c not in columns and c != s.selection.target and c not in plan.by]
    target = f"target {s.selection.target!r}" if s.selection.target is not None \
        else "no target (a label-free loss)"
    say(f"input {plan.source} ({plan.input_format}); {target}; model inputs ({len(columns)}): "
        f"{', '.join(columns)}" + (f"; not used: {', '.join(unused)}" if unused else ""))
    if loaded.predictor.n_features is not None and not loaded.predictor.columns:
        say("by position: " + ", ".join(f"x{i} <- {c}" for i, c in enumerate(columns)))
    if plan.by:
        say(f"one explainer per key of {', '.join(plan.by)}"
            + (f", at most {s.keys.max_keys:,} live (the others saved as plain data)" if s.keys.max_keys else ""))
    groups = s.selection.groups
    say(f"explaining ({len(names)}): "
        + ", ".join(n if n not in groups else f"{n}=[{','.join(groups[n])}]" for n in names))
    inner = getattr(explainer, "n_inner", s.method.inner)
    say(f"method {s.method.name}, removal {s.method.removal}"
        + (f" ({s.method.conditional_sampler} sampler)" if s.method.removal != "marginal" else "")
        + f", smoothing {s.method.smoothing}"
        + (f", {inner} imputation(s) per coalition, the empty one {s.method.empty_coalition}"
           if s.method.name == "sage"
           else ""))
    params = s.params
    say(f"alpha {params.alpha}, repeats {params.n_repeats}, sampling {params.sampling}, "
        f"reservoir {params.reservoir_size}, "
        f"seed {seed} (--seed {seed} repeats this run)")
