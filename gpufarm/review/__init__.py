"""Review a change to a cloud assembly: what deploying HEAD over BASE would do, as a PR report.

Pure: reads two `cdk.out` folders (or one), no AWS call, no CDK. Per stack it finds:

- **Replacements**, stateful and traffic-bearing resources first. A resource is replaced when a
  property that can only be set at creation changes (the resource type's `createOnlyProperties`
  in the CloudFormation registry schemas bundled with cfn-lint, plus :data:`REPLACEMENT_SUPPLEMENT`
  for properties those schemas miss; without cfn-lint, :data:`CREATE_ONLY_FALLBACK`), when a
  create-only property refers to a resource that is itself replaced, or when a logical ID
  disappears while one of the same type appears (a construct ID changed).
- **Public exposure**: internet-facing load balancers, ingress from CIDRs outside private
  address space (0.0.0.0/0 above all), a public Kubernetes API endpoint, endpoint services open
  to other accounts.
- **IAM**: grants (principal, effect, action, resource) added and removed in roles, inline and
  managed policies, trust policies and attached managed policies; wildcards flagged.
- **GPU capacity** by capacity type and the **monthly cost**, from the tier config each
  template carries in `Metadata["gpufarm:tier"]` (:mod:`gpufarm.estimate`).
"""

from __future__ import annotations

import difflib
import importlib
import ipaddress
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gpufarm.assembly import AssemblyError, read_assembly
from gpufarm.config import TierConfig
from gpufarm.config.model import TIER_METADATA_KEY

# --------------------------------------------------------------------------- resource classes

STATEFUL_TYPES = frozenset(
    {
        "AWS::EKS::Cluster",
        "AWS::EKS::Nodegroup",
        "AWS::FSx::FileSystem",
        "AWS::FSx::DataRepositoryAssociation",
        "AWS::S3::Bucket",
        "AWS::KMS::Key",
        "AWS::Logs::LogGroup",
        "AWS::EC2::CapacityReservation",
        "AWS::SQS::Queue",
        "AWS::APS::Workspace",
        "AWS::SecretsManager::Secret",
        "AWS::Cognito::UserPool",
    }
)
"""Resources that hold data or running capacity: replacing one loses it or restarts everything on it."""

TRAFFIC_TYPES = frozenset(
    {
        "AWS::ElasticLoadBalancingV2::LoadBalancer",
        "AWS::ElasticLoadBalancingV2::TargetGroup",
        "AWS::ElasticLoadBalancingV2::Listener",
        "AWS::EC2::VPC",
        "AWS::EC2::Subnet",
        "AWS::EC2::SecurityGroup",
        "AWS::EC2::NatGateway",
        "AWS::EC2::EIP",
        "AWS::EC2::InternetGateway",
        "AWS::EC2::VPCEndpoint",
        "AWS::EC2::VPCEndpointService",
        "AWS::WAFv2::WebACL",
    }
)
"""Resources requests flow through: replacing one drops connections or changes addresses."""

REPLACEMENT_SUPPLEMENT: dict[str, tuple[str, ...]] = {
    # CreateTargetGroup takes TargetControlPort; ModifyTargetGroup does not (ELBv2 API).
    "AWS::ElasticLoadBalancingV2::TargetGroup": ("/properties/TargetControlPort",),
    # UpdateFileSystem's Lustre configuration has none of these (FSx API), so CloudFormation
    # creates a new file system when one changes.
    "AWS::FSx::FileSystem": (
        "/properties/LustreConfiguration/DeploymentType",
        "/properties/LustreConfiguration/ImportPath",
        "/properties/LustreConfiguration/ExportPath",
        "/properties/LustreConfiguration/ImportedFileChunkSize",
        "/properties/LustreConfiguration/DriveCacheType",
        "/properties/LustreConfiguration/EfaEnabled",
    ),
}
"""Create-only properties the registry schemas do not list, from the service APIs' update calls."""

CREATE_ONLY_FALLBACK: dict[str, tuple[str, ...]] = {
    "AWS::EKS::Cluster": (
        "/properties/OutpostConfig",
        "/properties/EncryptionConfig",
        "/properties/KubernetesNetworkConfig/IpFamily",
        "/properties/KubernetesNetworkConfig/ServiceIpv4Cidr",
        "/properties/AccessConfig/BootstrapClusterCreatorAdminPermissions",
        "/properties/Name",
        "/properties/RoleArn",
        "/properties/BootstrapSelfManagedAddons",
    ),
    "AWS::EKS::Nodegroup": (
        "/properties/CapacityType",
        "/properties/NodegroupName",
        "/properties/RemoteAccess",
        "/properties/NodeRole",
        "/properties/ClusterName",
        "/properties/InstanceTypes",
        "/properties/DiskSize",
        "/properties/AmiType",
        "/properties/Subnets",
    ),
    "AWS::FSx::FileSystem": (
        "/properties/KmsKeyId",
        "/properties/SecurityGroupIds",
        "/properties/FileSystemType",
        "/properties/SubnetIds",
        "/properties/BackupId",
    ),
    "AWS::FSx::DataRepositoryAssociation": (
        "/properties/FileSystemId",
        "/properties/FileSystemPath",
        "/properties/DataRepositoryPath",
        "/properties/BatchImportMetaDataOnCreate",
    ),
    "AWS::S3::Bucket": ("/properties/BucketName",),
    "AWS::Logs::LogGroup": ("/properties/LogGroupName",),
    "AWS::EC2::CapacityReservation": (
        "/properties/Tenancy",
        "/properties/InstancePlatform",
        "/properties/InstanceType",
        "/properties/AvailabilityZone",
        "/properties/EphemeralStorage",
        "/properties/EbsOptimized",
        "/properties/PlacementGroupArn",
        "/properties/AvailabilityZoneId",
    ),
    "AWS::SQS::Queue": ("/properties/FifoQueue", "/properties/QueueName"),
    "AWS::APS::Workspace": ("/properties/KmsKeyArn",),
    "AWS::SecretsManager::Secret": ("/properties/Name",),
    "AWS::EC2::VPC": ("/properties/CidrBlock", "/properties/Ipv4IpamPoolId", "/properties/Ipv4NetmaskLength"),
    "AWS::EC2::Subnet": (
        "/properties/VpcId",
        "/properties/AvailabilityZone",
        "/properties/AvailabilityZoneId",
        "/properties/CidrBlock",
        "/properties/Ipv6Native",
    ),
    "AWS::EC2::SecurityGroup": ("/properties/GroupDescription", "/properties/GroupName", "/properties/VpcId"),
    "AWS::EC2::NatGateway": (
        "/properties/VpcId",
        "/properties/SubnetId",
        "/properties/ConnectivityType",
        "/properties/AllocationId",
        "/properties/PrivateIpAddress",
    ),
    "AWS::EC2::EIP": ("/properties/NetworkBorderGroup", "/properties/TransferAddress", "/properties/Address"),
    "AWS::ElasticLoadBalancingV2::LoadBalancer": (
        "/properties/Name",
        "/properties/Type",
        "/properties/Scheme",
    ),
    "AWS::ElasticLoadBalancingV2::TargetGroup": (
        "/properties/TargetType",
        "/properties/ProtocolVersion",
        "/properties/Port",
        "/properties/Name",
        "/properties/VpcId",
        "/properties/Protocol",
        "/properties/IpAddressType",
    ),
    "AWS::ElasticLoadBalancingV2::Listener": ("/properties/LoadBalancerArn",),
    "AWS::EC2::VPCEndpoint": (
        "/properties/ServiceName",
        "/properties/VpcEndpointType",
        "/properties/VpcId",
    ),
    "AWS::WAFv2::WebACL": ("/properties/Name", "/properties/Scope"),
}
"""createOnlyProperties of the stateful and traffic-bearing types, as cfn-lint 1.58's bundled
registry schemas list them: used when cfn-lint is not installed."""

_IGNORED_TYPES = frozenset({"AWS::CDK::Metadata"})


def is_critical(resource_type: str) -> bool:
    """Whether a resource is stateful or traffic-bearing."""
    return resource_type in STATEFUL_TYPES or resource_type in TRAFFIC_TYPES


class CreateOnlyProperties:
    """Create-only property paths per resource type: cfn-lint's schemas, else the fallback table."""

    def __init__(self, *, use_cfn_lint: bool = True) -> None:
        self._manager: Any = None
        if use_cfn_lint:
            try:
                self._manager = importlib.import_module("cfnlint.schema").PROVIDER_SCHEMA_MANAGER
            except ImportError:
                self._manager = None
        self._cache: dict[tuple[str, str], tuple[str, ...]] = {}

    @property
    def source(self) -> str:
        """Where the create-only properties come from."""
        return "cfn-lint resource schemas" if self._manager is not None else "gpufarm's fallback table"

    def paths(self, resource_type: str, region: str = "us-east-1") -> tuple[str, ...]:
        """Schema paths ('/properties/A/B') of the type's create-only properties."""
        key = (resource_type, region)
        if key not in self._cache:
            found: tuple[str, ...] = CREATE_ONLY_FALLBACK.get(resource_type, ())
            if self._manager is not None and not resource_type.startswith("Custom::"):
                try:
                    schema = self._manager.get_resource_schema(region, resource_type).schema
                    found = tuple(schema.get("createOnlyProperties", ()))
                except Exception:  # an unknown type or region: no schema, use the table
                    found = CREATE_ONLY_FALLBACK.get(resource_type, ())
            self._cache[key] = tuple(dict.fromkeys(found + REPLACEMENT_SUPPLEMENT.get(resource_type, ())))
        return self._cache[key]


# --------------------------------------------------------------------------- assemblies


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


# --------------------------------------------------------------------------- replacements


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


# --------------------------------------------------------------------------- exposure

_PRIVATE_V4 = tuple(
    ipaddress.IPv4Network(n)
    for n in (
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
    )
)


def is_public_cidr(cidr: str) -> bool:
    """Whether a CIDR reaches beyond private address space (RFC 1918, CGNAT, loopback, link-local)."""
    try:
        network = ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        return False
    if isinstance(network, ipaddress.IPv4Network):
        return not any(network.subnet_of(p) for p in _PRIVATE_V4)
    return not (network.is_private or network.is_link_local or network.is_loopback)


@dataclass(frozen=True, kw_only=True, order=True)
class Exposure:
    """Something reachable from outside the VPC's private networks."""

    logical_id: str
    resource_type: str
    description: str

    @property
    def anywhere(self) -> bool:
        """Open to the whole internet (0.0.0.0/0, ::/0 or any account)."""
        return "0.0.0.0/0" in self.description or "::/0" in self.description or "any AWS" in self.description

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "logical_id": self.logical_id,
            "type": self.resource_type,
            "description": self.description,
            "anywhere": self.anywhere,
        }


def _ports(rule: Mapping[str, Any]) -> str:
    protocol = str(rule.get("IpProtocol", "-1"))
    if protocol in {"-1", "all"}:
        return "all traffic"
    low, high = rule.get("FromPort"), rule.get("ToPort")
    return f"{protocol} {low}" if low == high else f"{protocol} {low}-{high}"


def _ingress_exposures(lid: str, rtype: str, rule: Mapping[str, Any]) -> Iterator[Exposure]:
    for key in ("CidrIp", "CidrIpv6"):
        cidr = rule.get(key)
        if isinstance(cidr, str) and is_public_cidr(cidr):
            who = f"anywhere ({cidr})" if cidr in {"0.0.0.0/0", "::/0"} else cidr
            yield Exposure(
                logical_id=lid, resource_type=rtype, description=f"ingress from {who} on {_ports(rule)}"
            )


def exposures(stack: StackTemplate) -> set[Exposure]:
    """What the stack makes reachable from outside private networks."""
    out: set[Exposure] = set()
    for lid, resource in stack.resources.items():
        rtype = str(resource.get("Type"))
        props = resource.get("Properties") or {}
        if rtype == "AWS::ElasticLoadBalancingV2::LoadBalancer":
            kind = str(props.get("Type", "application"))
            if kind != "gateway" and props.get("Scheme", "internet-facing") == "internet-facing":
                out.add(
                    Exposure(
                        logical_id=lid,
                        resource_type=rtype,
                        description=f"internet-facing {kind} load balancer",
                    )
                )
        elif rtype == "AWS::EC2::SecurityGroup":
            for rule in props.get("SecurityGroupIngress") or []:
                if isinstance(rule, Mapping):
                    out.update(_ingress_exposures(lid, rtype, rule))
        elif rtype == "AWS::EC2::SecurityGroupIngress":
            out.update(_ingress_exposures(lid, rtype, props))
        elif rtype == "AWS::EKS::Cluster":
            vpc = props.get("ResourcesVpcConfig") or {}
            if vpc.get("EndpointPublicAccess", True) is True:
                cidrs = vpc.get("PublicAccessCidrs") or ["0.0.0.0/0"]
                shown = ", ".join(render(c) for c in cidrs) if isinstance(cidrs, list) else render(cidrs)
                out.add(
                    Exposure(
                        logical_id=lid,
                        resource_type=rtype,
                        description=f"public Kubernetes API endpoint from {shown}",
                    )
                )
        elif rtype == "AWS::EC2::VPCEndpointServicePermissions":
            principals = props.get("AllowedPrincipals") or []
            for principal in principals if isinstance(principals, list) else [principals]:
                who = "any AWS account (*)" if principal == "*" else render(principal)
                out.add(
                    Exposure(
                        logical_id=lid, resource_type=rtype, description=f"endpoint service open to {who}"
                    )
                )
    return out


# --------------------------------------------------------------------------- IAM

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


# --------------------------------------------------------------------------- tier facts


@dataclass(frozen=True, kw_only=True)
class TierFacts:
    """GPU capacity and monthly cost of the tier a template was synthesized from."""

    tier: str | None = None
    gpus: dict[str, int] = field(default_factory=dict)
    """GPUs by capacity type at peak (every model at its most replicas)."""
    monthly_usd: float | None = None
    """The base bill (models at their fewest replicas)."""
    peak_monthly_usd: float | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "tier": self.tier,
            "gpus": dict(self.gpus),
            "monthly_usd": self.monthly_usd,
            "peak_monthly_usd": self.peak_monthly_usd,
            "note": self.note,
        }


def tier_facts(stack: StackTemplate) -> TierFacts:
    """GPU capacity and cost from `Metadata["gpufarm:tier"]`; a note when the template has none."""
    metadata = (stack.template.get("Metadata") or {}).get(TIER_METADATA_KEY)
    if metadata is None:
        return TierFacts(note="no gpufarm tier metadata in the template")
    try:
        tier = TierConfig.model_validate(metadata)
    except ValidationError as exc:
        return TierFacts(
            note=f"the tier metadata does not match this gpufarm version ({exc.error_count()} error(s))"
        )
    from gpufarm.estimate import gpu_capacity, monthly_cost
    from gpufarm.pricing import PriceNotFoundError

    gpus = gpu_capacity(tier)
    try:
        cost = monthly_cost(tier)
    except PriceNotFoundError as exc:
        return TierFacts(tier=tier.name, gpus=gpus, note=f"no cost estimate: {exc}")
    return TierFacts(
        tier=tier.name, gpus=gpus, monthly_usd=cost.total_usd, peak_monthly_usd=cost.peak_total_usd
    )


# --------------------------------------------------------------------------- the review


@dataclass(frozen=True, kw_only=True)
class StackReview:
    """What changes in one stack (diff mode) or what it holds (summary mode)."""

    name: str
    status: str
    """'changed', 'unchanged', 'added' (new stack), 'removed' (stack deleted) or 'summary'."""
    changes: list[ResourceChange] = field(default_factory=list)
    replacements: list[Replacement] = field(default_factory=list)
    exposure_opened: list[Exposure] = field(default_factory=list)
    exposure_closed: list[Exposure] = field(default_factory=list)
    iam_added: list[IamGrant] = field(default_factory=list)
    iam_removed: list[IamGrant] = field(default_factory=list)
    base: TierFacts | None = None
    head: TierFacts | None = None
    resource_counts: dict[str, int] = field(default_factory=dict)
    """Summary mode: resources by type."""
    critical_resources: list[tuple[str, str, str]] = field(default_factory=list)
    """Summary mode: (logical ID, type, deletion policy) of stateful and traffic-bearing resources."""
    exposure: list[Exposure] = field(default_factory=list)
    """Summary mode: what the stack exposes."""
    iam_wildcards: list[IamGrant] = field(default_factory=list)
    """Summary mode: wildcard grants."""

    @property
    def critical_replacements(self) -> list[Replacement]:
        """Replacements of stateful or traffic-bearing resources."""
        return [r for r in self.replacements if r.critical]

    def counts_by_type(self) -> dict[str, dict[str, int]]:
        """Type -> {'added', 'removed', 'modified', 'replaced'} counts."""
        out: dict[str, dict[str, int]] = {}
        for change in self.changes:
            row = out.setdefault(
                change.resource_type, dict.fromkeys(("added", "removed", "modified", "replaced"), 0)
            )
            row[change.change] += 1
        return dict(sorted(out.items()))

    def gpu_delta(self) -> dict[str, int]:
        """Change in GPUs by capacity type (head minus base)."""
        before = self.base.gpus if self.base else {}
        after = self.head.gpus if self.head else {}
        return {k: after.get(k, 0) - before.get(k, 0) for k in sorted(set(before) | set(after))}

    def cost_delta(self) -> float | None:
        """Change of the base monthly bill, USD (None when either side has no estimate)."""
        if self.status == "added" and self.head and self.head.monthly_usd is not None:
            return self.head.monthly_usd
        if self.status == "removed" and self.base and self.base.monthly_usd is not None:
            return -self.base.monthly_usd
        if not (self.base and self.head) or self.base.monthly_usd is None or self.head.monthly_usd is None:
            return None
        return self.head.monthly_usd - self.base.monthly_usd

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        out: dict[str, Any] = {"name": self.name, "status": self.status}
        if self.status == "summary":
            out |= {
                "resource_counts": self.resource_counts,
                "critical_resources": [
                    {"logical_id": i, "type": t, "deletion_policy": p} for i, t, p in self.critical_resources
                ],
                "exposure": [e.to_dict() for e in self.exposure],
                "iam_wildcards": [g.to_dict() for g in self.iam_wildcards],
                "tier": self.head.to_dict() if self.head else None,
            }
            return out
        return out | {
            "replacements": [r.to_dict() for r in self.replacements],
            "exposure": {
                "opened": [e.to_dict() for e in self.exposure_opened],
                "closed": [e.to_dict() for e in self.exposure_closed],
            },
            "iam": {
                "added": [g.to_dict() for g in self.iam_added],
                "removed": [g.to_dict() for g in self.iam_removed],
                "new_wildcards": [g.to_dict() for g in self.iam_added if g.wildcard],
            },
            "resources": {"by_type": self.counts_by_type(), "changes": [c.to_dict() for c in self.changes]},
            "gpus": {
                "base": self.base.gpus if self.base else {},
                "head": self.head.gpus if self.head else {},
                "delta": self.gpu_delta(),
            },
            "monthly_cost": {
                "base_usd": self.base.monthly_usd if self.base else None,
                "head_usd": self.head.monthly_usd if self.head else None,
                "delta_usd": self.cost_delta(),
                "base_peak_usd": self.base.peak_monthly_usd if self.base else None,
                "head_peak_usd": self.head.peak_monthly_usd if self.head else None,
            },
            "notes": [
                n for n in (self.base.note if self.base else "", self.head.note if self.head else "") if n
            ],
        }


@dataclass(frozen=True, kw_only=True)
class Review:
    """The review of an assembly change (diff mode) or of one assembly (summary mode)."""

    mode: str
    """'diff' or 'summary'."""
    stacks: list[StackReview]
    base_label: str = ""
    head_label: str = ""
    create_only_source: str = ""

    @property
    def critical_replacements(self) -> int:
        """Replacements of stateful or traffic-bearing resources over all stacks."""
        return sum(len(s.critical_replacements) for s in self.stacks)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "mode": self.mode,
            "base": self.base_label or None,
            "head": self.head_label,
            "create_only_source": self.create_only_source,
            "critical_replacements": self.critical_replacements,
            "stacks": [s.to_dict() for s in self.stacks],
        }


def _review_stack(
    name: str, base: StackTemplate | None, head: StackTemplate | None, create_only: CreateOnlyProperties
) -> StackReview:
    either = head or base
    empty = StackTemplate(name=name, region=either.region if either else "us-east-1", template={})
    old, new = base or empty, head or empty
    diff = diff_resources(old, new, create_only)
    old_exp, new_exp = exposures(old), exposures(new)
    old_iam, new_iam = iam_grants(old), iam_grants(new)
    if base is None:
        status = "added"
    elif head is None:
        status = "removed"
    else:
        status = "changed" if diff.changes else "unchanged"
    return StackReview(
        name=name,
        status=status,
        changes=diff.changes,
        replacements=diff.replacements,
        exposure_opened=sorted(new_exp - old_exp),
        exposure_closed=sorted(old_exp - new_exp),
        iam_added=sorted(new_iam - old_iam),
        iam_removed=sorted(old_iam - new_iam),
        base=tier_facts(base) if base else None,
        head=tier_facts(head) if head else None,
    )


def review_assemblies(
    base: Mapping[str, StackTemplate] | None,
    head: Mapping[str, StackTemplate],
    *,
    base_label: str = "",
    head_label: str = "",
    create_only: CreateOnlyProperties | None = None,
) -> Review:
    """Compare two assemblies stack by stack (stacks matched by name); with no base, summarize head."""
    create_only = create_only or CreateOnlyProperties()
    if base is None:
        return Review(
            mode="summary",
            stacks=[summarize_stack(head[name]) for name in sorted(head)],
            head_label=head_label,
            create_only_source=create_only.source,
        )
    names = sorted(set(base) | set(head))
    return Review(
        mode="diff",
        stacks=[_review_stack(n, base.get(n), head.get(n), create_only) for n in names],
        base_label=base_label,
        head_label=head_label,
        create_only_source=create_only.source,
    )


def summarize_stack(stack: StackTemplate) -> StackReview:
    """What one stack holds: resources by type, critical resources, exposure, wildcards, GPUs, cost."""
    resources = stack.resources
    counts = Counter(str(r.get("Type")) for r in resources.values())
    critical = sorted(
        (lid, str(r["Type"]), str(r.get("DeletionPolicy", "Delete")))
        for lid, r in resources.items()
        if is_critical(str(r.get("Type")))
    )
    return StackReview(
        name=stack.name,
        status="summary",
        resource_counts=dict(sorted(counts.items())),
        critical_resources=critical,
        exposure=sorted(exposures(stack)),
        iam_wildcards=sorted(g for g in iam_grants(stack) if g.wildcard),
        head=tier_facts(stack),
    )


def review_paths(base: str | Path | None, head: str | Path) -> Review:
    """Load and review assemblies from folders (`base` None: summarize `head`)."""
    base_stacks = load_assembly(base) if base is not None else None
    head_stacks = load_assembly(head)
    return review_assemblies(
        base_stacks, head_stacks, base_label=str(base) if base is not None else "", head_label=str(head)
    )


# --------------------------------------------------------------------------- Markdown


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def _table(columns: Iterable[str], rows: Iterable[Iterable[Any]]) -> list[str]:
    cols = list(columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return [*lines, ""]


def _usd(value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return "n/a"
    if signed:
        sign = "+" if value > 0.005 else "-" if value < -0.005 else "±"
        return f"{sign}${abs(value):,.2f}"
    return f"${value:,.2f}"


def _gpus(facts: TierFacts | None) -> str:
    if facts is None or not facts.gpus:
        return "n/a"
    return " / ".join(str(facts.gpus.get(k, 0)) for k in ("reserved", "on-demand", "spot"))


def _iam_rows(grants: list[IamGrant], change: str) -> list[list[str]]:
    """Grants grouped by principal, kind, effect and resource, with their actions in one cell."""
    grouped: dict[tuple[str, str, str, str, str, bool], list[IamGrant]] = defaultdict(list)
    for g in grants:
        grouped[(g.principal, g.via, g.kind, g.effect, g.resource, g.conditional)].append(g)
    rows = []
    for (principal, via, kind, effect, resource, conditional), members in sorted(grouped.items()):
        wildcard = any(g.wildcard for g in members)
        rows.append(
            [
                ("**" + change + "**") if wildcard and change == "added" else change,
                _code(principal) + (f" via {_code(via)}" if via else ""),
                kind if effect == "Allow" else f"{kind} ({effect})",
                ", ".join(_code(a) for a in sorted(g.action for g in members)),
                _code(resource) + (" (conditional)" if conditional else ""),
                "**yes**" if wildcard else "",
            ]
        )
    return rows


def _stack_markdown(stack: StackReview) -> list[str]:
    lines = [f"### {stack.name}", ""]
    if stack.status == "unchanged":
        return [*lines, "No changes.", ""]
    if stack.status == "added":
        lines += ["New stack: every resource below is created.", ""]
    if stack.status == "removed":
        lines += [
            "**The stack is deleted**: every resource below is deleted (or retained, per its policy).",
            "",
        ]
    lines += ["#### Replacements", ""]
    critical = stack.critical_replacements
    other = [r for r in stack.replacements if not r.critical]
    if critical:
        lines += [
            f"**{len(critical)} stateful or traffic-bearing resource(s) replaced or deleted**: an outage or "
            "data loss unless planned.",
            "",
        ]
        lines += _table(
            ["Resource", "Type", "Why", "Old resource"],
            [
                [
                    _code(r.logical_id) + (f" → {_code(r.new_logical_id)}" if r.new_logical_id else ""),
                    r.resource_type,
                    r.reason,
                    r.old_resource,
                ]
                for r in critical
            ],
        )
    else:
        lines += ["No stateful or traffic-bearing resource is replaced.", ""]
    if other:
        lines += ["Other replacements:", ""]
        lines += _table(
            ["Resource", "Type", "Why"],
            [
                [
                    _code(r.logical_id) + (f" → {_code(r.new_logical_id)}" if r.new_logical_id else ""),
                    r.resource_type,
                    r.reason,
                ]
                for r in other
            ],
        )
    lines += ["#### Public exposure", ""]
    if stack.exposure_opened or stack.exposure_closed:
        lines += _table(
            ["Change", "Resource", "Type", "Exposure"],
            [
                ["**opened**", _code(e.logical_id), e.resource_type, e.description]
                for e in stack.exposure_opened
            ]
            + [
                ["closed", _code(e.logical_id), e.resource_type, e.description] for e in stack.exposure_closed
            ],
        )
    else:
        lines += ["No change.", ""]
    lines += ["#### IAM", ""]
    wildcards = [g for g in stack.iam_added if g.wildcard]
    if stack.iam_added or stack.iam_removed:
        summary = f"{len(stack.iam_added)} grant(s) added, {len(stack.iam_removed)} removed"
        if wildcards:
            summary += f", **{len(wildcards)} new wildcard grant(s)**"
        lines += [summary + ".", ""]
        lines += _table(
            ["Change", "Principal", "Kind", "Actions", "Resource", "Wildcard"],
            _iam_rows(stack.iam_added, "added") + _iam_rows(stack.iam_removed, "removed"),
        )
    else:
        lines += ["No change.", ""]
    lines += _capacity_and_cost(stack)
    lines += ["#### Resources", ""]
    counts = stack.counts_by_type()
    if counts:
        lines += _table(
            ["Type", "Added", "Removed", "Modified", "Replaced"],
            [[t, c["added"], c["removed"], c["modified"], c["replaced"]] for t, c in counts.items()],
        )
        lines += [f"<details><summary>{len(stack.changes)} changed resource(s)</summary>", ""]
        for change in sorted(stack.changes, key=lambda c: (c.change, c.resource_type, c.logical_id)):
            detail = f": {', '.join(change.properties)}" if change.properties else ""
            renamed = f" → {_code(change.new_logical_id)}" if change.new_logical_id else ""
            lines.append(
                f"- {change.change} {_code(change.logical_id)}{renamed} ({change.resource_type}){detail}"
            )
        lines += ["", "</details>", ""]
    return lines


def _capacity_and_cost(stack: StackReview) -> list[str]:
    lines = ["#### GPU capacity and monthly cost", ""]
    base, head = stack.base, stack.head
    keys = ("reserved", "on-demand", "spot")
    rows = []
    for key in keys:
        before = base.gpus.get(key, 0) if base and base.gpus else None
        after = head.gpus.get(key, 0) if head and head.gpus else None
        delta = "" if before is None or after is None or before == after else f"{after - before:+d}"
        rows.append(
            [
                f"GPUs {key} (at peak)",
                "n/a" if before is None else before,
                "n/a" if after is None else after,
                delta,
            ]
        )
    rows.append(
        [
            "Monthly cost",
            _usd(base.monthly_usd if base else None),
            _usd(head.monthly_usd if head else None),
            _usd(stack.cost_delta(), signed=True) if stack.cost_delta() is not None else "",
        ]
    )
    base_peak, head_peak = (
        (base.peak_monthly_usd if base else None),
        (head.peak_monthly_usd if head else None),
    )
    peak_delta = head_peak - base_peak if base_peak is not None and head_peak is not None else None
    rows.append(
        [
            "Monthly cost at peak",
            _usd(base_peak),
            _usd(head_peak),
            _usd(peak_delta, signed=True) if peak_delta is not None else "",
        ]
    )
    lines += _table(["", "Base", "Head", "Change"], rows)
    notes = [n for n in (base.note if base else "", head.note if head else "") if n]
    lines += [f"_{n}_" for n in dict.fromkeys(notes)] + ([""] if notes else [])
    return lines


def _summary_markdown(stack: StackReview) -> list[str]:
    facts = stack.head
    lines = [f"### {stack.name}", ""]
    total = sum(stack.resource_counts.values())
    lines += [f"{total} resources of {len(stack.resource_counts)} types.", ""]
    if facts is not None:
        lines += _table(
            ["GPUs reserved / on-demand / spot (at peak)", "Monthly cost", "Monthly cost at peak"],
            [[_gpus(facts), _usd(facts.monthly_usd), _usd(facts.peak_monthly_usd)]],
        )
        if facts.note:
            lines += [f"_{facts.note}_", ""]
    lines += ["#### Public exposure", ""]
    lines += (
        _table(
            ["Resource", "Type", "Exposure"],
            [[_code(e.logical_id), e.resource_type, e.description] for e in stack.exposure],
        )
        if stack.exposure
        else ["Nothing is reachable from outside private networks.", ""]
    )
    lines += ["#### IAM wildcards", ""]
    lines += (
        _table(
            ["Principal", "Kind", "Actions", "Resource", "Wildcard"],
            [row[1:] for row in _iam_rows(stack.iam_wildcards, "present")],
        )
        if stack.iam_wildcards
        else ["No wildcard grant.", ""]
    )
    lines += [
        f"<details><summary>{len(stack.critical_resources)} stateful or traffic-bearing resources</summary>",
        "",
    ]
    lines += _table(
        ["Resource", "Type", "Deletion policy"], [[_code(i), t, p] for i, t, p in stack.critical_resources]
    )
    lines += ["</details>", ""]
    lines += ["<details><summary>Resources by type</summary>", ""]
    lines += _table(["Type", "Count"], list(stack.resource_counts.items()))
    lines += ["</details>", ""]
    return lines


def render_markdown(review: Review) -> str:
    """The review as a Markdown report for a pull request comment."""
    lines = ["## gpufarm review", ""]
    if review.mode == "summary":
        lines += [f"Summary of {_code(review.head_label)}." if review.head_label else "Summary.", ""]
        for stack in review.stacks:
            lines += _summary_markdown(stack)
        return "\n".join(lines).rstrip() + "\n"
    if review.base_label or review.head_label:
        lines += [f"Base {_code(review.base_label)} → head {_code(review.head_label)}.", ""]
    rows = []
    for s in review.stacks:
        wildcards = sum(1 for g in s.iam_added if g.wildcard)
        rows.append(
            [
                s.name,
                s.status,
                f"**{len(s.critical_replacements)}**" if s.critical_replacements else "0",
                f"+{len(s.exposure_opened)} / -{len(s.exposure_closed)}",
                f"+{len(s.iam_added)} / -{len(s.iam_removed)}"
                + (f" (**{wildcards} wildcard**)" if wildcards else ""),
                f"{_gpus(s.base)} → {_gpus(s.head)}",
                _usd(s.cost_delta(), signed=True) if s.cost_delta() is not None else "n/a",
            ]
        )
    lines += _table(
        [
            "Stack",
            "Status",
            "Stateful/traffic replacements",
            "Exposure opened / closed",
            "IAM grants added / removed",
            "GPUs reserved / on-demand / spot",
            "Monthly cost change",
        ],
        rows,
    )
    for stack in review.stacks:
        lines += _stack_markdown(stack)
    lines += [f"<sub>Replacements judged from {review.create_only_source}.</sub>", ""]
    return "\n".join(lines).rstrip() + "\n"
