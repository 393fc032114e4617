"""Amazon Managed Service for Prometheus: what CreateWorkspace and CreateScraper refuse."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpufarm.deploy_rules.rule import Resource, Rule, Template, literal_str
from gpufarm.deploy_rules.shapes import arn_check, resource

WORKSPACE = "AWS::APS::Workspace"
SCRAPER = "AWS::APS::Scraper"
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
)
