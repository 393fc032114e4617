"""The enterprise tier passes AWS Control Tower's proactive controls (the `control-tower` pack)
with only the acknowledgements below, each on its resource with a reason about that resource;
the controls gpufarm meets by a fix stay met; the other tiers do not answer to the pack."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpufarm.config import ConfigError, load_preset
from gpufarm.constructs.compliance import CONTROL_TOWER_PLUGIN, control_tower_violations
from gpufarm.constructs.reserved_capacity import node_group_efa_interfaces
from tests.tiers.conftest import synthesize, variant

STACK = "gpufarm-enterprise"
KUBECTL = f"{STACK}/Cluster/Resource/KubectlProvider"

# (where the acknowledgement sits, control) -> words its reason must contain: the fact about
# that resource that makes the control not apply, not a generic excuse.
ACKNOWLEDGED = {
    (f"{STACK}/Ingress/AccessLogs", "CT.S3.PR.10"): "only to buckets encrypted with SSE-S3",
    (f"{STACK}/Ingress/AccessLogs", "CT.S3.PR.2"): "a log of a log",
    (f"{STACK}/Ingress/AccessLogs", "CT.S3.PR.4"): "an event notification would have no target",
    (f"{STACK}/Ingress/AccessLogs", "CT.S3.PR.9"): "an Object Lock retention would keep them past that",
    (f"{STACK}/Ingress/Waf/Logs", "CT.CLOUDWATCH.PR.2"): "kept 90 days",
    (f"{STACK}/Inspection/Appliances", "CT.AUTOSCALING.PR.6"): "one instance type",
    (f"{STACK}/Inspection/GatewayLoadBalancer", "CT.ELASTICLOADBALANCING.PR.5"): "holds no state",
    (f"{STACK}/PrivateLink/LoadBalancer", "CT.ELASTICLOADBALANCING.PR.6"): "record TLS connections only",
    (f"{STACK}/Ingress/Gateway-Route/Listener", "CT.ELASTICLOADBALANCING.PR.1"): "plain HTTP inside the VPC",
    (f"{STACK}/Ingress/Gateway-Route/Nlb/Resource", "CT.ELASTICLOADBALANCING.PR.6"): "only for TLS listeners",
    (f"{KUBECTL}/Handler", "CT.LAMBDA.PR.3"): "Fn::GetAtt on the cluster",
    (f"{KUBECTL}/Provider/framework-onEvent", "CT.LAMBDA.PR.3"): "Fn::GetAtt on the cluster",
    (f"{STACK}/Custom::VpcRestrictDefaultSGCustomResourceProvider", "CT.LAMBDA.PR.3"): "no VPC placement",
    (f"{STACK}/Karpenter/InterruptionQueue", "CT.SQS.PR.1"): "retention is 300 s",
}


def _plugin(outdir: Path) -> dict[str, Any]:
    report = json.loads((outdir / "validation-report.json").read_text())
    plugin: dict[str, Any] = next(
        p for p in report["pluginReports"] if p["pluginName"] == CONTROL_TOWER_PLUGIN
    )
    return plugin


def test_enterprise_passes_with_only_the_intended_acknowledgements(
    enterprise_template: dict[str, Any], enterprise_dir: Path
) -> None:
    plugin = _plugin(enterprise_dir)
    assert plugin["violations"] == []
    acknowledged = {(v["acknowledgedAt"], v["ruleName"]): v["reason"] for v in plugin["suppressedViolations"]}
    assert sorted(acknowledged) == sorted(ACKNOWLEDGED)
    for where, words in ACKNOWLEDGED.items():
        assert words in acknowledged[where], where


def test_enterprise_breaks_no_control_beyond_those_acknowledged(
    enterprise_template: dict[str, Any], enterprise_dir: Path
) -> None:
    # The controls gpufarm meets by a fix (CT.KMS.PR.3, CT.EC2.PR.9, CT.EC2.PR.10,
    # CT.AUTOSCALING.PR.1) are not among the controls cfn-guard reports at all.
    reported = {v.rule_name for v in control_tower_violations(str(enterprise_dir / f"{STACK}.template.json"))}
    assert reported == {control for _, control in ACKNOWLEDGED}


def test_running_only_the_controls_for_the_templates_types_finds_the_same(
    enterprise_template: dict[str, Any], enterprise_dir: Path
) -> None:
    template = str(enterprise_dir / f"{STACK}.template.json")

    def found(**kwargs: bool) -> dict[str, list[str]]:
        return {
            v.rule_name: [r.resource_logical_id for r in v.violating_resources]
            for v in control_tower_violations(template, **kwargs)
        }

    assert found() == found(every_rule=True)


def _resources(template: dict[str, Any], type_name: str) -> dict[str, Any]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == type_name}


def test_every_key_denies_grants_no_aws_service_asks_for(enterprise_template: dict[str, Any]) -> None:
    keys = _resources(enterprise_template, "AWS::KMS::Key")
    assert len(keys) == 4
    for name, key in keys.items():
        sids = [s.get("Sid") for s in key["Properties"]["KeyPolicy"]["Statement"]]
        assert "DenyGrantsOutsideAwsServices" in sids, name


def test_every_launch_template_has_detailed_monitoring_and_private_interfaces(
    enterprise_template: dict[str, Any],
) -> None:
    templates = _resources(enterprise_template, "AWS::EC2::LaunchTemplate")
    assert len(templates) == 4  # system nodes, two reserved node groups, inspection appliances
    interfaces = 0
    for name, template in templates.items():
        data = template["Properties"]["LaunchTemplateData"]
        assert data["Monitoring"] == {"Enabled": True}, name
        for interface in data.get("NetworkInterfaces", []):
            assert interface["AssociatePublicIpAddress"] is False, name
            interfaces += 1
    multinode = next(g for g in load_preset("enterprise").node_groups if g.efa)
    # The appliances' one interface, and every interface of the multi-node group's EFA layout.
    assert interfaces == 1 + len(node_group_efa_interfaces(multinode.instance_type))


def test_appliance_group_names_the_zones_of_its_subnets(enterprise_template: dict[str, Any]) -> None:
    (group,) = _resources(enterprise_template, "AWS::AutoScaling::AutoScalingGroup").values()
    zones = list(load_preset("enterprise").environment.availability_zones)
    assert group["Properties"]["AvailabilityZones"] == zones
    assert len(group["Properties"]["VPCZoneIdentifier"]) == len(zones)


def test_production_asking_for_the_pack_is_refused_on_its_own_config_choices(
    production_document: dict[str, Any],
) -> None:
    """What production's settings break: flow logs kept 90 days (the control asks for a year) and
    an ALB and its gateway NLB without deletion protection (`termination_protection: false`). The
    config names both before any construct is built."""
    with pytest.raises(ConfigError) as caught:
        variant(production_document, {"compliance_packs": ["aws-solutions", "control-tower"]})
    assert [f"{issue.path}: {issue.message}" for issue in caught.value.issues] == [
        "network.flow_logs.retention_days: must be at least 365 with the 'control-tower' compliance "
        "pack (its control CT.CLOUDWATCH.PR.2 requires a CloudWatch log group kept at least one "
        "year), got 90",
        "termination_protection: must be true with the 'control-tower' compliance pack (its control "
        "CT.ELASTICLOADBALANCING.PR.5 requires deletion protection on the load balancers, which "
        "follows termination_protection), got false",
    ]


def test_production_with_those_choices_changed_passes_the_pack(
    production_document: dict[str, Any], tmp_path: Path
) -> None:
    """With the two settings the config names changed, the acknowledgements the constructs carry
    cover the rest, as in enterprise: the gate passes."""
    config = variant(
        production_document,
        {
            "compliance_packs": ["aws-solutions", "control-tower"],
            "network": {"flow_logs": {"retention_days": 365}},
            "termination_protection": True,
        },
    )
    synthesize([config], tmp_path)
    report = _plugin(tmp_path)
    assert report["violations"] == []


@pytest.mark.parametrize("tier", ["poc", "production"])
def test_tiers_that_do_not_ask_are_not_gated(
    tier: str,
    request: pytest.FixtureRequest,
    poc_template: dict[str, Any],
    production_template: dict[str, Any],
) -> None:
    outdir: Path = request.getfixturevalue(f"{tier}_dir")
    report = json.loads((outdir / "validation-report.json").read_text())
    assert CONTROL_TOWER_PLUGIN not in [p["pluginName"] for p in report["pluginReports"]]
