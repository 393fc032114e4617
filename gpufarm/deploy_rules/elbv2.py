"""Elastic Load Balancing v2: rules the ELB API enforces on load balancers, listeners and target groups."""

from __future__ import annotations

from collections.abc import Iterator

from gpufarm.deploy_rules.rule import Resource, Rule, Template, key_values, literal_int, literal_str

TARGET_GROUP = "AWS::ElasticLoadBalancingV2::TargetGroup"

_TG_ATTRIBUTES_DOC = (
    "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/"
    "edit-target-group-attributes.html#slow-start-mode"
)


def _lor_with_slow_start(resource: Resource, template: Template) -> Iterator[str]:
    # ALB user guide, target group attributes, slow start mode: "You cannot enable both slow
    # start mode and least outstanding requests."
    attributes = key_values(resource.prop("TargetGroupAttributes"))
    algorithm = literal_str(attributes.get("load_balancing.algorithm.type"))
    slow_start = literal_int(attributes.get("slow_start.duration_seconds"))
    if algorithm == "least_outstanding_requests" and slow_start:
        yield (
            f"least_outstanding_requests with slow_start.duration_seconds={slow_start}: the ELB API "
            "refuses slow start together with least outstanding requests; set slow start to 0 or "
            "choose round_robin"
        )


def _tg(attributes: dict[str, str]) -> dict[str, object]:
    return {
        "Type": TARGET_GROUP,
        "Properties": {
            "Port": 8000,
            "Protocol": "HTTP",
            "TargetType": "ip",
            "VpcId": "vpc-0123456789abcdef0",
            "TargetGroupAttributes": [{"Key": k, "Value": v} for k, v in attributes.items()],
        },
    }


RULES: tuple[Rule, ...] = (
    Rule(
        id="ELBV2-TG-LOR-SLOW-START",
        resource_type=TARGET_GROUP,
        title="Least outstanding requests and slow start cannot be combined",
        doc_url=_TG_ATTRIBUTES_DOC,
        check=_lor_with_slow_start,
        bad={
            "Tg": _tg(
                {
                    "load_balancing.algorithm.type": "least_outstanding_requests",
                    "slow_start.duration_seconds": "60",
                }
            )
        },
        good={
            "Tg": _tg(
                {
                    "load_balancing.algorithm.type": "least_outstanding_requests",
                    "slow_start.duration_seconds": "0",
                }
            )
        },
    ),
)
