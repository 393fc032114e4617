"""PrometheusMonitoring, InferenceAlarms and InferenceDashboard: AMP + scraper, alarms, dashboard.

Two small stacks, each synthesized once with the cdk-nag gate on: `full` (AWS owned key for the
workspace, DCGM exporter, Target Optimizer alarms, load balancer names as tokens) and
`customer_key` (customer managed key for workspace and topic, scraper RBAC, no DCGM exporter,
no Target Optimizer).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Template

from gpufarm.config.model import AlarmsConfig, LoadBalancerKind, PrometheusConfig
from gpufarm.constructs import enable_compliance_checks
from gpufarm.constructs.observability import (
    InferenceAlarms,
    InferenceDashboard,
    PrometheusMonitoring,
)
from gpufarm.k8s.observability import dcgm_exporter_values, scrape_configuration, scraper_rbac
from tests.conftest import cdk_context, cfn_lint_errors
from tests.constructs.helpers import (
    AZS,
    REGION,
    imported_cluster,
    logical_id,
    manifest_of,
    new_stack,
    ref,
    resources,
)

SERVING_NS = "inference"
MODELS = ("qwen3-8b", "llama-3-70b")
SUBNET_IDS = ["subnet-0a1b2c3d4e5f60718", "subnet-0a1b2c3d4e5f60719"]
SECURITY_GROUP_ID = "sg-0123456789abcdef0"
EMAILS = ["oncall@example.com", "ml-platform@example.org"]
LITERAL_LB = "app/gpufarm-alb/50dc6c495c0c9188"
LITERAL_TGS = {m: f"targetgroup/{m}/73e2d6bc24d8a06{i}" for i, m in enumerate(MODELS)}
ALARM = "AWS::CloudWatch::Alarm"
HELM = "Custom::AWSCDK-EKS-HelmChart"
KUBERNETES_RESOURCE = "Custom::AWSCDK-EKS-KubernetesResource"


@dataclass(frozen=True)
class Built:
    stack: cdk.Stack
    template: Template
    outdir: Path
    prometheus: PrometheusMonitoring
    alarms: InferenceAlarms
    dashboard: InferenceDashboard
    key: kms.Key | None
    lb_name: Any
    tg_names: dict[str, Any]
    cluster_arn: Any
    query_role: iam.Role | None = None


def _subnets(stack: cdk.Stack) -> list[ec2.ISubnet]:
    return [
        ec2.Subnet.from_subnet_attributes(
            stack, f"Subnet{i}", subnet_id=subnet_id, availability_zone=az, route_table_id=f"rtb-0{i}"
        )
        for i, (subnet_id, az) in enumerate(zip(SUBNET_IDS, AZS, strict=True))
    ]


def _security_group(stack: cdk.Stack) -> ec2.ISecurityGroup:
    return ec2.SecurityGroup.from_security_group_id(stack, "ClusterSg", SECURITY_GROUP_ID)


def _synth(app: cdk.App, stack: cdk.Stack, outdir: Path) -> Template:
    """Synthesize once with the nag gate; the template is read from the cloud assembly."""
    app.synth()
    return Template.from_json(json.loads((outdir / f"{stack.stack_name}.template.json").read_text()))


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> Built:
    outdir = tmp_path_factory.mktemp("observability-full")
    app = cdk.App(context=cdk_context(), outdir=str(outdir))
    enable_compliance_checks(app)
    stack = cdk.Stack(app, "ObservabilityFull", env=cdk.Environment(region=REGION))
    cluster = imported_cluster(stack)
    # Names as a stack would hand them over: tokens, resolved at deploy time.
    lb_name = cdk.CfnParameter(stack, "LoadBalancerFullName").value_as_string
    tg_names = {m: cdk.CfnParameter(stack, f"TargetGroup{i}").value_as_string for i, m in enumerate(MODELS)}
    prometheus = PrometheusMonitoring(
        stack,
        "Prometheus",
        cluster=cluster,
        config=PrometheusConfig(enabled=True),
        subnets=_subnets(stack),
        security_groups=[_security_group(stack)],
        serving_namespace=SERVING_NS,
    )
    query_role = iam.Role(stack, "KedaRole", assumed_by=iam.ServicePrincipal("pods.eks.amazonaws.com"))
    prometheus.grant_query(query_role)
    alarms = InferenceAlarms(
        stack,
        "Alarms",
        load_balancer_full_name=lb_name,
        target_groups=tg_names,
        config=AlarmsConfig(
            emails=EMAILS, target_5xx_per_minute=20, p99_response_seconds=12.5, evaluation_minutes=3
        ),
        target_optimizer=True,
    )
    dashboard = InferenceDashboard(
        stack,
        "Dashboard",
        name="gpufarm-production",
        load_balancer_full_name=lb_name,
        target_groups=tg_names,
        region=REGION,
        target_optimizer=True,
        workspace_query=True,
    )
    template = _synth(app, stack, outdir)
    return Built(
        stack,
        template,
        outdir,
        prometheus,
        alarms,
        dashboard,
        None,
        stack.resolve(lb_name),
        {m: stack.resolve(v) for m, v in tg_names.items()},
        stack.resolve(cluster.cluster_arn),
        query_role,
    )


@pytest.fixture(scope="module")
def customer_key(tmp_path_factory: pytest.TempPathFactory) -> Built:
    outdir = tmp_path_factory.mktemp("observability-key")
    app = cdk.App(context=cdk_context(), outdir=str(outdir))
    enable_compliance_checks(app)
    stack = cdk.Stack(app, "ObservabilityKey", env=cdk.Environment(region=REGION))
    cluster = imported_cluster(stack)
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    prometheus = PrometheusMonitoring(
        stack,
        "Prometheus",
        cluster=cluster,
        config=PrometheusConfig(enabled=True, scrape_interval_seconds=60, dcgm_exporter=False),
        subnets=_subnets(stack),
        security_groups=[_security_group(stack)],
        serving_namespace=SERVING_NS,
        key=key,
        rbac=True,
        removal_policy=cdk.RemovalPolicy.DESTROY,
    )
    query_role = iam.Role(stack, "KedaRole", assumed_by=iam.ServicePrincipal("pods.eks.amazonaws.com"))
    prometheus.grant_query(query_role)
    alarms = InferenceAlarms(
        stack,
        "Alarms",
        load_balancer_full_name=LITERAL_LB,
        target_groups={MODELS[0]: LITERAL_TGS[MODELS[0]]},
        config=AlarmsConfig(),
        target_optimizer=False,
        key=key,
    )
    dashboard = InferenceDashboard(
        stack,
        "Dashboard",
        name="gpufarm-poc",
        load_balancer_full_name=LITERAL_LB,
        target_groups={MODELS[0]: LITERAL_TGS[MODELS[0]]},
        region=REGION,
        target_optimizer=False,
    )
    template = _synth(app, stack, outdir)
    return Built(
        stack,
        template,
        outdir,
        prometheus,
        alarms,
        dashboard,
        key,
        LITERAL_LB,
        {MODELS[0]: LITERAL_TGS[MODELS[0]]},
        stack.resolve(cluster.cluster_arn),
        query_role,
    )


def _props(built: Built, construct: Any) -> dict[str, Any]:
    found = built.template.to_json()["Resources"][logical_id(construct)]
    props: dict[str, Any] = found["Properties"]
    return props


def _get_att(construct: Any, attribute: str) -> dict[str, Any]:
    return {"Fn::GetAtt": [logical_id(construct), attribute]}


# ============================================================================= workspace and scraper


def test_one_workspace_and_one_scraper(full: Built) -> None:
    full.template.resource_count_is("AWS::APS::Workspace", 1)
    full.template.resource_count_is("AWS::APS::Scraper", 1)


def test_workspace_uses_an_aws_owned_key_by_default(full: Built) -> None:
    assert _props(full, full.prometheus.workspace) == {"Alias": "ObservabilityFull"}


@pytest.mark.parametrize(("which", "policy"), [("full", "Retain"), ("customer_key", "Delete")])
def test_workspace_removal_policy(which: str, policy: str, request: pytest.FixtureRequest) -> None:
    built: Built = request.getfixturevalue(which)
    resource = built.template.to_json()["Resources"][logical_id(built.prometheus.workspace)]
    assert (resource["DeletionPolicy"], resource["UpdateReplacePolicy"]) == (policy, policy)


def test_workspace_is_encrypted_with_the_given_customer_key(customer_key: Built) -> None:
    assert customer_key.key is not None
    assert _props(customer_key, customer_key.prometheus.workspace)["KmsKeyArn"] == _get_att(
        customer_key.key, "Arn"
    )


def test_scraper_reads_the_cluster_through_the_given_subnets_and_security_groups(full: Built) -> None:
    assert _props(full, full.prometheus.scraper)["Source"] == {
        "EksConfiguration": {
            "ClusterArn": full.cluster_arn,
            "SubnetIds": SUBNET_IDS,
            "SecurityGroupIds": [SECURITY_GROUP_ID],
        }
    }


def test_scraper_writes_to_the_workspace(full: Built) -> None:
    assert _props(full, full.prometheus.scraper)["Destination"] == {
        "AmpConfiguration": {"WorkspaceArn": _get_att(full.prometheus.workspace, "Arn")}
    }


@pytest.mark.parametrize(("which", "interval"), [("full", 30), ("customer_key", 60)])
def test_scraper_configuration_is_the_plain_yaml_of_the_scrape_jobs(
    which: str, interval: int, request: pytest.FixtureRequest
) -> None:
    built: Built = request.getfixturevalue(which)
    blob = _props(built, built.prometheus.scraper)["ScrapeConfiguration"]["ConfigurationBlob"]
    assert blob == scrape_configuration(
        scrape_interval_seconds=interval, serving_namespace=SERVING_NS, dcgm_namespace="dcgm-exporter"
    )
    assert yaml.safe_load(blob)["global"]["scrape_interval"] == f"{interval}s"


def test_scraper_uses_its_service_linked_role_with_an_aws_owned_key(full: Built) -> None:
    assert "RoleConfiguration" not in _props(full, full.prometheus.scraper)
    full.template.resource_count_is("AWS::IAM::Role", 1)  # only the test's query role


def test_no_access_entry_is_declared_for_the_scrapers_service_linked_role(full: Built) -> None:
    """AMP creates it; EKS rejects access entries for service-linked roles from anyone else."""
    full.template.resource_count_is("AWS::EKS::AccessEntry", 0)
    assert full.stack.resolve(full.prometheus.scraper_role_arn) == _get_att(
        full.prometheus.scraper, "RoleArn"
    )


def test_query_endpoint_is_the_workspace_url_keda_takes(full: Built) -> None:
    assert full.stack.resolve(full.prometheus.query_endpoint) == {
        "Fn::Join": [
            "",
            [
                f"https://aps-workspaces.{REGION}.",
                {"Ref": "AWS::URLSuffix"},
                "/workspaces/",
                _get_att(full.prometheus.workspace, "WorkspaceId"),
            ],
        ]
    }


def test_workspace_arn_is_the_workspace_attribute(full: Built) -> None:
    assert full.stack.resolve(full.prometheus.workspace_arn) == _get_att(full.prometheus.workspace, "Arn")


def test_grant_query_allows_promql_queries_on_the_workspace_only(full: Built) -> None:
    assert full.query_role is not None
    full.template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "Roles": [ref(full.query_role)],
            "PolicyDocument": {
                "Statement": [
                    {
                        "Action": "aps:QueryMetrics",
                        "Effect": "Allow",
                        "Resource": _get_att(full.prometheus.workspace, "Arn"),
                    }
                ]
            },
        },
    )


def test_grant_query_on_a_customer_key_workspace_also_allows_decrypting(customer_key: Built) -> None:
    assert customer_key.query_role is not None and customer_key.key is not None
    customer_key.template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "Roles": [ref(customer_key.query_role)],
            "PolicyDocument": {
                "Statement": [
                    {
                        "Action": "kms:Decrypt",
                        "Effect": "Allow",
                        "Resource": _get_att(customer_key.key, "Arn"),
                    },
                    {
                        "Action": "aps:QueryMetrics",
                        "Effect": "Allow",
                        "Resource": _get_att(customer_key.prometheus.workspace, "Arn"),
                    },
                ]
            },
        },
    )


# ----------------------------------------------------------------------------- customer key roles


def _role(built: Built, role: iam.Role | None) -> dict[str, Any]:
    assert role is not None
    return _props(built, role)


def test_customer_key_scraper_writes_through_its_role_pair(customer_key: Built) -> None:
    prometheus = customer_key.prometheus
    assert _props(customer_key, prometheus.scraper)["RoleConfiguration"] == {
        "SourceRoleArn": _get_att(prometheus.source_role, "Arn"),
        "TargetRoleArn": _get_att(prometheus.target_role, "Arn"),
    }


def _scrapers_in_this_account() -> dict[str, Any]:
    return {"Fn::Join": ["", [f"arn:aws:aps:{REGION}:", {"Ref": "AWS::AccountId"}, ":scraper/*"]]}


def test_source_role_is_assumed_by_this_accounts_scrapers_only(customer_key: Built) -> None:
    document = _role(customer_key, customer_key.prometheus.source_role)["AssumeRolePolicyDocument"]
    assert document["Statement"] == [
        {
            "Action": "sts:AssumeRole",
            "Effect": "Allow",
            "Principal": {"Service": "scraper.aps.amazonaws.com"},
            "Condition": {
                "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
                "ArnLike": {"aws:SourceArn": _scrapers_in_this_account()},
            },
        }
    ]


def test_target_role_is_assumed_by_the_source_role_for_a_scraper(customer_key: Built) -> None:
    prometheus = customer_key.prometheus
    document = _role(customer_key, prometheus.target_role)["AssumeRolePolicyDocument"]
    assert document["Statement"] == [
        {
            "Action": "sts:AssumeRole",
            "Effect": "Allow",
            "Principal": {"AWS": _get_att(prometheus.source_role, "Arn")},
            "Condition": {"StringLike": {"sts:ExternalId": _scrapers_in_this_account()}},
        }
    ]


def test_target_role_may_remote_write_and_use_the_key(customer_key: Built) -> None:
    prometheus = customer_key.prometheus
    assert customer_key.key is not None and prometheus.target_role is not None
    customer_key.template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "Roles": [ref(prometheus.target_role)],
            "PolicyDocument": {
                "Statement": [
                    {
                        "Action": "aps:RemoteWrite",
                        "Effect": "Allow",
                        "Resource": _get_att(prometheus.workspace, "Arn"),
                    },
                    {
                        "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
                        "Effect": "Allow",
                        "Resource": _get_att(customer_key.key, "Arn"),
                    },
                ]
            },
        },
    )


def test_source_role_may_only_assume_the_target_role(customer_key: Built) -> None:
    prometheus = customer_key.prometheus
    assert prometheus.source_role is not None
    customer_key.template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "Roles": [ref(prometheus.source_role)],
            "PolicyDocument": {
                "Statement": [
                    {
                        "Action": "sts:AssumeRole",
                        "Effect": "Allow",
                        "Resource": _get_att(prometheus.target_role, "Arn"),
                    }
                ]
            },
        },
    )


# ----------------------------------------------------------------------------- in-cluster parts


def test_dcgm_exporter_chart_is_pinned_with_the_gpu_node_values(full: Built) -> None:
    assert full.prometheus.dcgm_exporter is not None
    [chart] = resources(full.template, HELM).values()
    props = dict(chart["Properties"])
    assert json.loads(props.pop("Values")) == dcgm_exporter_values()
    assert {k: v for k, v in props.items() if k not in ("ServiceToken", "ClusterName")} == {
        "Chart": "dcgm-exporter",
        "Repository": "https://nvidia.github.io/dcgm-exporter/helm-charts",
        "Version": "4.6.0",
        "Release": "dcgm-exporter",
        "Namespace": "dcgm-exporter",
        "CreateNamespace": True,
        "Wait": True,
        "Timeout": "600s",
    }


def test_no_dcgm_exporter_when_turned_off(customer_key: Built) -> None:
    customer_key.template.resource_count_is(HELM, 0)
    assert customer_key.prometheus.dcgm_exporter is None


def test_scraper_rbac_is_applied_only_when_asked(full: Built, customer_key: Built) -> None:
    full.template.resource_count_is(KUBERNETES_RESOURCE, 0)
    manifest = customer_key.prometheus.rbac_manifest
    assert manifest is not None
    assert manifest_of(customer_key.template, manifest) == scraper_rbac()


# ============================================================================= alarms


def _alarms(built: Built) -> dict[str, dict[str, Any]]:
    return {name: _props(built, alarm) for name, alarm in built.alarms.alarms.items()}


def test_alarm_set_is_5xx_count_and_rate_then_latency_and_health_per_model_then_rejects(
    full: Built, customer_key: Built
) -> None:
    assert sorted(full.alarms.alarms) == sorted(
        ["5xx", "error-rate", "target-control-rejects"]
        + [f"{kind}:{m}" for m in MODELS for kind in ("p99", "unhealthy")]
    )
    assert sorted(customer_key.alarms.alarms) == [
        "5xx",
        "error-rate",
        f"p99:{MODELS[0]}",
        f"unhealthy:{MODELS[0]}",
    ]
    full.template.resource_count_is(ALARM, 7)


@pytest.mark.parametrize("which", ["full", "customer_key"])
def test_every_alarm_notifies_the_topic_on_alarm_and_ok(which: str, request: pytest.FixtureRequest) -> None:
    built: Built = request.getfixturevalue(which)
    topic = ref(built.alarms.topic)
    for name, props in _alarms(built).items():
        assert (name, props["AlarmActions"], props["OKActions"]) == (name, [topic], [topic])
        assert "InsufficientDataActions" not in props


def test_every_alarm_treats_missing_data_as_not_breaching(full: Built) -> None:
    assert {p["TreatMissingData"] for p in _alarms(full).values()} == {"notBreaching"}


def test_every_alarm_needs_the_breach_for_the_whole_evaluation_window(full: Built) -> None:
    assert {(p["EvaluationPeriods"], p["DatapointsToAlarm"]) for p in _alarms(full).values()} == {(3, 3)}


def _metric(metric: str, dimensions: dict[str, Any]) -> dict[str, Any]:
    return {
        "Namespace": "AWS/ApplicationELB",
        "MetricName": metric,
        "Dimensions": [{"Name": k, "Value": v} for k, v in dimensions.items()],
    }


def test_5xx_alarm_adds_load_balancer_and_target_errors(full: Built) -> None:
    props = _alarms(full)["5xx"]
    lb = {"LoadBalancer": full.lb_name}
    assert props["Metrics"] == [
        {
            "Id": "elb",
            "MetricStat": {"Metric": _metric("HTTPCode_ELB_5XX_Count", lb), "Period": 60, "Stat": "Sum"},
            "ReturnData": False,
        },
        {
            "Id": "target",
            "MetricStat": {"Metric": _metric("HTTPCode_Target_5XX_Count", lb), "Period": 60, "Stat": "Sum"},
            "ReturnData": False,
        },
        {
            "Id": "errors",
            "Expression": "FILL(elb, 0) + FILL(target, 0)",
            "Label": "5xx per minute",
            "ReturnData": True,
        },
    ]
    assert (props["ComparisonOperator"], props["Threshold"]) == ("GreaterThanOrEqualToThreshold", 20)


@pytest.mark.parametrize("model", MODELS)
def test_p99_alarm_per_target_group(full: Built, model: str) -> None:
    props = _alarms(full)[f"p99:{model}"]
    assert {k: props[k] for k in ("Namespace", "MetricName", "Dimensions")} == _metric(
        "TargetResponseTime", {"LoadBalancer": full.lb_name, "TargetGroup": full.tg_names[model]}
    )
    assert (props["ExtendedStatistic"], props["Period"]) == ("p99", 60)
    assert "Statistic" not in props
    assert (props["ComparisonOperator"], props["Threshold"]) == ("GreaterThanThreshold", 12.5)


@pytest.mark.parametrize("model", MODELS)
def test_unhealthy_host_alarm_per_target_group(full: Built, model: str) -> None:
    props = _alarms(full)[f"unhealthy:{model}"]
    assert {k: props[k] for k in ("Namespace", "MetricName", "Dimensions")} == _metric(
        "UnHealthyHostCount", {"LoadBalancer": full.lb_name, "TargetGroup": full.tg_names[model]}
    )
    assert (props["Statistic"], props["Period"]) == ("Maximum", 60)
    assert (props["ComparisonOperator"], props["Threshold"]) == ("GreaterThanThreshold", 0)


def test_target_control_reject_alarm_is_per_load_balancer(full: Built) -> None:
    """CloudWatch publishes TargetControlRequestRejectCount per load balancer, not per target group."""
    props = _alarms(full)["target-control-rejects"]
    assert {k: props[k] for k in ("Namespace", "MetricName", "Dimensions")} == _metric(
        "TargetControlRequestRejectCount", {"LoadBalancer": full.lb_name}
    )
    assert (props["Statistic"], props["ComparisonOperator"], props["Threshold"]) == (
        "Sum",
        "GreaterThanOrEqualToThreshold",
        20,
    )


def test_alarms_describe_the_condition(full: Built) -> None:
    assert _alarms(full)[f"p99:{MODELS[0]}"]["AlarmDescription"] == (
        f"{MODELS[0]}: p99 time to first response byte above 12.5 s for 3 min"
    )


# ----------------------------------------------------------------------------- topic


def test_topic_is_encrypted_with_its_own_retained_rotating_key(full: Built) -> None:
    key = full.alarms.key
    assert _props(full, full.alarms.topic)["KmsMasterKeyId"] == _get_att(key, "Arn")
    resource = full.template.to_json()["Resources"][logical_id(key)]
    assert (resource["Properties"]["EnableKeyRotation"], resource["DeletionPolicy"]) == (True, "Retain")


def test_topic_uses_the_given_key(customer_key: Built) -> None:
    assert customer_key.key is not None
    assert _props(customer_key, customer_key.alarms.topic)["KmsMasterKeyId"] == _get_att(
        customer_key.key, "Arn"
    )
    customer_key.template.resource_count_is("AWS::KMS::Key", 1)


def _this_accounts_alarms() -> dict[str, Any]:
    alarms_arn = {"Fn::Join": ["", [f"arn:aws:cloudwatch:{REGION}:", {"Ref": "AWS::AccountId"}, ":alarm:*"]]}
    return {
        "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
        "ArnLike": {"aws:SourceArn": alarms_arn},
    }


@pytest.mark.parametrize("which", ["full", "customer_key"])
def test_cloudwatch_may_use_the_topic_key(which: str, request: pytest.FixtureRequest) -> None:
    built: Built = request.getfixturevalue(which)
    statements = _props(built, built.alarms.key)["KeyPolicy"]["Statement"]
    assert {
        "Action": ["kms:Decrypt", "kms:GenerateDataKey*"],
        "Condition": _this_accounts_alarms(),
        "Effect": "Allow",
        "Principal": {"Service": "cloudwatch.amazonaws.com"},
        "Resource": "*",
        "Sid": "CloudWatchAlarmsEncrypt",
    } in statements


def _topic_statements(built: Built) -> list[dict[str, Any]]:
    [policy] = resources(built.template, "AWS::SNS::TopicPolicy").values()
    assert policy["Properties"]["Topics"] == [ref(built.alarms.topic)]
    statements: list[dict[str, Any]] = policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def test_topic_policy_denies_publishing_without_tls(full: Built) -> None:
    assert {
        "Action": "sns:Publish",
        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        "Effect": "Deny",
        "Principal": "*",
        "Resource": ref(full.alarms.topic),
        "Sid": "AllowPublishThroughSSLOnly",
    } in _topic_statements(full)


def test_topic_policy_lets_this_accounts_alarms_publish(full: Built) -> None:
    assert {
        "Action": "sns:Publish",
        "Condition": _this_accounts_alarms(),
        "Effect": "Allow",
        "Principal": {"Service": "cloudwatch.amazonaws.com"},
        "Resource": ref(full.alarms.topic),
        "Sid": "CloudWatchAlarmsPublish",
    } in _topic_statements(full)


def test_each_email_is_subscribed(full: Built, customer_key: Built) -> None:
    found = resources(full.template, "AWS::SNS::Subscription")
    assert sorted(
        (p["Properties"]["Protocol"], p["Properties"]["Endpoint"]) for p in found.values()
    ) == sorted(("email", e) for e in EMAILS)
    assert {json.dumps(p["Properties"]["TopicArn"]) for p in found.values()} == {
        json.dumps(ref(full.alarms.topic))
    }
    customer_key.template.resource_count_is("AWS::SNS::Subscription", 0)


def test_addresses_differing_only_in_punctuation_get_their_own_subscriptions() -> None:
    alarms = InferenceAlarms(
        new_stack(),
        "Alarms",
        load_balancer_full_name=LITERAL_LB,
        target_groups=LITERAL_TGS,
        config=AlarmsConfig(emails=["a.b@example.com", "a-b@example.com"]),
        target_optimizer=False,
    )
    assert len([c for c in alarms.node.children if isinstance(c, sns.CfnSubscription)]) == 2


# ============================================================================= dashboard


def _body(built: Built) -> dict[str, Any]:
    """The dashboard JSON, with each CloudFormation token replaced by its JSON-encoded form."""
    raw = _props(built, built.dashboard.dashboard)["DashboardBody"]
    if isinstance(raw, str):
        text = raw
    else:
        delimiter, parts = raw["Fn::Join"]
        text = delimiter.join(p if isinstance(p, str) else json.dumps(p).replace('"', "'") for p in parts)
    body: dict[str, Any] = json.loads(text)
    return body


def _titles(built: Built) -> list[str]:
    return [w["properties"].get("title", "") for w in _body(built)["widgets"]]


def test_dashboard_is_named_and_its_body_is_json(full: Built) -> None:
    assert _props(full, full.dashboard.dashboard)["DashboardName"] == "gpufarm-production"
    assert _body(full)["start"] == "-PT3H"


def test_dashboard_has_a_target_health_widget_per_model(full: Built, customer_key: Built) -> None:
    assert [t for t in _titles(full) if t.startswith("Targets: ")] == [
        f"Targets: {m}" for m in sorted(MODELS)
    ]
    assert [t for t in _titles(customer_key) if t.startswith("Targets: ")] == [f"Targets: {MODELS[0]}"]


def test_dashboard_graphs_requests_errors_and_latency(customer_key: Built) -> None:
    assert set(_titles(customer_key)) >= {
        "Requests per minute",
        "5xx per minute",
        "Response time p50",
        "Response time p99",
    }


def test_dashboard_latency_lines_are_per_target_group_percentiles(customer_key: Built) -> None:
    [p99] = [w for w in _body(customer_key)["widgets"] if w["properties"].get("title") == "Response time p99"]
    assert p99["properties"]["metrics"] == [
        [
            "AWS/ApplicationELB",
            "TargetResponseTime",
            "TargetGroup",
            LITERAL_TGS[MODELS[0]],
            "LoadBalancer",
            LITERAL_LB,
            {"label": MODELS[0], "stat": "p99"},
        ]
    ]


def test_dashboard_metrics_carry_the_token_names(full: Built) -> None:
    [requests] = [w for w in _body(full)["widgets"] if w["properties"].get("title") == "Requests per minute"]
    lines = requests["properties"]["metrics"]
    lb = json.dumps(full.lb_name).replace('"', "'")
    assert [(line[3], line[5], line[6]["label"]) for line in lines] == [
        (json.dumps(full.tg_names[m]).replace('"', "'"), lb, m) for m in sorted(MODELS)
    ]


def test_target_optimizer_row_only_when_on(full: Built, customer_key: Built) -> None:
    assert "Target Optimizer" in _titles(full)
    assert "Target Optimizer" not in _titles(customer_key)


def test_promql_panel_only_when_asked(full: Built, customer_key: Built) -> None:
    def markdown(built: Built) -> str:
        return "\n".join(w["properties"].get("markdown", "") for w in _body(built)["widgets"])

    assert "vllm:num_requests_waiting" in markdown(full)
    assert "vllm:num_requests_waiting" not in markdown(customer_key)


def test_dashboard_widgets_tile_the_grid_without_overlap(full: Built) -> None:
    cells: set[tuple[int, int]] = set()
    for widget in _body(full)["widgets"]:
        assert widget["x"] + widget["width"] <= 24
        area = {
            (x, y)
            for x in range(widget["x"], widget["x"] + widget["width"])
            for y in range(widget["y"], widget["y"] + widget["height"])
        }
        assert not cells & area
        cells |= area


# ============================================================================= gates


@pytest.mark.parametrize("which", ["full", "customer_key"])
def test_cdk_nag_finds_nothing(which: str, request: pytest.FixtureRequest) -> None:
    built: Built = request.getfixturevalue(which)
    report = json.loads((built.outdir / "validation-report.json").read_text())
    assert [(p["pluginName"], p["conclusion"], p["violations"]) for p in report["pluginReports"]] == [
        (p["pluginName"], "success", []) for p in report["pluginReports"]
    ]


@pytest.mark.parametrize("which", ["full", "customer_key"])
def test_cfn_lint_reports_no_errors(which: str, request: pytest.FixtureRequest) -> None:
    built: Built = request.getfixturevalue(which)
    assert cfn_lint_errors(str(built.outdir / f"{built.stack.stack_name}.template.json")) == []


# ============================================================================= invalid input


def _prometheus(stack: cdk.Stack, **overrides: Any) -> PrometheusMonitoring:
    args: dict[str, Any] = {
        "cluster": imported_cluster(stack),
        "config": PrometheusConfig(enabled=True),
        "security_groups": [_security_group(stack)],
        "serving_namespace": SERVING_NS,
        **overrides,
    }
    if "subnets" not in args:
        args["subnets"] = _subnets(stack)
    return PrometheusMonitoring(stack, "Prometheus", **args)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"config": PrometheusConfig(enabled=False)},
            "'config.enabled' must be true to build PrometheusMonitoring, got False",
        ),
        (
            # The config model rejects this too; a construct user may build the config unvalidated.
            {
                "config": PrometheusConfig.model_construct(
                    **{**PrometheusConfig(enabled=True).model_dump(), "scrape_interval_seconds": 15}
                )
            },
            "'scrape_interval_seconds' must be 30-300 (the scraper's minimum is 30 s), got 15",
        ),
        ({"subnets": 1}, "'subnets' must name 2-5 subnets in at least two Availability Zones, got 1"),
        (
            {"security_groups": []},
            "'security_groups' must name 1-5 security groups reaching the pods and the endpoint, got 0",
        ),
        (
            {"serving_namespace": "Serving"},
            "'serving_namespace' must be a Kubernetes namespace name (a DNS label), got 'Serving'",
        ),
    ],
)
def test_invalid_prometheus_monitoring(overrides: dict[str, Any], message: str) -> None:
    stack = new_stack()
    if "subnets" in overrides:
        overrides = {"subnets": _subnets(stack)[: overrides["subnets"]]}
    with pytest.raises(ValueError) as error:
        _prometheus(stack, **overrides)
    assert str(error.value) == message


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"config": AlarmsConfig(enabled=False)},
            "'config.enabled' must be true to build InferenceAlarms, got False",
        ),
        ({"target_groups": {}}, "'target_groups' must map at least one model to its target group, got {}"),
        (
            {"kind": LoadBalancerKind.NLB, "target_optimizer": True},
            "'target_optimizer' must be false with kind 'nlb' (an ALB feature), got True",
        ),
    ],
)
def test_invalid_inference_alarms(overrides: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {
        "load_balancer_full_name": LITERAL_LB,
        "target_groups": LITERAL_TGS,
        "config": AlarmsConfig(),
        "target_optimizer": False,
        **overrides,
    }
    with pytest.raises(ValueError) as error:
        InferenceAlarms(new_stack(), "Alarms", **args)
    assert str(error.value) == message


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"name": "gpufarm production"},
            "'name' must be 1-255 letters, digits, '-' or '_', got 'gpufarm production'",
        ),
        ({"name": ""}, "'name' must be 1-255 letters, digits, '-' or '_', got ''"),
        ({"target_groups": {}}, "'target_groups' must map at least one model to its target group, got {}"),
        (
            {"kind": LoadBalancerKind.NLB, "target_optimizer": True},
            "'target_optimizer' must be false with kind 'nlb' (an ALB feature), got True",
        ),
    ],
)
def test_invalid_inference_dashboard(overrides: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {
        "name": "gpufarm",
        "load_balancer_full_name": LITERAL_LB,
        "target_groups": LITERAL_TGS,
        "region": REGION,
        "target_optimizer": False,
        **overrides,
    }
    with pytest.raises(ValueError) as error:
        InferenceDashboard(new_stack(), "Dashboard", **args)
    assert str(error.value) == message


def test_network_load_balancer_alarms_watch_health_and_resets() -> None:
    stack = new_stack()
    alarms = InferenceAlarms(
        stack,
        "Alarms",
        load_balancer_full_name=LITERAL_LB,
        target_groups=LITERAL_TGS,
        config=AlarmsConfig(target_5xx_per_minute=7),
        target_optimizer=False,
        kind=LoadBalancerKind.NLB,
    )
    # An NLB publishes no HTTP codes or response times: health per target group and TCP resets.
    assert sorted(alarms.alarms) == sorted([*(f"unhealthy:{m}" for m in LITERAL_TGS), "target-resets"])
    template = Template.from_stack(stack)
    found = [a["Properties"] for a in template.find_resources("AWS::CloudWatch::Alarm").values()]
    assert {a["Namespace"] for a in found} == {"AWS/NetworkELB"}
    (resets,) = [a for a in found if a["MetricName"] == "TCP_Target_Reset_Count"]
    assert (resets["Threshold"], resets["Statistic"]) == (7, "Sum")


def test_network_load_balancer_dashboard_charts_flows_resets_and_target_health() -> None:
    stack = new_stack()
    dashboard = InferenceDashboard(
        stack,
        "Dashboard",
        name="gpufarm-enterprise",
        load_balancer_full_name=LITERAL_LB,
        target_groups=LITERAL_TGS,
        region=REGION,
        target_optimizer=False,
        workspace_query=True,
        kind=LoadBalancerKind.NLB,
    )
    graphs = [w["properties"] for w in dashboard.body["widgets"] if w["type"] == "metric"]
    metrics = [m for g in graphs for m in g["metrics"]]
    # Every series is one the NLB publishes; none of the ALB's HTTP metrics appear.
    assert {m[0] for m in metrics} == {"AWS/NetworkELB"}
    names = {m[1] for m in metrics}
    assert {"NewFlowCount", "ActiveFlowCount", "ProcessedBytes", "TCP_Target_Reset_Count"} <= names
    assert not names & {"RequestCount", "TargetResponseTime", "HTTPCode_Target_5XX_Count"}
    # Target health is the only per-model row: one widget per target group.
    per_model = {g["title"]: g for g in graphs if g["title"].startswith("Targets: ")}
    assert sorted(per_model) == sorted(f"Targets: {m}" for m in LITERAL_TGS)
    for model, tg in LITERAL_TGS.items():
        for metric in per_model[f"Targets: {model}"]["metrics"]:
            assert metric[metric.index("TargetGroup") + 1] == tg
    # Flow and reset metrics exist per load balancer only: never filtered by target group.
    assert all(
        "TargetGroup" not in m for m in metrics if m[1] != "HealthyHostCount" and m[1] != "UnHealthyHostCount"
    )
    texts = [w["properties"]["markdown"] for w in dashboard.body["widgets"] if w["type"] == "text"]
    assert any("vllm:num_requests_waiting" in t for t in texts)


@pytest.mark.parametrize(("network", "kind"), [(True, LoadBalancerKind.NLB), (False, LoadBalancerKind.ALB)])
def test_deprecated_network_keyword_still_chooses_the_kind(network: bool, kind: LoadBalancerKind) -> None:
    stack = new_stack()
    with pytest.warns(DeprecationWarning) as warned:
        alarms = InferenceAlarms(
            stack,
            "Alarms",
            load_balancer_full_name=LITERAL_LB,
            target_groups=LITERAL_TGS,
            config=AlarmsConfig(),
            target_optimizer=False,
            network=network,
        )
        dashboard = InferenceDashboard(
            stack,
            "Dashboard",
            name="gpufarm",
            load_balancer_full_name=LITERAL_LB,
            target_groups=LITERAL_TGS,
            region=REGION,
            target_optimizer=False,
            network=network,
        )
    assert [str(w.message) for w in warned] == [
        f"InferenceAlarms(network=...) is deprecated: pass kind=LoadBalancerKind.{kind.name} instead",
        f"InferenceDashboard(network=...) is deprecated: pass kind=LoadBalancerKind.{kind.name} instead",
    ]
    # The warning points at the caller, not at the construct.
    assert {Path(w.filename).name for w in warned} == {Path(__file__).name}
    assert (alarms.kind, dashboard.kind) == (kind, kind)
    namespaces = {
        a["Properties"].get("Namespace")
        for a in Template.from_stack(stack).find_resources("AWS::CloudWatch::Alarm").values()
    } - {None}
    assert namespaces == {"AWS/NetworkELB" if network else "AWS/ApplicationELB"}


def test_alarms_without_a_kind_read_the_application_load_balancer() -> None:
    alarms = InferenceAlarms(
        new_stack(),
        "Alarms",
        load_balancer_full_name=LITERAL_LB,
        target_groups=LITERAL_TGS,
        config=AlarmsConfig(),
        target_optimizer=False,
    )
    assert alarms.kind is LoadBalancerKind.ALB
    assert "5xx" in alarms.alarms


def test_network_keyword_that_contradicts_the_kind_is_refused() -> None:
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError) as error:
        InferenceAlarms(
            new_stack(),
            "Alarms",
            load_balancer_full_name=LITERAL_LB,
            target_groups=LITERAL_TGS,
            config=AlarmsConfig(),
            target_optimizer=False,
            kind=LoadBalancerKind.ALB,
            network=True,
        )
    assert str(error.value) == "'network' must agree with 'kind' ('alb'), got network=True"
