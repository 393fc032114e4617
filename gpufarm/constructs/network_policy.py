"""The serving namespace's NetworkPolicies, applied in one manifest after the namespace exists."""

from __future__ import annotations

from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from gpufarm.config.model import TierConfig
from gpufarm.k8s.network_policy import network_policies


class ServingNetworkPolicies(Construct):
    """Default deny in `tier.serving.namespace`, then the flows the tier's workloads need.

    One `KubernetesManifest` (child `Resource`) holds every policy of the namespace
    (:func:`gpufarm.k8s.network_policy.network_policies`), applied after `after` (the construct
    that creates the namespace). The policies take effect only where the cluster enforces
    NetworkPolicies (the VPC CNI's network policy agent, or Auto Mode's node class setting).
    Default `after`: none.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: eks.ICluster,
        tier: TierConfig,
        after: Construct | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.namespace = tier.serving.namespace
        self.policies = network_policies(tier)
        self.manifest = eks.KubernetesManifest(
            self, "Resource", cluster=cluster, manifest=self.policies, overwrite=True
        )
        if after is not None:
            self.manifest.node.add_dependency(after)

    @property
    def policy_names(self) -> list[str]:
        """Names of the NetworkPolicies applied, in order."""
        return [p["metadata"]["name"] for p in self.policies]
