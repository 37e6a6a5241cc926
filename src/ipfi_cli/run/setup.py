"""Setting a run up: the task, the loss, the labels and the columns the model gets.

Every command (``explain``, ``batch``, ``compare``) calls these, so a mistake gives the same
one-line message everywhere: a loss that cannot measure the model is refused before the
first row (:class:`~ipfi_cli.errors.ModelError`), a missing column names the input
(:class:`~ipfi_cli.errors.InputError`), and an option naming a column that is not there is
a :class:`~ipfi_cli.errors.UsageError`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ipfi_cli.core.groups import resolve_groups
from ipfi_cli.core.losses import Loss, default_loss, get_loss, prediction_shift
from ipfi_cli.errors import InputError, ModelError, RunError, UsageError
from ipfi_cli.models.categories import learned_categories
from ipfi_cli.models.loading import LoadedModel
from ipfi_cli.run.labels import (
    _FALSE,
    _TRUE,
    LabelMatcher,
    LossFitError,
    check_loss,
    declared_task,
    model_classes_from_answer,
    model_classes_from_first_row,
)
from ipfi_cli.text import quoted

TASKS = ("auto", "classification", "regression")


def choose_task(loaded: LoadedModel, task: str = "auto") -> bool:
    """True for classification: ``task`` if given, else what the model says it is."""
    if task not in TASKS:
        raise UsageError(f"choose one of {', '.join(TASKS)}, got {task!r}", "--task")
    if task != "auto":
        return task == "classification"
    return bool(loaded.predictor.is_classifier)


def choose_loss(loaded: LoadedModel, classification: bool, loss: str | None) -> Loss:
    """The core ``Loss``: ``loss`` if given, else the paper's default for the task.

    A loss that cannot measure this model (zero-one or log loss on a regressor, absolute or
    squared error on text classes) is refused here, before the first row, naming the fix.
    """
    chosen = get_loss(loss) if loss else default_loss(classification)
    if chosen.relative:  # label-free: its form follows the model (see core.losses.prediction_shift)
        return prediction_shift(classification, loaded.predictor.classes, loaded.predictor.has_proba)
    try:
        check_loss(chosen, classification, declared_task(loaded.model), loaded.predictor.classes,
                   loaded.predictor.has_proba)
    except LossFitError as error:
        raise ModelError(f"{loaded.path}: {error}") from None
    return chosen


def check_no_target(loss: Loss, learn: bool) -> None:
    """A run without ``--target``: only a label-free loss (``prediction-shift``) measures a model
    without labels, and a model learns from none; a :class:`~ipfi_cli.errors.UsageError` naming
    ``--target`` otherwise."""
    if not loss.relative:
        raise UsageError(no_target_message(loss.name))
    if learn:
        raise UsageError("Missing option '--target': --learn learns from labels; name their column with --target")


def no_target_message(loss: str | None) -> str:
    """The usage error of a run without ``--target`` whose loss (``None``: the default) needs labels.

    >>> no_target_message(None)
    "Missing option '--target': the default loss compares predictions with labels; name their column with \
--target, or use --loss prediction-shift, which needs none"
    """
    which = f"the {loss} loss" if loss else "the default loss"
    return (f"Missing option '--target': {which} compares predictions with labels; name their column with --target, "
            "or use --loss prediction-shift, which needs none")


def label_matcher(loaded: LoadedModel, classification: bool, learn: bool) -> LabelMatcher:
    """A :class:`~ipfi_cli.run.labels.LabelMatcher` for the model's classes (scikit-learn's
    ``classes_``; a river classifier's are asked on the first row, see :func:`first_row_hook`).

    A river binary classifier that learns gets a :class:`BinaryLabels` matcher."""
    name = binary_river_classifier(loaded) if learn and classification else None
    if name is not None:
        return BinaryLabels(loaded.path, name, classes=loaded.predictor.classes)
    return LabelMatcher(classification=classification, classes=loaded.predictor.classes, fixed=not learn)


def binary_river_classifier(loaded: LoadedModel) -> str | None:
    """The class name of a river classifier (or a pipeline's last step) that is binary only
    (river marks them ``_multiclass = False``: ``linear_model.LogisticRegression``, ``Perceptron``,
    ...), else ``None``."""
    if loaded.kind != "river" or not loaded.predictor.is_classifier:
        return None
    model = loaded.model
    if getattr(model, "_multiclass", True) is not False:
        return None
    steps = getattr(model, "steps", None)
    last = list(steps.values())[-1] if isinstance(steps, dict) and steps else model
    return type(last).__name__


class BinaryLabels(LabelMatcher):
    """Labels for a river binary classifier that learns: it learns True/False (or 1/0) only,
    so a label that does not read as one (``'UP'``, ``'>50K'``) stops the run at the first
    row, naming the fix, instead of failing inside ``learn_one`` ("invalid literal for int()")."""

    def __init__(self, path: str, name: str, classes: Sequence[Any] | None) -> None:
        super().__init__(classification=True, classes=classes, fixed=False)
        self.path = path
        self.name = name

    def __call__(self, value: Any) -> Any:
        label = super().__call__(value)
        if isinstance(label, bool) or (type(label) in (int, float) and label in (0, 1)):
            return label
        if isinstance(label, str) and label.strip().lower() in _TRUE + _FALSE:  # the model told no classes yet
            return label.strip().lower() in _TRUE

        raise RunError(f"{self.path}: river's {self.name} is a binary classifier that learns True/False labels; "
                       f"the labels read like {label!r}: map them to true/false, or use a multi-class model such "
                       "as tree.HoeffdingTreeClassifier")


def served_model(loaded: LoadedModel) -> Any | None:
    """The served model's predictor (:class:`~ipfi_cli.models.http.HttpPredictor`, the model itself
    under the run's wrappers), or ``None`` for a model in this process."""
    if not loaded.kind.startswith("HTTP"):
        return None
    from ipfi_cli.models.http import HttpPredictor

    return loaded.model if isinstance(loaded.model, HttpPredictor) else None


def first_row_hook(loaded: LoadedModel, matcher: LabelMatcher,
                   columns: Sequence[str]) -> Callable[[dict[str, Any]], None] | None:
    """For a classifier with no known classes (river, a served model, a pyfunc): learn them, or at
    least their type, from its answer on the first row, so that labels are matched to what it answers
    (``'True'`` to ``True``, ``1`` to ``'1'``)."""
    if not matcher.classification or matcher.classes is not None:
        return None

    def learn_classes(values: dict[str, Any]) -> None:
        row = {c: values[c] for c in columns if c in values}
        if loaded.kind == "river":
            classes = model_classes_from_first_row(loaded.model, row)
        else:  # one answer shows a class, not all: labels are converted to its type, never counted unknown
            classes = model_classes_from_answer(loaded.predictor, row)
            matcher.fixed = False
        if classes:
            matcher.learn_classes(classes)
    return learn_classes


class RenamedInputs:
    """A predictor whose inputs the run names as the input's header does, while the model gets
    its own names (``names``: header name -> model name), e.g. ``' workclass'`` for ``workclass``.

    Everything else is the wrapped predictor's.
    """

    def __init__(self, predictor: Any, names: dict[str, str]) -> None:
        self.predictor = predictor
        self.names = names
        header = {model: name for name, model in names.items()}
        self.columns: list[str] | None = [header.get(c, c) for c in predictor.columns] if predictor.columns else None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.predictor, name)

    def _model_names(self, columns: Sequence[str]) -> list[str]:
        return [self.names.get(c, c) for c in columns]

    def predict_block(self, block: Any, columns: Sequence[str], output: Any, targets: Any) -> Any:
        return self.predictor.predict_block(block, self._model_names(columns), output, targets)

    def predict_records(self, records: list[dict[str, Any]], output: Any, target: Any) -> Any:
        names = self.names
        return self.predictor.predict_records([{names.get(c, c): v for c, v in r.items()} for r in records],
                                              output, target)


def _preview(columns: Sequence[str]) -> str:
    return ", ".join(columns[:6]) + (", ..." if len(columns) > 6 else "")


def model_columns(loaded: LoadedModel, input_columns: Sequence[str], target: str | None, source: str,
                  *, check_target: bool = True, features: Sequence[str] | None = None,
                  drop: Sequence[str] | None = None, groups: dict[str, list[str]] | None = None,
                  notes: list[str] | None = None, by: Sequence[str] = (),
                  present: Sequence[str] | None = None, choose: str = "--features or --drop") -> list[str]:
    """The model's input columns, checked against the input's columns up front.

    A model that names its inputs (``feature_names_in_``) gets exactly those, and every
    one must be in the input. A model without a schema (river, a function, scikit-learn
    fitted on an array) gets the columns chosen by ``--features`` (with the ``--group``
    members) or else every input column but the target, the ``--by`` key columns and the
    ``--drop`` columns; one
    fitted on an array takes them by position, so the count must match (``notes`` gets a
    line saying so). ``present`` are the columns the input is seen to hold when they differ from
    ``input_columns`` (JSONL: the first object's keys); a ``--drop`` name among them that the model
    does not take is a note, as for a CSV header's column. ``choose`` names the options that
    choose the columns, in the message when their count is wrong.
    """
    inputs = list(input_columns)
    seen = [*inputs, *(c for c in present or () if c not in inputs)]
    if check_target and target is not None and target not in inputs:
        hint = ""
        for delimiter, name in ((";", "';'"), ("\t", "tab"), ("|", "'|'")):
            if any(delimiter in c for c in inputs):
                hint = f" (the header holds {name}: is the file separated by it? use --delimiter)"
                break
        if not hint and target != target.strip() and target.strip() in inputs:
            hint = f" (the header's names are read without surrounding spaces: use --target {target.strip()!r})"
        raise InputError(f"no column {target!r} (the --target); the columns are: {', '.join(inputs)}{hint}",
                         source=source)
    known = loaded.predictor.columns
    if known:
        if target in known or target in [c.strip() for c in known if c not in inputs]:
            raise ModelError(f"{loaded.path}: the model takes the target column {target!r} as an input")
        missing = [c for c in known if c not in inputs]
        spaced = {c: c.strip() for c in missing if c != c.strip() and c.strip() in inputs}
        formed = _same_in_another_form([c for c in missing if c not in spaced], inputs)
        matched = {**spaced, **formed}
        if missing and len(matched) == len(missing) and len(set(matched.values())) == len(matched) \
                and not set(matched.values()) & set(known):
            # pandas keeps a header's spaces (' workclass'), ipfi strips them; a header may spell 'café' with
            # a combining accent (NFD) where the model's name has one code point (NFC): the model gets its names
            loaded.predictor = RenamedInputs(loaded.predictor, {v: k for k, v in matched.items()})
            if notes is not None and spaced:
                shown = _preview([repr(c) for c in spaced])
                notes.append(f"the model's column names have surrounding spaces ({shown}); they are matched "
                             "to the input's header names, which are read without them")
            if notes is not None and formed:
                shown = _preview([repr(c) for c in formed])
                notes.append(f"the model's column names {shown} are written in another Unicode form than the "
                             "input's header names that look the same (composed or decomposed accents); they "
                             "are matched to the input's header names")
            known = [matched.get(c, c) for c in known]
        elif missing:
            hint = ""
            if any(c != c.strip() for c in missing):
                hint = ("; the model's names have surrounding spaces, the input's header names are read without "
                        "them")
            lacking = [c for c in missing if c not in spaced] or missing
            raise InputError(f"the model needs column(s) {', '.join(map(repr, lacking))}, which the input lacks "
                             f"(the model's inputs: {', '.join(map(repr, known))}){hint}", source=source)
        _check_drop(known, seen, drop or [], notes)
        return list(known)
    available = [c for c in inputs if c != target and c not in by]
    for option, names in (("--features", features or []), ("--drop", drop or []),
                          ("--group", [c for members in (groups or {}).values() for c in members])):
        unknown = [n for n in names if n not in available and (option != "--drop" or n not in seen or n == target)]
        if unknown:
            raise UsageError(f"no such input column: {', '.join(unknown)} (the columns: {', '.join(available)})",
                             option)
    dropped = set(drop or [])
    if features:
        chosen = set(features) | {c for members in (groups or {}).values() for c in members}
        columns = [c for c in available if c in chosen and c not in dropped]
    else:
        columns = [c for c in available if c not in dropped]
    expected = loaded.predictor.n_features
    if expected is not None and expected != len(columns):
        raise InputError(f"the model was fitted on {expected} unnamed features and takes columns by "
                         f"position, but it would get {len(columns)}: {', '.join(columns)} (choose them with "
                         f"{choose}, in the order the model was fitted on)", source=source)
    if not columns:
        raise InputError("the input has no columns" + (f" besides the target {target!r}" if target is not None else ""),
                         source=source)
    if features and notes is not None and len(columns) < len(available) - len(dropped):
        notes.append(f"the model does not name its inputs, so it gets only the columns --features and --group "
                     f"choose ({_preview(columns)}); to give it every other column, leave out the ones it must "
                     "not see with --drop instead")
    if expected is not None and notes is not None:
        shown = ", ".join(f"{i} = {quoted(c)}" for i, c in enumerate(columns[:12])) \
            + (f", ... ({len(columns)} in all)" if len(columns) > 12 else "")
        notes.append("the model was fitted without column names: it gets the input's columns by position, "
                     f"its input {shown}; check that this is the order it was fitted in (else choose the columns "
                     f"in that order with --features)")
    return columns


def _same_in_another_form(missing: Sequence[str], inputs: Sequence[str]) -> dict[str, str]:
    """The model's names among ``missing`` that one input column spells in another Unicode
    normal form (``'café'`` as ``c a f e U+0301``), each with that column; a name two input columns
    share in that way is left out (the run then names it as lacking).

    >>> _same_in_another_form(["caf\u00e9", "x"], ["cafe\u0301", "y"]) == {"caf\u00e9": "cafe\u0301"}
    True
    """
    import unicodedata

    forms: dict[str, list[str]] = {}
    for column in inputs:
        forms.setdefault(unicodedata.normalize("NFC", column), []).append(column)
    found = {}
    for name in missing:
        spellings = forms.get(unicodedata.normalize("NFC", name), [])
        if len(spellings) == 1:
            found[name] = spellings[0]
    return found


def _check_drop(known: Sequence[str], inputs: Sequence[str], drop: Sequence[str],
                notes: list[str] | None) -> None:
    """``--drop`` for a model that names its inputs: an input column it does not take is left out
    anyway (a note says so); a name that is neither an input column nor a model input is a usage error."""
    outside = [n for n in drop if n not in known]
    unknown = [n for n in outside if n not in inputs]
    if unknown:
        raise UsageError(f"no such column: {', '.join(unknown)} (the model's inputs: {', '.join(known)})",
                         "--drop")
    if outside and notes is not None:
        notes.append(f"--drop {', '.join(outside)}: not {'an input' if len(outside) == 1 else 'inputs'} of "
                     f"the model, which never gets {'it' if len(outside) == 1 else 'them'} anyway")


def select_features(columns: Sequence[str], features: Sequence[str] | None, drop: Sequence[str] | None,
                    groups: dict[str, list[str]]) -> tuple[list[str] | None, dict[str, list[str]]]:
    """Check ``--features``/``--drop``/``--group`` against the model's columns (usage errors).

    Returns the ``features`` and ``groups`` arguments for the core estimators. (A ``--drop``
    column that the model does not get, because it has no schema, is already left out.)
    """
    known = set(columns)
    for option, names in (("--features", features or []), ("--drop", drop or []),
                          ("--group", [c for members in groups.values() for c in members])):
        unknown = [n for n in names if n not in known]
        if unknown:
            raise UsageError(f"not a model input: {', '.join(unknown)} (the model's inputs: {', '.join(columns)})",
                             option)
    selected: list[str] | None = list(features) if features else None
    if drop:
        base = selected if selected is not None else list(columns)
        selected = [c for c in base if c not in set(drop)]
        if not selected and not groups:
            raise UsageError("every feature is dropped: nothing left to explain", "--drop")

    try:
        resolve_groups(list(columns), selected, groups)
    except ValueError as error:
        raise UsageError(str(error), "--group" if groups else "--features") from None
    return selected, groups


def explained_columns(loaded: LoadedModel, columns: Sequence[str], features: Sequence[str] | None,
                      drop: Sequence[str] | None, groups: dict[str, list[str]], *, by: Sequence[str] = ()
                      ) -> tuple[list[str] | None, dict[str, list[str]]]:
    """:func:`select_features` for the run's model: a ``--drop`` column that the model does not
    get at all (checked by :func:`model_columns`) is not checked again; a ``--by`` key column that
    the model takes as an input (it names it) is given to the model but never explained."""
    left_out = [c for c in [*(drop or []), *by] if c in columns]
    return select_features(columns, features, list(dict.fromkeys(left_out)), groups)


def input_categories(loaded: LoadedModel, columns: Sequence[str]) -> dict[str, Any]:
    """The categories the model's encoders learned (:func:`~ipfi_cli.models.categories.learned_categories`),
    by the input's name of each column (a model's ``' workclass'`` is the header's ``workclass``).
    A river model learns its categories as it goes: none."""
    if loaded.kind == "river":
        return {}

    names: dict[str, str] = getattr(loaded.predictor, "names", None) or {}
    found = learned_categories(loaded.model, loaded.predictor, [names.get(c, c) for c in columns])
    return {c: found[names.get(c, c)] for c in columns if names.get(c, c) in found}


def check_readable(reader: Any, names: Sequence[str | None]) -> None:
    """Refuse a column the run uses that the reader cannot read (a Parquet list column, say).

    A reader that holds such columns names them in ``unreadable`` (column -> why); a column the
    run does not use (left out with ``--drop``, or not among a model's named inputs) is skipped.
    """
    unreadable: dict[str, str] = getattr(reader, "unreadable", {})
    for name in names:
        if name is not None and name in unreadable:
            raise InputError(unreadable[name])


def check_key_columns(by: Sequence[str], input_columns: Sequence[str], target: str | None,
                      features: Sequence[str] | None, groups: dict[str, list[str]], source: str) -> None:
    """``--by``'s key columns: in the input, not the target, not named by ``--features`` or ``--group``
    (a key is never explained); a :class:`~ipfi_cli.errors.UsageError` naming ``--by`` otherwise."""
    unknown = [c for c in by if c not in input_columns]
    if unknown:
        raise UsageError(f"no such input column: {', '.join(unknown)} in {source} (the columns: "
                         f"{', '.join(input_columns)})", "--by")
    if target in by:
        raise UsageError(f"{target!r} is the --target: a key column cannot be the label", "--by")
    named = [c for c in [*(features or []), *(m for members in groups.values() for m in members)] if c in by]
    if named:
        raise UsageError(f"{named[0]!r} is a key column (--by): it is never explained; leave it out of "
                         "--features and --group", "--by")
