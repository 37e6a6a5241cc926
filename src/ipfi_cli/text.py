"""Text from data, files, models and servers made safe for a terminal.

Column names, values, file names and a server's error message can hold control characters:
``ESC]52;...`` writes the user's clipboard, ``ESC[2J`` clears the screen, a carriage return
overwrites what was shown, a bidirectional override reverses it. :func:`terminal_safe` shows
every such character escaped, as Python writes it in a string (``\\x1b``, ``\\n``, ``\\u202e``),
so a message stays one line and shows what the data holds. Rich markup (``[link=...]``) is
escaped where Rich renders text (:func:`ipfi_cli.cli.ui.rich_safe`).

Traces and events are data, not terminal text: they keep the exact bytes.

>>> terminal_safe("age\\x1b]52;c;aGk=\\x07 [b]x[/b]\\nnext")
'age\\\\x1b]52;c;aGk=\\\\x07 [b]x[/b]\\\\nnext'
>>> terminal_safe("naïve – ✓")
'naïve – ✓'
"""

from __future__ import annotations

import re

#: C0 and C1 controls, DEL, and the bidirectional overrides and isolates
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: object) -> str:
    """``str(text)`` with every control character shown escaped (one line, nothing a terminal obeys)."""
    return _UNSAFE.sub(_escaped, str(text))


#: characters of a value a message quotes whole; a longer one is cut (:func:`quoted`)
QUOTE_LIMIT = 80
#: characters of a message line kept whole; a longer line loses its middle (:func:`message_line`)
LINE_LIMIT = 2000


def quoted(value: object, limit: int = QUOTE_LIMIT) -> str:
    """A value from data as a message quotes it (``repr``), cut after ``limit`` characters with an
    ellipsis and its full length, so a 100 kB field gives a readable line.

    >>> quoted("abc"), quoted(12)
    ("'abc'", '12')
    >>> quoted("x" * 500)
    "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…' (500 characters)"
    """
    if isinstance(value, str) and len(value) > limit:
        return repr(value[:limit])[:-1] + "…" + repr(value[:limit])[-1] + f" ({len(value):,} characters)"
    text = repr(value)
    if len(text) > limit + 2:
        return text[:limit] + f"… ({len(text):,} characters)"
    return text


def message_line(text: object, limit: int = LINE_LIMIT) -> str:
    """A message as the one line a user sees: :func:`terminal_safe`, and a line longer than ``limit``
    cut in its middle (where the data a message quotes is; where and what to do are at its ends).

    >>> message_line("data.csv: row 1: got '" + "x" * 5000 + "'; use --text", limit=60)
    "data.csv: row 1: got 'xxxxxxxx… (4,985 characters cut) …xxxxxxx'; use --text"
    """
    line = terminal_safe(text)
    if len(line) <= limit:
        return line
    head, tail = limit // 2, limit // 3
    return f"{line[:head]}… ({len(line) - head - tail:,} characters cut) …{line[-tail:]}"
