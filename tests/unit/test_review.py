"""The review of cloud assemblies on small hand-written templates: replacements, exposure, IAM,
tier facts, reading assemblies and the Markdown report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpufarm.assembly import AssemblyError
from gpufarm.config import load_preset
from gpufarm.estimate import gpu_capacity, monthly_cost
from gpufarm.review import (
    CreateOnlyProperties,
    Exposure,
    IamGrant,
    ResourceChange,
    StackTemplate,
    diff_resources,
    exposures,
    iam_grants,
    is_public_cidr,
    load_assembly,
    references,
    render,
    render_markdown,
    review_assemblies,
    tier_facts,
)

from .factories import make_production, production_model

SCHEMAS = CreateOnlyProperties()
TABLE = CreateOnlyProperties(use_cfn_lint=False)


def stack(resources: dict[str, dict[str, Any]], *, metadata: dict[str, Any] | None = None) -> StackTemplate:
    template: dict[str, Any] = {"Resources": resources}
    if metadata is not None:
        template["Metadata"] = metadata
    return StackTemplate(name="gpufarm-test", region="us-east-1", template=template)


def resource(rtype: str, **properties: Any) -> dict[str, Any]:
    return {"Type": rtype, "Properties": properties}


def target_group(**properties: Any) -> dict[str, Any]:
    defaults = {"Port": 8000, "Protocol": "HTTP", "TargetType": "ip", "VpcId": {"Ref": "Vpc"}}
    return resource("AWS::ElasticLoadBalancingV2::TargetGroup", **{**defaults, **properties})


# --------------------------------------------------------------------------- replacements


def replacement_reasons(
    old: StackTemplate, new: StackTemplate, schemas: CreateOnlyProperties = SCHEMAS
) -> dict[str, str]:
    return {r.logical_id: r.reason for r in diff_resources(old, new, schemas).replacements}


def test_an_in_place_property_change_is_a_modification() -> None:
    old = stack({"Tg": target_group(HealthCheckIntervalSeconds=15)})
    new = stack({"Tg": target_group(HealthCheckIntervalSeconds=30)})
    diff = diff_resources(old, new, SCHEMAS)
    assert (diff.replacements, [(c.change, c.properties) for c in diff.changes]) == (
        [],
        [("modified", ("HealthCheckIntervalSeconds",))],
    )


def test_a_create_only_property_change_replaces_the_resource() -> None:
    old = stack({"Tg": target_group()})
    new = stack({"Tg": target_group(Port=8080)})
    assert replacement_reasons(old, new) == {"Tg": "create-only Port changes"}


def test_a_target_control_port_change_replaces_the_target_group() -> None:
    old = stack({"Tg": target_group(TargetControlPort=3000)})
    new = stack({"Tg": target_group(TargetControlPort=3001)})
    assert replacement_reasons(old, new) == {"Tg": "create-only TargetControlPort changes"}


def test_an_fsx_deployment_type_change_replaces_the_file_system() -> None:
    def fs(deployment: str) -> dict[str, Any]:
        return resource(
            "AWS::FSx::FileSystem",
            FileSystemType="LUSTRE",
            StorageCapacity=1200,
            LustreConfiguration={"DeploymentType": deployment, "PerUnitStorageThroughput": 250},
        )

    assert replacement_reasons(stack({"Fs": fs("PERSISTENT_1")}), stack({"Fs": fs("PERSISTENT_2")})) == {
        "Fs": "create-only LustreConfiguration.DeploymentType changes"
    }


def test_without_cfn_lint_the_fallback_table_decides() -> None:
    old = stack({"Lb": resource("AWS::ElasticLoadBalancingV2::LoadBalancer", Scheme="internal")})
    new = stack({"Lb": resource("AWS::ElasticLoadBalancingV2::LoadBalancer", Scheme="internet-facing")})
    assert (TABLE.source, replacement_reasons(old, new, TABLE)) == (
        "gpufarm's replacement rules (gpufarm/review/rules.py)",
        {"Lb": "create-only Scheme changes"},
    )


def test_a_create_only_reference_to_a_replaced_resource_replaces_too() -> None:
    old = stack(
        {
            "Vpc": resource("AWS::EC2::VPC", CidrBlock="10.0.0.0/16"),
            "Sg": resource("AWS::EC2::SecurityGroup", GroupDescription="x", VpcId={"Ref": "Vpc"}),
        }
    )
    new = stack(
        {
            "Vpc": resource("AWS::EC2::VPC", CidrBlock="10.1.0.0/16"),
            "Sg": resource("AWS::EC2::SecurityGroup", GroupDescription="x", VpcId={"Ref": "Vpc"}),
        }
    )
    assert replacement_reasons(old, new) == {
        "Vpc": "create-only CidrBlock changes",
        "Sg": "create-only VpcId refers to replaced Vpc",
    }


def test_a_logical_id_change_of_the_same_type_is_a_replacement() -> None:
    old = stack({"TgOld": target_group(), "Topic": resource("AWS::SNS::Topic")})
    new = stack({"TgNew": target_group(TargetControlPort=3000), "Topic": resource("AWS::SNS::Topic")})
    diff = diff_resources(old, new, SCHEMAS)
    assert [(r.logical_id, r.new_logical_id, r.critical) for r in diff.replacements] == [
        ("TgOld", "TgNew", True)
    ]
    assert [(c.change, c.logical_id, c.new_logical_id) for c in diff.changes] == [
        ("replaced", "TgOld", "TgNew")
    ]


def test_replaced_logical_ids_pair_by_construct_path() -> None:
    def tg(path: str) -> dict[str, Any]:
        return {**target_group(), "Metadata": {"aws:cdk:path": path}}

    old = stack(
        {"A1": tg("s/Ingress/Alpha/TargetGroup/Resource"), "B1": tg("s/Ingress/Beta/TargetGroup/Resource")}
    )
    new = stack(
        {
            "A2": tg("s/Ingress/Alpha/TargetGroupData8080/Resource"),
            "B2": tg("s/Ingress/Beta/TargetGroupData8080/Resource"),
        }
    )
    assert {r.logical_id: r.new_logical_id for r in diff_resources(old, new, SCHEMAS).replacements} == {
        "A1": "A2",
        "B1": "B2",
    }


def test_removing_a_stateful_resource_is_flagged_with_its_policy() -> None:
    old = stack({"Bucket": {**resource("AWS::S3::Bucket"), "DeletionPolicy": "Retain"}})
    diff = diff_resources(old, stack({}), SCHEMAS)
    assert [(r.logical_id, r.reason, r.deletion_policy) for r in diff.replacements] == [
        ("Bucket", "removed (retained in the account, no longer managed)", "Retain")
    ]


def test_a_replaced_resource_with_a_retain_policy_is_kept() -> None:
    def fs(kms: str) -> dict[str, Any]:
        return {
            **resource("AWS::FSx::FileSystem", FileSystemType="LUSTRE", KmsKeyId=kms),
            "UpdateReplacePolicy": "Retain",
        }

    [replacement] = diff_resources(stack({"Fs": fs("a")}), stack({"Fs": fs("b")}), SCHEMAS).replacements
    assert (replacement.reason, replacement.old_resource) == ("create-only KmsKeyId changes", "retained")


def test_replacements_of_stateful_and_traffic_resources_come_first() -> None:
    old = stack({"Role": resource("AWS::IAM::Role", RoleName="a"), "Tg": target_group()})
    new = stack({"Role": resource("AWS::IAM::Role", RoleName="b"), "Tg": target_group(Port=1)})
    assert [r.logical_id for r in diff_resources(old, new, SCHEMAS).replacements] == ["Tg", "Role"]


# --------------------------------------------------------------------------- template values


def test_intrinsics_render_as_references() -> None:
    value = {
        "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::", {"Fn::GetAtt": ["Bucket", "Arn"]}]]
    }
    assert render(value) == "arn:${AWS::Partition}:s3:::${Bucket.Arn}"


def test_references_find_ref_getatt_and_sub() -> None:
    value = [{"Ref": "A"}, {"Fn::GetAtt": ["B", "Arn"]}, {"Fn::Sub": "${C.Arn}/x/${AWS::Region}"}]
    assert references(value) == {"A", "B", "C"}


# --------------------------------------------------------------------------- exposure


@pytest.mark.parametrize(
    ("cidr", "public"),
    [
        ("0.0.0.0/0", True),
        ("203.0.113.0/24", True),
        ("10.0.0.0/16", False),
        ("100.64.0.0/16", False),
        ("::/0", True),
    ],
)
def test_public_cidrs_are_those_outside_private_space(cidr: str, public: bool) -> None:
    assert is_public_cidr(cidr) is public


def test_exposure_lists_public_load_balancers_ingress_and_endpoints() -> None:
    found = exposures(
        stack(
            {
                "Internal": resource("AWS::ElasticLoadBalancingV2::LoadBalancer", Scheme="internal"),
                "Public": resource("AWS::ElasticLoadBalancingV2::LoadBalancer", Type="network"),
                "Sg": resource(
                    "AWS::EC2::SecurityGroup",
                    SecurityGroupIngress=[
                        {"CidrIp": "0.0.0.0/0", "IpProtocol": "tcp", "FromPort": 443, "ToPort": 443},
                        {"CidrIp": "10.0.0.0/16", "IpProtocol": "tcp", "FromPort": 80, "ToPort": 80},
                    ],
                ),
                "Rule": resource("AWS::EC2::SecurityGroupIngress", CidrIpv6="::/0", IpProtocol="-1"),
                "Cluster": resource("AWS::EKS::Cluster", ResourcesVpcConfig={"EndpointPublicAccess": True}),
                "Private": resource("AWS::EKS::Cluster", ResourcesVpcConfig={"EndpointPublicAccess": False}),
                "Perms": resource("AWS::EC2::VPCEndpointServicePermissions", AllowedPrincipals=["*"]),
            }
        )
    )
    assert sorted((e.logical_id, e.description, e.anywhere) for e in found) == [
        ("Cluster", "public Kubernetes API endpoint from 0.0.0.0/0", True),
        ("Perms", "endpoint service open to any AWS account (*)", True),
        ("Public", "internet-facing network load balancer", False),
        ("Rule", "ingress from anywhere (::/0) on all traffic", True),
        ("Sg", "ingress from anywhere (0.0.0.0/0) on tcp 443", True),
    ]


def test_exposure_changes_are_opened_and_closed() -> None:
    old = stack({"Lb": resource("AWS::ElasticLoadBalancingV2::LoadBalancer", Scheme="internet-facing")})
    new = stack({"Lb": resource("AWS::ElasticLoadBalancingV2::LoadBalancer", Scheme="internal")})
    review = review_assemblies({"s": old}, {"s": new})
    assert (review.stacks[0].exposure_opened, review.stacks[0].exposure_closed) == (
        [],
        [
            Exposure(
                logical_id="Lb",
                resource_type="AWS::ElasticLoadBalancingV2::LoadBalancer",
                description="internet-facing application load balancer",
            )
        ],
    )


# --------------------------------------------------------------------------- IAM


def policy(*statements: dict[str, Any], roles: tuple[str, ...] = ("Role",)) -> dict[str, Any]:
    return resource(
        "AWS::IAM::Policy",
        PolicyDocument={"Version": "2012-10-17", "Statement": list(statements)},
        Roles=[{"Ref": r} for r in roles],
    )


def test_grants_come_from_policies_roles_trust_and_managed_policies() -> None:
    grants = iam_grants(
        stack(
            {
                "Role": resource(
                    "AWS::IAM::Role",
                    AssumeRolePolicyDocument={
                        "Statement": [
                            {
                                "Effect": "Allow",
                                "Principal": {"Service": "pods.eks.amazonaws.com"},
                                "Action": "sts:AssumeRole",
                            }
                        ]
                    },
                    ManagedPolicyArns=[
                        {
                            "Fn::Join": [
                                "",
                                ["arn:", {"Ref": "AWS::Partition"}, ":iam::aws:policy/AdministratorAccess"],
                            ]
                        }
                    ],
                ),
                "Policy": policy(
                    {
                        "Effect": "Allow",
                        "Action": ["s3:GetObject"],
                        "Resource": {"Fn::GetAtt": ["Bucket", "Arn"]},
                    }
                ),
            }
        )
    )
    assert sorted((g.kind, g.action, g.resource, g.via, g.wildcard) for g in grants) == [
        ("managed-policy", "attach", "arn:${AWS::Partition}:iam::aws:policy/AdministratorAccess", "", True),
        ("permission", "s3:GetObject", "${Bucket.Arn}", "Policy", False),
        ("trust", "sts:AssumeRole", "Service: pods.eks.amazonaws.com", "", False),
    ]


@pytest.mark.parametrize(
    ("statement", "wildcard"),
    [
        ({"Effect": "Allow", "Action": "fsx:DescribeFileSystems", "Resource": "*"}, True),
        ({"Effect": "Allow", "Action": "s3:*", "Resource": "arn:aws:s3:::b"}, True),
        ({"Effect": "Allow", "NotAction": "iam:*", "Resource": "arn:aws:s3:::b"}, True),
        ({"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*"}, False),
        ({"Effect": "Deny", "Action": "*", "Resource": "*"}, False),
    ],
)
def test_wildcards_are_any_action_any_resource_or_not_action(
    statement: dict[str, Any], wildcard: bool
) -> None:
    assert [g.wildcard for g in iam_grants(stack({"Policy": policy(statement)}))] == [wildcard]


def test_iam_changes_list_added_and_removed_grants() -> None:
    old = stack(
        {"Policy": policy({"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": "arn:aws:s3:::b/*"})}
    )
    new = stack(
        {"Policy": policy({"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"], "Resource": "*"})}
    )
    review = review_assemblies({"s": old}, {"s": new}).stacks[0]
    assert (
        [(g.action, g.resource) for g in review.iam_added],
        [(g.action, g.resource) for g in review.iam_removed],
    ) == (
        [("s3:GetObject", "*"), ("s3:PutObject", "*")],
        [("s3:GetObject", "arn:aws:s3:::b/*")],
    )
    assert "2 grant(s) added, 1 removed, **2 new wildcard grant(s)**." in render_markdown(
        review_assemblies({"s": old}, {"s": new})
    )


def test_a_grant_serializes_with_its_wildcard_flag() -> None:
    grant = IamGrant(principal="Role", kind="permission", effect="Allow", action="ec2:*", resource="*")
    assert grant.to_dict()["wildcard"] is True


# --------------------------------------------------------------------------- tier facts


def test_tier_facts_come_from_the_template_metadata() -> None:
    tier = load_preset("production")
    facts = tier_facts(stack({}, metadata={"gpufarm:tier": tier.model_dump(mode="json")}))
    assert (facts.tier, facts.gpus, facts.monthly_usd, facts.peak_monthly_usd) == (
        "production",
        gpu_capacity(tier),
        monthly_cost(tier).total_usd,
        monthly_cost(tier).peak_total_usd,
    )


def test_a_template_without_tier_metadata_has_no_facts() -> None:
    assert tier_facts(stack({})).note == "no gpufarm tier metadata in the template"


def test_tier_metadata_from_another_gpufarm_version_is_noted() -> None:
    metadata = {"gpufarm:tier": {**load_preset("poc").model_dump(mode="json"), "retired_field": 1}}
    assert tier_facts(stack({}, metadata=metadata)).note == (
        "the tier metadata does not match this gpufarm version (1 error(s))"
    )


# --------------------------------------------------------------------------- assemblies


def write_assembly(folder: Path, templates: dict[str, dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    artifacts: dict[str, Any] = {"Tree": {"type": "cdk:tree", "properties": {"file": "tree.json"}}}
    for name, template in templates.items():
        (folder / f"{name}.template.json").write_text(json.dumps(template))
        artifacts[name] = {
            "type": "aws:cloudformation:stack",
            "environment": "aws://unknown-account/eu-west-1",
            "properties": {"templateFile": f"{name}.template.json", "stackName": name},
        }
    (folder / "manifest.json").write_text(json.dumps({"version": "48.0.0", "artifacts": artifacts}))
    return folder


def test_an_assembly_reads_its_stacks_and_regions(tmp_path: Path) -> None:
    folder = write_assembly(tmp_path / "out", {"gpufarm-a": {"Resources": {}}})
    assert {n: s.region for n, s in load_assembly(folder).items()} == {"gpufarm-a": "eu-west-1"}


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "'{dir}/missing' is not a folder"),
        (
            "empty",
            "'{dir}/empty' is not a cloud assembly (no manifest.json); give the folder `cdk synth` or "
            "`gpufarm synth` wrote (cdk.out)",
        ),
        ("stackless", "'{dir}/stackless' holds no CloudFormation stack"),
    ],
)
def test_a_folder_that_is_not_an_assembly_is_rejected(tmp_path: Path, setup: str, message: str) -> None:
    if setup == "empty":
        (tmp_path / "empty").mkdir()
    if setup == "stackless":
        write_assembly(tmp_path / "stackless", {})
    with pytest.raises(AssemblyError) as raised:
        load_assembly(tmp_path / setup)
    assert str(raised.value) == message.format(dir=tmp_path)


def test_a_stack_that_leaves_the_app_is_orphaned_not_deleted() -> None:
    # `cdk deploy` never deletes a stack that is no longer in the app: nothing in it is removed.
    bucket = {"B": resource("AWS::S3::Bucket")}
    review = review_assemblies({"old": stack(bucket)}, {"new": stack(bucket)})
    assert [(s.name, s.status, s.changes, s.replacements) for s in review.stacks] == [
        (
            "new",
            "added",
            [ResourceChange(logical_id="B", resource_type="AWS::S3::Bucket", change="added")],
            [],
        ),
        ("old", "orphaned", [], []),
    ]


def test_an_unchanged_stack_says_so() -> None:
    same = stack({"B": resource("AWS::S3::Bucket")})
    review = review_assemblies({"s": same}, {"s": same})
    assert (review.stacks[0].status, "### s\n\nNo changes." in render_markdown(review)) == ("unchanged", True)


def test_the_cost_change_is_shown_at_floor_expected_and_ceiling() -> None:
    scaling = {"min_replicas": 3, "max_replicas": 8, "queue_target": 5, "kv_cache_target": 0.8}
    before, after = load_preset("production"), make_production(production_model(0, autoscaling=scaling))
    old = stack({}, metadata={"gpufarm:tier": before.model_dump(mode="json")})
    # The model's manifest changes with its replicas.
    new = stack(
        {"Manifest": resource("Custom::AWSCDK-EKS-KubernetesResource")},
        metadata={"gpufarm:tier": after.model_dump(mode="json")},
    )
    review = review_assemblies({"s": old}, {"s": new})
    costs = review.stacks[0].to_dict()["monthly_cost"]
    was, now = monthly_cost(before), monthly_cost(after)
    assert (costs["delta_usd"], costs["expected_delta_usd"], costs["peak_delta_usd"]) == (
        pytest.approx(now.total_usd - was.total_usd),
        pytest.approx(now.expected_total_usd - was.expected_total_usd),
        pytest.approx(now.peak_total_usd - was.peak_total_usd),
    )
    report = render_markdown(review)
    for label, delta in (
        ("floor", now.total_usd - was.total_usd),
        ("expected", now.expected_total_usd - was.expected_total_usd),
        ("ceiling", now.peak_total_usd - was.peak_total_usd),
    ):
        assert delta > 0
        assert (
            f"| Monthly cost, {label} | ${was.total_at(label):,.2f} | ${now.total_at(label):,.2f} | "
            f"+${delta:,.2f} |"
        ) in report
    # The summary's cost change is the floor's, and its GPUs the peak's: the headers say so.
    (summary_header,) = [line for line in report.splitlines() if line.startswith("| Stack | Status |")]
    assert summary_header.endswith(
        "| GPUs reserved / on-demand / spot (at peak) | Monthly cost change, floor |"
    )
    (row,) = [line for line in report.splitlines() if line.startswith("| s | ")]
    assert row.endswith(f"| +${now.total_usd - was.total_usd:,.2f} |")
