"""Which resource types a gpufarm template holds cost money, and which line of `gpufarm cost` prices each.

Every CloudFormation resource type (and every Kubernetes object kind the stack applies) that a
synthesized tier contains is in exactly one of two tables:

* :data:`PRICED_TYPES`: the type bills, and `gpufarm cost` has a line for it; the value is the
  start of that line's item (or several, any of which prices it);
* :data:`FREE_TYPES`: AWS bills nothing for the type itself, with the reason.

`tests/tiers/test_billed_types.py` walks every template the test suite synthesizes and fails on
a type that is in neither table, so a new resource cannot slip into a tier unpriced. A few types
bill differently by a property (an interface endpoint bills, a gateway endpoint does not): they
are keyed as ``Type/Value`` by :func:`resource_kind`. See docs/decisions/0053-every-billed-resource.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

_LAMBDA_FREE = (
    "a deploy-time handler (custom resources, the kubectl provider): it runs when the stack is "
    "deployed or updated, within Lambda's monthly free allowance of 1M requests and 400,000 "
    "GB-seconds, which does not expire"
)
_K8S_OBJECT = "a Kubernetes API object: it runs on the priced nodes and bills nothing itself"

PRICED_TYPES: dict[str, tuple[str, ...]] = {
    "AWS::EKS::Cluster": ("EKS control plane",),
    "AWS::EKS::Nodegroup": ("System nodes", "GPU node group"),
    "AWS::EC2::CapacityReservation": ("GPU node group",),
    "AWS::AutoScaling::AutoScalingGroup": ("Inspection appliances", "GPU pool", "Gateway instances"),
    "AWS::AutoScaling::WarmPool": ("EBS gp3 warm pool volumes",),
    "AWS::EC2::NatGateway": ("NAT gateways",),
    "AWS::EC2::EIP": ("Public IPv4 addresses",),
    "AWS::EC2::VPCEndpoint/Interface": ("VPC interface endpoints", "Inspection VPC interface endpoints"),
    "AWS::EC2::VPCEndpoint/GatewayLoadBalancer": ("GWLB endpoints",),
    "AWS::ElasticLoadBalancingV2::LoadBalancer/application": ("Application Load Balancer",),
    "AWS::ElasticLoadBalancingV2::LoadBalancer/network": (
        "Network Load Balancer",
        "PrivateLink Network Load Balancer",
        "Gateway Network Load Balancer",
    ),
    "AWS::ElasticLoadBalancingV2::LoadBalancer/gateway": ("Gateway Load Balancer (inspection)",),
    "AWS::FSx::FileSystem": ("FSx for Lustre",),
    "AWS::KMS::Key": ("KMS keys",),
    "AWS::Logs::LogGroup": ("CloudWatch Logs",),
    "AWS::EC2::FlowLog": ("CloudWatch Logs ingestion: VPC flow logs",),
    "AWS::WAFv2::WebACL": ("AWS WAF web ACL",),
    "AWS::WAFv2::LoggingConfiguration": ("CloudWatch Logs ingestion: WAF logs",),
    "AWS::APS::Workspace": ("AMP samples ingested",),
    "AWS::APS::Scraper": ("AMP managed collector",),
    "AWS::APS::RuleGroupsNamespace": ("AMP query samples (rules)",),
    "AWS::CloudWatch::Alarm": ("CloudWatch alarms",),
    "AWS::CloudWatch::Dashboard": ("CloudWatch dashboard",),
    "AWS::Grafana::Workspace": ("Managed Grafana",),
    "AWS::Bedrock::Guardrail": ("Bedrock Guardrail",),
    "AWS::S3::Bucket": ("S3 access logs", "S3 model replica"),
    "AWS::Route53::HealthCheck": ("Route 53 health checks",),
    "AWS::ECR::PullThroughCacheRule": ("ECR storage (image cache)",),
    "AWS::SageMaker::Endpoint": ("SageMaker endpoint instances",),
}
"""Resource type (or ``Type/Value``, see :func:`resource_kind`) -> the item(s) of its cost line."""

FREE_TYPES: dict[str, str] = {
    # Identity and networking plumbing.
    "AWS::IAM::Role": "IAM is free",
    "AWS::IAM::Policy": "IAM is free",
    "AWS::IAM::ManagedPolicy": "IAM is free",
    "AWS::IAM::InstanceProfile": "IAM is free",
    "AWS::EC2::VPC": "a VPC bills nothing itself; its NAT gateways, endpoints and addresses are priced",
    "AWS::EC2::Subnet": "subnets are free",
    "AWS::EC2::RouteTable": "route tables are free",
    "AWS::EC2::Route": "routes are free",
    "AWS::EC2::SubnetRouteTableAssociation": "route table associations are free",
    "AWS::EC2::GatewayRouteTableAssociation": "route table associations are free",
    "AWS::EC2::InternetGateway": "an internet gateway is free; data out and public addresses are priced",
    "AWS::EC2::VPCGatewayAttachment": "attaching a gateway is free",
    "AWS::EC2::SecurityGroup": "security groups are free",
    "AWS::EC2::SecurityGroupIngress": "security group rules are free",
    "AWS::EC2::SecurityGroupEgress": "security group rules are free",
    "AWS::EC2::VPCEndpoint/Gateway": "gateway endpoints (S3) have no hourly or data charge",
    "AWS::EC2::VPCEndpointService": (
        "the provider of an endpoint service pays nothing for it; consumers pay for their "
        "endpoints, and the NLB behind it is priced"
    ),
    "AWS::EC2::VPCEndpointServicePermissions": "permissions on an endpoint service are free",
    "AWS::EC2::LaunchTemplate": (
        "a launch template is free; the instances and volumes it launches are priced (its gp3 "
        "throughput above the baseline too)"
    ),
    "AWS::AutoScaling::ScalingPolicy": "scaling policies are free; the instances are priced",
    "AWS::ApplicationAutoScaling::ScalableTarget": (
        "Application Auto Scaling is free; the capacity it scales (inference component copies on "
        "the endpoint's priced instances) is priced"
    ),
    "AWS::ApplicationAutoScaling::ScalingPolicy": "scaling policies are free; the instances are priced",
    "AWS::SageMaker::Model": (
        "a model is a definition (image, environment, role); its endpoint's instances are priced"
    ),
    "AWS::SageMaker::EndpointConfig": (
        "an endpoint config is a definition; the endpoint's instances are priced"
    ),
    "AWS::SageMaker::InferenceComponent": (
        "a component's copies run on the endpoint's instances, which are priced per instance-hour"
    ),
    # Load balancer parts, billed through the load balancer's hours and capacity units.
    "AWS::ElasticLoadBalancingV2::Listener": "billed through the load balancer's capacity units",
    "AWS::ElasticLoadBalancingV2::ListenerRule": (
        "billed through the ALB's capacity units (rule evaluations are one of their dimensions)"
    ),
    "AWS::ElasticLoadBalancingV2::TargetGroup": "target groups are free",
    # EKS parts.
    "AWS::EKS::Addon": "EKS add-ons are free; their pods run on the priced nodes",
    "AWS::EKS::AccessEntry": "access entries are free",
    "AWS::EKS::PodIdentityAssociation": "Pod Identity associations are free",
    "AWS::FSx::DataRepositoryAssociation": (
        "the association is free; the file system is priced and imports read S3 through the gateway endpoint"
    ),
    # WAF parts billed through the web ACL's rules.
    "AWS::WAFv2::WebACLAssociation": "associating a web ACL is free",
    "AWS::WAFv2::IPSet": "IP sets are free; the rule that references one is priced",
    "AWS::Bedrock::GuardrailVersion": "a guardrail version is free; its text units are priced",
    "AWS::S3::BucketPolicy": "bucket policies are free",
    "AWS::Route53::RecordSet": (
        "an alias record to a load balancer in a hosted zone the operator owns: Route 53 bills the "
        "zone (not this stack's) and charges nothing for queries to alias records that point at an "
        "Elastic Load Balancing load balancer (https://aws.amazon.com/route53/pricing/)"
    ),
    "AWS::SSM::Parameter": "standard-tier parameters are free",
    "AWS::CDK::Metadata": "CDK's own metadata, not an AWS resource",
    # Event plumbing with a monthly volume far inside an allowance that does not expire.
    "AWS::Events::Rule": (
        "rules matching AWS service events: CloudWatch pricing includes 'all events except "
        "custom events' free of charge"
    ),
    "AWS::SQS::Queue": (
        "the interruption queue carries a few hundred messages a month, inside SQS's monthly "
        "free allowance of 1M requests"
    ),
    "AWS::SQS::QueuePolicy": "queue policies are free",
    "AWS::SNS::Topic": (
        "alarm notifications: a handful of publishes a month, inside SNS's monthly free "
        "allowance of 1M publishes"
    ),
    "AWS::SNS::TopicPolicy": "topic policies are free",
    "AWS::StepFunctions::StateMachine": (
        "the CDK provider framework's waiter, run at deploy time: a few state transitions, "
        "inside Step Functions' 4,000 free transitions a month, which do not expire"
    ),
    "AWS::Lambda::Function": _LAMBDA_FREE,
    "AWS::Lambda::LayerVersion": "layers are stored free of charge",
    "AWS::Lambda::Permission": "permissions are free",
    "Custom::AWSCDK-EKS-KubernetesResource": (
        "applied by the kubectl provider at deploy time; the objects it applies are walked as "
        "Kubernetes kinds"
    ),
    "Custom::AWSCDK-EKS-HelmChart": (
        "installed by the kubectl provider at deploy time; its pods run on the priced nodes"
    ),
    "Custom::VpcRestrictDefaultSG": _LAMBDA_FREE,
    "Custom::GrafanaDashboards": _LAMBDA_FREE,
}
"""Resource type (or ``Type/Value``) -> why it bills nothing."""

PRICED_KINDS: dict[str, tuple[str, ...]] = {
    "NodePool": ("GPU pool", "EKS Auto Mode fee"),
    "EC2NodeClass": ("GPU pool",),
    "NodeClass": ("GPU pool",),
}
"""Kubernetes kind (``Service/LoadBalancer`` for a Service of that type) -> the item(s) of its line."""

FREE_KINDS: dict[str, str] = {
    "Namespace": _K8S_OBJECT,
    "ConfigMap": _K8S_OBJECT,
    "Secret": _K8S_OBJECT,
    "ServiceAccount": _K8S_OBJECT,
    "Role": _K8S_OBJECT,
    "RoleBinding": _K8S_OBJECT,
    "ClusterRole": _K8S_OBJECT,
    "ClusterRoleBinding": _K8S_OBJECT,
    "Deployment": _K8S_OBJECT,
    "StatefulSet": _K8S_OBJECT,
    "DaemonSet": _K8S_OBJECT,
    "Job": _K8S_OBJECT,
    "LeaderWorkerSet": _K8S_OBJECT,
    "Service/ClusterIP": "a ClusterIP Service creates no load balancer",
    "Service/None": "a headless Service creates no load balancer",
    "HorizontalPodAutoscaler": _K8S_OBJECT,
    "ScaledObject": _K8S_OBJECT,
    "TriggerAuthentication": _K8S_OBJECT,
    "PodDisruptionBudget": _K8S_OBJECT,
    "NetworkPolicy": _K8S_OBJECT,
    "PriorityClass": _K8S_OBJECT,
    "TargetGroupBinding": "registers pods in a target group the stack creates; the load balancer is priced",
    "PersistentVolume": (
        "a static volume naming the FSx file system (priced) or the model bucket (created outside the stack)"
    ),
    "PersistentVolumeClaim": "bound to a static volume (FSx or S3 Mountpoint); no EBS volume is provisioned",
    "StorageClass": _K8S_OBJECT,
    "IngressClass": _K8S_OBJECT,
    "IngressClassParams": _K8S_OBJECT,
    "InferencePool": _K8S_OBJECT,
    "InferenceObjective": _K8S_OBJECT,
    "InferenceModel": _K8S_OBJECT,
    "HTTPRoute": _K8S_OBJECT,
}
"""Kubernetes kind -> why it bills nothing."""


def resource_kind(resource_type: str, properties: Mapping[str, Any]) -> str:
    """The key a resource is looked up under: its type, refined by the property that decides its bill."""
    if resource_type == "AWS::EC2::VPCEndpoint":
        return f"{resource_type}/{properties.get('VpcEndpointType', 'Gateway')}"
    if resource_type == "AWS::ElasticLoadBalancingV2::LoadBalancer":
        return f"{resource_type}/{properties.get('Type', 'application')}"
    return resource_type


def kubernetes_kind(manifest: Mapping[str, Any]) -> str:
    """The key a Kubernetes object is looked up under: its kind, with a Service's type."""
    kind = str(manifest.get("kind"))
    if kind == "Service":
        spec = manifest.get("spec") or {}
        if spec.get("clusterIP") == "None":
            return "Service/None"
        return f"Service/{spec.get('type', 'ClusterIP')}"
    return kind


def template_kinds(template: Mapping[str, Any]) -> set[str]:
    """Every resource key (see :func:`resource_kind`) a CloudFormation template holds."""
    return {
        resource_kind(str(r.get("Type")), r.get("Properties") or {})
        for r in (template.get("Resources") or {}).values()
    }


def unaccounted(kinds: Iterable[str], *, priced: Mapping[str, object], free: Mapping[str, str]) -> list[str]:
    """The kinds in neither table, sorted; empty when every one is priced or free."""
    return sorted({k for k in kinds if k not in priced and k not in free})


def unpriced_lines(
    kinds: Iterable[str], items: Iterable[str], *, priced: Mapping[str, tuple[str, ...]]
) -> list[str]:
    """Priced kinds whose line is missing from `items` (the items of an estimate), sorted."""
    present = list(items)
    return sorted(
        kind
        for kind in set(kinds)
        if kind in priced and not any(item.startswith(priced[kind]) for item in present)
    )
