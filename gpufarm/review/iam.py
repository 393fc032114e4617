"""IAM grants (principal, effect, action, resource) of a stack, with wildcards flagged."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gpufarm.review.templates import StackTemplate, render

_BROAD_MANAGED = re.compile(r"(AdministratorAccess|PowerUserAccess|FullAccess)$")


@dataclass(frozen=True, kw_only=True, order=True)
class IamGrant:
    """One permission: a principal may (or may not) do an action on a resource."""

    principal: str
    """Logical ID of the role (or user, group, policy) that holds the grant."""
    kind: str
    """'permission', 'trust' (who may assume the role) or 'managed-policy'."""
    effect: str
    action: str
    resource: str
    conditional: bool = False
    via: str = ""
    """The policy resource that carries the grant, when not the role itself."""

    @property
    def wildcard(self) -> bool:
        """A wildcard action, any resource, a NotAction/NotResource, or a broad managed policy."""
        if self.effect != "Allow":
            return False
        if self.kind == "managed-policy":
            return bool(_BROAD_MANAGED.search(self.resource))
        if self.kind == "trust":
            return self.resource in {"AWS: *", "*"}
        return (
            "*" in self.action
            or self.resource == "*"
            or self.action.startswith("NOT ")
            or self.resource.startswith("NOT ")
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "principal": self.principal,
            "via": self.via,
            "kind": self.kind,
            "effect": self.effect,
            "action": self.action,
            "resource": self.resource,
            "conditional": self.conditional,
            "wildcard": self.wildcard,
        }


def _listed(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _statements(document: Any) -> list[Mapping[str, Any]]:
    if not isinstance(document, Mapping):
        return []
    return [s for s in _listed(document.get("Statement")) if isinstance(s, Mapping)]


def _permission_grants(principal: str, via: str, document: Any) -> Iterator[IamGrant]:
    for statement in _statements(document):
        effect = str(statement.get("Effect", "Allow"))
        conditional = bool(statement.get("Condition"))
        actions = [render(a) for a in _listed(statement.get("Action"))] or [
            "NOT " + render(a) for a in _listed(statement.get("NotAction"))
        ]
        resources = [render(r) for r in _listed(statement.get("Resource"))] or [
            "NOT " + render(r) for r in _listed(statement.get("NotResource"))
        ]
        for action in actions:
            for resource in resources or ["*"]:
                yield IamGrant(
                    principal=principal,
                    via=via,
                    kind="permission",
                    effect=effect,
                    action=action,
                    resource=resource,
                    conditional=conditional,
                )


def _trust_grants(principal: str, document: Any) -> Iterator[IamGrant]:
    for statement in _statements(document):
        who = statement.get("Principal")
        entries: list[str] = []
        if isinstance(who, Mapping):
            for kind, values in who.items():
                entries += [f"{kind}: {render(v)}" for v in _listed(values)]
        elif who is not None:
            entries.append(render(who))
        for action in _listed(statement.get("Action")) or ["sts:AssumeRole"]:
            for entry in entries:
                yield IamGrant(
                    principal=principal,
                    kind="trust",
                    effect=str(statement.get("Effect", "Allow")),
                    action=render(action),
                    resource=entry,
                    conditional=bool(statement.get("Condition")),
                )


def iam_grants(stack: StackTemplate) -> set[IamGrant]:
    """Every identity-based grant, trust relationship and managed-policy attachment of the stack."""
    out: set[IamGrant] = set()
    for lid, resource in stack.resources.items():
        rtype = str(resource.get("Type"))
        props = resource.get("Properties") or {}
        if rtype == "AWS::IAM::Role":
            for policy in props.get("Policies") or []:
                out.update(_permission_grants(lid, "", policy.get("PolicyDocument")))
            out.update(_trust_grants(lid, props.get("AssumeRolePolicyDocument")))
            for arn in _listed(props.get("ManagedPolicyArns")):
                out.add(
                    IamGrant(
                        principal=lid,
                        kind="managed-policy",
                        effect="Allow",
                        action="attach",
                        resource=render(arn),
                    )
                )
        elif rtype in {"AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"}:
            holders = [
                render(r).removeprefix("${").removesuffix("}")
                for key in ("Roles", "Users", "Groups")
                for r in _listed(props.get(key))
            ]
            for holder in holders or [lid]:
                out.update(
                    _permission_grants(holder, lid if holder != lid else "", props.get("PolicyDocument"))
                )
    return out
