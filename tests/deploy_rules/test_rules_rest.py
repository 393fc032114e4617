"""Deploy rules for the monitoring, IAM, storage, messaging, WAF, Lambda and EKS custom resources.

test_catalog.py runs every rule on its own examples; these tests pin each rule's exact message,
the shapes of gpufarm's own templates the rules must read (rendered `Fn::Join`, tokens), and the
helpers the rules share.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpufarm.deploy_rules import (
    RULES,
    aps,
    awslambda,
    bedrock,
    check_template,
    cloudwatch,
    custom,
    events,
    iam,
    kms,
    kubernetes,
    logs,
    s3,
    sns,
    sqs,
    ssm,
    wafv2,
)
from gpufarm.deploy_rules.kubernetes import duration_seconds, label_key_problem, manifest_objects
from gpufarm.deploy_rules.s3 import bucket_name_problems
from gpufarm.deploy_rules.shapes import TOKEN, policy_size, render, resource

BY_ID = {rule.id: rule for rule in RULES}


def _messages(document: dict[str, Any], rule_id: str) -> list[tuple[str, str]]:
    return [
        (v.logical_id, v.message) for v in check_template({"Resources": document}) if v.rule.id == rule_id
    ]


BAD_MESSAGES: list[tuple[str, list[tuple[str, str]]]] = [
    (
        "APS-WORKSPACE-ALIAS",
        [("Ws", "Alias '   ' has 0 characters once trimmed; a workspace alias has 1 to 100")],
    ),
    (
        "APS-RULE-GROUP-NAME-LENGTH",
        [
            (
                "R",
                f"namespace 'ns' and rule group '{'g' * 40}'... are 722 UTF-8 bytes together; at most 721",
            )
        ],
    ),
    (
        "APS-ALERT-MANAGER-SNS",
        [("Ws", "receiver 'r' has no sigv4.region, which AMP needs to sign its SNS calls")],
    ),
    (
        "APS-SCRAPER-CLUSTER-ARN",
        [
            (
                "Scraper",
                "Source.EksConfiguration.ClusterArn is Ref Cluster, which gives the cluster name; "
                "use Fn::GetAtt Cluster.Arn",
            )
        ],
    ),
    ("LAMBDA-MEMORY", [("Fn", "MemorySize 16384 MB; a function has at most 10240 MB")]),
    (
        "LAMBDA-LOG-LEVEL-JSON",
        [("Fn", "ApplicationLogLevel set with LogFormat Text; log-level filtering needs LogFormat JSON")],
    ),
    ("LAMBDA-LAYER-LICENSE-INFO", [("L", "LicenseInfo has 550 characters; the maximum is 512")]),
    (
        "BEDROCK-GUARDRAIL-TOPIC-DEFINITION",
        [
            (
                "Guardrail",
                "topic 'investment-advice': definition has 300 characters; the CLASSIC tier allows 200",
            )
        ],
    ),
    (
        "BEDROCK-GUARDRAIL-VERSION-IDENTIFIER",
        [("V", "GuardrailIdentifier is Guardrail.Version; use its GuardrailId or GuardrailArn")],
    ),
    (
        "CW-ALARM-EVALUATION-RANGE",
        [
            (
                "Alarm",
                "Period 300 s x EvaluationPeriods 300 = 90000 s; the most an alarm with this period "
                "can evaluate is 86400 s",
            )
        ],
    ),
    (
        "CW-ALARM-ONE-RETURN-DATA",
        [
            (
                "Alarm",
                "2 metric queries return data (m1, e1); exactly one must (ReturnData defaults to "
                "true, set it to false on the others)",
            )
        ],
    ),
    (
        "CW-ALARM-DATAPOINTS",
        [("Alarm", "DatapointsToAlarm 5 exceeds EvaluationPeriods 3 (M out of N needs M <= N)")],
    ),
    ("CW-ALARM-METRIC-QUERIES", [("Alarm", "11 MetricStat queries; an alarm takes at most 10")]),
    (
        "CW-ALARM-QUERY-IDS",
        [
            (
                "Alarm",
                "Metrics[0].Id 'Errors' must start with a lowercase letter and hold only letters, "
                "digits and '_'",
            )
        ],
    ),
    (
        "CW-DASHBOARD-NAME",
        [("R", "DashboardName 'gpufarm.poc': letters, digits, '-' and '_'")],
    ),
    ("CW-DASHBOARD-WIDGETS", [("D", "DashboardBody has 501 widgets; a dashboard holds at most 500")]),
    (
        "CUSTOM-RESTRICT-DEFAULT-SG",
        [
            (
                "Restrict",
                "DefaultSecurityGroupId points at Vpc (AWS::EC2::VPC, CidrBlock), "
                "not a VPC's DefaultSecurityGroup",
            )
        ],
    ),
    (
        "EVENTS-RULE-FIFO-TARGET",
        [
            ("Rule", "target Interruptions: FIFO queue Queue needs ContentBasedDeduplication enabled"),
            ("Rule", "target Interruptions: a FIFO queue target needs SqsParameters.MessageGroupId"),
        ],
    ),
    (
        "IAM-ROLE-INLINE-POLICY-SIZE",
        [("Role", "its inline policies total at least 12246 characters; a role's cannot exceed 10240")],
    ),
    ("IAM-ROLE-MANAGED-POLICIES", [("Role", "21 managed policies attached; a role can have at most 20")]),
    (
        "IAM-POLICY-ROLE-SIZE",
        [
            (
                "Extra",
                "role Role's inline policies, this one included, total at least 12246 characters; "
                "a role's cannot exceed 10240",
            )
        ],
    ),
    (
        "IAM-MANAGED-POLICY-SIZE",
        [("P", "the policy has at least 6223 characters; a managed policy cannot exceed 6144")],
    ),
    (
        "IAM-INSTANCE-PROFILE-ROLE-NAME",
        [("P", "Roles entry is an attribute of Role; an instance profile takes its name (Ref)")],
    ),
    (
        "KMS-KEY-ROTATION-SYMMETRIC",
        [
            (
                "Key",
                "EnableKeyRotation with KeySpec RSA_2048: only symmetric encryption keys "
                "rotate automatically",
            )
        ],
    ),
    (
        "K8S-OBJECT-NAME",
        [
            ("M", "ConfigMap 'Llama_3.1-8B': the name must be a DNS subdomain of at most 253 characters"),
            ("M", "Service '8b': the name must be a DNS label of at most 63 characters"),
        ],
    ),
    (
        "K8S-PROBES",
        [
            (
                "M",
                "Deployment 'vllm-llama': init container 'hf-token' sets readinessProbe: only a "
                "sidecar (restartPolicy Always) may",
            ),
            (
                "M",
                "Deployment 'vllm-llama': container 'vllm' livenessProbe.failureThreshold is 0; the "
                "minimum is 1",
            ),
            (
                "M",
                "Deployment 'vllm-llama': container 'vllm' livenessProbe.successThreshold is 2; it must be 1",
            ),
        ],
    ),
    (
        "K8S-LABELS",
        [
            (
                "M",
                "ConfigMap 'vllm': label 'gpufarm.io/model' value 'Llama 3.1 8B' is not a valid label value",
            ),
            (
                "M",
                "ConfigMap 'vllm': label key '-tier': name '-tier' is not 1 to 63 alphanumerics, '-', "
                "'_' or '.', alphanumeric at both ends",
            ),
        ],
    ),
    (
        "HELM-RELEASE-NAME",
        [
            (
                "C",
                "Release 'gpufarm-production-keda-event-driven-autoscaler-release' is not a DNS "
                "subdomain of at most 53 characters",
            )
        ],
    ),
    ("HELM-VERSION-PINNED", [("C", "chart 'keda' from a repository has no Version; pin one")]),
    (
        "HELM-TIMEOUT",
        [
            (
                "C",
                "Timeout 900s leaves the kubectl handler, a Lambda function stopped at 15 minutes, "
                "no time to start and report; use at most 870s",
            )
        ],
    ),
    ("LOGS-KMS-KEY-ARN", [("Logs", "KmsKeyId is Ref Key, which gives the key ID; use Fn::GetAtt Key.Arn")]),
    ("S3-BUCKET-NAME", [("B", "BucketName 'gpufarm-logs-s3alias' ends with the reserved suffix '-s3alias'")]),
    (
        "S3-LIFECYCLE-RULES",
        [("B", "1001 lifecycle rules; a bucket's lifecycle configuration holds at most 1000")],
    ),
    (
        "S3-BUCKET-POLICY-SIZE",
        [("P", "the policy has at least 23328 bytes; a bucket policy is limited to 20 KB (20480 bytes)")],
    ),
    ("SNS-TOPIC-NAME", [("T", "TopicName 'gpufarm-alarms' of a FIFO topic does not end with '.fifo'")]),
    ("SNS-TOPIC-POLICY-ARNS", [("P", "Topics entry T.TopicName is not the topic ARN; use Ref")]),
    (
        "SQS-QUEUE-NAME",
        [("Q", "QueueName 'gpufarm-poc.interruptions' is not accepted: letters, digits, '_' and '-' only")],
    ),
    ("SQS-QUEUE-POLICY-URLS", [("P", "Queues entry Q.Arn is not the queue URL; use Ref")]),
    (
        "SSM-PARAMETER-NAME",
        [("P", "Name 'ssm-gpufarm-poc-ready' starts with the reserved prefix 'aws' or 'ssm'")],
    ),
    (
        "SSM-PARAMETER-VALUE-SIZE",
        [("P", "Value has at least 5000 characters; a Standard parameter holds at most 4096")],
    ),
    (
        "WAF-WEBACL-RULE-PRIORITIES",
        [("Acl", "2 rules have Priority 0; each rule of a web ACL needs its own")],
    ),
    (
        "WAF-ASSOCIATION-REGIONAL",
        [
            (
                "Assoc",
                "web ACL Acl has Scope CLOUDFRONT; only a REGIONAL web ACL is associated with a resource",
            )
        ],
    ),
    (
        "WAF-LOGGING-DESTINATION-PREFIX",
        [("Logging", "log destination 'gpufarm-waf' does not start with 'aws-waf-logs-'")],
    ),
    ("WAF-IPSET-ADDRESSES", [("Set", "address '0.0.0.0/0': WAF takes every CIDR range but /0")]),
]


@pytest.mark.parametrize(("rule_id", "expected"), BAD_MESSAGES, ids=[r for r, _ in BAD_MESSAGES])
def test_bad_example_message(rule_id: str, expected: list[tuple[str, str]]) -> None:
    assert _messages(dict(BY_ID[rule_id].bad), rule_id) == expected


THESE_MODULES = (
    aps,
    awslambda,
    bedrock,
    cloudwatch,
    custom,
    events,
    iam,
    kms,
    kubernetes,
    logs,
    s3,
    sns,
    sqs,
    ssm,
    wafv2,
)
"""The services this file pins messages for (EC2, EKS, ELB, Auto Scaling and FSx have their own)."""


def test_every_rule_of_these_services_has_its_message_pinned() -> None:
    pinned = {rule_id for rule_id, _ in BAD_MESSAGES}
    assert {r.id for module in THESE_MODULES for r in module.RULES} == pinned


# --- shapes gpufarm's own templates use -------------------------------------------------------


def _waf_logging(log_group_name: Any) -> dict[str, Any]:
    """A web ACL logging to a log group by Ref inside a Join, as gpufarm's WAF construct does."""
    bad = BY_ID["WAF-LOGGING-DESTINATION-PREFIX"].bad
    logs = resource("AWS::Logs::LogGroup", LogGroupName=log_group_name, RetentionInDays=30)
    return {**bad, "Logs": logs}


def test_waf_log_group_named_by_join_with_the_prefix_passes() -> None:
    name = {
        "Fn::Join": [
            "",
            ["aws-waf-logs-gpufarm-poc-", {"Fn::Select": [2, {"Fn::Split": ["/", {"Ref": "AWS::StackId"}]}]}],
        ]
    }
    assert _messages(_waf_logging(name), "WAF-LOGGING-DESTINATION-PREFIX") == []


def test_waf_log_group_named_by_join_without_the_prefix_fails() -> None:
    name = {"Fn::Join": ["", ["gpufarm-waf-", {"Ref": "AWS::StackName"}]]}
    assert _messages(_waf_logging(name), "WAF-LOGGING-DESTINATION-PREFIX") == [
        ("Logging", "log destination 'gpufarm-waf-...' does not start with 'aws-waf-logs-'")
    ]


def test_waf_log_group_by_getatt_is_resolved() -> None:
    document = _waf_logging("gpufarm-waf")
    document["Logging"]["Properties"]["LogDestinationConfigs"] = [{"Fn::GetAtt": ["Logs", "Arn"]}]
    assert _messages(document, "WAF-LOGGING-DESTINATION-PREFIX") == [
        ("Logging", "log destination 'gpufarm-waf' does not start with 'aws-waf-logs-'")
    ]


def test_waf_log_group_named_by_a_token_is_skipped() -> None:
    assert _messages(_waf_logging({"Ref": "LogGroupName"}), "WAF-LOGGING-DESTINATION-PREFIX") == []


def _joined_manifest(name_parts: list[Any]) -> dict[str, Any]:
    """A manifest as CDK writes it when a name holds a token: a JSON list split by Fn::Join."""
    head = '[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"'
    tail = '","namespace":"gpufarm"},"data":{}}]'
    manifest = {"Fn::Join": ["", [head, *name_parts, tail]]}
    return {"M": resource("Custom::AWSCDK-EKS-KubernetesResource", ClusterName="c", Manifest=manifest)}


def test_manifest_in_a_join_is_read() -> None:
    assert _messages(_joined_manifest(["Llama_", {"Ref": "AWS::StackName"}]), "K8S-OBJECT-NAME") == []
    assert _messages(_joined_manifest(["Llama_8B"]), "K8S-OBJECT-NAME") == [
        ("M", "ConfigMap 'Llama_8B': the name must be a DNS subdomain of at most 253 characters")
    ]


def test_manifest_reader_renders_tokens() -> None:
    (obj,) = manifest_objects(
        _joined_manifest(["vllm-", {"Ref": "AWS::StackName"}])["M"]["Properties"]["Manifest"]
    )
    assert obj["metadata"]["name"] == f"vllm-{TOKEN}"


def test_namespace_of_an_object_is_a_dns_label() -> None:
    manifest = json.dumps(
        [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "gpu.farm"}}]
    )
    document = {"M": resource("Custom::AWSCDK-EKS-KubernetesResource", ClusterName="c", Manifest=manifest)}
    assert _messages(document, "K8S-OBJECT-NAME") == [
        ("M", "ConfigMap 'a': namespace 'gpu.farm' is not a DNS label of at most 63 characters")
    ]


def test_alarm_with_unresolved_return_data_is_skipped() -> None:
    alarm = BY_ID["CW-ALARM-ONE-RETURN-DATA"].bad["Alarm"]
    metrics = [{**m, "ReturnData": {"Ref": "P"}} for m in alarm["Properties"]["Metrics"]]
    document = {"Alarm": {**alarm, "Properties": {**alarm["Properties"], "Metrics": metrics}}}
    assert _messages(document, "CW-ALARM-ONE-RETURN-DATA") == []


def test_alarm_period_in_metric_math_counts_for_the_evaluation_range() -> None:
    alarm = BY_ID["CW-ALARM-ONE-RETURN-DATA"].good["Alarm"]
    document = {"Alarm": {**alarm, "Properties": {**alarm["Properties"], "EvaluationPeriods": 1441}}}
    assert _messages(document, "CW-ALARM-EVALUATION-RANGE") == [
        (
            "Alarm",
            "Metrics[0].MetricStat.Period 60 s x EvaluationPeriods 1441 = 86460 s; the most an alarm "
            "with this period can evaluate is 86400 s",
        )
    ]


def test_dashboard_body_in_a_join_is_read() -> None:
    widgets = ",".join(['{"type":"text","properties":{"markdown":"m"}}'] * 501)
    body = {"Fn::Join": ["", ['{"widgets":[', widgets, '],"region":"', {"Ref": "AWS::Region"}, '"}']]}
    document = {"D": resource("AWS::CloudWatch::Dashboard", DashboardBody=body)}
    assert _messages(document, "CW-DASHBOARD-WIDGETS") == [
        ("D", "DashboardBody has 501 widgets; a dashboard holds at most 500")
    ]


def test_lambda_managed_instances_keep_their_own_memory_limit() -> None:
    function = BY_ID["LAMBDA-MEMORY"].bad["Fn"]
    provider = {"LambdaManagedInstancesCapacityProviderConfig": {"CapacityProviderArn": "arn:aws:lambda:::p"}}
    properties = {**function["Properties"], "CapacityProviderConfig": provider}
    assert _messages({"Fn": {**function, "Properties": properties}}, "LAMBDA-MEMORY") == []


def test_fifo_target_resolved_only_for_a_queue_of_the_template() -> None:
    rule = BY_ID["EVENTS-RULE-FIFO-TARGET"].bad["Rule"]
    assert _messages({"Rule": rule}, "EVENTS-RULE-FIFO-TARGET") == []


def test_iam_size_counts_no_white_space_and_nothing_for_tokens() -> None:
    assert policy_size({"Statement": [{"Resource": {"Fn::GetAtt": ["B", "Arn"]}}]}) == len(
        '{"Statement":[{"Resource":""}]}'
    )
    assert policy_size('{ "a" : "b c" }') == len('{"a":"bc"}')


# --- helpers -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "rendered"),
    [
        ("text", "text"),
        ({"Fn::Join": ["-", ["a", {"Ref": "X"}, "b"]]}, f"a-{TOKEN}-b"),
        ({"Fn::Sub": "arn:${AWS::Partition}:s3:::b"}, f"arn:{TOKEN}:s3:::b"),
        ({"Fn::Join": [{"Ref": "Sep"}, ["a", "b"]]}, None),
        ({"Ref": "X"}, TOKEN),
    ],
)
def test_render(value: Any, rendered: str | None) -> None:
    assert render(value) == rendered


@pytest.mark.parametrize(
    ("name", "problems"),
    [
        ("gpufarm-logs", []),
        ("ab", ["has 2 characters, not 3 to 63"]),
        ("Gpufarm_Logs", ["has characters other than lowercase letters, digits, '.' and '-'"]),
        ("-gpufarm", ["does not begin and end with a letter or digit"]),
        ("gpufarm..logs", ["has two adjacent periods"]),
        ("192.168.5.4", ["is formatted as an IP address"]),
        ("xn--gpufarm", ["starts with the reserved prefix 'xn--'"]),
        ("sthree-gpufarm", ["starts with the reserved prefix 'sthree-'"]),
        ("gpufarm--ol-s3", ["ends with the reserved suffix '--ol-s3'"]),
        ("gpufarm.mrap", ["ends with the reserved suffix '.mrap'"]),
    ],
)
def test_bucket_name_problems(name: str, problems: list[str]) -> None:
    assert bucket_name_problems(name) == problems


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("900s", 900.0),
        ("15m0s", 900.0),
        ("1h", 3600.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("15", None),
        ("5 m", None),
    ],
)
def test_duration_seconds(text: str, seconds: float | None) -> None:
    assert duration_seconds(text) == seconds


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("app.kubernetes.io/name", None),
        ("aws.cdk.eks/prune-c8cbae0af2c461f6b490cf27a96e4b1cc6d4de6602", None),
        ("tier", None),
        ("Gpufarm.IO/model", "prefix 'Gpufarm.IO' is not a DNS subdomain of at most 253 characters"),
        (
            "x" * 64,
            f"name {'x' * 64!r} is not 1 to 63 alphanumerics, '-', '_' or '.', alphanumeric at both ends",
        ),
    ],
)
def test_label_key_problem(key: str, problem: str | None) -> None:
    assert label_key_problem(key) == problem


def _manifest_of(*objects: dict[str, Any]) -> dict[str, Any]:
    return {
        "M": resource(
            "Custom::AWSCDK-EKS-KubernetesResource", ClusterName="c", Manifest=json.dumps(list(objects))
        )
    }


def test_rbac_names_are_path_segments() -> None:
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "gpufarm:reader"},
    }
    assert _messages(_manifest_of(role), "K8S-OBJECT-NAME") == []
    bad = {**role, "metadata": {"name": "gpufarm/reader"}}
    assert _messages(_manifest_of(bad), "K8S-OBJECT-NAME") == [
        (
            "M",
            "ClusterRole 'gpufarm/reader': the name must be a path segment (not '.' or '..', no '/' or '%')",
        )
    ]


def test_policy_attached_to_roles_by_a_token_is_skipped() -> None:
    bad = BY_ID["IAM-POLICY-ROLE-SIZE"].bad
    extra = {**bad["Extra"], "Properties": {**bad["Extra"]["Properties"], "Roles": {"Ref": "RoleNames"}}}
    assert _messages({**bad, "Extra": extra}, "IAM-POLICY-ROLE-SIZE") == []
