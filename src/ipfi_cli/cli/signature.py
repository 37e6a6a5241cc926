"""A command's options as per-panel parameter lists, and the builders that turn them into values.

Typer reads a command's options from ``inspect.signature``: :func:`with_options` gives a function
taking ``**options`` the signature made of its panels' lists (:func:`option` each), in order, so
that a panel's options are declared once, in the panel's module, beside the builder of its value.
:func:`build` calls such a builder with the options it names.

>>> def every_of(every: int) -> int:
...     return every * 2
>>> @with_options([option("every", int, 1)])
... def command(**options: Any) -> int:
...     return build(every_of, options)
>>> import inspect
>>> str(inspect.signature(command)), command(every=3)
('(*, every: int = 1) -> None', 6)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def option(name: str, annotation: Any, default: Any = inspect.Parameter.empty) -> inspect.Parameter:
    """One option (or argument) of a command: its parameter name, its ``Annotated`` Typer alias, its default."""
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def with_options(*panels: Sequence[inspect.Parameter]) -> Callable[[F], F]:
    """Give a ``**options`` function the signature of its panels' options (Typer's command line)."""
    parameters = [parameter for panel in panels for parameter in panel]

    def declare(function: F) -> F:
        function.__signature__ = inspect.Signature(parameters, return_annotation=None)  # type: ignore[attr-defined]
        function.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": None}
        return function

    return declare


def build(builder: Callable[..., T], options: Mapping[str, Any]) -> T:
    """``builder`` called with the ``options`` its parameters name (each builder takes its panel's options)."""
    return builder(**{name: options[name] for name in inspect.signature(builder).parameters if name in options})
