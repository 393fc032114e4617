"""Before -> after values: of a resource's properties, of the Kubernetes objects a manifest
applies, and of the tier config a template carries in its metadata."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gpufarm.review.templates import references, render

_INTRINSICS = frozenset(
    {"Ref", "Fn::GetAtt", "Fn::Join", "Fn::Sub", "Fn::ImportValue", "Fn::Select", "Fn::If", "Fn::Base64"}
)
_LONGEST = 160
"""Longest value shown in full; longer ones are cut in the middle."""


@dataclass(frozen=True, kw_only=True)
class ValueChange:
    """One value that changes: its path, and its value before and after (None: absent)."""

    path: str
    before: str | None
    after: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {"path": self.path, "before": self.before, "after": self.after}

    def text(self) -> str:
        """`path: before → after`, `(absent)` for a missing side."""
        return f"{self.path}: {_absent(self.before)} → {_absent(self.after)}"


def _absent(value: str | None) -> str:
    return "(absent)" if value is None else value


def shown(value: Any) -> str:
    """A value as the report shows it: intrinsics rendered, long values cut in the middle."""
    text = render(value)
    if len(text) > _LONGEST:
        half = (_LONGEST - 5) // 2
        text = f"{text[:half]} … {text[-half:]}"
    return text


def _is_leaf(value: Any) -> bool:
    if isinstance(value, Mapping):
        return len(value) == 1 and next(iter(value)) in _INTRINSICS
    return not isinstance(value, list)


def _keyed(items: list[Any]) -> dict[str, Any] | None:
    """A list of objects that each have a distinct `name` (containers, env, ports) as name -> item."""
    if not items or not all(isinstance(i, Mapping) and isinstance(i.get("name"), str) for i in items):
        return None
    names = [str(i["name"]) for i in items]
    return dict(zip(names, items, strict=True)) if len(set(names)) == len(names) else None


def diff_values(before: Any, after: Any, path: str = "") -> Iterator[ValueChange]:
    """Every leaf that differs between two JSON values, by dotted path (`a.b[0].c`, `containers[vllm]`)."""
    if before == after:
        return
    if (
        isinstance(before, Mapping)
        and isinstance(after, Mapping)
        and not (_is_leaf(before) or _is_leaf(after))
    ):
        for key in sorted(set(before) | set(after), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in before:
                yield ValueChange(path=sub, before=None, after=shown(after[key]))
            elif key not in after:
                yield ValueChange(path=sub, before=shown(before[key]), after=None)
            else:
                yield from diff_values(before[key], after[key], sub)
        return
    if isinstance(before, list) and isinstance(after, list):
        old_named, new_named = _keyed(before), _keyed(after)
        if old_named is not None and new_named is not None:
            for name in [*old_named, *(n for n in new_named if n not in old_named)]:
                sub = f"{path}[{name}]"
                if name not in new_named:
                    yield ValueChange(path=sub, before=shown(old_named[name]), after=None)
                elif name not in old_named:
                    yield ValueChange(path=sub, before=None, after=shown(new_named[name]))
                else:
                    yield from diff_values(old_named[name], new_named[name], sub)
            return
        if len(before) == len(after):
            for i, (old, new) in enumerate(zip(before, after, strict=True)):
                yield from diff_values(old, new, f"{path}[{i}]")
            return
    yield ValueChange(path=path or "(value)", before=shown(before), after=shown(after))


def property_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[ValueChange, ...]:
    """Before -> after of every property (and resource attribute) that changes, leaf by leaf.

    A JSON document held in a string (a Helm chart's values) is compared inside; a Kubernetes
    manifest is left to :func:`manifest_changes`.
    """
    out: list[ValueChange] = []
    old_props, new_props = old.get("Properties") or {}, new.get("Properties") or {}
    for name in sorted(set(old_props) | set(new_props)):
        before, after = old_props.get(name), new_props.get(name)
        if before == after:
            continue
        if name == "Manifest" and str(new.get("Type", old.get("Type"))).endswith("KubernetesResource"):
            continue
        if name not in new_props or name not in old_props:
            out.append(
                ValueChange(
                    path=name,
                    before=shown(before) if name in old_props else None,
                    after=shown(after) if name in new_props else None,
                )
            )
            continue
        out += diff_values(_parsed(before), _parsed(after), name)
    for attribute in ("DeletionPolicy", "UpdateReplacePolicy", "Condition"):
        if old.get(attribute) != new.get(attribute):
            out += diff_values(old.get(attribute), new.get(attribute), attribute)
    return tuple(out)


def reference_changes(properties: Mapping[str, Any], replaced: set[str]) -> tuple[ValueChange, ...]:
    """The values, unchanged as written, that refer to a replaced resource: each resolves to the
    new resource's ID or attribute at deploy (`ClusterName: ${Cluster} → new value`)."""
    out = []
    for name in sorted(properties):
        for path, leaf in _leaves(properties[name], name):
            hit = sorted(references(leaf) & replaced)
            if hit:
                out.append(
                    ValueChange(
                        path=path, before=shown(leaf), after=f"new value ({', '.join(hit)} is replaced)"
                    )
                )
    return tuple(out)


def _leaves(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping) and not _is_leaf(value):
        for key in sorted(value, key=str):
            yield from _leaves(value[key], f"{path}.{key}")
    elif isinstance(value, list):
        named = _keyed(value)
        for index, item in enumerate(value):
            yield from _leaves(item, f"{path}[{list(named)[index] if named else index}]")
    else:
        yield path, value


def _parsed(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


# --------------------------------------------------------------------------- Kubernetes manifests


@dataclass(frozen=True, kw_only=True)
class ObjectChange:
    """A Kubernetes object a manifest adds, removes or changes, with its field changes."""

    kind: str
    name: str
    namespace: str
    change: str
    """'added', 'removed' or 'modified'."""
    fields: tuple[ValueChange, ...] = ()

    @property
    def label(self) -> str:
        """`Kind namespace/name` (`Kind name` for a cluster-scoped object)."""
        return f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "kind": self.kind,
            "namespace": self.namespace or None,
            "name": self.name,
            "change": self.change,
            "fields": [f.to_dict() for f in self.fields],
        }


def manifest_objects(value: Any) -> dict[tuple[str, str, str], dict[str, Any]] | None:
    """The objects of a kubectl provider `Manifest` (a JSON list, as text or joined with tokens),
    keyed by (kind, namespace, name); None when it cannot be read."""
    if isinstance(value, Mapping) and list(value) == ["Fn::Join"]:
        value = render(value)
    if not isinstance(value, str):
        return None
    try:
        document = json.loads(value)
    except ValueError:
        return None
    items = document if isinstance(document, list) else [document]
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for item in items:
        if not isinstance(item, dict):
            return None
        metadata = item.get("metadata") or {}
        key = (str(item.get("kind", "")), str(metadata.get("namespace", "")), str(metadata.get("name", "")))
        out[key] = item
    return out


# Fields the provider or CDK writes that say nothing about the object's behaviour.
_NOISE_LABEL = "aws.cdk.eks/prune-"


def _without_noise(item: Mapping[str, Any]) -> dict[str, Any]:
    copy = json.loads(json.dumps(item))
    labels = (copy.get("metadata") or {}).get("labels") or {}
    for key in [k for k in labels if k.startswith(_NOISE_LABEL)]:
        del labels[key]
    return dict(copy)


def manifest_changes(before: Any, after: Any) -> tuple[ObjectChange, ...] | None:
    """The semantic diff of two manifests: objects added, removed and changed, field by field
    (`spec.replicas: 1 → 2`). None when either side cannot be read as Kubernetes objects."""
    old, new = manifest_objects(before), manifest_objects(after)
    if old is None or new is None:
        return None
    out: list[ObjectChange] = []
    for key in [*old, *(k for k in new if k not in old)]:
        kind, namespace, name = key
        if key not in new:
            out.append(ObjectChange(kind=kind, namespace=namespace, name=name, change="removed"))
        elif key not in old:
            out.append(ObjectChange(kind=kind, namespace=namespace, name=name, change="added"))
        else:
            fields = tuple(diff_values(_without_noise(old[key]), _without_noise(new[key])))
            if fields:
                out.append(
                    ObjectChange(kind=kind, namespace=namespace, name=name, change="modified", fields=fields)
                )
    return tuple(out)


# --------------------------------------------------------------------------- tier config


def tier_changes(
    before: Mapping[str, Any] | None, after: Mapping[str, Any] | None
) -> tuple[ValueChange, ...]:
    """The tier config's fields that change (`models[0].replicas: 1 → 2`), from each template's
    `Metadata["gpufarm:tier"]`; lists compared by position, as the config file writes them."""
    if before is None or after is None:
        return ()
    return tuple(_tier_diff(before, after, ""))


def _tier_diff(before: Any, after: Any, path: str) -> Iterator[ValueChange]:
    if before == after:
        return
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        for key in sorted(set(before) | set(after)):
            sub = f"{path}.{key}" if path else str(key)
            if key not in before:
                yield ValueChange(path=sub, before=None, after=_yamlish(after[key]))
            elif key not in after:
                yield ValueChange(path=sub, before=_yamlish(before[key]), after=None)
            else:
                yield from _tier_diff(before[key], after[key], sub)
        return
    if isinstance(before, list) and isinstance(after, list) and before and after:
        # By position, as the file writes them; an item added or dropped at the end is one row.
        for i in range(max(len(before), len(after))):
            sub = f"{path}[{i}]"
            if i >= len(before):
                yield ValueChange(path=sub, before=None, after=_yamlish(after[i]))
            elif i >= len(after):
                yield ValueChange(path=sub, before=_yamlish(before[i]), after=None)
            else:
                yield from _tier_diff(before[i], after[i], sub)
        return
    yield ValueChange(path=path, before=_yamlish(before), after=_yamlish(after))


def _yamlish(value: Any) -> str:
    """A config value as a user writes it: strings bare, the rest as JSON."""
    return value if isinstance(value, str) else shown(value)
