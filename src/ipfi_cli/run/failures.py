"""The row and column a model failed on, and a one-line message about them.

When a model call over a micro-batch fails, the run bisects the batch with the
explainer's own all-or-nothing ``explain_many`` (the halves that work are kept, exactly as
if explained in one call) until one row is left: that row is the one the model cannot
take. Its column is found by trying the row with one column at a time replaced by the
value of a row the model took: the column whose replacement makes the prediction work is
named.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ipfi_cli.core.losses import Output
from ipfi_cli.errors import IpfiError, ModelCallError, ModelError, ServiceError, first_line
from ipfi_cli.text import quoted

#: the largest 32-bit float: scikit-learn's trees take float32, so a larger value fails
FLOAT32_MAX = 3.4028234663852886e38


def _predicts(predictor: Any, x: dict[str, Any], output: Output, label: Any) -> bool:
    try:
        predictor.predict_records([x], output, label)
    except ServiceError:  # the model cannot be reached: about no row
        raise
    except IpfiError:  # the model (guarded) cannot take this row
        return False
    return True


def failing_column(predictor: Any, columns: Sequence[str], x: dict[str, Any], label: Any, output: Output,
                   reference: dict[str, Any] | None) -> str | None:
    """The column of ``x`` the model fails on, found with ``reference``, a row it takes.

    ``None`` when the unperturbed row predicts (the failure came from a permuted copy), or
    when no single column explains the failure. Without a reference row, only the text values
    are tried, each replaced by 0.0 (a number where the model needs one: a decimal comma, a
    zip code read as text).
    """
    row = {c: x[c] for c in columns}
    if reference is None:
        reference = {c: 0.0 if isinstance(v, str) else v for c, v in row.items()}
    if _predicts(predictor, row, output, label):
        return None
    for c in columns:
        if row[c] is reference.get(c) or row[c] == reference.get(c):
            continue
        trial = dict(row)
        trial[c] = reference[c]
        if _predicts(predictor, trial, output, label):
            return c
    return None


def guess_column(values: dict[str, Any], columns: Sequence[str], message: str) -> tuple[str, str] | None:
    """A column and what is wrong with it, from the error's words (when no reference row exists)."""
    lower = message.lower()
    if "infinity" in lower or "too large" in lower:
        for c in columns:
            v = values[c]
            if isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) > FLOAT32_MAX:
                return c, f"{quoted(v)} is too large for this model"
    if "string" in lower or "str" in lower or "dtype" in lower or "could not convert" in lower:
        text = [c for c in columns if isinstance(values[c], str)]
        if len(text) == 1:
            return text[0], f"the model needs a number, got {quoted(values[text[0]])}"
    if "nan" in lower or "missing" in lower:
        missing = [c for c in columns if isinstance(values[c], float) and math.isnan(values[c])]
        if len(missing) == 1:
            return missing[0], "missing value, which this model does not accept"
    return None


def failure_message(source: str, number: int, line: int | None, values: dict[str, Any], columns: Sequence[str],
                    error: BaseException, column: str | None) -> str:
    """``source: row R (line L), column 'c': what: ErrorType: the model's message``."""
    if isinstance(error, ModelCallError):
        error = error.cause  # the model's own exception, by its own type
    message = first_line(error)
    # ipfi's own finding on the model's answer reads as it is; a model's exception keeps its type
    cause = message if isinstance(error, ModelError) else f"{type(error).__name__}: {message}"
    where = f"{source}: row {number}" + (f" (line {line})" if line is not None else "")  # Parquet has no lines
    if column is not None:
        v = values[column]
        if isinstance(v, float) and math.isnan(v):
            what = "missing value, which this model does not accept"
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) > FLOAT32_MAX:
            what = f"{quoted(v)} is too large for this model"
        elif isinstance(v, str) and ("float" in message or "number" in message or "str" in message):
            what = f"the model needs a number, got {quoted(v)}"
        else:
            what = f"the model cannot take the value {quoted(v)}"
        return f"{where}, column {quoted(column)}: {what} ({cause})"
    guess = guess_column(values, columns, message)
    if guess is not None:
        return f"{where}, column {quoted(guess[0])}: {guess[1]} ({cause})"
    numbers = [c for c in columns if isinstance(values.get(c), int) and not isinstance(values.get(c), bool)]
    hint = ""
    if numbers and ("isnan" in message or "not supported between instances" in message):
        # an encoder that learned text categories got numbers: codes such as zip 02139 read as 2139
        hint = (f"; if {', '.join(repr(c) for c in numbers[:3])} holds text codes that look like numbers, read it "
                "as text with --text")
    flags = [c for c in columns if isinstance(values.get(c), bool)]
    if flags and not hint and any(word in message for word in (
            "unseen", "unknown", "categor", "isnan", "not supported between instances")):
        # an encoder that learned 'True' / 'False' as text got booleans (CSV and JSON read them as such)
        hint = (f"; {', '.join(repr(c) for c in flags[:3])} was read as true/false: if the model learned it as "
                "text ('True', 'False'), read it as text with --text")
    return f"{where}: the model failed on this row: {cause}{hint}"
