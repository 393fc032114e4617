"""Amazon Managed Service for Prometheus: what CreateWorkspace and CreateScraper refuse."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml

from gpufarm.deploy_rules.rule import Resource, Rule, Template, literal_str
from gpufarm.deploy_rules.shapes import TOKEN, arn_check, render, resource

WORKSPACE = "AWS::APS::Workspace"
SCRAPER = "AWS::APS::Scraper"
RULE_GROUPS_NAMESPACE = "AWS::APS::RuleGroupsNamespace"
EKS_CLUSTER = "AWS::EKS::Cluster"

_CREATE_WORKSPACE = "https://docs.aws.amazon.com/prometheus/latest/APIReference/API_CreateWorkspace.html"
MAX_ALIAS = 100


def _alias(res: Resource, _template: Template) -> Iterator[str]:
    # CreateWorkspace, alias: "Blank spaces at the beginning or end of the alias that you specify
    # will be trimmed"; "Length Constraints: Minimum length of 1. Maximum length of 100."
    alias = literal_str(res.prop("Alias"))
    if alias is not None and not 1 <= len(alias.strip()) <= MAX_ALIAS:
        yield (
            f"Alias {alias!r} has {len(alias.strip())} characters once trimmed; a "
            f"workspace alias has 1 to {MAX_ALIAS}"
        )


_EKS_CONFIGURATION = "https://docs.aws.amazon.com/prometheus/latest/APIReference/API_EksConfiguration.html"


def _scraper(cluster_arn: Any) -> dict[str, Any]:
    return resource(
        SCRAPER,
        ScrapeConfiguration={"ConfigurationBlob": "scrape_configs: []\n"},
        Source={
            "EksConfiguration": {
                "ClusterArn": cluster_arn,
                "SubnetIds": ["subnet-0123456789abcdef0"],
                "SecurityGroupIds": ["sg-0123456789abcdef0"],
            }
        },
        Destination={
            "AmpConfiguration": {"WorkspaceArn": "arn:aws:aps:us-east-1:123456789012:workspace/ws-1"}
        },
    )


_CLUSTER = resource(
    EKS_CLUSTER,
    RoleArn="arn:aws:iam::123456789012:role/eks",
    ResourcesVpcConfig={"SubnetIds": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]},
)

_CREATE_RULE_GROUPS_NAMESPACE = (
    "https://docs.aws.amazon.com/prometheus/latest/APIReference/API_CreateRuleGroupsNamespace.html"
)
_ALERT_MANAGER_SNS = (
    "https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-alertmanager-receiver-config.html"
)
MAX_NAMESPACE_AND_GROUP_BYTES = 721


def _yaml(text: str | None) -> Any:
    """`text` parsed as YAML once tokens are blanked, else None (absent, or not YAML)."""
    if text is None:
        return None
    try:
        return yaml.safe_load(text.replace(TOKEN, "TOKEN"))
    except yaml.YAMLError:
        return None


def _group_names(res: Resource, _template: Template) -> Iterator[str]:
    # CreateRuleGroupsNamespace: "The combined length of a rule group namespace and a rule group
    # name cannot exceed 721 UTF-8 bytes."
    namespace = literal_str(res.prop("Name"))
    document = _yaml(render(res.prop("Data")))
    if namespace is None or not isinstance(document, dict):
        return
    for group in document.get("groups") or []:
        name = str(group.get("name", "")) if isinstance(group, dict) else ""
        size = len(namespace.encode()) + len(name.encode())
        if size > MAX_NAMESPACE_AND_GROUP_BYTES:
            yield (
                f"namespace {namespace!r} and rule group {name[:40]!r}... are {size} UTF-8 bytes "
                f"together; at most {MAX_NAMESPACE_AND_GROUP_BYTES}"
            )


def _sns_receivers(res: Resource, _template: Template) -> Iterator[str]:
    # "Amazon SNS is the only receiver AMP supports" (AMP-alertmanager-receiver.html); in an SNS
    # receiver "api_url" and "Http_config" are not allowed, and "SigV4 settings are required to
    # have a Region property" (AMP-alertmanager-receiver-config.html).
    outer = _yaml(render(res.prop("AlertManagerDefinition")))
    if not isinstance(outer, dict):
        return
    config = (
        _yaml(outer.get("alertmanager_config")) if isinstance(outer.get("alertmanager_config"), str) else None
    )
    if not isinstance(config, dict):
        yield "AlertManagerDefinition has no alertmanager_config document"
        return
    for receiver in config.get("receivers") or []:
        if not isinstance(receiver, dict):
            continue
        name = receiver.get("name")
        others = sorted(k for k in receiver if k.endswith("_configs") and k != "sns_configs")
        if others:
            yield f"receiver {name!r} uses {', '.join(others)}; AMP sends only to Amazon SNS (sns_configs)"
        for sns in receiver.get("sns_configs") or []:
            if not isinstance(sns, dict):
                continue
            for refused in ("api_url", "http_config"):
                if refused in sns:
                    yield f"receiver {name!r} sets {refused}, which AMP refuses in an SNS receiver"
            sigv4 = sns.get("sigv4")
            if not (isinstance(sigv4, dict) and sigv4.get("region")):
                yield f"receiver {name!r} has no sigv4.region, which AMP needs to sign its SNS calls"


def _definition(receiver: str) -> str:
    return yaml.safe_dump({"alertmanager_config": f"route:\n  receiver: r\nreceivers:\n{receiver}"})


_BAD_RECEIVER = "- name: r\n  sns_configs:\n  - topic_arn: arn:aws:sns:us-east-1:123456789012:t\n"
_GOOD_RECEIVER = _BAD_RECEIVER + "    sigv4:\n      region: us-east-1\n"


def _rules(group_name: str) -> str:
    return yaml.safe_dump({"groups": [{"name": group_name, "rules": [{"record": "r", "expr": "up"}]}]})


RULES: tuple[Rule, ...] = (
    Rule(
        id="APS-WORKSPACE-ALIAS",
        resource_type=WORKSPACE,
        title="A workspace alias has 1 to 100 characters once trimmed",
        doc_url=_CREATE_WORKSPACE,
        check=_alias,
        bad={"Ws": resource(WORKSPACE, Alias="   ")},
        good={"Ws": resource(WORKSPACE, Alias="gpufarm-poc")},
    ),
    Rule(
        id="APS-SCRAPER-CLUSTER-ARN",
        resource_type=SCRAPER,
        title="A scraper's source cluster is given by ARN",
        doc_url=_EKS_CONFIGURATION,
        # EksConfiguration, clusterArn: "ARN of the Amazon EKS cluster", pattern
        # arn:aws[-a-z]*:eks:...:cluster/.+. `Ref` on AWS::EKS::Cluster gives its name (the
        # aws-cdk-lib EKS cluster uses Ref as its clusterName).
        check=arn_check(("Source", "EksConfiguration", "ClusterArn"), EKS_CLUSTER, "cluster name"),
        bad={"Cluster": _CLUSTER, "Scraper": _scraper({"Ref": "Cluster"})},
        good={"Cluster": _CLUSTER, "Scraper": _scraper({"Fn::GetAtt": ["Cluster", "Arn"]})},
    ),
    Rule(
        id="APS-RULE-GROUP-NAME-LENGTH",
        resource_type=RULE_GROUPS_NAMESPACE,
        title="A rule groups namespace and each of its group names are at most 721 UTF-8 bytes together",
        doc_url=_CREATE_RULE_GROUPS_NAMESPACE,
        check=_group_names,
        bad={"R": resource(RULE_GROUPS_NAMESPACE, Name="ns", Workspace="ws", Data=_rules("g" * 720))},
        good={"R": resource(RULE_GROUPS_NAMESPACE, Name="ns", Workspace="ws", Data=_rules("g" * 719))},
    ),
    Rule(
        id="APS-ALERT-MANAGER-SNS",
        resource_type=WORKSPACE,
        title="The alert manager sends only to SNS receivers that name their SigV4 Region",
        doc_url=_ALERT_MANAGER_SNS,
        check=_sns_receivers,
        bad={"Ws": resource(WORKSPACE, AlertManagerDefinition=_definition(_BAD_RECEIVER))},
        good={"Ws": resource(WORKSPACE, AlertManagerDefinition=_definition(_GOOD_RECEIVER))},
    ),
)
