"""What lets on-premises GPU hosts join the EKS cluster as hybrid nodes: their IAM role and access
entry, the VPC routes to the on-premises networks, and the security group rules EKS requires.

The cluster's `RemoteNetworkConfig` itself is set on :class:`gpufarm.constructs.cluster.InferenceCluster`
(a property of `AWS::EKS::Cluster`). Sources: the EKS user guide's hybrid nodes pages
(awsdocs/amazon-eks-user-guide, latest/ug/nodes/): hybrid-nodes-creds.adoc (the role),
hybrid-nodes-networking.adoc (routes and the cluster security group), hybrid-nodes-cluster-prep.adoc
(the `HYBRID_LINUX` access entry), hybrid-nodes-add-ons.adoc (Pod Identity on hybrid nodes).
"""

from __future__ import annotations

from typing import Final

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from gpufarm.config.model import CredentialProvider, HybridNodesConfig
from gpufarm.constructs._util import acknowledge_all, private_subnets, pseudo_parameters

SSM_ACTIVATION_TAG: Final = "EKSClusterARN"
"""Tag key of the SSM hybrid activation, whose value is the cluster ARN: the role may deregister only
the managed instances of that activation (hybrid-nodes-creds.adoc, the default `TAG_KEY`)."""

_MANAGED_POLICY = "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{}]"

_POLICY_REASONS: Final = {
    "AmazonEC2ContainerRegistryPullOnly": "the kubelet on a hybrid node pulls images from ECR with it; "
    "the EKS hybrid nodes guide attaches it to the Hybrid Nodes IAM role",
    "AmazonSSMManagedInstanceCore": "nodeadm init registers the host with the SSM hybrid activation "
    "with it; the EKS hybrid nodes guide attaches it to the Hybrid Nodes IAM role when SSM provides "
    "the credentials",
}

API_SERVER_PORT: Final = 443
DNS_PORT: Final = 53


def hybrid_managed_policies(provider: CredentialProvider) -> tuple[str, ...]:
    """The AWS managed policies of the hybrid nodes role (hybrid-nodes-creds.adoc): ECR pull always,
    Systems Manager's core policy with SSM hybrid activations."""
    if provider is CredentialProvider.SSM:
        return ("AmazonEC2ContainerRegistryPullOnly", "AmazonSSMManagedInstanceCore")
    return ("AmazonEC2ContainerRegistryPullOnly",)


class HybridNodes(Construct):
    """The hybrid nodes role, its `HYBRID_LINUX` access entry, routes and security group rules.

    The role is assumed by Systems Manager (`ssm.amazonaws.com`, from this account and region
    only) for SSM hybrid activations, or by IAM Roles Anywhere (`rolesanywhere.amazonaws.com`,
    from `trust_anchor_arn` only, with the role session name equal to the certificate's CN). It
    may describe this cluster (nodeadm reads the endpoint and CA), fetch Pod Identity credentials
    for pods on the hybrid nodes, pull from ECR and, with SSM, register and deregister the
    activation's instances. Every private subnet's route table sends the remote node and pod CIDRs
    to `gateway_id`; the cluster security group admits HTTPS from them (kubelets and pods to the
    API server) and DNS from the pod CIDRs (pods on hybrid nodes to CoreDNS on cloud nodes).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: eks.ICluster,
        cluster_security_group: ec2.ISecurityGroup,
        vpc: ec2.IVpc,
        config: HybridNodesConfig,
    ) -> None:
        super().__init__(scope, id)
        if config.gateway_id is None:
            raise ValueError("'gateway_id' is required: the remote CIDRs are routed to it")
        partition, region, account = pseudo_parameters()
        cluster_arn = cluster.cluster_arn
        ssm = config.credential_provider is CredentialProvider.SSM
        if ssm:
            principal: iam.IPrincipal = iam.ServicePrincipal(
                "ssm.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": account},
                    "ArnEquals": {"aws:SourceArn": f"arn:{partition}:ssm:{region}:{account}:*"},
                },
            )
        else:
            if config.trust_anchor_arn is None:
                raise ValueError(
                    "'trust_anchor_arn' is required with credential_provider 'iam-roles-anywhere'"
                )
            principal = iam.ServicePrincipal(
                "rolesanywhere.amazonaws.com",
                conditions={
                    "StringEquals": {"sts:RoleSessionName": "${aws:PrincipalTag/x509Subject/CN}"},
                    "ArnEquals": {"aws:SourceArn": config.trust_anchor_arn},
                },
            )
        managed = hybrid_managed_policies(config.credential_provider)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=principal,
            description="EKS hybrid nodes (on-premises GPU hosts) of this cluster",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(p) for p in managed],
        )
        if not ssm:
            # IAM Roles Anywhere also tags the session and sets its source identity
            # (hybrid-nodes-creds.adoc's trust policy allows both from the trust anchor).
            self.role.assume_role_policy.add_statements(  # type: ignore[union-attr]
                iam.PolicyStatement(
                    actions=["sts:TagSession", "sts:SetSourceIdentity"],
                    principals=[iam.ServicePrincipal("rolesanywhere.amazonaws.com")],
                    conditions={"ArnEquals": {"aws:SourceArn": config.trust_anchor_arn}},
                )
            )
        statements: list[dict[str, object]] = [
            {"Effect": "Allow", "Action": "eks:DescribeCluster", "Resource": cluster_arn},
            {"Effect": "Allow", "Action": "eks-auth:AssumeRoleForPodIdentity", "Resource": cluster_arn},
        ]
        if ssm:
            statements += [
                {"Effect": "Allow", "Action": "ssm:DescribeInstanceInformation", "Resource": "*"},
                {
                    "Effect": "Allow",
                    "Action": "ssm:DeregisterManagedInstance",
                    "Resource": f"arn:{partition}:ssm:{region}:{account}:managed-instance/*",
                    "Condition": {"StringEquals": {f"ssm:resourceTag/{SSM_ACTIVATION_TAG}": cluster_arn}},
                },
            ]
        self.policy = iam.CfnManagedPolicy(
            self,
            "Policy",
            description="EKS hybrid nodes: describe the cluster, Pod Identity, SSM deregistration",
            policy_document={"Version": "2012-10-17", "Statement": statements},
            roles=[self.role.role_name],
        )
        acknowledge_all(
            self.role, {_MANAGED_POLICY.format(p): f"{p}: {_POLICY_REASONS[p]}." for p in managed}
        )
        if ssm:
            acknowledge_all(
                self.policy,
                {
                    "AwsSolutions-IAM5[Resource::*]": "ssm:DescribeInstanceInformation takes no resource "
                    "(IAM's service authorization reference lists none for it); nodeadm uninstall reads "
                    "the host's own registration with it.",
                    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ssm:<AWS::Region>:<AWS::AccountId>:"
                    "managed-instance/*]": "Managed instance IDs are assigned when a host registers; the "
                    f"condition on the activation's {SSM_ACTIVATION_TAG} tag limits deregistration to this "
                    "cluster's hosts.",
                },
            )
        cdk.CfnOutput(
            self,
            "RoleName",
            key="HybridNodesRoleName",
            value=self.role.role_name,
            description="IAM role of the hybrid nodes: the SSM activation's --iam-role, or the "
            "Roles Anywhere profile's role",
        )
        self.access_entry = eks.CfnAccessEntry(
            self,
            "AccessEntry",
            cluster_name=cluster.cluster_name,
            principal_arn=self.role.role_arn,
            type="HYBRID_LINUX",
        )
        remote = [*config.remote_node_cidrs, *config.remote_pod_cidrs]
        transit = config.gateway_id.startswith("tgw-")
        self.routes: list[ec2.CfnRoute] = []
        seen: set[str] = set()
        for i, subnet in enumerate(private_subnets(vpc)):
            table = subnet.route_table.route_table_id
            if table in seen:
                continue
            seen.add(table)
            for j, cidr in enumerate(remote):
                self.routes.append(
                    ec2.CfnRoute(
                        self,
                        f"Route{i}x{j}",
                        route_table_id=table,
                        destination_cidr_block=cidr,
                        transit_gateway_id=config.gateway_id if transit else None,
                        gateway_id=None if transit else config.gateway_id,
                    )
                )
        for cidr in config.remote_node_cidrs:
            cluster_security_group.add_ingress_rule(
                ec2.Peer.ipv4(cidr),
                ec2.Port.tcp(API_SERVER_PORT),
                "Kubelets on hybrid nodes to the API server",
            )
        for cidr in config.remote_pod_cidrs:
            cluster_security_group.add_ingress_rule(
                ec2.Peer.ipv4(cidr), ec2.Port.tcp(API_SERVER_PORT), "Pods on hybrid nodes to the API server"
            )
            cluster_security_group.add_ingress_rule(
                ec2.Peer.ipv4(cidr), ec2.Port.udp(DNS_PORT), "Pods on hybrid nodes to CoreDNS (UDP)"
            )
            cluster_security_group.add_ingress_rule(
                ec2.Peer.ipv4(cidr), ec2.Port.tcp(DNS_PORT), "Pods on hybrid nodes to CoreDNS (TCP)"
            )
