"""Which columns are explained, alone or permuted jointly in named groups."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def resolve_groups(
    columns: Sequence[str],
    features: Sequence[str] | None = None,
    groups: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, list[int]]:
    """Map each explained name to the column positions it permutes.

    ``features`` are explained one by one (default: every column); each entry of
    ``groups`` is permuted jointly from one sampled row and reported under its name.
    A column in a group is not also reported on its own. Names keep column order,
    a group standing where its first column stands.

    >>> resolve_groups(["a", "b", "c"], groups={"bc": ["b", "c"]})
    {'a': [0], 'bc': [1, 2]}
    >>> resolve_groups(["a", "b", "c"], features=["c", "a"])
    {'a': [0], 'c': [2]}
    """
    columns = list(columns)
    if len(set(columns)) != len(columns):
        duplicates = sorted({c for c in columns if columns.count(c) > 1})
        raise ValueError(f"duplicate column names: {', '.join(duplicates)}")
    position = {name: i for i, name in enumerate(columns)}

    def check(names: Sequence[str], where: str) -> list[int]:
        missing = [n for n in names if n not in position]
        if missing:
            raise ValueError(f"{where} names unknown column(s): {', '.join(map(str, missing))}; "
                             f"columns are: {', '.join(columns)}")
        return [position[n] for n in names]

    groups = dict(groups or {})
    grouped: dict[int, str] = {}
    for name, members in groups.items():
        if not members:
            raise ValueError(f"group {name!r} has no columns")
        if name in position and list(members) != [name]:
            raise ValueError(f"group name {name!r} is also a column name")
        for index in check(list(members), f"group {name!r}"):
            if index in grouped:
                raise ValueError(f"column {columns[index]!r} is in groups {grouped[index]!r} and {name!r}")
            grouped[index] = name
    singles = check(list(features), "features") if features is not None else list(range(len(columns)))

    resolved: dict[str, list[int]] = {}
    for index in sorted(set(singles) | set(grouped)):
        if index in grouped:
            name = grouped[index]
            if name not in resolved:
                resolved[name] = sorted(position[c] for c in groups[name])
        else:
            resolved[columns[index]] = [index]
    if not resolved:
        raise ValueError("nothing to explain: no features and no groups")
    return resolved
