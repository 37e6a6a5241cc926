"""How a field becomes a value: numbers, strings and missing values, the same for every command.

* A CSV field that parses as a number becomes an ``int`` or ``float``; other fields stay
  strings. JSONL values keep their JSON types.
* ``True``/``False`` (also ``TRUE``/``true``, ``FALSE``/``false``: pandas' spellings) in a CSV
  field become the bools ``True``/``False``, as a JSON ``true``/``false`` does and as
  ``pandas.read_csv`` reads them, so a model fitted on a bool column gets 1 and 0 from
  either format. They are numbers to the reader (a column of them is a numeric column);
  ``--text`` keeps such a column as text. Labels are matched to the model's classes
  whatever their spelling (:mod:`ipfi_cli.run.labels`).
* **Missing values** become :data:`MISSING` (``float('nan')``), so the model sees NaN for a
  missing value whatever the input format: an empty CSV field, a JSON ``null``, and a CSV
  field or JSON string that is one of the ``na_values`` tokens (surrounding spaces ignored).
  The default tokens, :data:`DEFAULT_NA_VALUES`, are pandas' default list plus UCI's ``?``.
* The separator of a CSV file: ``,`` unless the header has none and has ``;``, a tab or
  ``|``; a ``.tsv``/``.tab`` name means a tab.
* The decimal mark of a CSV file's numbers: ``.``, or ``,`` with ``--decimal ,`` (as European
  spreadsheets export, with ``;`` between fields): then ``12,8`` is 12.8 and a field with a
  ``.`` in it is text, as in ``pandas.read_csv(decimal=",")``. JSONL and Parquet numbers are
  typed, so the decimal mark does not apply to them.

>>> [parse_value(s) for s in ["12", "-3.5", "NA", "abc"]]
[12, -3.5, nan, 'abc']
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from typing import Any

from ipfi_cli.errors import InputError, UsageError
from ipfi_cli.text import quoted

#: the value a missing field becomes (an empty CSV field, a JSON null)
MISSING = float("nan")

FORMATS = ("csv", "jsonl")

#: a column's kind, fixed by its first non-missing value (0 while unknown)
NUMBER, STRING = 1, 2

#: Tokens read as missing values by default: pandas' default list (``pandas.read_csv``'s
#: ``na_values``) plus ``?``, which UCI data sets use. An empty field is always missing.
DEFAULT_NA_VALUES: frozenset[str] = frozenset({
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>",
    "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null", "?",
})
#: default missing-value tokens that pandas reads as text (a model trained on a frame pandas read
#: may have learned them as categories)
NOT_PANDAS_NA: frozenset[str] = frozenset({"?"})
#: CSV fields read as bools: pandas' default ``true_values``/``false_values``
BOOLEANS: dict[str, bool] = {"True": True, "TRUE": True, "true": True, "False": False, "FALSE": False,
                             "false": False}
#: field separators recognised from a header line that holds no comma
SNIFFED_DELIMITERS = (";", "\t", "|")
_DELIMITER_NAMES = {"tab": "\t", "\\t": "\t", "comma": ",", "semicolon": ";", "pipe": "|", "space": " "}


def na_tokens(extra: Iterable[str] | None = None, *, defaults: bool = True) -> frozenset[str]:
    """The set of missing-value tokens: the defaults (unless ``defaults=False``) plus ``extra``.

    The empty field is always in it.

    >>> sorted(na_tokens(["-999", " missing "], defaults=False))
    ['', '-999', 'missing']
    """
    tokens = set(DEFAULT_NA_VALUES) if defaults else {""}
    tokens.update(t.strip() for t in extra or ())
    return frozenset(tokens)


def reader_options(na_values: Iterable[str] | None = None, no_default_na: bool = False,
                   delimiter: str | None = None, decimal: str | None = None, *,
                   skip_initial_space: bool = False) -> dict[str, Any]:
    """``open_rows``'s ``na_values``, ``delimiter``, ``decimal`` and ``skip_initial_space`` from the
    options ``--na-values`` (each value may hold several tokens, comma-separated), ``--no-default-na``,
    ``--delimiter``, ``--decimal`` and ``--skip-initial-space``.

    >>> options = reader_options(["-999,missing"], delimiter="tab")
    >>> options["delimiter"], {"-999", "missing", "NA"} <= options["na_values"], options["decimal"]
    ('\\t', True, '.')
    """
    tokens = na_tokens([t for value in na_values or [] for t in value.split(",")], defaults=not no_default_na)
    return {"na_values": tokens, "delimiter": parse_delimiter(delimiter) if delimiter is not None else None,
            "decimal": parse_decimal(decimal), "skip_initial_space": skip_initial_space}


def parse_decimal(text: str | None) -> str:
    """A ``--decimal`` value: ``.`` (the default) or ``,`` (also ``point``/``comma``).

    >>> [parse_decimal(t) for t in [None, ".", ",", "comma"]]
    ['.', '.', ',', ',']
    """
    value = {"point": ".", "dot": ".", "comma": ","}.get((text or ".").strip().lower(), (text or ".").strip())
    if value not in (".", ","):
        raise UsageError(f"the decimal mark is '.' or ',', got {text!r}", "--decimal")
    return value


#: a field that is a number written with a decimal comma (``12,8``, ``-0,5``)
DECIMAL_COMMA = re.compile(r"[+-]?\d+,\d+")


def decimal_comma_hint(text: str, delimiter: str | None) -> str | None:
    """The hint for a field that looks like a number with a decimal comma, read with the
    decimal point in a file not separated by commas (``;``, tab...); ``None`` for any other.

    >>> decimal_comma_hint("12,8", ";") is not None, decimal_comma_hint("12,8", ","), decimal_comma_hint("a,b", ";")
    (True, None, None)
    """
    if delimiter == "," or not DECIMAL_COMMA.fullmatch(text.strip()):
        return None
    return (f"{quoted(text)} looks like a number with a decimal comma: use --decimal , (or --text for a column "
            "that is text)")


#: a field that is a number written with a decimal point, or with points between groups of three digits
#: (``1.200``, ``3.750,5``, ``-0.5``, ``1e-3``)
DECIMAL_POINT = re.compile(r"[+-]?(\d{1,3}(\.\d{3})+(,\d+)?|\d*\.\d+([eE][+-]?\d+)?|\d+\.\d*([eE][+-]?\d+)?)")


def decimal_point_hint(text: str) -> str | None:
    """The reason a field that looks like a number with a ``.`` is refused when numbers are read with
    the decimal comma (``--decimal ,``): the ``.`` may be a thousands separator (``1.200`` for 1200)
    or a decimal point, and a model given the text would read it as a point (scikit-learn turns
    ``"1.200"`` into 1.2); ``None`` for a field that does not look like a number.

    >>> [decimal_point_hint(t) is not None for t in ["1.200", "3.750,5", "0.5", "v1.2", "10.0.0.1", "12,8"]]
    [True, True, True, False, False, False]
    """
    if not DECIMAL_POINT.fullmatch(text.strip()):
        return None
    return (f"{quoted(text)} has a '.', which --decimal , does not read: thousands separators are not read (export "
            "the numbers without them), and a column that is text is read with --text")


def parse_delimiter(text: str) -> str:
    """A ``--delimiter`` value as one character: ``;``, ``tab`` or ``\\t``, ``|``...

    >>> [parse_delimiter(t) for t in [";", "tab", "\\t", "semicolon", ","]]
    [';', '\\t', '\\t', ';', ',']
    """
    value = _DELIMITER_NAMES.get(text.lower(), text)
    if len(value) != 1 or value in "\"\r\n":
        raise UsageError(f"a delimiter is one character (or tab, semicolon, comma, pipe, space), got {text!r}",
                         "--delimiter")
    return value


def sniff_delimiter(header_line: str) -> str:
    """The separator of a CSV header line: ``,`` unless it has none and has ``;``, tab or ``|``.

    >>> [sniff_delimiter(h) for h in ["a,b;c", "a;b;c", "a\\tb", "a|b", "a"]]
    [',', ';', '\\t', '|', ',']
    """
    if "," in header_line:
        return ","
    counts = {d: header_line.count(d) for d in SNIFFED_DELIMITERS}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else ","


class Nested:
    """A JSON object or array as a JSONL value (``{"host": {"name": "a"}}``, as log shippers write).

    The reader keeps it rather than refusing the row: a key the run does not use (left out with
    ``--drop``, or not among a model's named inputs) is ignored; a model input, the label or a key
    column holding one is a bad row naming the column (:mod:`ipfi_cli.run.rows`). It prints as its
    JSON text.

    >>> Nested({"name": "a", "ip": [10, 0]})
    {"name":"a","ip":[10,0]}
    """

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    @property
    def kind(self) -> str:
        """``object`` or ``array``."""
        return "object" if isinstance(self.value, dict) else "array"

    def __repr__(self) -> str:
        import orjson

        try:
            return orjson.dumps(self.value).decode()
        except (TypeError, orjson.JSONEncodeError):
            return repr(self.value)

    __str__ = __repr__


class Row:
    """One data row: its 1-based ``number`` among data rows, the ``line`` it starts on,
    and either ``values`` (column -> value) or ``error`` (an :class:`InputError`)."""

    __slots__ = ("number", "line", "values", "error")

    def __init__(self, number: int, line: int | None, values: dict[str, Any] | None,
                 error: InputError | None = None) -> None:
        self.number = number
        self.line = line
        self.values = values
        self.error = error

    def __repr__(self) -> str:
        state = f"error={str(self.error)!r}" if self.error else f"values={self.values!r}"
        return f"Row(number={self.number}, line={self.line}, {state})"


class NotANumber(ValueError):
    """A field of a numeric column is not a number (``args[0]`` is the text)."""


@functools.lru_cache(maxsize=8)
def number_parser(na_values: frozenset[str], decimal: str = ".") -> Callable[[str], Any]:
    """A field of a column known to hold numbers: missing token -> ``MISSING``, number-like
    -> int/float; raises :class:`NotANumber` for anything else.

    With ``decimal=","`` the decimal mark is a comma (``12,8`` is 12.8) and a field with a
    ``.`` is not a number.

    >>> number_parser(frozenset(), ",")("-12,5"), number_parser(frozenset(), ",")("7")
    (-12.5, 7)
    """
    point = number_parser(na_values) if decimal == "," else None

    def comma_number(text: str) -> Any:
        if "." in text and text not in na_values and text.strip() not in na_values:
            raise NotANumber(text)
        assert point is not None
        try:
            return point(text.replace(",", ".", 1) if "," in text else text)
        except NotANumber:
            raise NotANumber(text) from None

    if decimal == ",":
        return comma_number

    def number(text: str) -> Any:
        if text in na_values:
            return MISSING
        if text.isdigit():
            try:
                return int(text)
            except ValueError:  # digits int() does not take, such as superscripts
                raise NotANumber(text) from None
        try:
            value = float(text)
        except ValueError:
            stripped = text.strip()
            if stripped and stripped in na_values:
                return MISSING
            if stripped in BOOLEANS:
                return BOOLEANS[stripped]
            raise NotANumber(text) from None
        if "_" in text:  # float() accepts digit separators; in a data file that is a string
            raise NotANumber(text)
        if value != value:  # "nan" and its spellings: missing, like the tokens
            return MISSING
        if value.is_integer() and text.strip().lstrip("+-").isdigit():
            return int(text)
        return value
    return number


def string_parser(na_values: frozenset[str], noted: dict[str, int] | None = None) -> Callable[[str], Any]:
    """A field of a column known to hold strings: missing token -> ``MISSING``, else the text.

    ``noted`` counts the fields read as missing through a token that pandas reads as text
    (:data:`NOT_PANDAS_NA`: ``?``), so a run can say so.
    """

    def string(text: str) -> Any:
        if text in na_values:
            token = text
        else:
            token = text.strip()
            if not token or token not in na_values:
                return text
        if noted is not None and token in NOT_PANDAS_NA:
            noted[token] = noted.get(token, 0) + 1
        return MISSING
    return string


def parse_value(text: str, na_values: frozenset[str] = DEFAULT_NA_VALUES, decimal: str = ".") -> Any:
    """A CSV field as a value: missing token -> ``MISSING``, number-like -> int/float, else the text.

    >>> [parse_value(s) for s in ["12", "-3.5", "1e3", "", "abc", "1_000", " 7 ", "-4", "2.0", "NA", " ? "]]
    [12, -3.5, 1000.0, nan, 'abc', '1_000', 7, -4, 2.0, nan, nan]
    >>> [parse_value(s, decimal=",") for s in ["12,8", "3", "1.5", "1,2,3"]]
    [12.8, 3, '1.5', '1,2,3']
    >>> [parse_value(s) for s in ["True", "false", " TRUE ", "yes", "T"]]
    [True, False, True, 'yes', 'T']
    """
    try:
        return number_parser(na_values, decimal)(text)
    except NotANumber:
        return text


def detect_format(path: str | None, explicit: str | None = None) -> str | None:
    """``csv`` or ``jsonl`` from ``explicit`` or the file name (``.gz``, ``.bz2``, ``.xz`` ignored); ``None``
    if unknown, as for ``.txt``, which holds either (the reader then goes by the first line)."""
    if explicit:
        key = explicit.lower()
        if key in ("ndjson", "json"):
            key = "jsonl"
        if key not in FORMATS:
            raise ValueError(f"unknown input format {explicit!r}; choose csv or jsonl")
        return key
    if not path or path == "-":
        return None
    name = _uncompressed_name(path)
    if name.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    if name.endswith((".csv", ".tsv", ".tab")):
        return "csv"
    return None


def delimiter_for(path: str | None) -> str | None:
    """The separator a file name implies: tab for ``.tsv``/``.tab`` (``.gz``, ``.bz2``, ``.xz`` ignored), else
    ``None``."""
    if not path or path == "-":
        return None
    return "\t" if _uncompressed_name(path).endswith((".tsv", ".tab")) else None


def _uncompressed_name(path: str) -> str:
    """A file name in lower case without the compressed formats' endings (``data.TSV.xz`` -> ``data.tsv``).

    >>> _uncompressed_name("Data.CSV.bz2"), _uncompressed_name("rows.jsonl.gz"), _uncompressed_name("a.csv")
    ('data.csv', 'rows.jsonl', 'a.csv')
    """
    name = path.lower()
    for ending in (".gz", ".bz2", ".xz"):
        if name.endswith(ending):
            return name[:-len(ending)]
    return name


def noted_missing_summary(source: str, noted_missing: dict[str, dict[str, int]]) -> str | None:
    """One line about values of ``source`` read as missing through a token pandas keeps as text
    (``?``; ``noted_missing``: column -> token -> count), or ``None``: a model trained on data
    pandas read may have learned them as a category."""
    counts = {column: sum(tokens.values()) for column, tokens in noted_missing.items() if tokens}
    if not counts:
        return None
    tokens = sorted({t for found in noted_missing.values() for t in found})
    shown = ", ".join(f"{column!r} ({n:,})" for column, n in sorted(counts.items(), key=lambda kv: -kv[1])[:4])
    more = ", ..." if len(counts) > 4 else ""
    return (f"{source}: {' '.join(repr(t) for t in tokens)} read as missing (UCI's token) in {shown}{more}; "
            "pandas keeps it as text, so a model trained on a frame pandas read may have learned it as a "
            "category: then use --no-default-na (and --na-values for the real tokens)")
