"""NetworkPolicy enforcement on the nodes: the VPC CNI add-on's settings (standard compute) and
the ConfigMap that turns Auto Mode's network policy controller on.

Kubernetes accepts NetworkPolicy objects on any cluster, but only a network plugin enforces them.
On EKS that plugin is the VPC CNI's network policy agent (eBPF on each node), and it is off until
it is switched on, differently per provisioning mode:

- Standard compute (the system managed node group, Karpenter's nodes and reserved node groups,
  all on the `vpc-cni` EKS add-on): the add-on's configuration value
  `{"enableNetworkPolicy": "true"}`, add-on version `v1.14.0-eksbuild.3` or later. EKS user
  guide, "Restrict Pod network traffic with Kubernetes network policies",
  https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy-configure.html
  (awsdocs/amazon-eks-user-guide@d9a9cba5f72775824492cfad11b145ebc1367ceb,
  latest/ug/networking/cni-network-policy-configure.adoc, "Step 4 ... Amazon EKS add-on").
- Auto Mode: the ConfigMap `kube-system/amazon-vpc-cni` with
  `enable-network-policy-controller: "true"`. Nodes of every NodeClass, the built-in `default`
  one included, then enforce; a custom NodeClass is needed only to change the agent's default
  (`networkPolicy: DefaultAllow | DefaultDeny`) or to log policy events
  (`networkPolicyEventLogs`). EKS user guide, "Use Network Policies with EKS Auto Mode",
  https://docs.aws.amazon.com/eks/latest/userguide/auto-net-pol.html
  (awsdocs/amazon-eks-user-guide@013856044148d6eeed4723027a45aa2180536bcb,
  latest/ug/automode/auto-net-pol.adoc, "Step 1: Enable Network Policy Controller" and
  "Step 3: ... Node Class (Optional)").

docs/decisions/0040-network-policy-enforcement.md records the choices.
"""

from __future__ import annotations

import json
from typing import Any, Final

from gpufarm.k8s.labels import common_labels

VPC_CNI_NETWORK_POLICY_KEY: Final = "enableNetworkPolicy"
"""The `vpc-cni` add-on configuration key that runs the network policy agent on each node."""

VPC_CNI_MIN_NETWORK_POLICY_VERSION: Final = "v1.14.0-eksbuild.3"
"""The first `vpc-cni` add-on version the EKS user guide names for network policy support."""

AUTO_MODE_CONFIG_MAP: Final = "amazon-vpc-cni"
"""The ConfigMap in `kube-system` that Auto Mode's network policy controller reads."""

AUTO_MODE_CONTROLLER_KEY: Final = "enable-network-policy-controller"
"""The ConfigMap key that turns Auto Mode's network policy controller on."""


def vpc_cni_configuration() -> dict[str, Any]:
    """The `vpc-cni` add-on configuration: the network policy agent on.

    The value is the string `"true"`, exactly as the EKS user guide's example writes it (the
    add-on's own schema, from DescribeAddonConfiguration, needs AWS credentials to read).
    """
    return {VPC_CNI_NETWORK_POLICY_KEY: "true"}


def vpc_cni_configuration_values() -> str:
    """:func:`vpc_cni_configuration` as the JSON text `AWS::EKS::Addon.ConfigurationValues` takes."""
    return json.dumps(vpc_cni_configuration(), separators=(",", ":"), sort_keys=True)


def auto_mode_network_policy_config_map() -> dict[str, Any]:
    """The `kube-system/amazon-vpc-cni` ConfigMap that turns Auto Mode's network policy controller on."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": AUTO_MODE_CONFIG_MAP,
            "namespace": "kube-system",
            "labels": common_labels("network-policy-enforcement"),
        },
        "data": {AUTO_MODE_CONTROLLER_KEY: "true"},
    }
