"""The set-up of a run, computed once: :class:`RunPlan`, built by :func:`plan_run`.

Every command (``explain``, ``batch``, ``compare``) sets up the same way: the model's
warnings, the task, the loss (refused before the first row if it cannot measure the
model), the label matching, the input opened and its columns matched to the model's,
what is explained (``--features``/``--drop``/``--group``), and the notes a user should
read. :func:`plan_run` does all of it and returns an immutable :class:`RunPlan` with the
reader, positioned at the first row; the streaming session and the batch loader then
only read the plan.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from ipfi_cli.errors import InputError, RunError
from ipfi_cli.io.readers import RowReader, open_rows
from ipfi_cli.io.values import reader_options
from ipfi_cli.run.checks import CategoryCheck, check_inputs
from ipfi_cli.run.rows import RowChecker

if TYPE_CHECKING:
    from ipfi_cli.core.losses import Loss
    from ipfi_cli.io.readers import RowReader
    from ipfi_cli.models.loading import LoadedModel
    from ipfi_cli.run.labels import LabelMatcher
    from ipfi_cli.run.rows import RowChecker


@dataclass(frozen=True)
class InputSpec:
    """Where the rows come from and how to read them (``--format``, ``--na-values``, ...)."""

    path: str | None = None  # None or "-": standard input
    format: str | None = None
    na_values: Sequence[str] | None = None
    no_default_na: bool = False
    delimiter: str | None = None
    decimal: str | None = None  # CSV numbers' decimal mark: "." (None) or "," (--decimal)
    text: Sequence[str] | None = None  # CSV columns read as text (--text)
    skip_initial_space: bool = False  # CSV: spaces after a separator are not the field's (--skip-initial-space)
    rows: Iterable[Mapping[str, Any]] | None = None  # rows as Python objects, instead of ``path``

    def check(self) -> None:
        """Refuse bad reader options (a :class:`~ipfi_cli.errors.UsageError`) before any work."""
        self.reader_options()

    def reader_options(self) -> dict[str, Any]:
        """:func:`~ipfi_cli.io.readers.open_rows`'s reading options (bad ones are usage errors)."""
        return reader_options(self.na_values, self.no_default_na, self.delimiter, self.decimal,
                              skip_initial_space=self.skip_initial_space)

    def open(self, *, hint: bool = True) -> RowReader:
        """The reader of the input, its ``--text`` columns set (reads nothing yet)."""
        if self.rows is not None:  # read as the JSONL lines they would be in a file
            from ipfi_cli.io.objects import JsonlRows

            return RowReader(cast(BinaryIO, JsonlRows(self.rows)), name="<rows>", format="jsonl",
                             **self.reader_options())
        reader = open_rows(None if self.path == "-" else self.path, format=self.format, hint=hint,
                           **self.reader_options())
        try:
            reader.keep_as_text(self.text)
        except BaseException:
            reader.close()
            raise
        return reader


@dataclass(frozen=True)
class Selection:
    """What is explained, against what: the target, task, loss and columns."""

    target: str | None  # the label column; None: no label (only for a label-free loss, prediction-shift)
    task: str = "auto"
    loss: str | None = None
    features: Sequence[str] | None = None
    drop: Sequence[str] | None = None
    groups: Mapping[str, Sequence[str]] = field(default_factory=dict)
    by: Sequence[str] = ()  # key columns (``explain --by``): not features, like the target
    #: run on when a column's first values are all unknown to the model's encoder (--allow-unknown-categories)
    allow_unknown_categories: bool = False


@dataclass(frozen=True)
class RunPlan:
    """The whole set-up of one run, computed once by :func:`plan_run`."""

    loaded: LoadedModel  # the model; its predictor takes ``columns``
    source: str  # the input's name
    input_format: str  # "csv" or "jsonl"
    input_columns: list[str]  # the input's columns (JSONL: the first object's keys)
    columns: list[str]  # the model's inputs, in order
    target: str | None  # None: the input has no label column (a label-free loss)
    features: list[str] | None  # the columns explained one by one (None: all but the groups' members)
    groups: dict[str, list[str]]
    classification: bool
    loss: Loss
    labels: LabelMatcher  # turns the input's labels into the model's (counts the unknown ones)
    learn: bool
    known_keys: frozenset[str] | None  # JSONL without a schema: the first object's keys (a later key is noted)
    by: tuple[str, ...] = ()  # key columns (``explain --by``): a row without a value in one is a bad row
    #: input column -> the categories the model's encoder learned for it (models.categories.Categories)
    categories: Mapping[str, Any] = field(default_factory=dict)
    allow_unknown_categories: bool = False  # a column of unknown categories is a warning, not refused
    skip_initial_space: bool = False  # the input is read with --skip-initial-space

    @property
    def predictor(self) -> Any:
        return self.loaded.predictor

    def row_checker(self, *, on_bad_row: str, on_skip: Callable[[InputError], None] | None,
                    say: Callable[[str, str | None], None] | None = None) -> RowChecker:
        """A :class:`~ipfi_cli.run.rows.RowChecker` for this plan's rows (``say`` gets its warnings)."""
        from ipfi_cli.run import setup
        categories = CategoryCheck(self.categories, source=self.source,
                                   csv=self.input_format == "csv" and not self.skip_initial_space,
                                   allow=self.allow_unknown_categories, say=say) if self.categories else None
        return RowChecker(source=self.source, target=self.target, columns=self.columns, to_label=self.labels,
                          no_label=self.loss.proba_class,
                          check_columns=self.input_format == "jsonl", learn=self.learn, on_bad_row=on_bad_row,
                          on_skip=on_skip, on_first_row=setup.first_row_hook(self.loaded, self.labels, self.columns),
                          known_keys=set(self.known_keys) if self.known_keys is not None else None,
                          key_columns=self.by, can_drop=not self.loaded.predictor.columns, categories=categories)


def plan_run(loaded: LoadedModel, inputs: InputSpec, selection: Selection, *, learn: bool,
             say: Callable[[str, str | None], None], streaming: bool = True,
             before_rows: Callable[[RowReader], None] | None = None,
             join: Callable[[RowReader], Any] | None = None,
             on_bad_row: str = "fail") -> tuple[RunPlan, RowReader]:
    """Set a run up: check the model against the options, open the input, match the columns.

    Returns the plan and the input's reader (the caller closes it). ``say(text, kind)`` gets
    the model's warnings and the notes. ``streaming`` (``explain``) or not (``batch``,
    ``compare``, which read the input whole) changes two things only: a static river model
    gets a note, and an input without rows is refused with the command's own words.
    ``before_rows`` is called with the reader before any row is read (a resumed run's
    reader continues the stream). ``join`` returns the reader the rows then come through
    (``explain --labels``: the input joined with its late labels, with a reader's interface);
    it owns the input's reader from then on.
    """
    from ipfi_cli.run import setup

    for line in loaded.warnings:
        say(line, "warning")
    served = setup.served_model(loaded)
    if served is not None:  # an outage's notices, from whichever thread waits; shown even with --quiet
        served.on_notice = lambda text: say(f"warning: {text}", "status")
    classification = setup.choose_task(loaded, selection.task)
    loss = setup.choose_loss(loaded, classification, selection.loss)
    if selection.target is None:
        setup.check_no_target(loss, learn)
    labels = setup.label_matcher(loaded, classification, learn)
    if streaming and loaded.kind == "river" and not learn:
        say("note: the river model is explained as it is and does not learn; add --learn to explain each row "
            "and then learn it", None)
    elif loaded.kind == "river" and not learn:
        say("note: the river model is explained as it is and does not learn (an untrained one predicts nothing "
            "useful); compare --learn and explain --learn learn as they go", None)
    reader = inputs.open(hint=streaming)
    try:
        if before_rows is not None:
            before_rows(reader)
        if join is not None:
            reader = join(reader)
        source, target = reader.name, selection.target
        features = list(selection.features) if selection.features is not None else None
        drop = list(selection.drop) if selection.drop is not None else None
        groups = {name: list(members) for name, members in selection.groups.items()}
        input_columns = reader.columns
        known = loaded.predictor.columns
        if not input_columns and (not streaming or (reader.format == "jsonl" and not known)):
            bad = [row.error for row in reader]  # no good row at all: only bad ones, if any
            if bad and on_bad_row == "fail" and bad[0] is not None:
                raise bad[0]
            if streaming:
                raise RunError(f"{source}: no row was explained: the input has no rows"
                               + (f" but {len(bad):,} bad one(s); the first: {bad[0]}" if bad else ""))
            raise RunError(f"{source}: no data to explain: "
                           + (f"all {len(bad):,} row(s) were bad; the first: {bad[0]}" if bad
                              else "the input has no rows"))
        by = list(selection.by)
        if by and input_columns:
            setup.check_key_columns(by, input_columns, target, features, groups, source)
        notes: list[str] = []
        if reader.format == "jsonl":
            # JSONL objects need not share keys: a model that names its inputs gets those, else
            # the columns --features and --group name, else the first object's keys; each row is
            # checked for them and the target
            named = [*(features or []), *(c for members in groups.values() for c in members)]
            inputs_ = (list(known) if known else list(dict.fromkeys(named)) if features
                       else [c for c in input_columns if c != target and c not in by])
            columns, check_target = [*inputs_, *([target] if target is not None else [])], target is not None
        else:
            columns, check_target = input_columns or list(known or []), bool(input_columns) and target is not None
        for field, name in getattr(reader, "unnamed", ()):
            given = name in known if known else (name != target and name not in (drop or []) and name not in by
                                                 and (features is None or name in features))
            if given:
                say(f"{source}: the header's field {field} has no name (pandas writes its index so); it is read as "
                    f"column {name!r} and given to the model: leave it out with --drop {name!r}", "warning")
        columns = setup.model_columns(loaded, columns, target, source, check_target=check_target,
                                      features=features, drop=drop, groups=groups, notes=notes, by=by,
                                      present=input_columns if reader.format == "jsonl" else None)
        setup.check_readable(reader, [*columns, target, *by])
        selected, groups = setup.explained_columns(loaded, columns, features, drop, groups, by=by)
        check_inputs(loaded, columns, source)
        for line in notes:
            say(line, "note")
        labelled = [target] if target is not None else []
        known_keys = (frozenset({*input_columns, *labelled}) if reader.format == "jsonl" and not known and not features
                      else None)
        plan = RunPlan(loaded=loaded, source=source, input_format=reader.format, input_columns=list(input_columns),
                       columns=columns, target=target, features=selected, groups=groups,
                       classification=classification, loss=loss, labels=labels, learn=learn, known_keys=known_keys,
                       by=tuple(by), categories=setup.input_categories(loaded, columns),
                       allow_unknown_categories=selection.allow_unknown_categories,
                       skip_initial_space=inputs.skip_initial_space)
    except BaseException:
        reader.close()
        raise
    return plan, reader
