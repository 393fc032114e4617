"""The AWS Load Balancer Controller, for TargetGroupBindings on clusters without EKS Auto Mode."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from gpufarm import images
from gpufarm.constructs._util import acknowledge, pod_identity_role
from gpufarm.constructs.crd_chart import CrdChart, crd_chart_version
from gpufarm.constructs.image_cache import ImageCache

LBC_CHART: Final = "aws-load-balancer-controller"
LBC_REPOSITORY: Final = "https://aws.github.io/eks-charts"
LBC_CHART_VERSION: Final = "3.2.2"
LBC_IMAGE: Final = "aws-load-balancer-controller"
"""The controller's row in the image table (gpufarm/data/images.yaml)."""
LBC_CRD_CHART: Final = "aws-load-balancer-controller-crds"
"""The chart gpufarm ships with the CRDs of :data:`LBC_CHART_VERSION` (TargetGroupBinding,
IngressClassParams, ALBTargetControlConfig)."""
"""Chart 3.2.2 installs controller v3.2.2 (TargetGroupBinding `elbv2.k8s.aws/v1beta1`, Target
Optimizer support, which needs controller 2.16 or later)."""
LBC_NAMESPACE: Final = "kube-system"
LBC_SERVICE_ACCOUNT: Final = "aws-load-balancer-controller"

_ANY_PARTITION_ARN: Final = "arn:aws:"

_POLICY_V3_2_2: Final[list[dict[str, Any]]] = [
    {
        "Effect": "Allow",
        "Action": ["iam:CreateServiceLinkedRole"],
        "Resource": "*",
        "Condition": {"StringEquals": {"iam:AWSServiceName": "elasticloadbalancing.amazonaws.com"}},
    },
    {
        "Effect": "Allow",
        "Action": [
            "ec2:DescribeAccountAttributes",
            "ec2:DescribeAddresses",
            "ec2:DescribeAvailabilityZones",
            "ec2:DescribeInternetGateways",
            "ec2:DescribeVpcs",
            "ec2:DescribeVpcPeeringConnections",
            "ec2:DescribeSubnets",
            "ec2:DescribeSecurityGroups",
            "ec2:DescribeInstances",
            "ec2:DescribeNetworkInterfaces",
            "ec2:DescribeTags",
            "ec2:GetCoipPoolUsage",
            "ec2:DescribeCoipPools",
            "ec2:GetSecurityGroupsForVpc",
            "ec2:DescribeIpamPools",
            "ec2:DescribeRouteTables",
            "elasticloadbalancing:DescribeLoadBalancers",
            "elasticloadbalancing:DescribeLoadBalancerAttributes",
            "elasticloadbalancing:DescribeListeners",
            "elasticloadbalancing:DescribeListenerCertificates",
            "elasticloadbalancing:DescribeSSLPolicies",
            "elasticloadbalancing:DescribeRules",
            "elasticloadbalancing:DescribeTargetGroups",
            "elasticloadbalancing:DescribeTargetGroupAttributes",
            "elasticloadbalancing:DescribeTargetHealth",
            "elasticloadbalancing:DescribeTags",
            "elasticloadbalancing:DescribeTrustStores",
            "elasticloadbalancing:DescribeListenerAttributes",
            "elasticloadbalancing:DescribeCapacityReservation",
        ],
        "Resource": "*",
    },
    {
        "Effect": "Allow",
        "Action": [
            "cognito-idp:DescribeUserPoolClient",
            "acm:ListCertificates",
            "acm:DescribeCertificate",
            "iam:ListServerCertificates",
            "iam:GetServerCertificate",
            "waf-regional:GetWebACL",
            "waf-regional:GetWebACLForResource",
            "waf-regional:AssociateWebACL",
            "waf-regional:DisassociateWebACL",
            "wafv2:GetWebACL",
            "wafv2:GetWebACLForResource",
            "wafv2:AssociateWebACL",
            "wafv2:DisassociateWebACL",
            "shield:GetSubscriptionState",
            "shield:DescribeProtection",
            "shield:CreateProtection",
            "shield:DeleteProtection",
        ],
        "Resource": "*",
    },
    {
        "Effect": "Allow",
        "Action": ["ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress"],
        "Resource": "*",
    },
    {"Effect": "Allow", "Action": ["ec2:CreateSecurityGroup"], "Resource": "*"},
    {
        "Effect": "Allow",
        "Action": ["ec2:CreateTags"],
        "Resource": "arn:aws:ec2:*:*:security-group/*",
        "Condition": {
            "StringEquals": {"ec2:CreateAction": "CreateSecurityGroup"},
            "Null": {"aws:RequestTag/elbv2.k8s.aws/cluster": "false"},
        },
    },
    {
        "Effect": "Allow",
        "Action": ["ec2:CreateTags", "ec2:DeleteTags"],
        "Resource": "arn:aws:ec2:*:*:security-group/*",
        "Condition": {
            "Null": {
                "aws:RequestTag/elbv2.k8s.aws/cluster": "true",
                "aws:ResourceTag/elbv2.k8s.aws/cluster": "false",
            }
        },
    },
    {
        "Effect": "Allow",
        "Action": [
            "ec2:AuthorizeSecurityGroupIngress",
            "ec2:RevokeSecurityGroupIngress",
            "ec2:DeleteSecurityGroup",
        ],
        "Resource": "*",
        "Condition": {"Null": {"aws:ResourceTag/elbv2.k8s.aws/cluster": "false"}},
    },
    {
        "Effect": "Allow",
        "Action": ["elasticloadbalancing:CreateLoadBalancer", "elasticloadbalancing:CreateTargetGroup"],
        "Resource": "*",
        "Condition": {"Null": {"aws:RequestTag/elbv2.k8s.aws/cluster": "false"}},
    },
    {
        "Effect": "Allow",
        "Action": [
            "elasticloadbalancing:CreateListener",
            "elasticloadbalancing:DeleteListener",
            "elasticloadbalancing:CreateRule",
            "elasticloadbalancing:DeleteRule",
        ],
        "Resource": "*",
    },
    {
        "Effect": "Allow",
        "Action": ["elasticloadbalancing:AddTags", "elasticloadbalancing:RemoveTags"],
        "Resource": [
            "arn:aws:elasticloadbalancing:*:*:targetgroup/*/*",
            "arn:aws:elasticloadbalancing:*:*:loadbalancer/net/*/*",
            "arn:aws:elasticloadbalancing:*:*:loadbalancer/app/*/*",
        ],
        "Condition": {
            "Null": {
                "aws:RequestTag/elbv2.k8s.aws/cluster": "true",
                "aws:ResourceTag/elbv2.k8s.aws/cluster": "false",
            }
        },
    },
    {
        "Effect": "Allow",
        "Action": ["elasticloadbalancing:AddTags", "elasticloadbalancing:RemoveTags"],
        "Resource": [
            "arn:aws:elasticloadbalancing:*:*:listener/net/*/*/*",
            "arn:aws:elasticloadbalancing:*:*:listener/app/*/*/*",
            "arn:aws:elasticloadbalancing:*:*:listener-rule/net/*/*/*",
            "arn:aws:elasticloadbalancing:*:*:listener-rule/app/*/*/*",
        ],
    },
    {
        "Effect": "Allow",
        "Action": [
            "elasticloadbalancing:ModifyLoadBalancerAttributes",
            "elasticloadbalancing:SetIpAddressType",
            "elasticloadbalancing:SetSecurityGroups",
            "elasticloadbalancing:SetSubnets",
            "elasticloadbalancing:DeleteLoadBalancer",
            "elasticloadbalancing:ModifyTargetGroup",
            "elasticloadbalancing:ModifyTargetGroupAttributes",
            "elasticloadbalancing:DeleteTargetGroup",
            "elasticloadbalancing:ModifyListenerAttributes",
            "elasticloadbalancing:ModifyCapacityReservation",
            "elasticloadbalancing:ModifyIpPools",
        ],
        "Resource": "*",
        "Condition": {"Null": {"aws:ResourceTag/elbv2.k8s.aws/cluster": "false"}},
    },
    {
        "Effect": "Allow",
        "Action": ["elasticloadbalancing:AddTags"],
        "Resource": [
            "arn:aws:elasticloadbalancing:*:*:targetgroup/*/*",
            "arn:aws:elasticloadbalancing:*:*:loadbalancer/net/*/*",
            "arn:aws:elasticloadbalancing:*:*:loadbalancer/app/*/*",
        ],
        "Condition": {
            "StringEquals": {
                "elasticloadbalancing:CreateAction": ["CreateTargetGroup", "CreateLoadBalancer"]
            },
            "Null": {"aws:RequestTag/elbv2.k8s.aws/cluster": "false"},
        },
    },
    {
        "Effect": "Allow",
        "Action": ["elasticloadbalancing:RegisterTargets", "elasticloadbalancing:DeregisterTargets"],
        "Resource": "arn:aws:elasticloadbalancing:*:*:targetgroup/*/*",
    },
    {
        "Effect": "Allow",
        "Action": [
            "elasticloadbalancing:SetWebAcl",
            "elasticloadbalancing:ModifyListener",
            "elasticloadbalancing:AddListenerCertificates",
            "elasticloadbalancing:RemoveListenerCertificates",
            "elasticloadbalancing:ModifyRule",
            "elasticloadbalancing:SetRulePriorities",
        ],
        "Resource": "*",
    },
]
"""The controller's IAM policy as its project publishes it (`docs/install/iam_policy.json`) for
v3.2.2; aws-cdk-lib 2.275 bundles the same document for `AlbControllerVersion.V3_2_2`."""

UPSTREAM_POLICIES: Final[Mapping[str, list[dict[str, Any]]]] = {LBC_CHART_VERSION: _POLICY_V3_2_2}
"""Chart version -> the upstream IAM policy statements of the controller it installs."""


def upstream_policy_statements(chart_version: str, partition: str) -> list[dict[str, Any]]:
    """The upstream IAM policy statements for a chart version, ARNs rewritten to `partition`."""
    statements = copy.deepcopy(UPSTREAM_POLICIES[chart_version])
    for statement in statements:
        resource = statement["Resource"]
        if isinstance(resource, list):
            statement["Resource"] = [_in_partition(r, partition) for r in resource]
        else:
            statement["Resource"] = _in_partition(resource, partition)
    return statements


def _in_partition(arn: str, partition: str) -> str:
    if arn.startswith(_ANY_PARTITION_ARN):
        return f"arn:{partition}:{arn[len(_ANY_PARTITION_ARN) :]}"
    return arn


def _nag_resource(arn: str) -> str:
    """How cdk-nag names an ARN built on `AWS::Partition` in an AwsSolutions-IAM5 finding."""
    return _in_partition(arn, "<AWS::Partition>")


class AwsLoadBalancerController(Construct):
    """The AWS Load Balancer Controller from its Helm chart, with credentials from EKS Pod Identity.

    Load balancers and target groups are CloudFormation resources; the controller only registers
    pods in them through `TargetGroupBinding` (`elbv2.k8s.aws/v1beta1`). Make every binding depend
    on this construct: the chart's validating webhook rejects bindings until the controller runs.

    Defaults: chart :data:`LBC_CHART_VERSION` from :data:`LBC_REPOSITORY`, two replicas (one leads),
    the upstream IAM policy of that release on a Pod Identity role for
    `kube-system/aws-load-balancer-controller`, no mutating webhook for Services of type
    LoadBalancer and no IngressClass (nothing outside the template creates a load balancer),
    `wait` with a 14-minute timeout (under the kubectl handler Lambda's 15-minute limit).
    `node_selector` (default: none) pins the pods to nodes. The image is the table's
    `aws-load-balancer-controller` (gpufarm/data/images.yaml), its digest from `image_digests`
    (default: none; a tier's `images.digests`) while the table holds none; with `image_cache`
    (default: none) the image is pulled through the account's ECR.
    The CRDs are installed first as their own Helm release (:attr:`crds`, the chart
    `aws-load-balancer-controller-crds` shipped with gpufarm), so a version bump upgrades them.
    The region and VPC are passed in so the pods never need the instance metadata service.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: eks.ICluster,
        vpc_id: str,
        region: str,
        version: str = LBC_CHART_VERSION,
        replicas: int = 2,
        node_selector: Mapping[str, str] | None = None,
        image_digests: Mapping[str, str] | None = None,
        image_cache: ImageCache | None = None,
    ) -> None:
        super().__init__(scope, id)
        if version not in UPSTREAM_POLICIES:
            raise ValueError(
                f"'version' must be one of {', '.join(repr(v) for v in UPSTREAM_POLICIES)} (the chart "
                f"versions whose controller IAM policy is shipped here), got {version!r}"
            )
        if not 1 <= replicas <= 3:
            raise ValueError(f"'replicas' must be 1 to 3 (one leads, the rest wait), got {replicas}")
        self.version = version
        self.role = pod_identity_role(
            self, "Role", description="AWS Load Balancer Controller: register pods in target groups"
        )
        statements = upstream_policy_statements(version, cdk.Aws.PARTITION)
        self.policy = iam.Policy(
            self,
            "Policy",
            roles=[self.role],
            document=iam.PolicyDocument.from_json({"Version": "2012-10-17", "Statement": statements}),
        )
        self.pod_identity = eks.CfnPodIdentityAssociation(
            self,
            "PodIdentity",
            cluster_name=cluster.cluster_name,
            namespace=LBC_NAMESPACE,
            service_account=LBC_SERVICE_ACCOUNT,
            role_arn=self.role.role_arn,
        )
        self.values: dict[str, Any] = {
            "clusterName": cluster.cluster_name,
            "region": region,
            "vpcId": vpc_id,
            "replicaCount": replicas,
            "serviceAccount": {"create": True, "name": LBC_SERVICE_ACCOUNT},
            "enableServiceMutatorWebhook": False,
            "createIngressClassResource": False,
            "ingressClassParams": {"create": False},
            "podDisruptionBudget": {"maxUnavailable": 1},
            "nodeSelector": dict(node_selector or {}),
            # The chart builds `repository:tag` (aws/eks-charts stable/aws-load-balancer-controller
            # templates/deployment.yaml), so the digest rides in the tag.
            "image": {
                "repository": images.image(LBC_IMAGE).repository,
                "tag": images.helm_tag(LBC_IMAGE, image_digests),
            },
        }
        shipped = crd_chart_version(LBC_CRD_CHART)
        if version != shipped:
            raise ValueError(
                f"'version' must be {shipped!r}, the release whose CRDs gpufarm ships "
                f"(gpufarm/charts/{LBC_CRD_CHART}), got {version!r}"
            )
        # The CRDs as their own release, so a version bump upgrades their schemas.
        self.crds = CrdChart(
            self,
            "Crds",
            cluster=cluster,
            chart=LBC_CRD_CHART,
            namespace=LBC_NAMESPACE,
            create_namespace=False,
        )
        self.chart = eks.HelmChart(
            self,
            "Resource",
            cluster=cluster,
            chart=LBC_CHART,
            repository=LBC_REPOSITORY,
            version=version,
            release=LBC_CHART,
            namespace=LBC_NAMESPACE,
            create_namespace=False,
            values=self.values if image_cache is None else image_cache.values(self.values),
            wait=True,
            # Under the kubectl handler's 15-minute Lambda limit, which also covers its own start:
            # a 15-minute wait is cut off and leaves the release pending (deploy rule HELM-TIMEOUT).
            timeout=cdk.Duration.minutes(14),
        )
        # Pods get Pod Identity credentials only if the association exists when they start.
        self.chart.node.add_dependency(self.pod_identity, self.policy, self.crds.chart)
        self._acknowledge(version)

    def _acknowledge(self, version: str) -> None:
        acknowledge(
            self.policy,
            "NIST.800.53.R5-IAMNoInlinePolicy",
            f"The controller's published IAM policy (v{version}) is attached inline to its own Pod "
            "Identity role only: no other principal can be given it, and it is replaced with the "
            "chart version and deleted with the role.",
        )
        reason = (
            "The AWS Load Balancer Controller's published IAM policy (v{}): {}. Its write actions "
            "on load balancers and security groups are limited by the elbv2.k8s.aws/cluster tag "
            "condition where the API supports it."
        )
        acknowledge(
            self.policy,
            "AwsSolutions-IAM5[Resource::*]",
            reason.format(
                version,
                "Describe*/Get* calls and the create calls have no resource-level permissions, and "
                "the target groups and listeners it acts on are created by CloudFormation under "
                "names it cannot know in advance",
            ),
        )
        wildcard_arns = sorted(
            {
                r
                for s in UPSTREAM_POLICIES[version]
                for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
                if r != "*"
            }
        )
        for arn in wildcard_arns:
            acknowledge(
                self.policy,
                f"AwsSolutions-IAM5[Resource::{_nag_resource(arn)}]",
                reason.format(
                    version,
                    f"{arn.split(':')[5]} of any name in the account, since the controller registers "
                    "pods in target groups and tags the resources it manages",
                ),
            )
