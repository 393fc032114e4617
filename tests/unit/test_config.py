"""Tier config: presets, `extends`, and the exact message of every invalid input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpufarm.config import (
    CapacityType,
    ConfigError,
    ConfigIssue,
    EndpointAccess,
    LoadBalancerScheme,
    Provisioning,
    TierConfig,
    build_tier,
    load_preset,
    load_tier_file,
    merge,
    preset_names,
)

from .factories import make_tier, model_override, overrides, poc_document, pool_override

CERT_ARN = "arn:aws:acm:{region}:123456789012:certificate/12345678-1234-1234-1234-123456789012"
POC_MODEL = poc_document()["models"][0]
POC_POOL = poc_document()["node_pools"][0]


def issues_of(*parts: dict[str, Any]) -> list[str]:
    """The issues (as rendered, one string each) of the poc tier with `parts` merged over it."""
    with pytest.raises(ConfigError) as caught:
        make_tier(*parts)
    return [str(issue) for issue in caught.value.issues]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- presets


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_loads(name: str) -> None:
    cfg = load_preset(name)
    assert cfg.name == name
    assert cfg.models and cfg.node_pools


def test_poc_is_a_preset() -> None:
    assert "poc" in preset_names()


def test_poc_preset_values(poc: TierConfig) -> None:
    assert poc.environment.region == "us-east-1"
    assert poc.environment.availability_zones == ["us-east-1a", "us-east-1b"]
    assert poc.network.nat_gateways == 1
    assert poc.cluster.provisioning is Provisioning.AUTO_MODE
    assert poc.cluster.endpoint_access is EndpointAccess.PUBLIC_AND_PRIVATE
    assert poc.cluster.public_access_cidrs, "the public endpoint must be limited to some CIDRs"
    assert "0.0.0.0/0" not in poc.cluster.public_access_cidrs
    assert poc.ingress.scheme is LoadBalancerScheme.INTERNAL
    assert poc.ingress.certificate_arn is None
    [pool] = poc.node_pools
    assert pool.instance_families == ["g6e"]
    assert pool.capacity_types == [CapacityType.ON_DEMAND]
    [model] = poc.models
    assert model.gpus == 1
    assert poc.pool_of(model) is pool
    assert poc.stack_name == "gpufarm-poc"


def test_unknown_preset_is_rejected() -> None:
    with pytest.raises(ConfigError) as caught:
        load_preset("prod")
    assert caught.value.render() == (
        "invalid tier selection:\n  - tier: must be one of 'ec2-poc', 'enterprise', 'poc', 'production', "
        "'sagemaker-poc', got 'prod'"
    )


# --------------------------------------------------------------------------- extends


def test_extends_overrides_a_nested_field_and_keeps_the_rest(tmp_path: Path, poc: TierConfig) -> None:
    file = write(
        tmp_path / "tier.yaml",
        "extends: poc\n"
        "name: two-nat\n"
        "environment:\n"
        "  availability_zones: [us-east-1b, us-east-1c, us-east-1d]\n"
        "network:\n"
        "  nat_gateways: 2\n",
    )
    cfg = load_tier_file(file)
    assert cfg.name == "two-nat"
    assert cfg.network.nat_gateways == 2
    # A list replaces the inherited list; it is never appended to.
    assert cfg.environment.availability_zones == ["us-east-1b", "us-east-1c", "us-east-1d"]
    # Siblings of the overridden fields keep the preset's values.
    assert cfg.environment.region == poc.environment.region
    assert cfg.network.cidr == poc.network.cidr
    assert cfg.network.flow_logs == poc.network.flow_logs
    assert cfg.network.interface_endpoints == poc.network.interface_endpoints
    assert cfg.cluster == poc.cluster
    assert cfg.node_pools == poc.node_pools
    assert cfg.models == poc.models
    assert cfg.ingress == poc.ingress


def test_extends_list_of_mappings_is_replaced_not_merged(tmp_path: Path) -> None:
    file = write(
        tmp_path / "tier.yaml",
        "extends: poc\nmodels:\n  - name: small\n    weights: Qwen/Qwen3-0.6B\n    bedrock: none\n",
    )
    cfg = load_tier_file(file)
    [model] = cfg.models
    assert model.name == "small"
    # Fields of the poc's model are not carried into the replacing list item.
    assert model.max_model_len == 8192
    assert model.startup_timeout_seconds == 1800


def test_extends_chain_through_relative_file_paths(tmp_path: Path) -> None:
    write(tmp_path / "base" / "team.yaml", "extends: poc\nnetwork:\n  nat_gateways: 2\n")
    write(tmp_path / "envs" / "dev.yaml", "extends: ../base/team.yaml\nname: dev\n")
    leaf = write(
        tmp_path / "envs" / "dev-eu.yaml",
        "extends: dev.yaml\n"
        "environment:\n"
        "  region: eu-west-1\n"
        "  availability_zones: [eu-west-1a, eu-west-1b]\n"
        # A 'us.' inference profile cannot be called from Europe: the model names an EU one.
        "models:\n"
        "  - name: qwen3-8b\n"
        "    weights: Qwen/Qwen3-8B\n"
        "    bedrock: {model_id: eu.meta.llama3-2-3b-instruct-v1:0}\n",
    )
    cfg = load_tier_file(leaf)
    assert cfg.name == "dev"
    assert cfg.network.nat_gateways == 2
    assert cfg.environment.region == "eu-west-1"
    assert cfg.environment.availability_zones == ["eu-west-1a", "eu-west-1b"]
    assert cfg.node_pools[0].name == "l40s"


def test_extends_merge_of_a_child_can_make_the_tier_invalid(tmp_path: Path) -> None:
    file = write(tmp_path / "tier.yaml", "extends: poc\nnetwork:\n  nat_gateways: 3\n")
    with pytest.raises(ConfigError) as caught:
        load_tier_file(file)
    assert caught.value.render() == (
        f"invalid {file}:\n"
        "  - network.nat_gateways: must be at most the number of availability zones (2), got 3"
    )


def test_extends_cycle_is_detected(tmp_path: Path) -> None:
    a = write(tmp_path / "a.yaml", "extends: b.yaml\n")
    b = write(tmp_path / "b.yaml", "extends: a.yaml\n")
    with pytest.raises(ConfigError) as caught:
        load_tier_file(a)
    a_key, b_key = a.resolve(), b.resolve()
    assert caught.value.issues == [
        ConfigIssue(path="extends", message=f"forms a cycle: {a_key} -> {b_key} -> {a_key}")
    ]


def test_extends_itself_is_a_cycle(tmp_path: Path) -> None:
    a = write(tmp_path / "a.yaml", "extends: a.yaml\n")
    with pytest.raises(ConfigError) as caught:
        load_tier_file(a)
    key = a.resolve()
    assert [str(i) for i in caught.value.issues] == [f"extends: forms a cycle: {key} -> {key}"]


def test_extends_unknown_preset(tmp_path: Path) -> None:
    file = write(tmp_path / "tier.yaml", "extends: pco\n")
    with pytest.raises(ConfigError) as caught:
        load_tier_file(file)
    assert [str(i) for i in caught.value.issues] == [
        "extends: must be one of 'ec2-poc', 'enterprise', 'poc', 'production', 'sagemaker-poc', got 'pco'"
    ]


def test_extends_must_be_a_string(tmp_path: Path) -> None:
    file = write(tmp_path / "tier.yaml", "extends: [poc]\n")
    with pytest.raises(ConfigError) as caught:
        load_tier_file(file)
    assert caught.value.render() == (
        f"invalid {file}:\n  - extends: must be a preset name or a file path, got ['poc']"
    )


def test_extends_missing_parent_file(tmp_path: Path) -> None:
    file = write(tmp_path / "tier.yaml", "extends: nowhere.yaml\n")
    with pytest.raises(ConfigError) as caught:
        load_tier_file(file)
    assert caught.value.render() == (
        f"invalid {tmp_path / 'nowhere.yaml'} (reached through {file} extends nowhere.yaml):\n"
        "  - cannot read the file: No such file or directory"
    )


def test_merge_is_deep_and_does_not_mutate_its_inputs() -> None:
    base = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    override = {"a": {"c": [3]}, "e": 2}
    assert merge(base, override) == {"a": {"b": 1, "c": [3]}, "d": 1, "e": 2}
    assert base == {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    assert override == {"a": {"c": [3]}, "e": 2}


def test_merge_mapping_replaced_by_scalar() -> None:
    assert merge({"a": {"b": 1}}, {"a": None}) == {"a": None}


# --------------------------------------------------------------------------- invalid inputs

INVALID: list[Any] = [
    # ---- unknown keys
    pytest.param(
        {"nmae": "poc"},
        [
            "nmae: is not a known setting (allowed: name, description, removal_policy, "
            "termination_protection, compliance_packs, environment, network, cluster, karpenter, "
            "node_pools, node_groups, serving, models, model_store, ingress, fallback, autoscaling, "
            "observability, images, ec2, sagemaker, hybrid_nodes, regions)"
        ],
        id="unknown-top-level-key",
    ),
    pytest.param(
        {"network": {"nat_gateway": 2}},
        [
            "network.nat_gateway: is not a known setting (allowed: cidr, nat_gateways, flow_logs, "
            "s3_gateway_endpoint, interface_endpoints)"
        ],
        id="unknown-nested-key",
    ),
    pytest.param(
        {"network": {"flow_logs": {"retention": 7}}},
        ["network.flow_logs.retention: is not a known setting (allowed: enabled, retention_days)"],
        id="unknown-key-two-levels-down",
    ),
    pytest.param(
        pool_override(foo=1),
        [
            "node_pools[0].foo: is not a known setting (allowed: name, instance_families, "
            "instance_types, capacity_types, gpu_limit, consolidate_after, expire_after, "
            "disruption_budget_nodes, purpose, weight, ami_family, ami_version, root_volume_gib, "
            "image_pull, capacity_class, reservation_ids, efa)"
        ],
        id="unknown-key-in-list-item",
    ),
    pytest.param(
        model_override(gpu=1),
        [
            "models[0].gpu: is not a known setting (allowed: name, weights, engine, served_model_name, "
            "revision, hf_token_secret, node_pool, gpus, replicas, max_model_len, "
            "gpu_memory_utilization, max_num_seqs, dtype, quantization, extra_args, cpu, memory_gib, "
            "startup_timeout_seconds, route_priority, critical, allow_spot, weights_gib, autoscaling, "
            "target_control_max_concurrency, capacity_class, pipeline_parallel, listener_port, "
            "kv_cache_routing, prefill_decode, bedrock, shares, ttft_p99_seconds)"
        ],
        id="unknown-key-in-model",
    ),
    pytest.param(
        model_override(ttft_p99_seconds=0),
        ["models[0].ttft_p99_seconds: must be > 0.0, got 0"],
        id="ttft-objective-zero",
    ),
    pytest.param(
        model_override(ttft_p99_seconds=601),
        ["models[0].ttft_p99_seconds: must be <= 600.0, got 601"],
        id="ttft-objective-too-long",
    ),
    pytest.param(
        {"observability": {"alarms": {"error_rate_percent": 0}}},
        ["observability.alarms.error_rate_percent: must be > 0.0, got 0"],
        id="error-rate-percent-zero",
    ),
    pytest.param(
        {"observability": {"alarms": {"error_rate_percent": 100.5}}},
        ["observability.alarms.error_rate_percent: must be <= 100.0, got 100.5"],
        id="error-rate-percent-above-100",
    ),
    pytest.param(
        {"observability": {"prometheus": {"enabled": True}, "alarms": {"enabled": False}}},
        [
            "observability.prometheus.alerts: needs observability.alarms.enabled: true (the alert "
            "manager sends to the alarm topic), or set alerts: false; got alerts: true with alarms disabled"
        ],
        id="prometheus-alerts-need-the-alarm-topic",
    ),
    # ---- wrong types
    pytest.param(
        {"network": {"nat_gateways": "2"}},
        ["network.nat_gateways: must be an integer, got '2'"],
        id="string-for-int",
    ),
    pytest.param(
        {"network": {"nat_gateways": None}},
        ["network.nat_gateways: must be an integer, got an empty value (null)"],
        id="null-for-int",
    ),
    pytest.param(
        model_override(memory_gib=32.5),
        ["models[0].memory_gib: must be an integer, got 32.5"],
        id="float-for-int",
    ),
    pytest.param(
        model_override(cpu="6"),
        ["models[0].cpu: must be a number, got '6'"],
        id="string-for-float",
    ),
    pytest.param(
        {"cluster": {"kubernetes_version": 1.34}},
        ["cluster.kubernetes_version: must be a string (quote it: '1.34'), got 1.34"],
        id="number-for-string-hints-quoting",
    ),
    pytest.param(
        pool_override(disruption_budget_nodes=1),
        ["node_pools[0].disruption_budget_nodes: must be a string (quote it: '1'), got 1"],
        id="int-for-string-hints-quoting",
    ),
    pytest.param(
        {"network": {"s3_gateway_endpoint": "yes please"}},
        ["network.s3_gateway_endpoint: must be true or false, got 'yes please'"],
        id="string-for-bool",
    ),
    pytest.param(
        {"network": ["10.0.0.0/16"]},
        ["network: must be a mapping, got ['10.0.0.0/16']"],
        id="list-for-mapping",
    ),
    pytest.param(
        {"models": ["Qwen/Qwen3-8B"]},
        ["models[0]: must be a mapping, got 'Qwen/Qwen3-8B'"],
        id="string-for-list-item-mapping",
    ),
    pytest.param(
        {"node_pools": {"name": "l40s"}},
        ["node_pools: must be a list, got a mapping"],
        id="mapping-for-list",
    ),
    pytest.param(
        {"environment": {"availability_zones": "us-east-1a"}},
        ["environment.availability_zones: must be a list, got 'us-east-1a'"],
        id="string-for-list",
    ),
    # ---- closed sets
    pytest.param(
        {"cluster": {"provisioning": "karpenter-mode"}},
        [
            "cluster.provisioning: must be one of 'auto-mode', 'karpenter', 'ec2' or 'sagemaker', "
            "got 'karpenter-mode'"
        ],
        id="enum-values",
    ),
    pytest.param(
        pool_override(capacity_types=["spot", "ondemand"]),
        ["node_pools[0].capacity_types[1]: must be one of 'on-demand', 'spot' or 'reserved', got 'ondemand'"],
        id="enum-in-list",
    ),
    pytest.param(
        {"ingress": {"scheme": "public"}},
        ["ingress.scheme: must be one of 'internal' or 'internet-facing', got 'public'"],
        id="enum-scheme",
    ),
    # ---- ranges and lengths
    pytest.param(
        {"network": {"nat_gateways": -1}},
        ["network.nat_gateways: must be >= 0, got -1"],
        id="nat-negative",
    ),
    pytest.param(
        {"network": {"nat_gateways": 0}},
        [
            "network.nat_gateways: must be at least 1 for a tier: GPU nodes pull the vLLM image and "
            "Hugging Face weights through NAT, and Auto Mode nodes reach AWS APIs that have no "
            "endpoint here, got 0"
        ],
        id="no-nat",
    ),
    pytest.param(
        model_override(replicas=101),
        ["models[0].replicas: must be <= 100, got 101"],
        id="above-le",
    ),
    pytest.param(
        model_override(gpu_memory_utilization=0.05),
        ["models[0].gpu_memory_utilization: must be > 0.1, got 0.05"],
        id="not-above-gt",
    ),
    pytest.param(
        {"serving": {"port": 80}},
        ["serving.port: must be >= 1024, got 80"],
        id="privileged-port",
    ),
    pytest.param(
        {"environment": {"availability_zones": ["us-east-1a"]}},
        ["environment.availability_zones: must have at least 2 item(s), got 1"],
        id="too-few-azs",
    ),
    pytest.param(
        {"models": []},
        ["models: must have at least 1 item(s), got 0"],
        id="no-models",
    ),
    pytest.param(
        {"description": "x" * 1025},
        ["description: must be at most 1024 characters, got 1025"],
        id="string-too-long-shows-length",
    ),
    # ---- required fields
    pytest.param(
        {"models": [{"name": "qwen"}]},
        ["models[0].weights: is required"],
        id="missing-model-weights",
    ),
    pytest.param(
        {"node_pools": [{"instance_families": ["g6e"]}]},
        ["node_pools[0].name: is required"],
        id="missing-pool-name",
    ),
    # ---- formats
    pytest.param(
        {"name": "PoC"},
        [
            "name: must be a lowercase DNS label (a-z, 0-9, '-', starting with a letter, at most "
            "40 characters), got 'PoC'"
        ],
        id="name-not-dns-label",
    ),
    pytest.param(
        {"environment": {"region": "US-East-1"}},
        ["environment.region: must be an AWS region name such as 'us-east-1', got 'US-East-1'"],
        id="bad-region",
    ),
    pytest.param(
        {"environment": {"account": "1234"}},
        ["environment.account: must be a 12-digit AWS account ID, got '1234'"],
        id="bad-account",
    ),
    pytest.param(
        pool_override(consolidate_after="30 minutes"),
        [
            "node_pools[0].consolidate_after: must be a duration such as '30m', '1h' or '2h30m' "
            "(or 'Never'), got '30 minutes'"
        ],
        id="invalid-duration",
    ),
    pytest.param(
        pool_override(disruption_budget_nodes="150%"),
        [
            "node_pools[0].disruption_budget_nodes: must be a node count such as '1' or a "
            "percentage from '0%' to '100%', got '150%'"
        ],
        id="budget-over-100-percent",
    ),
    pytest.param(
        {"serving": {"vllm_image": "vllm/vllm-openai"}},
        [
            "serving.vllm_image: must be a container image pinned by digest, such as "
            "'repo/name:v1.2.3@sha256:<64 hex digits>' (read it with `crane digest repo/name:v1.2.3`), "
            "got 'vllm/vllm-openai'"
        ],
        id="image-without-tag",
    ),
    # A tag can be pushed again; only a digest fixes what runs (ADR 0039).
    pytest.param(
        {"serving": {"vllm_image": "vllm/vllm-openai:v0.31.0"}},
        [
            "serving.vllm_image: must be a container image pinned by digest, such as "
            "'repo/name:v1.2.3@sha256:<64 hex digits>' (read it with `crane digest repo/name:v1.2.3`), "
            "got 'vllm/vllm-openai:v0.31.0'"
        ],
        id="image-tag-without-digest",
    ),
    pytest.param(
        {"serving": {"aws_cli_image": "public.ecr.aws/aws-cli/aws-cli@sha256:123"}},
        [
            "serving.aws_cli_image: must be a container image pinned by digest, such as "
            "'repo/name:v1.2.3@sha256:<64 hex digits>' (read it with `crane digest repo/name:v1.2.3`), "
            "got 'public.ecr.aws/aws-cli/aws-cli@sha256:123'"
        ],
        id="image-short-digest",
    ),
    pytest.param(
        {"images": {"digests": {"vllm": "sha256:" + "a" * 64}}},
        [
            "images.digests: must name images whose digest gpufarm's table lacks (lws-controller, "
            "keda-operator, keda-metrics-apiserver, keda-admission-webhooks, nvidia-device-plugin, "
            "efa-device-plugin, aws-load-balancer-controller), got 'vllm'"
        ],
        id="digest-for-an-image-the-table-pins",
    ),
    pytest.param(
        {"images": {"digests": {"keda-operator": "2.18.1"}}},
        [
            "images.digests: 'keda-operator' must be a digest, 'sha256:' followed by 64 lowercase "
            "hex digits, got '2.18.1'"
        ],
        id="digest-not-a-digest",
    ),
    pytest.param(
        {"images": {"digest": {}}},
        [
            "images.digest: is not a known setting (allowed: digests, pull_through_cache, "
            "cache_rules_only, cache_prefix, docker_hub_credential_arn, github_credential_arn)"
        ],
        id="images-unknown-key",
    ),
    pytest.param(
        {"serving": {"vllm_image": "vllm/vllm-openai:latest"}},
        [
            "serving.vllm_image: must be a container image pinned by digest, such as "
            "'repo/name:v1.2.3@sha256:<64 hex digits>' (read it with `crane digest repo/name:v1.2.3`), "
            "got 'vllm/vllm-openai:latest'"
        ],
        id="image-latest",
    ),
    pytest.param(
        {"cluster": {"admin_role_arn": "arn:aws:iam::123:role/admin"}},
        [
            "cluster.admin_role_arn: must be an IAM role ARN (arn:aws:iam::<account>:role/<name>), "
            "got 'arn:aws:iam::123:role/admin'"
        ],
        id="bad-role-arn",
    ),
    pytest.param(
        {"ingress": {"certificate_arn": "my-cert"}},
        [
            "ingress.certificate_arn: must be an ACM certificate ARN "
            "(arn:aws:acm:<region>:<account>:certificate/<id>), got 'my-cert'"
        ],
        id="bad-certificate-arn",
    ),
    pytest.param(
        model_override(hf_token_secret="my token"),
        ["models[0].hf_token_secret: must be a Secrets Manager secret name or ARN, got 'my token'"],
        id="bad-secret-name",
    ),
    pytest.param(
        model_override(dtype="fp8"),
        ["models[0].dtype: must be one of 'auto', 'half', 'float16', 'bfloat16' or 'float32', got 'fp8'"],
        id="bad-dtype",
    ),
    # ---- environment and network (cross-field)
    pytest.param(
        {"environment": {"availability_zones": ["us-east-1a", "us-west-2b"]}},
        [
            "environment.availability_zones[1]: must be an availability zone of region 'us-east-1' "
            "(such as 'us-east-1a'), got 'us-west-2b'"
        ],
        id="az-not-in-region",
    ),
    pytest.param(
        {"environment": {"availability_zones": ["us-east-1a", "us-east-1-bos-1a"]}},
        [
            "environment.availability_zones[1]: must be an availability zone of region 'us-east-1' "
            "(such as 'us-east-1a'), got 'us-east-1-bos-1a'"
        ],
        id="local-zone-is-not-an-az",
    ),
    pytest.param(
        {"environment": {"availability_zones": ["us-east-1a", "us-east-1a"]}},
        ["environment.availability_zones: must not repeat an availability zone, got 'us-east-1a' 2 times"],
        id="duplicate-az",
    ),
    pytest.param(
        {"network": {"nat_gateways": 3}},
        ["network.nat_gateways: must be at most the number of availability zones (2), got 3"],
        id="more-nat-than-azs",
    ),
    pytest.param(
        {"network": {"cidr": "10.0.0.0/24"}},
        ["network.cidr: must be a /16 to /20 block (room for a private subnet per AZ), got '10.0.0.0/24'"],
        id="cidr-prefix-too-long",
    ),
    pytest.param(
        {"network": {"cidr": "10.0.0.0/8"}},
        ["network.cidr: must be a /16 to /20 block (room for a private subnet per AZ), got '10.0.0.0/8'"],
        id="cidr-prefix-too-short",
    ),
    pytest.param(
        {"network": {"cidr": "10.0.0.1/16"}},
        [
            "network.cidr: must be an IPv4 CIDR block with no host bits set, such as '10.0.0.0/16', "
            "got '10.0.0.1/16'"
        ],
        id="cidr-host-bits",
    ),
    pytest.param(
        {"network": {"interface_endpoints": ["sts", "logs", "sts"]}},
        ["network.interface_endpoints: must not list an endpoint twice, got 'sts' 2 times"],
        id="duplicate-interface-endpoint",
    ),
    # ---- cluster
    pytest.param(
        {"cluster": {"kubernetes_version": "1.29"}},
        ["cluster.kubernetes_version: must be one of '1.34', '1.35', '1.36', got '1.29'"],
        id="unsupported-kubernetes-version",
    ),
    pytest.param(
        {"cluster": {"public_access_cidrs": []}},
        [
            "cluster.public_access_cidrs: must list at least one CIDR when endpoint_access is "
            "'public_and_private' (the public endpoint is never open to everyone by default), got []"
        ],
        id="public-endpoint-without-cidrs",
    ),
    pytest.param(
        {"cluster": {"endpoint_access": "private"}},
        [
            "cluster.public_access_cidrs: must be empty when endpoint_access is 'private', "
            "got ['198.51.100.0/24']"
        ],
        id="private-endpoint-with-cidrs",
    ),
    # ---- node pools
    pytest.param(
        pool_override(instance_families=["m5"]),
        [
            "node_pools[0].instance_families[0]: must be a GPU instance family ('g5', 'g6', 'g6e', "
            "'g7e', 'p4d', 'p4de', 'p5', 'p5e', 'p5en', 'p6-b200', 'p6-b300'), got 'm5'"
        ],
        id="unknown-instance-family",
    ),
    pytest.param(
        pool_override(instance_types=["g6e.xlarge", "g6.xlarge"]),
        [
            "node_pools[0].instance_types[1]: must be a known GPU instance type of the pool's "
            "instance_families ('g6e'), got 'g6.xlarge'",
            # Both hosts are in the catalog, and the poc pod (6 CPU, 48 GiB) fits neither.
            "models[0].cpu: must fit one instance the model may land on with 1 GPU(s) (at most "
            "4 vCPUs and 32 GiB; the pod asks 6 CPU and 48 GiB), got 6",
        ],
        id="instance-type-outside-families",
    ),
    pytest.param(
        pool_override(instance_types=["g6e.huge"]),
        [
            "node_pools[0].instance_types[0]: must be a known GPU instance type of the pool's "
            "instance_families ('g6e'), got 'g6e.huge'"
        ],
        id="unknown-instance-size",
    ),
    pytest.param(
        pool_override(capacity_types=["on-demand", "reserved"]),
        [
            "node_pools[0].capacity_types: must be 'on-demand' and/or 'spot' with auto-mode "
            "provisioning (reserved capacity needs a custom NodeClass), got ['on-demand', 'reserved']"
        ],
        id="reserved-capacity-with-auto-mode",
    ),
    pytest.param(
        pool_override(expire_after="505h"),
        [
            "node_pools[0].expire_after: must be at most 504h with auto-mode provisioning (Auto Mode "
            "replaces nodes after 21 days), got '505h'"
        ],
        id="expire-after-over-504h",
    ),
    pytest.param(
        pool_override(expire_after="503h61m"),
        [
            "node_pools[0].expire_after: must be at most 504h with auto-mode provisioning (Auto Mode "
            "replaces nodes after 21 days), got '503h61m'"
        ],
        id="expire-after-over-504h-in-minutes",
    ),
    pytest.param(
        pool_override(expire_after="Never"),
        [
            "node_pools[0].expire_after: must be at most 504h with auto-mode provisioning (Auto Mode "
            "replaces nodes after 21 days), got 'Never'"
        ],
        id="expire-after-never",
    ),
    pytest.param(
        {"node_pools": [POC_POOL, POC_POOL]},
        ["node_pools: pool names must be unique, got 'l40s' 2 times"],
        id="duplicate-pool-names",
    ),
    # ---- models
    pytest.param(
        {"models": [POC_MODEL, {**POC_MODEL, "served_model_name": "qwen"}]},
        ["models: name must be unique, got 'qwen3-8b' 2 times"],
        id="duplicate-model-names",
    ),
    pytest.param(
        {"models": [POC_MODEL, {**POC_MODEL, "name": "other", "served_model_name": "qwen3-8b"}]},
        ["models: served_model_name must be unique, got 'qwen3-8b' 2 times"],
        id="duplicate-served-model-names",
    ),
    pytest.param(
        model_override(weights="qwen3-8b"),
        [
            "models[0].weights: must be a Hugging Face repo id ('org/name') or an S3 URI "
            "('s3://bucket/prefix/'), got 'qwen3-8b'"
        ],
        id="bad-hugging-face-id",
    ),
    pytest.param(
        model_override(weights="s3://My_Bucket/qwen/"),
        ["models[0].weights: must be an S3 URI such as 's3://bucket/prefix/', got 's3://My_Bucket/qwen/'"],
        id="bad-s3-uri",
    ),
    pytest.param(
        model_override(weights="s3://models/qwen/", revision="main"),
        ["models[0].revision: applies only to Hugging Face weights, not 's3://models/qwen/'"],
        id="revision-with-s3-weights",
    ),
    pytest.param(
        model_override(weights="s3://models/qwen/", hf_token_secret="hf-token"),
        ["models[0].hf_token_secret: applies only to Hugging Face weights, not 's3://models/qwen/'"],
        id="hf-token-with-s3-weights",
    ),
    pytest.param(
        model_override(gpus=3),
        ["models[0].gpus: must be one of 1, 2, 4, 8 (the tensor-parallel size), got 3"],
        id="gpus-not-a-tensor-parallel-size",
    ),
    pytest.param(
        model_override(gpus=0),
        ["models[0].gpus: must be >= 1, got 0"],
        id="zero-gpus",
    ),
    pytest.param(
        overrides(pool_override(instance_types=["g6e.xlarge"]), model_override(gpus=4)),
        ["models[0].gpus: must fit on one instance of pool 'l40s' (at most 1 GPU(s) per instance), got 4"],
        id="gpus-above-largest-pool-instance",
    ),
    pytest.param(
        model_override(node_pool="h100"),
        ["models[0].node_pool: must name a node pool or node group ('l40s'), got 'h100'"],
        id="unknown-node-pool",
    ),
    pytest.param(
        model_override(extra_args=["--enforce-eager", "--max-model-len=4096"]),
        [
            "models[0].extra_args[1]: must not set --max-model-len (gpufarm derives it from the "
            "model config), got '--max-model-len=4096'"
        ],
        id="reserved-vllm-flag",
    ),
    pytest.param(
        model_override(extra_args=["-tp", "2"]),
        [
            "models[0].extra_args[0]: must not set --tensor-parallel-size (gpufarm derives it from "
            "the model config), got '-tp'"
        ],
        id="reserved-vllm-flag-short-alias",
    ),
    pytest.param(
        model_override(extra_args=["--dtype", "half"]),
        [
            "models[0].extra_args[0]: must not set --dtype (gpufarm derives it from the model "
            "config), got '--dtype'"
        ],
        id="reserved-vllm-flag-dtype",
    ),
    pytest.param(
        model_override(extra_args=["--max_model_len=4096"]),
        [
            "models[0].extra_args[0]: must not set --max-model-len (gpufarm derives it from the "
            "model config), got '--max_model_len=4096'"
        ],
        id="reserved-vllm-flag-underscore-spelling",
    ),
    pytest.param(
        model_override(extra_args=["--enforce-eager", "--swap-space", "4"]),
        [
            "models[0].extra_args[1]: must be a flag of vLLM 0.31.0's `vllm serve`: model 'qwen3-8b' "
            "sets '--swap-space', which that release does not have, got '--swap-space'"
        ],
        id="vllm-flag-removed-swap-space",
    ),
    pytest.param(
        model_override(extra_args=["--disable-log-requests"]),
        [
            "models[0].extra_args[0]: must be a flag of vLLM 0.31.0's `vllm serve`: model 'qwen3-8b' "
            "sets '--disable-log-requests', which that release does not have (nearest known flag: "
            "'--enable-log-requests'), got '--disable-log-requests'"
        ],
        id="vllm-flag-removed-disable-log-requests",
    ),
    pytest.param(
        model_override(extra_args=["--max_num_seq=64"]),
        [
            "models[0].extra_args[0]: must be a flag of vLLM 0.31.0's `vllm serve`: model 'qwen3-8b' "
            "sets '--max-num-seq', which that release does not have (nearest known flag: "
            "'--max-num-seqs'), got '--max_num_seq=64'"
        ],
        id="vllm-flag-typo-in-underscore-spelling",
    ),
    pytest.param(
        model_override(replicas=5),
        [
            "node_pools[0].gpu_limit: must cover the GPUs its models request (5 = sum of gpus x "
            "replicas, max_replicas when autoscaled), got 4"
        ],
        id="gpu-limit-below-requests",
    ),
    # ---- ingress
    pytest.param(
        {"ingress": {"scheme": "internet-facing"}},
        [
            "ingress.certificate_arn: is required when ingress.scheme is 'internet-facing' (public "
            "traffic is served over HTTPS only); it is not set",
            "ingress.allowed_cidrs: must list at least one CIDR when ingress.scheme is "
            "'internet-facing', got []",
            "ingress.waf.enabled: must be true when ingress.scheme is 'internet-facing' (public "
            "endpoints get rate limiting and managed rules), got false",
        ],
        id="internet-facing-without-certificate-or-cidrs",
    ),
    pytest.param(
        {"ingress": {"certificate_arn": CERT_ARN.format(region="eu-west-1")}},
        [
            "ingress.certificate_arn: must be in the stack's region 'us-east-1', got a certificate "
            "in 'eu-west-1'"
        ],
        id="certificate-in-another-region",
    ),
    pytest.param(
        {"ingress": {"slow_start_seconds": 60}},
        [
            "ingress.slow_start_seconds: must be 0 (slow start off): the ALB's model target groups "
            "route by least outstanding requests, which the ELB API does not allow together with "
            "slow start, got 60"
        ],
        id="alb-slow-start-with-least-outstanding-requests",
    ),  # ---- Bedrock fallback
    pytest.param(
        model_override(bedrock=None),
        [
            "models[0].bedrock: must name a Bedrock model ({model_id: ...}) or be 'none' to opt "
            "out, while fallback.enabled is true; it is not set"
        ],
        id="model-without-fallback-choice",
    ),
    pytest.param(
        model_override(bedrock="nope"),
        ["models[0].bedrock: must be 'none' or a mapping, got 'nope'"],
        id="fallback-neither-none-nor-mapping",
    ),
    pytest.param(
        model_override(bedrock={"modelid": "meta.llama3-1-8b-instruct-v1:0"}),
        [
            "models[0].bedrock.model_id: is required",
            "models[0].bedrock.modelid: is not a known setting (allowed: model_id, base_model_id, "
            "provisioned, region, destination_regions, max_tokens)",
        ],
        id="fallback-key-typo",
    ),
    pytest.param(
        model_override(bedrock={"model_id": "Llama 3"}),
        [
            "models[0].bedrock.model_id: must be a Bedrock model ID such as "
            "'anthropic.claude-3-5-haiku-20241022-v1:0', an inference-profile ID such as "
            "'us.meta.llama3-3-70b-instruct-v1:0', or a provisioned-model or "
            "application-inference-profile ARN, got 'Llama 3'"
        ],
        id="fallback-model-id-shape",
    ),
    pytest.param(
        model_override(bedrock={"model_id": "eu.meta.llama3-2-3b-instruct-v1:0"}),
        [
            "models[0].bedrock.model_id: must be an inference profile of the calling region "
            "'us-east-1': a 'eu' profile is called from its geography's regions ('eu-central-1', "
            "'eu-central-2', 'eu-north-1', 'eu-south-1', 'eu-south-2', 'eu-west-1', 'eu-west-3'), "
            "got 'eu.meta.llama3-2-3b-instruct-v1:0'"
        ],
        id="profile-of-another-geography",
    ),
    pytest.param(
        model_override(
            bedrock={"model_id": "meta.llama3-1-8b-instruct-v1:0", "destination_regions": ["us-west-2"]}
        ),
        [
            "models[0].bedrock.destination_regions: applies only to geographic inference profiles "
            "('us.', 'us-gov.', 'eu.', 'apac.', 'jp.', 'au.', 'ca.'), got ['us-west-2'] for "
            "'meta.llama3-1-8b-instruct-v1:0'"
        ],
        id="destination-regions-on-a-plain-model",
    ),
    pytest.param(
        overrides(model_override(bedrock="none"), {"fallback": {"guardrail": {"enabled": True}}}),
        [
            "fallback.guardrail.enabled: needs at least one model with a Bedrock fallback (the "
            "guardrail applies on that path only), got true with none"
        ],
        id="guardrail-without-bedrock-targets",
    ),
    pytest.param(
        model_override(name="v1"),
        [
            "models[0].name: must not be one of 'v1', 'health', 'metrics', 'gateway' while "
            "fallback is enabled (the gateway serves /v1, /health and /metrics behind the default "
            "route), got 'v1'"
        ],
        id="model-named-like-a-gateway-path",
    ),
    pytest.param(
        {"fallback": {"request_timeout_seconds": 300}},
        [
            "fallback.request_timeout_seconds: must leave time to fall back before the load "
            "balancer's idle timeout: (num_retries + 1) x request_timeout_seconds = 2 x 300 must "
            "be below ingress.idle_timeout_seconds (600), got 300"
        ],
        id="gateway-timeout-beyond-alb-idle-timeout",
    ),
    pytest.param(
        {"network": {"interface_endpoints": ["ecr.api", "bedrock-runtime"]}},
        [
            "network.interface_endpoints: must not list 'bedrock-runtime' while fallback is enabled "
            "(the gateway adds it, open to the cluster's nodes only, not the whole VPC), got it listed"
        ],
        id="bedrock-endpoint-open-to-the-vpc",
    ),
    pytest.param(
        {"fallback": {"replicas": 1}},
        ["fallback.replicas: must be >= 2, got 1"],
        id="single-gateway-replica",
    ),
    pytest.param(
        {"fallback": {"image": "ghcr.io/berriai/litellm:latest"}},
        [
            "fallback.image: must be a container image pinned by digest, such as "
            "'repo/name:v1.2.3@sha256:<64 hex digits>' (read it with `crane digest repo/name:v1.2.3`), "
            "got 'ghcr.io/berriai/litellm:latest'"
        ],
        id="gateway-image-latest",
    ),
]


@pytest.mark.parametrize(("override", "expected"), INVALID)
def test_invalid_input_message(override: dict[str, Any], expected: list[str]) -> None:
    assert issues_of(override) == expected


def test_invalid_cases_are_many_and_distinct() -> None:
    ids = [case.id for case in INVALID]
    assert len(ids) == len(set(ids))
    assert len(ids) >= 25


VALID: list[Any] = [
    pytest.param(
        {"observability": {"prometheus": {"enabled": True, "alerts": False}, "alarms": {"enabled": False}}},
        id="prometheus-without-alerts-needs-no-alarm-topic",
    ),
    pytest.param(model_override(ttft_p99_seconds=0.25), id="ttft-objective-quarter-second"),
    pytest.param(pool_override(expire_after="504h"), id="expire-after-504h"),
    pytest.param(pool_override(consolidate_after="Never"), id="consolidate-never"),
    pytest.param(pool_override(disruption_budget_nodes="100%"), id="budget-100-percent"),
    pytest.param(pool_override(disruption_budget_nodes="0"), id="budget-zero"),
    pytest.param(
        overrides(
            pool_override(capacity_types=["spot", "on-demand"], purpose="batch"),
            model_override(critical=False),
        ),
        id="spot-on-batch-pool-for-non-critical-model",
    ),
    pytest.param(
        overrides(pool_override(gpu_limit=16), model_override(gpus=8, replicas=2)),
        id="eight-gpus-fit-g6e-48xlarge",
    ),
    pytest.param(
        overrides(pool_override(instance_types=["g6e.12xlarge"]), model_override(gpus=4)),
        id="four-gpus-fit-g6e-12xlarge",
    ),
    pytest.param(model_override(replicas=0), id="zero-replicas"),
    pytest.param({"ingress": {"slow_start_seconds": 0}}, id="slow-start-off"),
    pytest.param({"network": {"cidr": "10.0.0.0/20"}}, id="cidr-20"),
    pytest.param(
        {"cluster": {"endpoint_access": "private", "public_access_cidrs": []}},
        id="private-endpoint",
    ),
    pytest.param(
        {
            "ingress": {
                "scheme": "internet-facing",
                "certificate_arn": CERT_ARN.format(region="us-east-1"),
                "allowed_cidrs": ["203.0.113.0/24"],
                "waf": {"enabled": True},
            }
        },
        id="internet-facing-with-tls-cidrs-and-waf",
    ),
    pytest.param(model_override(weights="s3://gpufarm-models/qwen/"), id="s3-weights"),
    pytest.param(
        model_override(hf_token_secret="arn:aws:secretsmanager:us-east-1:123456789012:secret:hf-AbCdEf"),
        id="hf-token-secret-arn",
    ),
    pytest.param(
        {
            "serving": {
                "vllm_image": "public.ecr.aws/example/vllm@sha256:" + "0" * 64,
            }
        },
        id="image-by-digest",
    ),
    pytest.param(model_override(extra_args=["--enable-prefix-caching"]), id="free-extra-args"),
    pytest.param(
        model_override(
            extra_args=[
                "--no-enable-prefix-caching",
                "--max_num_batched_tokens",
                "8192",
                "--seed",
                "-1",
                "-O3",
                "--compilation-config.cudagraph_mode=FULL",
                "--speculative-config",
                '{"method": "ngram"}',
            ]
        ),
        id="vllm-flag-forms-as-vllm-reads-them",
    ),
    # The shipped flag list describes vLLM 0.31.0 only: another release is not checked against it.
    pytest.param(
        overrides(
            {"serving": {"vllm_image": "vllm/vllm-openai:v0.32.0@sha256:" + "b" * 64}},
            model_override(extra_args=["--swap-space", "4"]),
        ),
        id="flags-of-another-vllm-release-are-not-checked",
    ),
    pytest.param(model_override(bedrock="none"), id="fallback-opt-out"),
    pytest.param(
        overrides(model_override(bedrock=None), {"fallback": {"enabled": False}}),
        id="no-fallback-choice-needed-while-disabled",
    ),
    pytest.param(
        model_override(bedrock={"model_id": "eu.meta.llama3-2-3b-instruct-v1:0", "region": "eu-west-1"}),
        id="eu-profile-called-in-eu",
    ),
    pytest.param(
        model_override(bedrock={"model_id": "global.anthropic.claude-sonnet-4-20250514-v1:0"}),
        id="global-profile",
    ),
    pytest.param(
        model_override(
            bedrock={"model_id": "us.meta.llama3-1-8b-instruct-v1:0", "destination_regions": ["us-east-1"]}
        ),
        id="profile-with-explicit-destinations",
    ),
]


@pytest.mark.parametrize("override", VALID)
def test_valid_overrides(override: dict[str, Any]) -> None:
    make_tier(override)


def test_several_issues_are_reported_together_in_document_order() -> None:
    found = issues_of(
        {"network": {"nat_gateways": "two"}},
        {"cluster": {"kubernetes_version": 134}},
        pool_override(gpu_limit=0),
        model_override(gpus=0, replicas=-1),
        {"ingress": {"idle_timeout_seconds": 1}},
    )
    assert found == [
        "network.nat_gateways: must be an integer, got 'two'",
        "cluster.kubernetes_version: must be a string (quote it: '134'), got 134",
        "node_pools[0].gpu_limit: must be >= 1, got 0",
        "models[0].gpus: must be >= 1, got 0",
        "models[0].replicas: must be >= 0, got -1",
        "ingress.idle_timeout_seconds: must be >= 60, got 1",
    ]


def test_several_cross_field_issues_are_reported_together_in_document_order() -> None:
    found = issues_of(
        {"environment": {"availability_zones": ["us-east-1a", "us-east-1a"]}},
        {"network": {"cidr": "10.0.0.0/24"}},
        {"cluster": {"kubernetes_version": "1.20"}},
        pool_override(expire_after="600h"),
        model_override(gpus=3),
        {"ingress": {"slow_start_seconds": 10}},
    )
    assert [issue.split(":", 1)[0] for issue in found] == [
        "environment.availability_zones",
        "network.cidr",
        "cluster.kubernetes_version",
        "node_pools[0].expire_after",
        "models[0].gpus",
        "ingress.slow_start_seconds",
    ]


def test_config_error_render_format() -> None:
    error = ConfigError(
        [
            ConfigIssue(path="network.nat_gateways", message="must be >= 0, got -1"),
            ConfigIssue(path="", message="is not valid YAML"),
        ],
        source="tiers/dev.yaml",
    )
    assert error.render() == (
        "invalid tiers/dev.yaml:\n  - network.nat_gateways: must be >= 0, got -1\n  - is not valid YAML"
    )
    assert str(error) == error.render()


def test_build_tier_names_its_source() -> None:
    document = merge(poc_document(), {"network": {"nat_gateways": -1}})
    with pytest.raises(ConfigError) as caught:
        build_tier(document, source="tiers/dev.yaml")
    assert caught.value.source == "tiers/dev.yaml"
    assert caught.value.render() == (
        "invalid tiers/dev.yaml:\n  - network.nat_gateways: must be >= 0, got -1"
    )


def test_build_tier_does_not_coerce_or_raise_pydantic_errors() -> None:
    document = merge(poc_document(), {"models": [{"name": 7, "weights": ["x"], "bogus": 1}]})
    with pytest.raises(ConfigError) as caught:
        build_tier(document)
    assert caught.value.render() == (
        "invalid tier config:\n"
        "  - models[0].name: must be a string (quote it: '7'), got 7\n"
        "  - models[0].weights: must be a string, got ['x']\n"
        "  - models[0].bogus: is not a known setting (allowed: name, weights, engine, served_model_name, "
        "revision, hf_token_secret, node_pool, gpus, replicas, max_model_len, "
        "gpu_memory_utilization, max_num_seqs, dtype, quantization, extra_args, cpu, memory_gib, "
        "startup_timeout_seconds, route_priority, critical, allow_spot, weights_gib, autoscaling, "
        "target_control_max_concurrency, capacity_class, pipeline_parallel, listener_port, "
        "kv_cache_routing, prefill_decode, bedrock, shares, ttft_p99_seconds)"
    )


# --------------------------------------------------------------------------- reading files


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "name: [poc\n",
            "is not valid YAML at line 2, column 1: expected ',' or ']', but got '<stream end>'",
            id="unclosed-flow-sequence",
        ),
        pytest.param(
            "name: poc\n  network: x\n",
            "is not valid YAML at line 2, column 10: mapping values are not allowed here",
            id="bad-indentation",
        ),
        pytest.param(
            "\tname: poc\n",
            "is not valid YAML at line 1, column 1: found character '\\t' that cannot start any token",
            id="tab-indentation",
        ),
        pytest.param("- poc\n- prod\n", "must be a mapping of settings, got a list", id="list-document"),
        pytest.param("poc\n", "must be a mapping of settings, got a string", id="scalar-document"),
    ],
)
def test_unreadable_documents(tmp_path: Path, text: str, message: str) -> None:
    file = write(tmp_path / "tier.yaml", text)
    with pytest.raises(ConfigError) as caught:
        load_tier_file(file)
    assert caught.value.issues == [ConfigIssue(path="", message=message)]
    assert caught.value.render() == f"invalid {file}:\n  - {message}"


def test_empty_file_reports_the_required_settings(tmp_path: Path) -> None:
    file = write(tmp_path / "tier.yaml", "")
    with pytest.raises(ConfigError) as caught:
        load_tier_file(file)
    assert [str(i) for i in caught.value.issues] == [
        "name: is required",
        "node_pools: is required",
        "models: is required",
    ]


def test_missing_file(tmp_path: Path) -> None:
    file = tmp_path / "absent.yaml"
    with pytest.raises(ConfigError) as caught:
        load_tier_file(file)
    assert caught.value.render() == (f"invalid {file}:\n  - cannot read the file: No such file or directory")


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_tier_file(tmp_path)
    assert caught.value.render() == (
        f"invalid {tmp_path}:\n  - is a folder, not a tier file (give the path of a .yaml file)"
    )


def test_names_differing_only_in_hyphens_are_rejected() -> None:
    models = [
        {"name": "qwen3", "weights": "Qwen/Qwen3-8B", "bedrock": "none"},
        {"name": "qwen-3", "weights": "Qwen/Qwen3-8B", "bedrock": "none"},
    ]
    with pytest.raises(ConfigError) as caught:
        make_tier({"models": models})
    assert [str(i) for i in caught.value.issues] == [
        "models[1].name: must differ from 'qwen3' by more than hyphens (both map to the resource name "
        "'qwen3'), got 'qwen-3'"
    ]


def test_route_priority_follows_the_name_not_the_position() -> None:
    first = {"name": "a-model", "weights": "Qwen/Qwen3-8B", "bedrock": "none"}
    second = {"name": "b-model", "weights": "Qwen/Qwen3-8B", "bedrock": "none"}
    one = make_tier({"models": [first, second]})
    other = make_tier({"models": [second]})
    assert one.models[1].rule_priority == other.models[0].rule_priority
    assert one.models[0].rule_priority != one.models[1].rule_priority


def test_route_priority_clash_asks_for_an_explicit_priority() -> None:
    models = [
        {"name": "a-model", "weights": "Qwen/Qwen3-8B", "route_priority": 2000, "bedrock": "none"},
        {"name": "b-model", "weights": "Qwen/Qwen3-8B", "route_priority": 2000, "bedrock": "none"},
    ]
    with pytest.raises(ConfigError) as caught:
        make_tier({"models": models})
    assert [str(i) for i in caught.value.issues] == [
        "models[1].route_priority: must differ from that of models[0] ('a-model'); both are 2000: "
        "set route_priority on one of them"
    ]


def test_a_multi_node_model_needs_karpenter_on_auto_mode() -> None:
    assert [i for i in issues_of(model_override(pipeline_parallel=2)) if "pipeline_parallel" in i] == [
        "models[0].pipeline_parallel: needs karpenter provisioning (multi-node replicas run as "
        "LeaderWorkerSets, which gpufarm installs on standard compute), got 2 with 'auto-mode'"
    ]
