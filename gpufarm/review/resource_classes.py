"""Which resource types are stateful or traffic-bearing, and which of their properties can only be
set at creation (so that changing them replaces the resource)."""

from __future__ import annotations

import importlib
from typing import Any

from gpufarm.review.rules import REPLACEMENT_RULES

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
        "AWS::SageMaker::Endpoint",
        "AWS::SageMaker::InferenceComponent",
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
    rtype: tuple("/properties/" + p.replace(".", "/") for p in rules.replacement)
    for rtype, rules in REPLACEMENT_RULES.items()
}
"""Schema paths of the properties marked "Update requires: Replacement", for every type gpufarm
emits (:data:`gpufarm.review.rules.REPLACEMENT_RULES`): used when cfn-lint is not installed, and
joined with its schemas when it is."""


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
        if self._manager is not None:
            return "cfn-lint resource schemas and gpufarm's replacement rules"
        return "gpufarm's replacement rules (gpufarm/review/rules.py)"

    def paths(self, resource_type: str, region: str = "us-east-1") -> tuple[str, ...]:
        """Schema paths ('/properties/A/B') of the type's create-only properties."""
        key = (resource_type, region)
        if key not in self._cache:
            found: tuple[str, ...] = CREATE_ONLY_FALLBACK.get(resource_type, ())
            if self._manager is not None and not resource_type.startswith("Custom::"):
                try:
                    schema = self._manager.get_resource_schema(region, resource_type).schema
                    found = tuple(schema.get("createOnlyProperties", ())) + found
                except Exception:  # an unknown type or region: no schema, use the table
                    found = CREATE_ONLY_FALLBACK.get(resource_type, ())
            self._cache[key] = tuple(dict.fromkeys(found + REPLACEMENT_SUPPLEMENT.get(resource_type, ())))
        return self._cache[key]
