"""The configuration reference (docs/config-reference.md), generated from the tier model.

Every field of :class:`~gpufarm.config.model.TierConfig` and its sections, with its dotted path,
type, default and description, followed by the cross-field rules of
:mod:`gpufarm.config.validate`. Regenerate the document with::

    python -m gpufarm.config.reference > docs/config-reference.md

A test compares the file with :func:`render_reference`, so the document cannot drift from the code.
"""

from __future__ import annotations

import re
import sys
import typing
from collections.abc import Iterator
from enum import Enum
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from gpufarm import images as image_table
from gpufarm.config import model as m
from gpufarm.config._typing import is_union, split_optional
from gpufarm.config.loader import preset_names
from gpufarm.config.placeholders import MIN_REASON_CHARS, PRESET_EXAMPLE_BUCKETS
from gpufarm.config.sections import hybrid
from gpufarm.config.sections.regions import BucketName, HostedZoneId, PoolReservations
from gpufarm.config.sections.sagemaker import LmiImageDigests
from gpufarm.config.validate import (
    AUTO_MODE_MAX_EXPIRE_HOURS,
    CFN_DESCRIPTION_MAX_BYTES,
    GPUFARM_CONTROLLER_NAMESPACES,
    HEALTH_CHECK_TIMEOUT_SECONDS,
    KUBERNETES_SYSTEM_NAMESPACES,
    MAX_SCRAPER_SUBNETS,
    MIN_APPLIANCE_SUBNET_PREFIX,
    MULTI_NODE_RESERVED_VLLM_FLAGS,
    RESERVED_VLLM_FLAGS,
    SUPPORTED_KUBERNETES_VERSIONS,
)
from gpufarm.config.vllm_flags import SHORT_FLAGS, vllm_flags_version
from gpufarm.config.yaml_reader import MAX_DEPTH, MAX_FILE_BYTES, MAX_VALUES
from gpufarm.core.instances import GPU_FAMILIES

REGENERATE = "python -m gpufarm.config.reference > docs/config-reference.md"
"""The command that rewrites the reference."""

_NAMED_TYPES: tuple[tuple[Any, str], ...] = (
    (
        m.DnsLabel,
        "DNS label (a-z, 0-9, `-`; starts with a letter, not ending with `-`; at most 40 characters)",
    ),
    (m.Duration, "duration (`30m`, `1h`, `2h30m`) or `Never`"),
    (m.Cidr, "IPv4 CIDR (no host bits set)"),
    (
        m.LogRetentionDays,
        f"days, a CloudWatch Logs retention ({', '.join(map(str, m.LOG_RETENTION_DAYS))})",
    ),
    (m.Region, "AWS region name (`us-east-1`)"),
    (m.AcmCertificateArn, "ACM certificate ARN"),
    (m.IamRoleArn, "IAM role ARN"),
    (m.SecretRef, "Secrets Manager secret name or ARN"),
    (m.NodeBudget, "node count (`1`) or percentage (`0%`-`100%`)"),
    (m.ImageRef, "container image pinned by digest (`repo/name:v1.2.3@sha256:...`)"),
    (
        m.AgentImageRef,
        "container image pinned by digest (or AWS's own `...target-control-agent:latest`, refused at deploy)",
    ),
    (
        m.EngineImageRef,
        "container image pinned by digest (or the image table's tag while it has no digest, "
        "refused at deploy)",
    ),
    (m.ImageDigests, "mapping of image name to `sha256:` digest"),
    (LmiImageDigests, "mapping of engine (`vllm`, `trtllm`) to `sha256:` digest"),
    (m.AccountId, "12-digit AWS account ID"),
    (m.ChartVersion, "exact Helm chart version (`1.2.3`)"),
    (m.AmiVersion, "`latest`, an AL2023 release (`v20251120`) or a Bottlerocket version (`1.50.0`)"),
    (m.HttpsUrl, "https:// URL"),
    (HostedZoneId, "Route 53 hosted zone ID (`Z...`)"),
    (BucketName, "S3 bucket name"),
    (PoolReservations, "mapping of node pool name to capacity reservation IDs (`cr-...`)"),
    (m.CognitoUserPoolArn, "Cognito user pool ARN"),
    (m.Email, "email address"),
    (m.ReservationId, "capacity reservation ID (`cr-...`)"),
    (m.AllowedPrincipal, "IAM principal ARN (`arn:aws:iam::<account>:root`, `:role/...`, `:user/...`)"),
    (hybrid.GatewayId, "transit gateway (`tgw-...`) or virtual private gateway (`vgw-...`) ID"),
    (hybrid.TrustAnchorArn, "IAM Roles Anywhere trust anchor ARN"),
    (hybrid.ProfileArn, "IAM Roles Anywhere profile ARN"),
    (hybrid.GpuType, "lower-case GPU name (`h100`, `l40s`)"),
)
"""Annotated aliases of gpufarm/config/model.py and how the reference names them."""

_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}

_CHART_PIN = (
    "while the tier runs the chart, the version whose image `gpufarm/data/images.yaml` pins by digest "
    "(the row's `chart`): a chart and its image digest move together."
)

CROSS_FIELD_RULES: tuple[tuple[str, str], ...] = (
    (
        "environment.region",
        "one with a known Amazon EKS image registry (gpufarm/core/registries.py) when a node "
        "group sets `efa`: the EFA device plugin is pulled from the region's own registry.",
    ),
    (
        "environment.availability_zones",
        "every zone belongs to `environment.region` (the region plus one letter); no zone is listed twice.",
    ),
    (
        "network.nat_gateways",
        "at least 1 (nodes pull images and weights through NAT) and at most the number of "
        "`environment.availability_zones`.",
    ),
    ("network.cidr", "a /16 to /20 block, so each AZ gets a private subnet with room for pod IPs."),
    ("network.interface_endpoints", "no endpoint is listed twice."),
    (
        "cluster.kubernetes_version",
        f"one of {', '.join(f'`{v}`' for v in SUPPORTED_KUBERNETES_VERSIONS)} "
        "(the bundled kubectl 1.35 and one minor version either side).",
    ),
    (
        "cluster.public_access_cidrs",
        "at least one CIDR when `cluster.endpoint_access` is `public_and_private`; "
        "empty when it is `private`; `0.0.0.0/0` only with `cluster.open_to_internet`.",
    ),
    (
        "cluster.open_to_internet",
        "only when `cluster.public_access_cidrs` holds `0.0.0.0/0`; its `reason` has at least "
        f"{MIN_REASON_CHARS} characters and no placeholder word (TODO, TBD, ...). The reason is the "
        "cdk-nag acknowledgement of AwsSolutions-EKS1 on the cluster.",
    ),
    (
        "cluster.auto_mode_builtin_pools",
        "at least one pool with `auto-mode` provisioning (GPU pools use the `default` NodeClass, "
        "which exists only while a built-in pool is enabled).",
    ),
    ("node_pools", "pool names are unique, also after removing hyphens (they name resources)."),
    (
        "node_pools[].instance_families",
        f"known GPU families: {', '.join(f'`{f}`' for f in sorted(GPU_FAMILIES))}.",
    ),
    (
        "node_pools[].instance_types",
        "known GPU instance types of one of the pool's `instance_families`.",
    ),
    (
        "node_pools[].capacity_types",
        "`on-demand` and/or `spot` with `auto-mode` or `karpenter` provisioning (`reserved` needs "
        "capacity reservation selectors); `spot` only on pools whose `purpose` is `batch`; no "
        "type listed twice.",
    ),
    (
        "node_pools[].expire_after",
        f"at most `{AUTO_MODE_MAX_EXPIRE_HOURS}h` (not `Never`) with `auto-mode` provisioning.",
    ),
    (
        "node_pools[].gpu_limit",
        "at least the sum of `gpus` x `replicas` (`autoscaling.max_replicas` when autoscaled) of "
        "the models and shares placed on the pool.",
    ),
    (
        "models",
        "`name` is unique, also after removing hyphens, and so is the name clients send "
        "(`served_model_name`, else `name`).",
    ),
    (
        "models[].route_priority",
        "unique across models; the default is derived from the model name, so a clash asks you to "
        "set it on one of them.",
    ),
    (
        "models[].weights",
        "a Hugging Face repo id (`org/name`) or an S3 URI (`s3://bucket/prefix/`).",
    ),
    ("models[].revision", "only with Hugging Face weights (not `s3://`)."),
    ("models[].hf_token_secret", "only with Hugging Face weights (not `s3://`)."),
    (
        "models[].gpus",
        f"one of {', '.join(map(str, m.TENSOR_PARALLEL_SIZES))} (the tensor-parallel size), and no more "
        "than the GPUs of the largest instance the model's pool may launch.",
    ),
    (
        "models[].node_pool",
        "names a pool in `node_pools` (unset: the first pool); a `critical` model may use a pool "
        "that allows `spot` only with `allow_spot: true`.",
    ),
    (
        "models[].weights_gib",
        "required for `s3://` models when `model_store.kind` is `fsx-lustre` and "
        "`model_store.fsx.storage_capacity_gib` is not set.",
    ),
    (
        "models[].autoscaling",
        "sets `queue_target` and/or `kv_cache_target`; needs `observability.prometheus.enabled`.",
    ),
    (
        "models[].autoscaling.min_replicas",
        "at most `max_replicas`; `0` (scale to zero) only when the model is not `critical` and "
        "`fallback.enabled` is true (a parked model wakes on the requests the gateway counts).",
    ),
    (
        "cluster.system_nodes",
        "`min_size` <= `desired_size` <= `max_size`.",
    ),
    (
        "node_pools[].reservation_ids",
        "required with the `reserved` capacity type under `karpenter` provisioning, and only then.",
    ),
    ("node_pools[].efa", "false: EFA is set on reserved node groups."),
    (
        "node_groups",
        "names unique and different from every pool's; `karpenter` provisioning (standard compute).",
    ),
    ("node_groups[].instance_type", "a known GPU instance type."),
    ("node_groups[].availability_zone", "one of `environment.availability_zones`."),
    (
        "node_groups[].capacity.reservation_ids",
        "empty for `create`; at least one for `odcr`; exactly one for `capacity-block`.",
    ),
    (
        "node_groups[].capacity.instance_count",
        "only for `create`, and at least `nodes`.",
    ),
    (
        "node_groups[].nodes",
        "hold the GPUs of the models and shares placed on the group (`gpus` x `pipeline_parallel` x "
        "replicas).",
    ),
    (
        "models[].capacity_class",
        "names a class of node groups and pools, not together with `node_pool`; the class has room "
        "for its models' GPUs; a `critical` model's class has no spot pool unless `allow_spot`.",
    ),
    (
        "models[].pipeline_parallel",
        "above 1 only with `karpenter` provisioning and without `autoscaling`.",
    ),
    (
        "models[].listener_port",
        "required and unique with `ingress.kind` `nlb` (and not the gateway's 443/80); empty with `alb`.",
    ),
    (
        "ingress.kind",
        "`nlb` excludes the Target Optimizer, WAF, OIDC/Cognito and `lcu_reservation`; `nlb.tls` "
        "needs `certificate_arn`; an internet-facing NLB needs `nlb.tls` and `inspection.enabled`; "
        "`allowed_cidrs` x (models + 1) listener rules fit the security group's 60.",
    ),
    ("ingress.private_link.allowed_principals", "at least one when PrivateLink is enabled."),
    (
        "ingress.inspection",
        "only for an `internet-facing` scheme; its CIDR does not overlap `network.cidr`; "
        "appliance `min_size` <= `max_size`; appliance `root_device_name` stays `/dev/xvda` "
        "unless `ami_id` is set.",
    ),
    (
        "compliance_packs",
        "at least one, none twice; with `control-tower`, `network.flow_logs.retention_days` is at "
        "least 365 (control CT.CLOUDWATCH.PR.2) and `termination_protection` is true (the load "
        "balancers' deletion protection, CT.ELASTICLOADBALANCING.PR.5).",
    ),
    (
        "models[].kv_cache_routing",
        "only with `ingress.kind` `alb` and without the Target Optimizer (both would choose the pod).",
    ),
    (
        "models[].prefill_decode",
        "only with `ingress.kind` `alb`, without the Target Optimizer, for single-node models "
        "(`pipeline_parallel` 1) and without `kv_cache_routing` (the prefill/decode router also scores "
        "prefix-cache hits); `prefill_gpus` is a tensor-parallel size that fits one node of the model's "
        "placement; `kv_transport` `efa` needs `efa_image` and only EFA node groups under the model, "
        "`tcp` takes no `efa_image`; `serving.port` is neither 8200 nor 5600 (the decode engine and "
        "NIXL's side channel); `extra_args` sets neither `--kv-transfer-config` nor `--block-size`; "
        "prefill pods count against the model's pool or class like its replicas; "
        "`prefill_autoscaling` keeps at least one prefill pod, needs Managed Prometheus and leaves "
        "`prefill_replicas` unset.",
    ),
    (
        "models[].shares",
        "2-5 shares, at least one with a `weight` above 0, names unique within the model; not "
        "together with the model's `node_pool`, `capacity_class`, `autoscaling`, "
        "`pipeline_parallel` above 1, `kv_cache_routing` or `prefill_decode`.",
    ),
    (
        "models[].shares[].node_pool",
        "exactly one of `node_pool` and `capacity_class`, naming a pool, node group or class as for "
        "a model (the same spot, GPU-fit and capacity rules, counted per share).",
    ),
    (
        "models[].shares[].gpus",
        f"one of {', '.join(map(str, m.TENSOR_PARALLEL_SIZES))} and no more than one instance of the "
        "share's pool holds.",
    ),
    ("models[].shares[].weight", "`0` when the share's `replicas` is `0`."),
    (
        "models[].shares[].name",
        "the Service `vllm-<model>-<name>` is at most 63 characters and differs from every other "
        "workload's name, also after removing hyphens.",
    ),
    (
        "karpenter.replicas",
        "at most `cluster.system_nodes.min_size` with `karpenter` provisioning (one controller "
        "per system node).",
    ),
    (
        "cluster.core_addons",
        "no add-on twice; with `karpenter` provisioning it includes `vpc-cni`, `coredns`, "
        "`kube-proxy` and `eks-pod-identity-agent`.",
    ),
    (
        "karpenter.node_repair",
        "with `karpenter` provisioning, needs `eks-node-monitoring-agent` in `cluster.core_addons` "
        "(the agent reports the faults repair acts on).",
    ),
    (
        "model_store.fsx.import_path",
        "an S3 URI when `model_store.kind` is `fsx-lustre`; every `s3://` model's weights are a "
        "folder under it.",
    ),
    (
        "model_store.fsx.storage_capacity_gib",
        "1200, 2400 or a multiple of 2400, and at least the models' `weights_gib` x `headroom`.",
    ),
    ("model_store.fsx.throughput_per_tib", "one of 125, 250, 500, 1000."),
    (
        "models[].extra_args",
        f"sets none of {', '.join(f'`{f}`' for f in RESERVED_VLLM_FLAGS)}, nor "
        f"{', '.join(f'`{a}`' for a in SHORT_FLAGS)} (their short forms), nor "
        f"{', '.join(f'`{f}`' for f in MULTI_NODE_RESERVED_VLLM_FLAGS)} on a multi-node model "
        "(gpufarm derives them from the model config); while `serving.vllm_image` is tagged "
        f"`v{vllm_flags_version()}`, every flag is one of that release's `vllm serve` "
        "(gpufarm/data/vllm_serve_flags.yaml; `--no-<flag>` for a known flag, `_` spelt as `-`, "
        "`--flag=value` and `--json-flag.key=value` as vLLM reads them). On `engine: sglang` or "
        "`trtllm` it sets none of the flags gpufarm derives for that engine, and every flag is one "
        "of that engine's pinned release, spelt exactly (gpufarm/data/sglang_serve_flags.yaml, "
        "trtllm_serve_flags.yaml; docs/serving-engines.md).",
    ),
    (
        "models[].engine",
        "`vllm`, `sglang` or `trtllm` (`tgi` is refused: Text Generation Inference is in maintenance "
        "mode upstream). `sglang` and `trtllm` refuse `pipeline_parallel` > 1, `prefill_decode` and "
        "`kv_cache_routing`; `trtllm` also refuses `quantization` and a `dtype` other than `auto` "
        "(docs/serving-engines.md).",
    ),
    (
        "ingress.certificate_arn",
        "required when `ingress.scheme` is `internet-facing`; in the region `environment.region`.",
    ),
    (
        "ingress.allowed_cidrs",
        "at least one CIDR when `ingress.scheme` is `internet-facing`; `0.0.0.0/0` only with "
        "`ingress.open_to_internet`.",
    ),
    (
        "ingress.open_to_internet",
        "only when `ingress.allowed_cidrs` holds `0.0.0.0/0`; its `reason` has at least "
        f"{MIN_REASON_CHARS} characters and no placeholder word. The reason is the cdk-nag "
        "acknowledgement of AwsSolutions-EC23 on the load balancer's security group.",
    ),
    (
        "ingress.slow_start_seconds",
        "`0` with `ingress.kind` `alb` (least outstanding requests excludes slow start); "
        "with `nlb`, `0` or 30-900.",
    ),
    ("ingress.waf.enabled", "true when `ingress.scheme` is `internet-facing`."),
    (
        "ingress.target_optimizer",
        "when enabled, `data_port`, `control_port` and `serving.port` all differ.",
    ),
    ("ingress.oidc", "needs `ingress.certificate_arn` (HTTPS)."),
    (
        "models[].bedrock",
        "set on every model while `fallback.enabled` is true: a Bedrock target, or `none` to opt out.",
    ),
    (
        "models[].bedrock.model_id",
        "a foundation-model ID (`provider.model`) or an inference-profile ID (`us.provider.model`); "
        "a geographic profile is called from a region of its geography (`bedrock.region`, else the "
        "stack's): one of gpufarm's table for its prefix, or of `destination_regions` when set. Or a "
        "provisioned-model ARN (`arn:aws:bedrock:<region>:<account>:provisioned-model/<12 characters>`) "
        "or application-inference-profile ARN, in the calling region, the region's partition and "
        "`environment.account` when set.",
    ),
    (
        "models[].bedrock.base_model_id",
        "required with a capacity ARN in `model_id`, refused without one; a model ID, never an ARN; "
        "a foundation model (no profile prefix) behind a provisioned-model ARN.",
    ),
    (
        "models[].bedrock.provisioned",
        "required with a provisioned-model ARN, refused otherwise; `commitment` is `one-month` or "
        "`six-months` (Bedrock sells no-commitment Provisioned Throughput for custom models only).",
    ),
    (
        "models[].bedrock.destination_regions",
        "only for geographic inference profiles (`us.`, `eu.`, `apac.`, ...).",
    ),
    (
        "models[].name",
        "not `v1`, `health`, `metrics` or `gateway` while fallback is enabled (the gateway's paths).",
    ),
    (
        "fallback.request_timeout_seconds",
        "(`num_retries` + 1) x this is below `ingress.idle_timeout_seconds`, so a hung vLLM is "
        "fallen back from before the load balancer closes the connection.",
    ),
    (
        "network.interface_endpoints",
        "no `bedrock-runtime` while fallback is enabled (the gateway adds it, open to the nodes only).",
    ),
    (
        "fallback.port",
        "not 9090 while `observability.prometheus.enabled` or a model scales to zero (the gateway's "
        "metrics port: the fallback rate, Bedrock's tokens and the wake counter).",
    ),
    (
        "fallback.guardrail.enabled",
        "needs at least one model with a Bedrock target.",
    ),
    ("fallback.workers", "at most `fallback.cpu` rounded up (one single-threaded process per worker)."),
    (
        "fallback.max_replicas",
        "at least `fallback.replicas`; above it (a HorizontalPodAutoscaler) only with `karpenter` "
        "provisioning and `metrics-server` in `cluster.core_addons` (the resource metrics it reads).",
    ),
    ("ingress.cognito", "needs `ingress.certificate_arn` (HTTPS); not together with `ingress.oidc`."),
    (
        "node_pools[].gpu_limit",
        "at least the GPUs of the smallest instance the pool may launch (else no node starts).",
    ),
    (
        "models[].cpu",
        "`cpu` and `memory_gib` fit one instance the model may land on (pool or node group) with "
        "its GPUs (checked where the catalog knows every candidate's vCPUs and memory).",
    ),
    (
        "node_pools[].ami_version",
        "an AL2023 release (`v20251120`) only with `ami_family` `al2023`, a Bottlerocket release "
        "(`1.50.0`) only with `bottlerocket`; `latest` with either.",
    ),
    (
        "cluster.system_nodes.instance_types",
        "with `karpenter` provisioning: EC2 instance types as the CDK reads them (`m7i.xlarge`), "
        "CPU families only, one CPU architecture, none twice.",
    ),
    (
        "ingress.health_check_interval_seconds",
        f"greater than the {HEALTH_CHECK_TIMEOUT_SECONDS} s health-check timeout (the ELB API "
        "refuses an interval that is not).",
    ),
    (
        "models[].hf_token_secret",
        "a secret name, or a Secrets Manager ARN in `environment.region` (also "
        "`ingress.oidc.client_secret` and `fallback.master_key_secret`).",
    ),
    (
        "models[].weights",
        "an `s3://` bucket S3 allows: 3-63 characters of a-z, 0-9, `.`, `-`, a letter or digit "
        "first and last, no `..`, not an IP address, none of the reserved prefixes (`xn--`, "
        "`sthree-`, `amzn-s3-demo-`) or suffixes (`-s3alias`, `--ol-s3`, `.mrap`, `--x-s3`); "
        "the same for `model_store.fsx.import_path`.",
    ),
    (
        "description",
        f"at most {CFN_DESCRIPTION_MAX_BYTES} bytes in UTF-8 (CloudFormation's limit; a non-ASCII "
        "character takes 2-4 bytes).",
    ),
    (
        "serving.namespace",
        f"not {', '.join(f'`{n}`' for n in KUBERNETES_SYSTEM_NAMESPACES)}, "
        f"{', '.join(f'`{n}`' for n in GPUFARM_CONTROLLER_NAMESPACES)}, `karpenter.namespace` or "
        "`autoscaling.namespace`.",
    ),
    (
        "serving.allowed_client_namespaces",
        "each namespace once, and not `serving.namespace`.",
    ),
    (
        "environment.availability_zones",
        f"at most {MAX_SCRAPER_SUBNETS} while `observability.prometheus.enabled` (one scraper "
        "subnet per zone).",
    ),
    ("models[].served_model_name", "does not end with `@bedrock` while fallback is enabled."),
    (
        "observability.prometheus.alerts",
        "needs `observability.alarms.enabled` (the alert manager sends to the alarm topic).",
    ),
    (
        "ingress.inspection.cidr",
        f"leaves a /{MIN_APPLIANCE_SUBNET_PREFIX} or larger appliance subnet per availability zone; "
        "`appliances.instance_type` is an EC2 instance type as the CDK reads it (`c6in.large`).",
    ),
    (
        "karpenter.chart_version",
        _CHART_PIN,
    ),
    (
        "karpenter.nvidia_device_plugin_chart_version",
        _CHART_PIN,
    ),
    (
        "autoscaling.keda_chart_version",
        _CHART_PIN,
    ),
    (
        "observability.prometheus.dcgm_exporter_chart_version",
        _CHART_PIN,
    ),
    (
        "observability.grafana.enabled",
        "only with `observability.prometheus.enabled` (the dashboards read that workspace).",
    ),
    (
        "observability.grafana.grafana_version",
        "one of `9.4`, `10.4`, `12.4`: Amazon Managed Grafana versions with workspace service "
        "accounts, which provision the dashboards.",
    ),
    (
        "observability.grafana.saml",
        "set exactly when `authentication` lists `SAML`, with exactly one of `idp_metadata_url` "
        "and `idp_metadata_xml`.",
    ),
)
"""The rules of gpufarm/config/validate.py, one line each: (field path, what it must satisfy)."""


# --------------------------------------------------------------------------- walking the model


def sections() -> Iterator[tuple[str, type[BaseModel]]]:
    """Each config object and its path prefix ('' for the top level), depth first in field order."""

    def walk(prefix: str, cls: type[BaseModel]) -> Iterator[tuple[str, type[BaseModel]]]:
        yield prefix, cls
        for name, field in cls.model_fields.items():
            nested = _nested_model(field.annotation)
            if nested is not None:
                yield from walk(_join(prefix, name) + ("[]" if _is_list(field.annotation) else ""), nested)

    yield from walk("", m.TierConfig)


def field_paths() -> list[str]:
    """Every field's dotted path, such as `node_pools[].gpu_limit`, in document order."""
    return [_join(prefix, name) for prefix, cls in sections() for name in cls.model_fields]


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _is_list(annotation: Any) -> bool:
    return typing.get_origin(split_optional(annotation)[0]) is list


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    inner, _ = split_optional(annotation)
    if typing.get_origin(inner) is list:
        inner = typing.get_args(inner)[0]
    if is_union(inner):  # `Section | Literal["none"]`: the section's fields are documented
        models = [a for a in typing.get_args(inner) if isinstance(a, type) and issubclass(a, BaseModel)]
        inner = models[0] if len(models) == 1 else None
    return inner if isinstance(inner, type) and issubclass(inner, BaseModel) else None


# --------------------------------------------------------------------------- rendering a field


def _type_name(hint: Any) -> str:
    """A reader's name for a type hint (with extras): aliases, enums, literals, lists, models."""
    hint, optional = split_optional(hint)
    text = _base_type_name(hint)
    return f"{text}, or null" if optional else text


def _base_type_name(hint: Any) -> str:
    for alias, name in _NAMED_TYPES:
        if hint == alias:
            return name
    origin = typing.get_origin(hint)
    if is_union(hint):
        return " or ".join(_base_type_name(member) for member in typing.get_args(hint))
    if origin is list:
        item = typing.get_args(hint)[0]
        if isinstance(item, type) and issubclass(item, BaseModel):
            return "list of mappings"
        return "list of " + _base_type_name(item).replace("one of ", "values from ", 1)
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{v}`" for v in typing.get_args(hint))
    if isinstance(hint, type) and issubclass(hint, Enum):
        return "one of " + ", ".join(f"`{member.value}`" for member in hint)
    if isinstance(hint, type) and issubclass(hint, BaseModel):
        return "mapping"
    if hint in _SCALARS:
        return _SCALARS[hint]
    raise TypeError(f"the config reference cannot name the type {hint!r}; add it to _NAMED_TYPES")


def _constraints(field: FieldInfo) -> str:
    """Ranges, lengths and patterns pydantic enforces on the field, in words."""
    parts: list[str] = []
    is_list = _is_list(field.annotation)
    for item in field.metadata:
        # annotated_types' Ge, Gt, Le, Lt, MinLen, MaxLen and pydantic's pattern metadata.
        for attr, word in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            if getattr(item, attr, None) is not None:
                parts.append(f"{word} {getattr(item, attr)}")
        if getattr(item, "min_length", None) is not None:
            parts.append(f"at least {item.min_length} {'item(s)' if is_list else 'characters'}")
        if getattr(item, "max_length", None) is not None:
            parts.append(f"at most {item.max_length} {'item(s)' if is_list else 'characters'}")
        if getattr(item, "pattern", None):
            parts.append(f"matching `{item.pattern}`")
    return "; ".join(p for p in parts if p)


def _default(field: FieldInfo) -> str:
    """The default as it would be written in YAML, or 'required'."""
    if field.is_required():
        return "**required**"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "(section)"
    return f"`{_yaml(value)}`"


def _yaml(value: Any) -> str:
    plain = value.value if isinstance(value, Enum) else value
    if isinstance(plain, list):
        plain = [v.value if isinstance(v, Enum) else v for v in plain]
    text = yaml.safe_dump(plain, default_flow_style=True, width=10_000).strip()
    return text.removesuffix("...").strip()


def _description(field: FieldInfo) -> str:
    if field.description:
        return field.description
    nested = _nested_model(field.annotation)
    if nested is not None and nested.__doc__:
        return _first_line(nested.__doc__)
    return ""


def _first_line(doc: str) -> str:
    return doc.strip().split("\n\n", 1)[0].replace("\n", " ")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _anchor(heading: str) -> str:
    """The fragment GitHub gives a heading."""
    return re.sub(r"[^a-z0-9 _-]", "", heading.lower()).replace(" ", "-")


def _heading(prefix: str) -> str:
    return f"`{prefix}`" if prefix else "Top level"


# --------------------------------------------------------------------------- the document


def render_reference() -> str:
    """The Markdown configuration reference, one table per config section, then the cross-field rules."""
    presets = ", ".join(f"`{name}`" for name in preset_names())
    out: list[str] = [
        "# Configuration reference",
        "",
        f"<!-- Generated from gpufarm/config/model.py by `{REGENERATE}`; do not edit. -->",
        "",
        "A tier is a YAML document read into `gpufarm.config.TierConfig`. Every field below has a "
        "default unless it is marked **required**. Unknown keys are errors, and types are strict: "
        "`'1.34'` is a string, `1.34` is a number. A user file may start with `extends: <preset>` "
        "(or a path to another tier file, relative to it); mappings then merge key by key and any "
        "other value, lists included, replaces the inherited one.",
        "",
        f"A tier file is UTF-8 text (a byte-order mark is allowed) of at most {MAX_FILE_BYTES // 2**20} "
        f"MiB, nested at most {MAX_DEPTH} levels and holding at most {MAX_VALUES:,} values with YAML "
        "aliases expanded; a key given twice "
        "in one mapping is an error. Anchors, aliases and `<<` merge keys may share settings; tags "
        "other than strings, numbers, true/false and null are refused, and dates stay the text "
        "written. YAML 1.1 reads some unquoted values as another type (`012345670123` as an octal "
        "number, `no` as false, `1.10` as 1.1): errors show such a value as written; quote it to "
        "keep it a string (docs/decisions/0036-bounded-tier-file-reading.md).",
        "",
        f"Shipped presets: {presets}.",
        "",
        "Paths use `[]` for an item of a list: `node_pools[].gpu_limit` is the `gpu_limit` of each "
        "entry of `node_pools`. Error messages name the item's index instead (`node_pools[0].gpu_limit`).",
        "",
        "Sections:",
        "",
    ]
    all_sections = list(sections())
    out += [f"- [{_heading(p)}](#{_anchor(_heading(p))})" for p, _ in all_sections]
    out += [
        "- [Cross-field rules](#cross-field-rules)",
        "- [Documentation values](#documentation-values)",
        "",
    ]
    for prefix, cls in all_sections:
        hints = typing.get_type_hints(cls, include_extras=True)
        out += [f"## {_heading(prefix)}", "", _first_line(cls.__doc__ or ""), ""]
        out += ["| Path | Type | Default | Description |", "|---|---|---|---|"]
        for name, field in cls.model_fields.items():
            path = _join(prefix, name)
            kind = _type_name(hints[name])
            nested = _nested_model(field.annotation)
            if nested is not None:
                child = path + ("[]" if _is_list(field.annotation) else "")
                kind += f" (see [{child}](#{_anchor(_heading(child))}))"
            limits = _constraints(field)
            if limits:
                kind += f"; {limits}"
            out.append(
                f"| `{path}` | {_cell(kind)} | {_cell(_default(field))} | {_cell(_description(field))} |"
            )
        out.append("")
    out += [
        "## Cross-field rules",
        "",
        "Checked after every field is valid on its own (gpufarm/config/validate.py). A tier that "
        "breaks any of them stops synth with exit status 2 and one line per problem.",
        "",
    ]
    out += [f"- `{path}`: {rule}" for path, rule in CROSS_FIELD_RULES]
    out += [
        "",
        "## Documentation values",
        "",
        "Values that only ever appear in examples are found in every field of the parts the tier "
        "builds (a section with `enabled: false`, and `model_store.fsx` unless `model_store.kind` is "
        "`fsx-lustre`, are skipped; gpufarm/config/placeholders.py): AWS's documentation accounts "
        "(123456789012, 012345678901, three blocks of one repeated digit such as 111122223333, "
        "twelve equal digits), "
        "the documentation address ranges 192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24 (RFC 5737) "
        "and 2001:db8::/32 (RFC 3849), resource IDs that are all zeros, and example buckets (an "
        f"`example` label, or the presets' {', '.join(f'`{b}`' for b in sorted(PRESET_EXAMPLE_BUCKETS))}). "
        "Synth warns about each; `gpufarm preflight` fails a row per field; the template gets a rule "
        "that makes CloudFormation refuse the deploy before it creates anything.",
        "",
        "Images the tier runs without a digest are reported the same way "
        "(gpufarm/config/image_pins.py): `ingress.target_optimizer.agent_image` while the Target "
        "Optimizer is on and it is AWS's `:latest`, and `images.digests.<name>` for each controller "
        "image the tier runs whose digest `gpufarm/data/images.yaml` lacks ("
        + ", ".join(f"`{row.name}`" for row in image_table.unconfirmed() if row.chart)
        + "). `images.digests` accepts only those names, each with a `sha256:` digest.",
    ]
    return "\n".join(out) + "\n"


def main() -> int:
    """Print the reference to standard output."""
    sys.stdout.write(render_reference())
    return 0


if __name__ == "__main__":
    sys.exit(main())
