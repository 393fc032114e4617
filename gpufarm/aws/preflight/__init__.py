"""Preflight: can this account run a tier in a region? Checked with read-only AWS calls.

Each check gives rows of pass / warn / fail with the fix for a failure. Two read only the tier
and run without credentials (:data:`OFFLINE_CHECKS`: the region, documentation values); the
others call AWS (:data:`ACCOUNT_CHECKS`), and without an account each is reported as one `skip`
row (:func:`offline_report`):

- **vCPU quotas**: the EC2 Service Quotas for G/VT and P instances, On-Demand and Spot, against
  the vCPUs the tier needs (instances x vCPUs per instance, from ``DescribeInstanceTypes``).
- **Instance type offerings**: the GPU instance types are offered in the configured AZs.
- **Capacity reservations**: referenced ODCRs and Capacity Blocks exist, are active, and match
  the node group's instance type, AZ and node count (Capacity Blocks: cover the present moment).
- **Bedrock**: fallback foundation models and inference profiles are offered in the region.
- **Kubernetes version**: EKS supports the configured version.
- **Bedrock access**: the account may invoke each fallback's foundation model
  (GetFoundationModelAvailability).
- **Certificate**: the ACM certificate exists, is issued, valid, and in the tier's region.
- **Model bucket**: every S3 weights folder and the FSx import path exist and hold the weights.
- **Hugging Face token secret**: each `hf_token_secret` exists with a current value.
- **CDK bootstrap**: the bootstrap version parameter holds the version the stack requires.
- **Network quotas**: with the synthesized template, what it creates (Elastic IPs, VPCs,
  interface endpoints per VPC, target groups per region and per load balancer, listener rules per
  load balancer, rules per security group, security groups per network interface) against the
  account's quotas in Service Quotas and what the account already uses.

An API the caller may not call turns its check into a warning (the check could not run); missing
or expired credentials stop the run with :class:`PreflightError`. Nothing here is imported at
synth time.

The package is split by job: :mod:`.results` (rows and the report), :mod:`.calls` (AWS calls
and their errors), one module per check (:mod:`.vcpu_quotas`, :mod:`.offerings`,
:mod:`.reservations`, :mod:`.bedrock`, :mod:`.kubernetes`, :mod:`.network_quotas`) and
:mod:`.run`. Every public name is importable from ``gpufarm.aws.preflight`` itself.
"""

from __future__ import annotations

from gpufarm.aws.preflight.bedrock import check_bedrock, check_bedrock_access
from gpufarm.aws.preflight.bootstrap import BOOTSTRAP_VERSION_PARAMETER, check_cdk_bootstrap, required_version
from gpufarm.aws.preflight.calls import (
    CREDENTIALS_HELP,
    InstanceInfo,
    describe_instance_types,
    describe_offerings,
)
from gpufarm.aws.preflight.certificate import check_certificate
from gpufarm.aws.preflight.image_cache import check_image_cache, template_images
from gpufarm.aws.preflight.kubernetes import check_kubernetes_version
from gpufarm.aws.preflight.model_bucket import check_model_bucket
from gpufarm.aws.preflight.network_quotas import (
    ALB_QUOTAS_DOC,
    ELASTIC_IPS,
    ENDPOINT_QUOTAS_DOC,
    INTERFACE_ENDPOINTS,
    NETWORK_QUOTAS,
    RULES_PER_ALB,
    SECURITY_GROUP_RULES,
    SECURITY_GROUPS_PER_INTERFACE,
    TARGET_GROUPS,
    TARGET_GROUPS_PER_ALB,
    VPC_QUOTAS_DOC,
    VPCS,
    AccountQuota,
    check_network_quotas,
    network_quota_checks,
    no_template_row,
)
from gpufarm.aws.preflight.offerings import check_offerings
from gpufarm.aws.preflight.reservations import check_reservations
from gpufarm.aws.preflight.results import (
    ACCOUNT_CHECKS,
    OFFLINE_CHECKS,
    Check,
    CheckResult,
    PreflightError,
    PreflightReport,
    QuotaFigures,
    Status,
)
from gpufarm.aws.preflight.run import (
    check_placeholders,
    offline_checks,
    offline_report,
    run_preflight,
    skipped_rows,
)
from gpufarm.aws.preflight.secrets import check_hf_token_secrets
from gpufarm.aws.preflight.vcpu_quotas import (
    VCPU_QUOTAS,
    PodShape,
    VcpuDemand,
    VcpuQuota,
    check_vcpu_quotas,
    fits,
    instance_for,
    quota_for,
    vcpu_demands,
)

__all__ = [
    "ACCOUNT_CHECKS",
    "ALB_QUOTAS_DOC",
    "BOOTSTRAP_VERSION_PARAMETER",
    "CREDENTIALS_HELP",
    "ELASTIC_IPS",
    "ENDPOINT_QUOTAS_DOC",
    "INTERFACE_ENDPOINTS",
    "NETWORK_QUOTAS",
    "OFFLINE_CHECKS",
    "RULES_PER_ALB",
    "SECURITY_GROUPS_PER_INTERFACE",
    "SECURITY_GROUP_RULES",
    "TARGET_GROUPS",
    "TARGET_GROUPS_PER_ALB",
    "VCPU_QUOTAS",
    "VPCS",
    "VPC_QUOTAS_DOC",
    "AccountQuota",
    "Check",
    "CheckResult",
    "InstanceInfo",
    "PodShape",
    "PreflightError",
    "PreflightReport",
    "QuotaFigures",
    "Status",
    "VcpuDemand",
    "VcpuQuota",
    "check_bedrock",
    "check_bedrock_access",
    "check_cdk_bootstrap",
    "check_certificate",
    "check_hf_token_secrets",
    "check_image_cache",
    "check_kubernetes_version",
    "check_model_bucket",
    "check_network_quotas",
    "check_offerings",
    "check_placeholders",
    "check_reservations",
    "check_vcpu_quotas",
    "describe_instance_types",
    "describe_offerings",
    "fits",
    "instance_for",
    "network_quota_checks",
    "no_template_row",
    "offline_checks",
    "offline_report",
    "quota_for",
    "required_version",
    "run_preflight",
    "skipped_rows",
    "template_images",
    "vcpu_demands",
]
