"""Checks that stop a run from printing numbers that cannot be right, or say why they may not be.

Each names the cause and the fix in one line: a river model that never learned the input's
columns (:func:`check_inputs`), a feature whose name is one of the traces' own fields
(:func:`check_output_names`), labels none of which is a class of the model
(:func:`labels_match_nothing`), importances that are all exactly zero
(:func:`all_zero_warning`), and a column whose values are none of the categories the model's
encoder learned (:class:`CategoryCheck`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ipfi_cli.errors import InputError, UsageError
from ipfi_cli.text import quoted

if TYPE_CHECKING:  # imported when used: the command line loads this module for --help
    from ipfi_cli.models.categories import Categories
    from ipfi_cli.models.loading import LoadedModel
    from ipfi_cli.run.labels import LabelMatcher

#: explained rows before all-zero importances are worth a warning
ZERO_ROWS = 30


def check_inputs(loaded: LoadedModel, columns: Sequence[str], source: str) -> None:
    """Refuse a river model that learned features none of which is an input column."""
    if loaded.kind != "river":
        return
    from ipfi_cli.models.introspect import unseen_inputs

    problem = unseen_inputs(loaded.model, list(columns))
    if problem:
        raise InputError(problem, source=source)


#: the fields of the trace files besides the features: ``row`` (explain's and compare's), and
#: ``method`` (compare --traces'; ``ipfi plot`` takes a file that has one for compare's traces)
TRACE_FIELDS = ("row", "method")


def check_output_names(names: Sequence[str], bounds: bool, source: str) -> None:
    """Refuse feature or group names that would collide with the traces' own fields.

    ``bounds``: the traces hold a ``<name>_bound`` column per name (explain --bounds); the
    traces of compare have none, but ``ipfi plot`` takes a ``<name>_bound`` column beside
    ``<name>`` for a bound (and does not draw it), so compare --traces passes True too.

    >>> check_output_names(["row", "x"], False, "data.csv")
    Traceback (most recent call last):
    ...
    ipfi_cli.errors.InputError: data.csv: the feature 'row' has the name of the traces' row-number field; ...
    >>> check_output_names(["x", "method"], False, "data.csv")
    Traceback (most recent call last):
    ...
    ipfi_cli.errors.InputError: data.csv: the feature 'method' has the name of the method field of compare's ...
    """
    taken = set(TRACE_FIELDS) | ({f"{name}_bound" for name in names} if bounds else set())
    clash = [name for name in names if name in taken]
    if clash:
        if clash[0] == "method":
            why = "the method field of compare's traces, which `ipfi plot` reads as one"
        elif clash[0] == "row":
            why = "the traces' row-number field; the traces would hold two fields of that name"
        else:
            why = f"the bound column of {clash[0][:-6]!r}; the traces would hold two fields of that name"
        raise InputError(f"the feature {clash[0]!r} has the name of {why}: report it under another name with "
                         f"--group NEW={clash[0]}", source=source)


def labels_match_nothing(matcher: LabelMatcher) -> str:
    """The line for a run in which no label is one of the model's classes."""
    examples = ", ".join(quoted(label) for label in list(matcher.unknown)[:3])
    classes = ", ".join(repr(c) for c in (matcher.classes or [])[:6])
    return (f"no label is one of the model's classes ({classes}); the labels read like {examples}: every "
            "prediction would count as wrong and every importance would be 0; check --target and the label values")


def all_zero_warning(importances: Any, explained: int) -> str | None:
    """A warning when every importance is exactly 0 after enough rows: no permutation of any
    feature changed any prediction, which is what a model that does not see its inputs does."""
    values = [float(v) for v in importances]
    if explained < ZERO_ROWS or not values or any(v != 0.0 for v in values):
        return None
    return (f"every feature scored exactly 0 after {explained:,} rows: no feature's permutation changed any "
            "prediction. A model that ignores these inputs gives that; if it should use them, check that the "
            "input's columns are the ones the model was trained on (names and types)")


#: rows whose values are compared with the categories the model's encoders learned
CATEGORY_ROWS = 20


@dataclass
class _Seen:
    """What a column's first values were, compared with the model's categories."""

    values: int = 0  # non-missing values compared
    unknown: int = 0  # of them, none of the categories
    spaced: int = 0  # of the unknown: known once the spaces before it are taken away
    trimmed: int = 0  # of the unknown: known once the spaces around it are taken away
    example: tuple[Any, int, int | None] | None = None  # the first unknown value, its row and line


class CategoryCheck:
    """The first rows' values of the columns a model's encoders read, compared with the categories
    they learned (:func:`~ipfi_cli.models.categories.learned_categories`).

    A column whose every value is unknown to its encoder changes no prediction of a
    ``OneHotEncoder(handle_unknown="ignore")``, so its importance is 0 whatever the data hold:

    * when the values are known once the spaces after the separator are taken away (``39, State-gov``,
      as UCI writes its files), the run is refused at once, before any row is explained, naming the
      row, the column and ``--skip-initial-space`` (a warning with ``allow``);
    * when no value of the first :data:`CATEGORY_ROWS` rows is known and no such fix is in sight
      (another spelling, categories the model never saw: data that moved on), a warning says so: the
      0 is then the model's true answer on these rows.

    ``categories`` maps the input's column names to the categories; ``csv``: the input is a CSV
    read without ``--skip-initial-space`` (the option that fixes the spaces).
    """

    def __init__(self, categories: Mapping[str, Categories], *, source: str, csv: bool, allow: bool,
                 say: Callable[[str, str | None], None] | None) -> None:
        self.categories = dict(categories)
        self.source = source
        self.csv = csv
        self.allow = allow
        self.say = say
        self.rows = 0
        self.done = not self.categories
        self._seen = {column: _Seen() for column in self.categories}

    def check(self, rows: Sequence[Any]) -> None:
        """Compare these good rows (``number``, ``line``, ``values``) while the first rows last;
        raise a :class:`~ipfi_cli.errors.UsageError` for values that only lack their spaces' removal."""
        if self.done or not rows:
            return
        for row in rows[:CATEGORY_ROWS - self.rows]:
            values = row.values
            for column, categories in self.categories.items():
                value = values.get(column)
                if value is None or (isinstance(value, float) and value != value):
                    continue
                seen = self._seen[column]
                seen.values += 1
                try:
                    if value in categories.known:
                        continue
                except TypeError:  # unhashable: not compared
                    continue
                seen.unknown += 1
                if seen.example is None:
                    seen.example = (value, row.number, row.line)
                if isinstance(value, str):
                    seen.spaced += value.lstrip(" ") in categories.known
                    seen.trimmed += value.strip() in categories.known
        self.rows = min(CATEGORY_ROWS, self.rows + len(rows))
        self._spaces()
        if self.rows >= CATEGORY_ROWS and not self.done:
            self.done = True
            self._unknown()

    def _all_unknown(self, fixed: Callable[[_Seen], int] | None) -> list[str]:
        return [c for c, s in self._seen.items()
                if s.values and s.unknown == s.values and (fixed is None or fixed(s) == s.values)]

    def _where(self, column: str) -> str:
        seen = self._seen[column]
        assert seen.example is not None
        _, number, line = seen.example
        return str(InputError("", source=self.source, row=number, line=line, column=column)).rstrip(": ")

    def _spaces(self) -> None:
        """Refuse (or, allowed, warn of) columns whose every value is known once its spaces are gone."""
        spaced = self._all_unknown(lambda s: s.trimmed)
        if not spaced:
            return
        self.done = True
        column = spaced[0]
        seen, categories = self._seen[column], self.categories[column]
        assert seen.example is not None
        value = seen.example[0]
        others = spaced[1:]
        also = ""
        if others:
            shown = ", ".join(quoted(c) for c in others[:3]) + (", ..." if len(others) > 3 else "")
            also = f" (so for {len(others)} more column(s): {shown})"
        leading = all(self._seen[c].spaced == self._seen[c].values for c in spaced)
        if leading and self.csv:
            fix = "read the file with --skip-initial-space (its fields start with a space after each separator)"
        elif leading:
            fix = "take the spaces off the values"
        else:
            fix = "take the spaces around the values off (no option of ipfi does)"
        outcome = ("the model would fail on every row" if categories.fails
                   else "its importance would be 0")
        message = (f"{self._where(column)}: {quoted(value)} is none of the categories the model's "
                   f"{categories.encoder} learned, but {quoted(value.strip())} is{also}: every value of such a "
                   f"column is unknown to the model, so {outcome}; {fix}")
        if not self.allow:
            raise UsageError(message + ", or run anyway with --allow-unknown-categories")
        if self.say is not None:
            self.say(message, "warning")

    def _unknown(self) -> None:
        """Warn of columns none of whose first values the model's encoder knows."""
        unknown = [c for c in self._all_unknown(None) if not self.categories[c].fails]  # those fail on their own
        if not unknown or self.say is None:
            return
        column = unknown[0]
        seen, categories = self._seen[column], self.categories[column]
        assert seen.example is not None
        learned = ", ".join(quoted(c) for c in categories.shown) + (", ..." if len(categories.known) > 4 else "")
        more = f" (and in {len(unknown) - 1} more column(s))" if len(unknown) > 1 else ""
        self.say(f"{self._where(column)}: none of the first {self.rows:,} rows' values is a category the model's "
                 f"{categories.encoder} learned{more}; they read like {quoted(seen.example[0])}, it learned "
                 f"{learned}: the model gets no information from the column in these rows, so its importance "
                 "is 0 while they last; check that the values are spelled as in the training data", "warning")
