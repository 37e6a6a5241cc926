"""The row steps of one key's rows in a keyed run (``explain --by``): rows numbered as the key's, a row
the model fails on named by its number in the whole input."""

from __future__ import annotations

from typing import Any

from ipfi_cli.errors import RunError
from ipfi_cli.run.rows import GoodRow
from ipfi_cli.run.steps import RowSteps


class KeyedSteps(RowSteps):
    """:class:`~ipfi_cli.run.steps.RowSteps` on one key's rows, numbered as the key's; a row the
    model fails on is named by its number in the whole input (:attr:`input_rows`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.input_rows: dict[int, int] = {}  # the key's row number -> the input's, for the rows being explained

    def _located(self, row: GoodRow) -> GoodRow:
        return row._replace(number=self.input_rows.get(row.number, row.number))

    def _bad_model_row(self, row: GoodRow, error: BaseException) -> None:
        super()._bad_model_row(self._located(row), error)

    def _nonfinite_loss(self, row: GoodRow) -> RunError:
        return super()._nonfinite_loss(self._located(row))
