"""Resources added, removed, modified and replaced between two versions of a stack."""

from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gpufarm.review.resource_classes import CreateOnlyProperties, is_critical
from gpufarm.review.rules import reference_url, rules_for
from gpufarm.review.templates import StackTemplate, references, render
from gpufarm.review.values import (
    ObjectChange,
    ValueChange,
    manifest_changes,
    property_changes,
    reference_changes,
)


def _get(properties: Mapping[str, Any], dotted: str) -> Any:
    """The value at a dotted property path ('A.B'), None when absent."""
    return _at(properties, "/properties/" + dotted.replace(".", "/"))


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
            "reference": reference_url(self.resource_type) if rules_for(self.resource_type) else None,
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
    values: tuple[ValueChange, ...] = ()
    """Before -> after of each changed property, leaf by leaf."""
    objects: tuple[ObjectChange, ...] | None = None
    """A Kubernetes manifest's objects added, removed and changed (None: not a readable manifest)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        out: dict[str, Any] = {
            "logical_id": self.logical_id,
            "new_logical_id": self.new_logical_id,
            "type": self.resource_type,
            "change": self.change,
            "properties": list(self.properties),
            "values": [v.to_dict() for v in self.values],
        }
        if self.objects is not None:
            out["kubernetes"] = [o.to_dict() for o in self.objects]
        return out


@dataclass(frozen=True, kw_only=True)
class DeployFailure:
    """A change CloudFormation or the service refuses: the deploy fails and the stack rolls back."""

    logical_id: str
    resource_type: str
    reason: str
    fix: str
    source: str
    """The documentation the rule comes from."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "logical_id": self.logical_id,
            "type": self.resource_type,
            "reason": self.reason,
            "fix": self.fix,
            "source": self.source,
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
    failures: list[DeployFailure]


_CUSTOM_NAMES = (
    "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-name.html"
)
_EKS_VPC = "https://docs.aws.amazon.com/eks/latest/userguide/network_reqs.html"


def _modified(
    lid: str,
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    change: str,
    props: tuple[str, ...],
    replaced: set[str],
) -> ResourceChange:
    objects = None
    if str(new.get("Type")).endswith("KubernetesResource"):
        objects = manifest_changes(
            (old.get("Properties") or {}).get("Manifest"), (new.get("Properties") or {}).get("Manifest")
        )
    return ResourceChange(
        logical_id=lid,
        resource_type=str(new["Type"]),
        change=change,
        properties=props,
        values=property_changes(old, new) or reference_changes(new.get("Properties") or {}, replaced),
        objects=objects,
    )


def _dependents(
    old: Mapping[str, Mapping[str, Any]],
    new: Mapping[str, Mapping[str, Any]],
    replaced: set[str],
    listed: set[str],
) -> list[ResourceChange]:
    """Resources whose template text is unchanged but whose properties refer to a replaced
    resource: CloudFormation updates them with the new resource's ID or attribute at deploy."""
    out = []
    for lid in sorted((set(old) & set(new)) - listed):
        values = reference_changes(new[lid].get("Properties") or {}, replaced)
        if values:
            out.append(
                ResourceChange(
                    logical_id=lid,
                    resource_type=str(new[lid]["Type"]),
                    change="modified",
                    properties=tuple(dict.fromkeys(v.path.split(".")[0].split("[")[0] for v in values)),
                    values=values,
                )
            )
    return out


def _name_kept(
    replacement: Replacement, old: Mapping[str, Any], new: Mapping[str, Any], replaced: set[str]
) -> DeployFailure | None:
    """A replacement that keeps a custom name: CloudFormation cannot create the new resource."""
    rules = rules_for(replacement.resource_type)
    if rules is None or not rules.names:
        return None
    old_props, new_props = old.get("Properties") or {}, new.get("Properties") or {}
    name = _get(new_props, rules.names[0])
    if name is None:
        return None
    for prop in rules.names:
        value = _get(new_props, prop)
        if value != _get(old_props, prop) or references(value) & replaced:
            return None
    shown = f"'{render(name)}'"
    how = (
        f"its logical ID changes to {replacement.new_logical_id}"
        if replacement.new_logical_id
        else replacement.reason
    )
    return DeployFailure(
        logical_id=replacement.logical_id,
        resource_type=replacement.resource_type,
        reason=(
            f"{how}, so CloudFormation must replace it, but it keeps its custom name "
            f"({rules.names[0]}) {shown}: CloudFormation cannot replace a custom-named resource "
            '("CloudFormation cannot update a stack when a custom-named resource requires replacing"), '
            "so this deploy will fail and roll back"
        ),
        fix=rules.fix
        or f"give the new resource another {rules.names[0]} (or none), or revert the change that replaces it",
        source=f"{_CUSTOM_NAMES}; {reference_url(replacement.resource_type)}",
    )


def _vpc_moves(
    old: Mapping[str, Mapping[str, Any]], new: Mapping[str, Mapping[str, Any]], replaced: set[str]
) -> list[DeployFailure]:
    """Resources updated in place to subnets or security groups of a replaced VPC."""
    vpcs = {lid for lid in replaced if str(new.get(lid, {}).get("Type")) == "AWS::EC2::VPC"}
    out = []
    for lid in sorted(set(old) & set(new)):
        rtype = str(new[lid].get("Type"))
        rules = rules_for(rtype)
        if rules is None or not rules.same_vpc or lid in replaced:
            continue
        props = new[lid].get("Properties") or {}
        moved = sorted(
            ref
            for path in rules.same_vpc
            for ref in references(_get(props, path))
            if ref in replaced and references((new.get(ref, {}).get("Properties") or {}).get("VpcId")) & vpcs
        )
        if moved:
            vpc = min(vpcs)
            out.append(
                DeployFailure(
                    logical_id=lid,
                    resource_type=rtype,
                    reason=(
                        f"{' / '.join(rules.same_vpc)} move to {', '.join(moved)} of the replaced VPC {vpc}: "
                        "the resource is updated in place, but an EKS cluster stays in the VPC it was "
                        "created in (its subnets change only within that VPC), so this deploy will fail "
                        "and roll back"
                    ),
                    fix=(
                        "keep the network (`network.cidr`) of a running tier; to move to a new network, "
                        "deploy a tier with a new `name` beside it, move traffic, then destroy the old stack"
                    ),
                    source=f"{_EKS_VPC}; {reference_url(rtype)}",
                )
            )
    return out


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
        changes.append(_modified(lid, old[lid], new[lid], change, props, set(reasons)))
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
                        values=property_changes(old[old_id], new[new_id]),
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
    replaced = set(reasons) | {r.logical_id for r in replacements}
    changes += _dependents(old, new, set(reasons), {c.logical_id for c in changes})
    failures = [
        failure
        for r in replacements
        if (r.new_logical_id or r.logical_id) in new
        if (failure := _name_kept(r, old[r.logical_id], new[r.new_logical_id or r.logical_id], replaced))
    ]
    failures += _vpc_moves(old, new, set(reasons))
    return _ResourceDiff(changes=changes, replacements=replacements, failures=failures)
