"""The service rules' messages, their edges, and what they leave to deploy time (tokens)."""

from __future__ import annotations

from typing import Any

import pytest

from gpufarm.deploy_rules import RULES, check_template


def _rule(rule_id: str) -> Any:
    (rule,) = (r for r in RULES if r.id == rule_id)
    return rule


def _messages(resources: dict[str, Any], rule_id: str) -> list[str]:
    return [v.message for v in check_template({"Resources": resources}) if v.rule.id == rule_id]


def _res(kind: str, **props: Any) -> dict[str, Any]:
    return {"Type": kind, "Properties": props}


TG = "AWS::ElasticLoadBalancingV2::TargetGroup"
RULE = "AWS::ElasticLoadBalancingV2::ListenerRule"


def _tg(**props: Any) -> dict[str, Any]:
    base = {"Port": 8000, "Protocol": "HTTP", "TargetType": "ip", "VpcId": "vpc-0123456789abcdef0"}
    return {"Tg": _res(TG, **{**base, **props})}


@pytest.mark.parametrize(
    ("name", "messages"),
    [
        ("gpufarm-prod-llama-70b", []),
        ("x" * 33, [f"Name {'x' * 33!r} is 33 characters; the API accepts 1 to 32"]),
        (
            "-llama",
            ["Name '-llama': only letters, digits and hyphens, not beginning or ending with a hyphen"],
        ),
        (
            "llama_70b",
            ["Name 'llama_70b': only letters, digits and hyphens, not beginning or ending with a hyphen"],
        ),
        ({"Fn::Join": ["-", ["gpufarm", {"Ref": "Model"}]]}, []),
    ],
)
def test_target_group_name(name: Any, messages: list[str]) -> None:
    assert _messages(_tg(Name=name), "ELBV2-TG-NAME") == messages


@pytest.mark.parametrize(
    ("code", "ok"),
    [
        ("200", True),
        ("200,202", True),
        ("200-299", True),
        ("499", True),
        ("199", False),
        ("500", False),
        ("300-200", False),
        ("2xx", False),
    ],
)
def test_matcher_codes(code: str, ok: bool) -> None:
    found = _messages(_tg(Matcher={"HttpCode": code}), "ELBV2-TG-MATCHER")
    assert (found == []) is ok, found


def test_matcher_applies_to_alb_protocols_only() -> None:
    # gRPC/NLB matchers follow other rules; a TCP group's HttpCode is not judged here.
    assert _messages(_tg(Protocol="TCP", Matcher={"HttpCode": "600"}), "ELBV2-TG-MATCHER") == []


@pytest.mark.parametrize(
    ("protocol", "interval", "timeout", "ok"),
    [("HTTP", 15, 5, True), ("HTTP", 10, 10, False), ("TCP", 10, 10, True), ("TCP", 10, 12, False)],
)
def test_health_check_timeout_below_interval(protocol: str, interval: int, timeout: int, ok: bool) -> None:
    tg = _tg(Protocol=protocol, HealthCheckIntervalSeconds=interval, HealthCheckTimeoutSeconds=timeout)
    message = f"HealthCheckTimeoutSeconds {timeout} is not below HealthCheckIntervalSeconds {interval}"
    expected = [] if ok else [message]
    assert _messages(tg, "ELBV2-TG-HEALTH-CHECK-TIMEOUT") == expected


def test_target_control_port_needs_ip_or_instance_targets() -> None:
    assert _messages(_tg(TargetType="lambda", TargetControlPort=3000), "ELBV2-TG-TARGET-CONTROL-PORT") == [
        "TargetControlPort with TargetType lambda: only instance and ip target groups take one"
    ]


def _listener_rule(listener: Any, priority: Any) -> dict[str, Any]:
    return _res(
        RULE,
        ListenerArn=listener,
        Priority=priority,
        Actions=[{"Type": "forward", "TargetGroupArn": "arn:tg"}],
        Conditions=[{"Field": "path-pattern", "PathPatternConfig": {"Values": ["/a/*"]}}],
    )


def test_priority_is_unique_per_listener_only() -> None:
    resources = {
        "A": _listener_rule({"Ref": "Https"}, 10),
        "B": _listener_rule({"Ref": "Http"}, 10),
        "C": _listener_rule({"Ref": "Https"}, 10),
        "D": _listener_rule({"Ref": "Https"}, {"Ref": "Priority"}),
    }
    found = [(v.logical_id, v.message) for v in check_template({"Resources": resources})]
    assert found == [("C", "priority 10 is already taken on this listener by A")]


def test_wildcards_per_rule() -> None:
    conditions = [{"Field": "path-pattern", "PathPatternConfig": {"Values": ["/*/*/*", "/?/*/*"]}}]
    rule = {
        "R": {
            **_listener_rule("arn:listener", 1),
            "Properties": {**_listener_rule("arn:listener", 1)["Properties"], "Conditions": conditions},
        }
    }
    assert _messages(rule, "ELBV2-RULE-CONDITION-QUOTA") == [
        "6 wildcards in the conditions; a rule takes at most 5"
    ]


SG = "AWS::EC2::SecurityGroup"


@pytest.mark.parametrize(
    ("rule", "messages"),
    [
        ({"IpProtocol": "-1", "CidrIp": "0.0.0.0/0"}, []),
        ({"IpProtocol": "udp", "FromPort": 1018, "ToPort": 1023, "CidrIp": "10.0.0.0/16"}, []),
        (
            {"IpProtocol": "6", "FromPort": -1, "ToPort": 80, "CidrIp": "10.0.0.0/16"},
            ["SecurityGroupEgress[0]: 6 ports -1-80 out of 0-65535"],
        ),
        ({"IpProtocol": "tcp", "FromPort": {"Ref": "Port"}, "ToPort": 80, "CidrIp": "10.0.0.0/16"}, []),
    ],
)
def test_security_group_ports(rule: dict[str, Any], messages: list[str]) -> None:
    group = {"Sg": _res(SG, GroupDescription="g", VpcId="vpc-0123456789abcdef0", SecurityGroupEgress=[rule])}
    assert _messages(group, "EC2-SG-RULE-PORTS") == messages


def test_tags_key_value_and_prefix() -> None:
    tags = [
        {"Key": "aws:owner", "Value": "x"},
        {"Key": "k" * 129, "Value": "v"},
        {"Key": "team", "Value": "v" * 257},
    ]
    found = _messages({"Igw": _res("AWS::EC2::InternetGateway", Tags=tags)}, "EC2-IGW-TAGS")
    assert found == [
        "tag key 'aws:owner': the aws: prefix is reserved for AWS",
        f"tag key {'k' * 40!r}... is 129 characters; at most 128",
        "tag 'team' has a value of 257 characters; at most 256",
    ]


def test_public_nat_gateway_needs_an_elastic_ip() -> None:
    nat = {"Nat": _res("AWS::EC2::NatGateway", SubnetId="subnet-0123456789abcdef0")}
    assert _messages(nat, "EC2-NATGW-ELASTIC-IP") == [
        "a public NAT gateway needs an Elastic IP (AllocationId)"
    ]


def test_regional_nat_gateway_is_left_alone() -> None:
    nat = {"Nat": _res("AWS::EC2::NatGateway", VpcId="vpc-1", AvailabilityMode="regional")}
    assert _messages(nat, "EC2-NATGW-ELASTIC-IP") == []


def test_route_without_target() -> None:
    route = {"R": _res("AWS::EC2::Route", RouteTableId="rtb-1", DestinationCidrBlock="0.0.0.0/0")}
    (message,) = _messages(route, "EC2-ROUTE-ONE-TARGET")
    assert message.startswith("route target: give exactly one of CarrierGatewayId,") and message.endswith(
        "(found none)"
    )


def test_no_value_counts_as_absent() -> None:
    route = {
        "R": _res(
            "AWS::EC2::Route",
            RouteTableId="rtb-1",
            DestinationCidrBlock="0.0.0.0/0",
            NatGatewayId="nat-1",
            GatewayId={"Ref": "AWS::NoValue"},
        )
    }
    assert _messages(route, "EC2-ROUTE-ONE-TARGET") == []


def test_user_data_lower_bound_from_joined_parts() -> None:
    # The literal parts of a joined script already exceed 16 KB: the rest cannot make it smaller.
    data = {"Fn::Base64": {"Fn::Join": ["", ["#!/bin/bash\n", {"Ref": "Cluster"}, "#" * 16384]]}}
    lt = {"Lt": _res("AWS::EC2::LaunchTemplate", LaunchTemplateData={"UserData": data})}
    assert _messages(lt, "EC2-LT-USER-DATA-SIZE") == [
        "user data is at least 16396 bytes; EC2 takes at most 16384 before base64"
    ]


def test_user_data_of_unknown_size_is_skipped() -> None:
    lt = {
        "Lt": _res(
            "AWS::EC2::LaunchTemplate", LaunchTemplateData={"UserData": {"Fn::Base64": {"Ref": "Script"}}}
        )
    }
    assert _messages(lt, "EC2-LT-USER-DATA-SIZE") == []


def test_gateway_endpoint_takes_no_subnets() -> None:
    endpoint = {"Ep": _res("AWS::EC2::VPCEndpoint", VpcId="vpc-1", ServiceName="s3", SubnetIds=["subnet-1"])}
    assert _messages(endpoint, "EC2-VPCE-TYPE-PROPERTIES") == [
        "SubnetIds on a Gateway endpoint: only GatewayLoadBalancer and Interface endpoints take it"
    ]


def test_other_endpoint_types_are_not_judged() -> None:
    endpoint = {
        "Ep": _res(
            "AWS::EC2::VPCEndpoint",
            VpcId="vpc-1",
            VpcEndpointType="ServiceNetwork",
            SubnetIds=["subnet-1"],
            PrivateDnsEnabled=True,
        )
    }
    assert _messages(endpoint, "EC2-VPCE-TYPE-PROPERTIES") == []


def test_principal_tokens_are_skipped() -> None:
    principal = {
        "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::", {"Ref": "AWS::AccountId"}, ":root"]]
    }
    permissions = {
        "P": _res(
            "AWS::EC2::VPCEndpointServicePermissions", ServiceId="s", AllowedPrincipals=[principal, "*"]
        )
    }
    assert _messages(permissions, "EC2-VPCESP-PRINCIPAL-ARN") == []


def test_flow_log_to_cloudwatch_needs_a_role() -> None:
    log = {"Fl": _res("AWS::EC2::FlowLog", ResourceId="vpc-1", ResourceType="VPC", LogGroupName="flows")}
    assert _messages(log, "EC2-FLOWLOG-ROLE") == [
        "a flow log to CloudWatch Logs needs DeliverLogsPermissionArn"
    ]


NG = "AWS::EKS::Nodegroup"


def _nodegroup(**props: Any) -> dict[str, Any]:
    base = {"ClusterName": "c", "NodeRole": "arn:role", "Subnets": ["subnet-1"]}
    return {"Ng": _res(NG, **{**base, **props})}


@pytest.mark.parametrize(
    ("scaling", "messages"),
    [
        ({"MinSize": 0, "DesiredSize": 0, "MaxSize": 1}, []),
        ({"MinSize": 1, "DesiredSize": 3, "MaxSize": 2}, ["DesiredSize 3 is above MaxSize 2"]),
        ({"MinSize": 3, "MaxSize": 2}, ["MinSize 3 is above MaxSize 2"]),
        (
            {"MinSize": 0, "DesiredSize": 0, "MaxSize": 0},
            ["MaxSize 0: a node group scales to at least 1 node"],
        ),
        ({"MinSize": {"Ref": "Min"}, "DesiredSize": 1, "MaxSize": 2}, []),
    ],
)
def test_nodegroup_scaling(scaling: dict[str, Any], messages: list[str]) -> None:
    assert _messages(_nodegroup(ScalingConfig=scaling), "EKS-NODEGROUP-SCALING") == messages


def test_capacity_block_without_launch_template() -> None:
    assert _messages(_nodegroup(CapacityType="CAPACITY_BLOCK"), "EKS-NODEGROUP-CAPACITY-BLOCK") == [
        "CapacityType CAPACITY_BLOCK needs a launch template that targets the Capacity Block"
    ]


def test_instance_types_in_both_places() -> None:
    resources = {
        "Lt": _res("AWS::EC2::LaunchTemplate", LaunchTemplateData={"InstanceType": "p5.48xlarge"}),
        **_nodegroup(LaunchTemplate={"Id": {"Ref": "Lt"}}, InstanceTypes=["p5.48xlarge"]),
    }
    assert _messages(resources, "EKS-NODEGROUP-LAUNCH-TEMPLATE-CONFLICTS") == [
        "InstanceTypes on the node group and InstanceType in its launch template: give only one"
    ]


@pytest.mark.parametrize(
    ("labels", "messages"),
    [
        ({"gpufarm.io/pool": "h100-base", "plain": "x"}, []),
        ({"plain": ""}, ["label plain='': EKS takes a value of 1 to 63 characters"]),
        ({"Gpufarm.IO/pool": "x"}, ["label key 'Gpufarm.IO/pool': its prefix is not a DNS subdomain"]),
        (
            {"gpufarm.io/" + "p" * 53: "x"},
            [f"label key {'gpufarm.io/' + 'p' * 53!r} is 64 characters; EKS takes 1 to 63 (prefix included)"],
        ),
        (
            {"pool": "h100_"},
            [
                "label pool='h100_': a value is at most 63 alphanumerics, '-', '_' or '.', "
                "starting and ending alphanumeric"
            ],
        ),
        ({"pool": {"Ref": "Pool"}}, []),
    ],
)
def test_node_labels(labels: dict[str, Any], messages: list[str]) -> None:
    assert _messages(_nodegroup(Labels=labels), "EKS-NODEGROUP-LABELS") == messages


@pytest.mark.parametrize(
    ("taints", "messages"),
    [
        ([{"Key": "nvidia.com/gpu", "Value": "", "Effect": "NO_SCHEDULE"}], []),
        ([{"Key": "dedicated", "Effect": "NO_SCHEDULE"}], []),
        (
            [{"Key": "nvidia.com/gpu", "Value": "-x", "Effect": "NO_SCHEDULE"}],
            [
                "taint nvidia.com/gpu='-x': a value is at most 63 alphanumerics, '-', '_' or '.', "
                "starting and ending alphanumeric"
            ],
        ),
        (
            [{"Key": f"k{i}", "Effect": "NO_SCHEDULE"} for i in range(51)],
            ["51 taints; a node group takes at most 50"],
        ),
    ],
)
def test_node_taints(taints: list[dict[str, str]], messages: list[str]) -> None:
    assert _messages(_nodegroup(Taints=taints), "EKS-NODEGROUP-TAINTS") == messages


def test_addon_configuration_that_is_not_yaml() -> None:
    addon = {"A": _res("AWS::EKS::Addon", ClusterName="c", AddonName="coredns", ConfigurationValues="a: [b")}
    (message,) = _messages(addon, "EKS-ADDON-CONFIGURATION")
    assert message.startswith("ConfigurationValues is neither JSON nor YAML: ")


def test_pod_identity_service_account() -> None:
    pia = {
        "P": _res(
            "AWS::EKS::PodIdentityAssociation",
            ClusterName="c",
            Namespace="kube-system",
            ServiceAccount="Karpenter",
            RoleArn="arn:role",
        )
    }
    assert _messages(pia, "EKS-POD-IDENTITY-NAMES") == [
        "ServiceAccount 'Karpenter' is not a DNS subdomain (lowercase alphanumerics, '-' and '.')"
    ]


@pytest.mark.parametrize(
    ("capacity", "ok"), [(1200, True), (2400, True), (4800, True), (1800, False), (0, False)]
)
def test_lustre_capacity_steps(capacity: int, ok: bool) -> None:
    fs = {
        "Fs": _res(
            "AWS::FSx::FileSystem",
            FileSystemType="LUSTRE",
            StorageCapacity=capacity,
            SubnetIds=["s"],
            LustreConfiguration={"DeploymentType": "PERSISTENT_2"},
        )
    }
    assert (_messages(fs, "FSX-LUSTRE-STORAGE-CAPACITY") == []) is ok


def test_data_repository_root_path_excludes_others() -> None:
    # "If you specify only a forward slash (/) as the file system path, you can link only one
    # data repository to the file system."
    def dra(path: str) -> dict[str, Any]:
        return _res(
            "AWS::FSx::DataRepositoryAssociation",
            FileSystemId={"Ref": "Fs"},
            FileSystemPath=path,
            DataRepositoryPath="s3://gpufarm-models/",
        )

    resources = {
        "A": dra("/"),
        "B": dra("/models"),
        "C": {**dra("/data"), "Properties": {**dra("/data")["Properties"], "FileSystemId": {"Ref": "Other"}}},
    }
    assert [(v.logical_id, v.message) for v in check_template({"Resources": resources})] == [
        ("B", "FileSystemPath /models overlaps A's / on the same file system")
    ]


def test_asg_sizes_from_strings() -> None:
    asg = {
        "G": _res(
            "AWS::AutoScaling::AutoScalingGroup",
            MinSize="3",
            MaxSize="6",
            DesiredCapacity="2",
            LaunchTemplate={"LaunchTemplateId": "lt-1", "Version": "1"},
        )
    }
    assert _messages(asg, "ASG-GROUP-SIZES") == ["DesiredCapacity 2 is below MinSize 3"]


def test_every_rule_has_a_resource_type_of_its_module() -> None:
    # The catalogue keeps one module per service; a rule's type belongs to that service.
    prefixes = {
        "ASG": "AWS::AutoScaling::",
        "EC2": "AWS::EC2::",
        "EKS": "AWS::EKS::",
        "ELBV2": "AWS::ElasticLoadBalancingV2::",
        "FSX": "AWS::FSx::",
    }
    for rule in RULES:
        prefix = prefixes.get(rule.id.split("-")[0])
        if prefix is not None:
            assert rule.resource_type.startswith(prefix), rule.id
    assert _rule("EC2-LT-NAME").resource_type == "AWS::EC2::LaunchTemplate"


@pytest.mark.parametrize(
    ("version", "address", "messages"),
    [
        ("IPV4", "10.0.0.0/16", []),
        ("IPV4", "10.0.0.0", ["address '10.0.0.0' has no prefix length: write it as 10.0.0.0/32"]),
        ("IPV4", "0.0.0.0/0", ["address '0.0.0.0/0': WAF takes every CIDR range but /0"]),
        ("IPV4", "2001:db8::/32", ["address '2001:db8::/32' is IPv6 in an IP set of IPAddressVersion IPV4"]),
        ("IPV6", "2001:db8::/32", []),
        ("IPV4", "10.0.0.0/40", ["address '10.0.0.0/40' is not in CIDR notation"]),
    ],
)
def test_waf_ip_set_addresses(version: str, address: str, messages: list[str]) -> None:
    ip_set = _res("AWS::WAFv2::IPSet", Scope="REGIONAL", IPAddressVersion=version, Addresses=[address])
    assert _messages({"Set": ip_set}, "WAF-IPSET-ADDRESSES") == messages
