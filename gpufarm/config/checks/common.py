"""Helpers the checks of several sections share."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

from gpufarm.config.errors import ConfigIssue


def _quoted(values: list[str] | tuple[str, ...]) -> str:
    return ", ".join(repr(v) for v in values)


def _repeats(path: str, values: list[str], rule: str) -> Iterator[ConfigIssue]:
    """One issue per value listed more than once."""
    for value, count in Counter(values).items():
        if count > 1:
            yield ConfigIssue(path=path, message=f"{rule}, got {value!r} {count} times")


def _unique_ids(path: str, names: list[str]) -> Iterator[ConfigIssue]:
    """Names that differ only in '-' map to the same construct ID, so one would overwrite the other."""
    seen: dict[str, str] = {}
    for i, name in enumerate(names):
        key = name.replace("-", "")
        if key in seen and seen[key] != name:
            yield ConfigIssue(
                path=f"{path}[{i}].name",
                message=f"must differ from {seen[key]!r} by more than hyphens "
                f"(both map to the resource name {key!r}), got {name!r}",
            )
        seen.setdefault(key, name)


_INSTANCE_TYPE = re.compile(r"^([a-z]+)(\d{1,2})([a-z-]*)\.([a-z0-9-]+)$")
"""An EC2 instance type as aws-cdk-lib reads it (`InstanceType.architecture` in
aws-cdk-lib@2.275.0 aws-ec2/lib/instance-types.ts): family letters, generation, capabilities,
then the size. Anything else makes the CDK throw "Malformed instance type identifier"."""


def _instance_architecture(instance_type: str) -> str | None:
    """'arm64' or 'x86_64' the way aws-cdk-lib decides it; None for a malformed type.

    The CDK calls a type ARM when its family is `a` (a1) or its capabilities contain `g`
    (m7g, c6gn, r8gd): the same test here, so the config and the CDK never disagree.
    """
    match = _INSTANCE_TYPE.match(instance_type)
    if match is None:
        return None
    family, _, capabilities, _ = match.groups()
    return "arm64" if family == "a" or "g" in capabilities else "x86_64"
