"""Small stacks and template readers shared by the construct tests.

This folder has no ``__init__.py`` on purpose: with pytest's default (prepend) import mode it
would become a top-level package named ``constructs`` and shadow the ``constructs`` library
that aws-cdk-lib imports. Import this module as ``tests.constructs.helpers``.
"""

from __future__ import annotations

import json
import typing
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template
from constructs import IConstruct

from tests.conftest import cdk_context

REGION = "us-east-1"
AZS = ["us-east-1a", "us-east-1b"]
CLUSTER_NAME = "gpufarm-test"
KUBECTL_SERVICE_TOKEN = "arn:aws:lambda:us-east-1:123456789012:function:kubectl-provider"
KUBERNETES_RESOURCE = "Custom::AWSCDK-EKS-KubernetesResource"
_PRUNE_LABEL_PREFIX = "aws.cdk.eks/prune-"


def new_stack(name: str = "Test") -> cdk.Stack:
    """A stack in its own app (one synth per app), region set, account left unresolved."""
    app = cdk.App(context=cdk_context())
    return cdk.Stack(app, name, env=cdk.Environment(region=REGION))


def new_vpc(stack: cdk.Stack, cidr: str = "10.0.0.0/16") -> ec2.Vpc:
    """A VPC created in the test stack (two AZs, one NAT), for constructs that take a VPC."""
    return ec2.Vpc(
        stack,
        "Vpc",
        ip_addresses=ec2.IpAddresses.cidr(cidr),
        availability_zones=AZS,
        nat_gateways=1,
    )


KUBECTL_ROLE_ARN = "arn:aws:iam::123456789012:role/platform-kubectl-provider"


def imported_cluster(stack: cdk.Stack, *, provider_role: bool = False) -> eks.ICluster:
    """An existing cluster with an existing kubectl provider: the stack creates neither.

    `provider_role` gives the provider its (existing, immutable) role, which charts shipped as
    assets need.
    """
    role = (
        iam.Role.from_role_arn(stack, "KubectlProviderRole", KUBECTL_ROLE_ARN, mutable=False)
        if provider_role
        else None
    )
    provider = eks.KubectlProvider.from_kubectl_provider_attributes(
        stack, "KubectlProvider", service_token=KUBECTL_SERVICE_TOKEN, role=role
    )
    return eks.Cluster.from_cluster_attributes(
        stack, "ExistingCluster", cluster_name=CLUSTER_NAME, kubectl_provider=provider
    )


def logical_id(construct: IConstruct) -> str:
    """Logical ID of a construct's CloudFormation resource (itself or its default child)."""
    resource = construct if isinstance(construct, cdk.CfnElement) else construct.node.default_child
    assert resource is not None, f"{construct.node.path} has no default child"
    return cdk.Stack.of(construct).get_logical_id(typing.cast(cdk.CfnElement, resource))


def ref(construct: IConstruct) -> dict[str, str]:
    """`{"Ref": <logical id>}` of a construct's resource."""
    return {"Ref": logical_id(construct)}


def resources(template: Template, type_: str, props: Any = None) -> dict[str, dict[str, Any]]:
    """Resources of a type (optionally matching a `Properties` pattern), by logical ID."""
    pattern = {"Properties": props} if props is not None else None
    found = template.find_resources(type_, pattern)
    return {k: dict(v) for k, v in found.items()}


def _decode(value: Any) -> tuple[str, dict[str, Any]]:
    """A manifest property as JSON text, with each CloudFormation token replaced by a placeholder."""
    if isinstance(value, str):
        return value, {}
    assert set(value) == {"Fn::Join"}, f"unexpected manifest value {value!r}"
    delimiter, parts = value["Fn::Join"]
    tokens: dict[str, Any] = {}
    text = []
    for part in parts:
        if isinstance(part, str):
            text.append(part)
        else:
            placeholder = f"@@token{len(tokens)}@@"
            tokens[placeholder] = part
            text.append(placeholder)
    return delimiter.join(text), tokens


def _substitute(node: Any, tokens: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        return {k: _substitute(v, tokens) for k, v in node.items()}
    if isinstance(node, list):
        return [_substitute(v, tokens) for v in node]
    if isinstance(node, str) and node in tokens:
        return tokens[node]
    if isinstance(node, str):
        assert "@@token" not in node, f"a token is embedded in a longer string: {node!r}"
    return node


def _strip_prune_labels(doc: dict[str, Any]) -> dict[str, Any]:
    labels = doc.get("metadata", {}).get("labels")
    if labels:
        doc["metadata"]["labels"] = {k: v for k, v in labels.items() if not k.startswith(_PRUNE_LABEL_PREFIX)}
    return doc


def manifest_docs(resource: dict[str, Any]) -> list[dict[str, Any]]:
    """The Kubernetes documents of a KubernetesManifest resource, as the handler will apply them.

    Tokens (`{"Ref": ...}`) come back as CloudFormation dicts where they were a whole string
    value; the prune label aws_eks_v2 adds to each document is removed.
    """
    text, tokens = _decode(resource["Properties"]["Manifest"])
    docs: list[dict[str, Any]] = json.loads(text)
    return [_strip_prune_labels(_substitute(doc, tokens)) for doc in docs]


def manifest_of(template: Template, manifest: IConstruct) -> list[dict[str, Any]]:
    """The documents of one KubernetesManifest construct in a synthesized template."""
    found = resources(template, KUBERNETES_RESOURCE)
    return manifest_docs(found[logical_id(manifest)])


def kinds(docs: list[dict[str, Any]]) -> list[str]:
    """The `kind` of each document, in order."""
    return [d["kind"] for d in docs]


def partition_arn(suffix: str) -> dict[str, Any]:
    """`arn:<partition><suffix>` as CDK renders an ARN built on `Aws.PARTITION`."""
    return {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, suffix]]}
