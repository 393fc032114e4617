"""NetworkPolicy enforcement settings: the VPC CNI add-on configuration and Auto Mode's ConfigMap."""

from __future__ import annotations

import json

from gpufarm.deploy_rules import check_template
from gpufarm.k8s.policy_enforcement import (
    auto_mode_network_policy_config_map,
    vpc_cni_configuration,
    vpc_cni_configuration_values,
)

from .k8s_schema import validate_core


def test_vpc_cni_configuration_turns_the_network_policy_agent_on() -> None:
    # The key and its string value as the EKS user guide's add-on example writes them:
    # { "enableNetworkPolicy": "true" } (cni-network-policy-configure, Step 4).
    assert vpc_cni_configuration() == {"enableNetworkPolicy": "true"}


def test_vpc_cni_configuration_values_are_the_json_of_the_configuration() -> None:
    text = vpc_cni_configuration_values()
    assert json.loads(text) == {"enableNetworkPolicy": "true"}
    assert text == '{"enableNetworkPolicy":"true"}'


def test_vpc_cni_configuration_values_pass_the_addon_deploy_rules() -> None:
    addon = {
        "Type": "AWS::EKS::Addon",
        "Properties": {
            "ClusterName": "gpufarm",
            "AddonName": "vpc-cni",
            "ConfigurationValues": vpc_cni_configuration_values(),
        },
    }
    assert [v.message for v in check_template({"Resources": {"VpcCni": addon}})] == []


def test_auto_mode_config_map_turns_the_network_policy_controller_on() -> None:
    config_map = auto_mode_network_policy_config_map()
    validate_core(config_map)
    assert config_map["apiVersion"] == "v1"
    assert config_map["kind"] == "ConfigMap"
    # Name, namespace, key and the quoted "true" exactly as auto-net-pol, Step 1, gives them.
    assert config_map["metadata"]["name"] == "amazon-vpc-cni"
    assert config_map["metadata"]["namespace"] == "kube-system"
    assert config_map["data"] == {"enable-network-policy-controller": "true"}
    assert config_map["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpufarm"
