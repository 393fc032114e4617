"""Resources added, removed, modified and replaced between two versions of a stack."""

from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gpufarm.review.resource_classes import CreateOnlyProperties, is_critical
from gpufarm.review.templates import StackTemplate, references


def _at(properties: Mapping[str, Any], path: str) -> Any:
    """The value at a schema path ('/properties/A/B'), cut at the first array wildcard."""
    node: Any = properties
    for part in path.split("/")[2:]:
        if part == "*" or not isinstance(node, Mapping):
            break
        node = node.get(part)
        if node is None:
            return None
    return node


@dataclass(frozen=True, kw_only=True)
class Replacement:
    """A resource CloudFormation will create anew (and delete the old one)."""

    logical_id: str
    resource_type: str
    reason: str
    new_logical_id: str | None = None
    deletion_policy: str = "Delete"
    """The policy that decides the old resource's fate: its UpdateReplacePolicy when a create-only
    property changes, its DeletionPolicy when its logical ID goes."""

    @property
    def critical(self) -> bool:
        """Stateful or traffic-bearing."""
        return is_critical(self.resource_type)

    @property
    def old_resource(self) -> str:
        """What becomes of the old resource: 'deleted', 'retained' or 'snapshot'."""
        return {"Retain": "retained", "RetainExceptOnCreate": "retained", "Snapshot": "snapshot"}.get(
            self.deletion_policy, "deleted"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "logical_id": self.logical_id,
            "new_logical_id": self.new_logical_id,
            "type": self.resource_type,
            "reason": self.reason,
            "critical": self.critical,
            "deletion_policy": self.deletion_policy,
            "old_resource": self.old_resource,
        }


@dataclass(frozen=True, kw_only=True)
class ResourceChange:
    """A resource added, removed or modified (in place or by replacement)."""

    logical_id: str
    resource_type: str
    change: str
    """'added', 'removed', 'modified' or 'replaced'."""
    properties: tuple[str, ...] = ()
    """Properties (and resource attributes) whose value changes."""
    new_logical_id: str | None = None
    """The logical ID that takes over, when a replacement comes from a logical ID change."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "logical_id": self.logical_id,
            "new_logical_id": self.new_logical_id,
            "type": self.resource_type,
            "change": self.change,
            "properties": list(self.properties),
        }


def _changed_properties(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[str, ...]:
    old_props, new_props = old.get("Properties") or {}, new.get("Properties") or {}
    names = sorted(k for k in set(old_props) | set(new_props) if old_props.get(k) != new_props.get(k))
    for attribute in ("DeletionPolicy", "UpdateReplacePolicy", "Condition"):
        if old.get(attribute) != new.get(attribute):
            names.append(attribute)
    return tuple(names)


def _path_label(path: str) -> str:
    return ".".join(path.split("/")[2:])


def _pair(removed: list[str], added: list[str], paths: Mapping[str, str]) -> Iterator[tuple[str, str | None]]:
    """Match removed logical IDs with added ones of the same type, by construct path similarity."""
    free = list(added)
    for old in removed:
        if not free:
            yield old, None
            continue
        best = max(
            free,
            key=lambda new: difflib.SequenceMatcher(None, paths.get(old, old), paths.get(new, new)).ratio(),
        )
        free.remove(best)
        yield old, best


def _cdk_paths(resources: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    return {k: str((v.get("Metadata") or {}).get("aws:cdk:path", k)) for k, v in resources.items()}


@dataclass(frozen=True, kw_only=True)
class _ResourceDiff:
    changes: list[ResourceChange]
    replacements: list[Replacement]


def diff_resources(
    base: StackTemplate, head: StackTemplate, create_only: CreateOnlyProperties
) -> _ResourceDiff:
    """Resources added, removed, modified and replaced between two versions of a stack."""
    old, new = base.resources, head.resources
    changes: list[ResourceChange] = []
    reasons: dict[str, str] = {}
    modified: dict[str, tuple[str, ...]] = {}
    for lid in sorted(set(old) & set(new)):
        props = _changed_properties(old[lid], new[lid])
        if old[lid].get("Type") != new[lid].get("Type"):
            reasons[lid] = f"type changes to {new[lid].get('Type')}"
        elif props:
            rtype = str(new[lid]["Type"])
            forced = [
                p
                for p in create_only.paths(rtype, head.region)
                if _at(old[lid].get("Properties") or {}, p) != _at(new[lid].get("Properties") or {}, p)
            ]
            if forced:
                reasons[lid] = "create-only " + ", ".join(_path_label(p) for p in forced) + " changes"
        if props or lid in reasons:
            modified[lid] = props
    # A create-only property that refers to a replaced resource gets a new value at deploy time.
    grew = True
    while grew:
        grew = False
        for lid in sorted(set(old) & set(new)):
            if lid in reasons:
                continue
            rtype = str(new[lid].get("Type"))
            for p in create_only.paths(rtype, head.region):
                hit = sorted(references(_at(new[lid].get("Properties") or {}, p)) & set(reasons))
                if hit:
                    reasons[lid] = f"create-only {_path_label(p)} refers to replaced {hit[0]}"
                    modified.setdefault(lid, (_path_label(p).split(".")[0],))
                    grew = True
                    break
    replacements = [
        Replacement(
            logical_id=lid,
            resource_type=str(new[lid]["Type"]),
            reason=reason,
            deletion_policy=str(old[lid].get("UpdateReplacePolicy", "Delete")),
        )
        for lid, reason in sorted(reasons.items())
    ]
    for lid, props in sorted(modified.items()):
        change = "replaced" if lid in reasons else "modified"
        changes.append(
            ResourceChange(
                logical_id=lid, resource_type=str(new[lid]["Type"]), change=change, properties=props
            )
        )
    removed_by_type: dict[str, list[str]] = defaultdict(list)
    added_by_type: dict[str, list[str]] = defaultdict(list)
    for lid in sorted(set(old) - set(new)):
        removed_by_type[str(old[lid]["Type"])].append(lid)
        changes.append(ResourceChange(logical_id=lid, resource_type=str(old[lid]["Type"]), change="removed"))
    for lid in sorted(set(new) - set(old)):
        added_by_type[str(new[lid]["Type"])].append(lid)
        changes.append(ResourceChange(logical_id=lid, resource_type=str(new[lid]["Type"]), change="added"))
    paths = {**_cdk_paths(old), **_cdk_paths(new)}
    for rtype, removed in sorted(removed_by_type.items()):
        for old_id, new_id in _pair(removed, added_by_type.get(rtype, []), paths):
            policy = str(old[old_id].get("DeletionPolicy", "Delete"))
            if new_id is not None:
                changes = [c for c in changes if c.logical_id not in {old_id, new_id}]
                changes.append(
                    ResourceChange(
                        logical_id=old_id,
                        new_logical_id=new_id,
                        resource_type=rtype,
                        change="replaced",
                        properties=_changed_properties(old[old_id], new[new_id]),
                    )
                )
                replacements.append(
                    Replacement(
                        logical_id=old_id,
                        new_logical_id=new_id,
                        resource_type=rtype,
                        reason=f"logical ID changes to {new_id}",
                        deletion_policy=policy,
                    )
                )
            elif is_critical(rtype):
                replacements.append(
                    Replacement(
                        logical_id=old_id,
                        resource_type=rtype,
                        reason="removed"
                        + (
                            " (retained in the account, no longer managed)"
                            if policy.startswith("Retain")
                            else ""
                        ),
                        deletion_policy=policy,
                    )
                )
    replacements.sort(key=lambda r: (not r.critical, r.resource_type, r.logical_id))
    return _ResourceDiff(changes=changes, replacements=replacements)
