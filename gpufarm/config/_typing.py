"""Reading the config models' type hints (shared by the error messages and the reference)."""

from __future__ import annotations

import types
import typing
from typing import Any


def split_optional(annotation: Any) -> tuple[Any, bool]:
    """`X | None` -> (X, True); `X | Y | None` -> (X | Y, True); anything else -> (annotation, False)."""
    if is_union(annotation):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) < len(typing.get_args(annotation)):
            return (members[0] if len(members) == 1 else typing.Union[tuple(members)]), True  # noqa: UP007
    return annotation, False


def is_union(annotation: Any) -> bool:
    """True for `X | Y` and `typing.Union[X, Y]`."""
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)
