"""A stack template of a cloud assembly, read through :func:`gpufarm.assembly.read_assembly`, and
its values: intrinsic functions rendered as text, the logical IDs a value refers to."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufarm.assembly import AssemblyError, read_assembly

# --------------------------------------------------------------------------- assemblies


_IGNORED_TYPES = frozenset({"AWS::CDK::Metadata"})


@dataclass(frozen=True, kw_only=True)
class StackTemplate:
    """One CloudFormation stack of an assembly."""

    name: str
    region: str
    template: dict[str, Any]

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        """Logical ID -> resource, without CDK's own metadata resource."""
        found = self.template.get("Resources", {}) or {}
        return {k: v for k, v in found.items() if v.get("Type") not in _IGNORED_TYPES}


def load_assembly(path: str | Path) -> dict[str, StackTemplate]:
    """Stack name -> template of every stack in a cloud assembly folder (nested assemblies too).

    Reads it with :func:`gpufarm.assembly.read_assembly`; raises :class:`AssemblyError` as it
    does, and when the folder holds no CloudFormation stack.
    """
    stacks = {
        stack.name: StackTemplate(name=stack.name, region=stack.region, template=stack.template)
        for stack in read_assembly(path)
    }
    if not stacks:
        raise AssemblyError(f"{str(Path(path))!r} holds no CloudFormation stack")
    return stacks


# --------------------------------------------------------------------------- rendering values


def render(value: Any) -> str:
    """A template value as text: intrinsic functions shown as `${Ref}` / `${Id.Attr}` / joined parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float) or value is None:
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(render(v) for v in value) + "]"
    if isinstance(value, dict) and len(value) == 1:
        ((key, arg),) = value.items()
        if key == "Ref":
            return f"${{{arg}}}"
        if key == "Fn::GetAtt":
            parts = arg if isinstance(arg, list) else str(arg).split(".", 1)
            return f"${{{'.'.join(render(p) for p in parts)}}}"
        if key == "Fn::Join" and isinstance(arg, list) and len(arg) == 2 and isinstance(arg[1], list):
            return str(arg[0]).join(render(p) for p in arg[1])
        if key == "Fn::Sub":
            return str(arg[0] if isinstance(arg, list) else arg)
        if key == "Fn::ImportValue":
            return f"${{Import:{render(arg)}}}"
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


_SUB_REF = re.compile(r"\$\{([A-Za-z0-9]+)(?:\.[A-Za-z0-9.]+)?\}")


def references(value: Any) -> set[str]:
    """Logical IDs a template value refers to (Ref, Fn::GetAtt, Fn::Sub)."""
    out: set[str] = set()
    if isinstance(value, list):
        for item in value:
            out |= references(item)
    elif isinstance(value, dict):
        for key, arg in value.items():
            if key == "Ref" and isinstance(arg, str):
                out.add(arg)
            elif key == "Fn::GetAtt":
                out.add(str(arg[0] if isinstance(arg, list) else str(arg).split(".", 1)[0]))
            elif key == "Fn::Sub":
                text = arg[0] if isinstance(arg, list) else arg
                out |= set(_SUB_REF.findall(str(text)))
                if isinstance(arg, list) and len(arg) > 1:
                    out |= references(arg[1])
            else:
                out |= references(arg)
    return {r for r in out if not r.startswith("AWS::")}
