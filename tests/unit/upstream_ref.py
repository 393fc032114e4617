"""Checks of what gpufarm hands to third-party components against the upstream releases it pins.

The facts live in `../shared/upstream-ref/` (see its README): each file is derived from one
upstream release (chart values and the keys its templates read, `vllm serve` flags, LiteLLM
config keys, endpoint-picker plugins, KEDA trigger metadata, DCGM counters, vendor labels). Each
checker returns findings as sentences; an unknown name comes with the nearest known one. A pin
that moves past the data is a finding too ("... is missing"), never a pass.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
REF_DIR = REPO_ROOT.parent / "shared" / "upstream-ref"
"""Upstream reference data; present on the team's machines, absent elsewhere."""


class MissingDataError(LookupError):
    """The pinned release has no reference data: the pin moved past `../shared/upstream-ref`."""


def ref_dir() -> Path:
    """The reference folder; skips the calling test (visibly) when it is absent."""
    if not REF_DIR.is_dir():
        pytest.skip(f"upstream reference data not available: {REF_DIR} does not exist")
    return REF_DIR


@cache
def load(name: str) -> dict[str, Any]:
    """One reference file by its path under the folder; MissingDataError names the file when absent."""
    path = ref_dir() / name
    if not path.is_file():
        raise MissingDataError(f"no upstream reference data for this pin: {path} is missing")
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def nearest(name: str, known: Iterable[str]) -> str:
    """' (nearest known: X)' for the closest known name, or '' when nothing is close."""
    close = difflib.get_close_matches(name, sorted(set(known)), n=1, cutoff=0.6)
    return f" (nearest known: {close[0]!r})" if close else " (no known name is close)"


def image_tag(image: str) -> tuple[str, str]:
    """(repository, tag) of an image reference; a digest-only reference has tag ''. An image
    pulled through the account's ECR (gpufarm/image_cache.py) reads as the image it caches,
    spelled as the image table spells it."""
    name = image.split("@", 1)[0]
    repository, _, tag = name.rpartition(":") if ":" in name.rsplit("/", 1)[-1] else (name, "", "")
    return as_published(repository), tag


def as_published(repository: str) -> str:
    """The image table's spelling of the upstream a (possibly cached) repository stands for."""
    from gpufarm.image_cache import host_of, upstream_repository
    from gpufarm.images import table

    upstream = upstream_repository(repository)
    if upstream == repository:
        return repository
    for row in table().values():
        if host_of(row.repository) == host_of(upstream):
            return row.repository
    return upstream


# --------------------------------------------------------------------------- Helm values


def chart_data(chart: str, version: str) -> dict[str, Any]:
    """The reference data of a chart at the version gpufarm pins."""
    return load(f"charts/{chart}@{version}.json")


def _tree_has(tree: Any, path: tuple[str, ...]) -> bool:
    for key in path:
        if not isinstance(tree, dict) or key not in tree:
            return False
        tree = tree[key]
    return True


def helm_value_issues(chart: str, version: str, values: dict[str, Any]) -> list[str]:
    """Every values key no template of the chart reads and its values.yaml does not define.

    A key is known when values.yaml defines it, or when a template reads it (`template_refs`) or
    something below it. Below a key the templates read whole (`wholesale_refs`: toYaml, with,
    range, tpl), such as `resources` or `nodeSelector`, anything goes.
    """
    try:
        data = chart_data(chart, version)
    except MissingDataError as missing:
        return [f"{chart} {version}: {missing}"]
    refs = {tuple(r.split(".")) for r in data["template_refs"]}
    wholesale = {tuple(r.split(".")) for r in data["wholesale_refs"]}
    issues: list[str] = []

    def walk(node: dict[str, Any], prefix: tuple[str, ...]) -> None:
        for key, value in node.items():
            path = (*prefix, key)
            known = _tree_has(data["values"], path) or any(r[: len(path)] == path for r in refs)
            if not known:
                siblings = [
                    ".".join(r[: len(path)])
                    for r in refs
                    if r[: len(prefix)] == prefix and len(r) > len(prefix)
                ]
                siblings += [".".join((*prefix, k)) for k in _subtree(data["values"], prefix)]
                issues.append(
                    f"{chart} {version}: values key {'.'.join(path)!r} is not in the chart's values.yaml "
                    f"and no template reads it" + nearest(".".join(path), siblings)
                )
                continue
            if path in wholesale or any(path[: len(w)] == w for w in wholesale):
                continue
            if isinstance(value, dict):
                walk(value, path)

    walk(values, ())
    return issues


def _subtree(tree: Any, path: tuple[str, ...]) -> list[str]:
    for key in path:
        tree = tree.get(key) if isinstance(tree, dict) else None
    return list(tree) if isinstance(tree, dict) else []


# --------------------------------------------------------------------------- command lines


def _flags(args: Iterable[str]) -> Iterator[tuple[str, str | None]]:
    """(flag, inline value or None) for every option in a command line (positionals skipped)."""
    for arg in args:
        if arg.startswith("-") and not re.fullmatch(r"-\d+(\.\d+)?", arg):
            flag, sep, value = arg.partition("=")
            yield flag, value if sep else None


def _values_of(args: list[str], flag: str) -> list[str]:
    out = []
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            out.append(args[i + 1])
        elif arg.startswith(f"{flag}="):
            out.append(arg.partition("=")[2])
    return out


def vllm_arg_issues(args: list[str], version: str) -> list[str]:
    """Flags of `vllm serve` unknown to the release, choices it refuses, KV transfer fields it lacks."""
    try:
        data = load(f"vllm@{version}.json")
    except MissingDataError as missing:
        return [f"vllm {version}: {missing}"]
    issues = []
    for flag, _ in _flags(args):
        if flag not in data["flags"]:
            issues.append(f"vllm {version}: unknown flag {flag!r}" + nearest(flag, data["flags"]))
        elif flag in data["deprecated_flags"]:
            issues.append(f"vllm {version}: flag {flag!r} is deprecated")
    for flag, choices in data["choices"].items():
        for value in _values_of(args, flag):
            if value not in choices:
                issues.append(
                    f"vllm {version}: {flag} {value!r} is not one of {choices}" + nearest(value, choices)
                )
    for value in _values_of(args, "--kv-transfer-config"):
        config = json.loads(value)
        for field in config:
            if field not in data["kv_transfer_config_fields"]:
                issues.append(
                    f"vllm {version}: unknown KVTransferConfig field {field!r}"
                    + nearest(field, data["kv_transfer_config_fields"])
                )
        if "kv_connector" in config and config["kv_connector"] not in data["kv_connectors"]:
            issues.append(
                f"vllm {version}: unknown kv_connector {config['kv_connector']!r}"
                + nearest(config["kv_connector"], data["kv_connectors"])
            )
        if "kv_role" in config and config["kv_role"] not in data["kv_roles"]:
            issues.append(
                f"vllm {version}: unknown kv_role {config['kv_role']!r}"
                + nearest(config["kv_role"], data["kv_roles"])
            )
    return issues


def flag_issues(
    args: list[str], known: Iterable[str], what: str, *, deprecated: Iterable[str] = ()
) -> list[str]:
    """Options of a Go (pflag/flag) or Click command line that its release does not define.

    Go flags are listed without dashes in the data; Click options with them.
    """
    known = set(known)
    deprecated = set(deprecated)
    issues = []
    for flag, _ in _flags(args):
        name = flag if flag in known else flag.lstrip("-")
        if name not in known:
            issues.append(f"{what}: unknown flag {flag!r}" + nearest(name, known))
        elif name in deprecated:
            issues.append(f"{what}: flag {flag!r} is deprecated")
    return issues


# --------------------------------------------------------------------------- LiteLLM


LITELLM_SECTIONS = {
    "router_settings": "router_settings",
    "litellm_settings": "litellm_settings",
    "general_settings": "general_settings",
}
"""Config section -> the reference list of its valid keys."""


def litellm_config_issues(config: dict[str, Any], version: str) -> list[str]:
    """Keys of a LiteLLM proxy config.yaml that the release does not read."""
    try:
        data = load(f"litellm@{version}.json")
    except MissingDataError as missing:
        return [f"litellm {version}: {missing}"]
    issues = []

    def unknown(keys: Iterable[str], known: list[str], where: str) -> None:
        issues.extend(
            f"litellm {version}: unknown {where} key {key!r}" + nearest(key, known)
            for key in keys
            if key not in known
        )

    unknown(config, data["config_sections"], "top-level")
    for section, field in LITELLM_SECTIONS.items():
        unknown(config.get(section) or {}, data[field], section)
    policy = (config.get("router_settings") or {}).get("allowed_fails_policy") or {}
    unknown(policy, data["allowed_fails_policy"], "router_settings.allowed_fails_policy")
    for i, entry in enumerate(config.get("model_list") or []):
        unknown(entry, ["model_name", "litellm_params", "model_info"], f"model_list[{i}]")
        params = entry.get("litellm_params") or {}
        provider_params = [p for ps in data["provider_params"].values() for p in ps]
        unknown(
            params,
            data["litellm_params"] + data["completion_params"] + provider_params,
            f"model_list[{i}].litellm_params",
        )
        unknown(entry.get("model_info") or {}, data["model_info"], f"model_list[{i}].model_info")
        provider = str(params.get("model", "")).partition("/")[0]
        if "/" in str(params.get("model", "")) and provider not in data["providers"]:
            issues.append(
                f"litellm {version}: unknown provider {provider!r}" + nearest(provider, data["providers"])
            )
    return issues


# --------------------------------------------------------------------------- endpoint pickers

PICKER_DATA = {
    "registry.k8s.io/gateway-api-inference-extension/epp": "epp-gaie@{tag}.json",
    "ghcr.io/llm-d/llm-d-router-endpoint-picker": "epp-llm-d@{tag}.json",
}
"""Picker image repository -> its reference file (by image tag)."""
SIDECAR_DATA = {"ghcr.io/llm-d/llm-d-router-disagg-sidecar": "epp-llm-d@{tag}.json"}
"""P/D routing sidecar image repository -> the llm-d release file that lists its flags."""
ENVOY_REPOSITORY = "docker.io/envoyproxy/envoy"


def picker_config_issues(config: dict[str, Any], data_file: str) -> list[str]:
    """Plugin types and parameters of an EndpointPickerConfig the picker release does not register."""
    try:
        data = load(data_file)
    except MissingDataError as missing:
        return [str(missing)]
    issues = []
    if config.get("apiVersion") not in data["config_api_versions"]:
        issues.append(
            f"{data_file}: config apiVersion {config.get('apiVersion')!r} "
            f"is not one of {data['config_api_versions']}"
        )
    declared = set()
    for plugin in config.get("plugins", []):
        kind = plugin["type"]
        declared.add(plugin.get("name", kind))
        if kind not in data["plugins"]:
            issues.append(f"{data_file}: unknown plugin type {kind!r}" + nearest(kind, data["plugins"]))
            continue
        if kind in data.get("deprecated_plugins", []):
            issues.append(f"{data_file}: plugin type {kind!r} is deprecated")
        known = data["plugins"][kind]["parameters"]
        for parameter in plugin.get("parameters") or {}:
            if parameter not in known:
                issues.append(
                    f"{data_file}: plugin {kind!r} has no parameter {parameter!r}" + nearest(parameter, known)
                )
    for profile in config.get("schedulingProfiles", []):
        for ref in profile.get("plugins", []):
            if ref["pluginRef"] not in declared:
                issues.append(
                    f"{data_file}: profile {profile['name']!r} refers to "
                    f"undeclared plugin {ref['pluginRef']!r}"
                )
    return issues


# --------------------------------------------------------------------------- KEDA, DCGM, vLLM metrics


def keda_issues(manifest: dict[str, Any], version: str) -> list[str]:
    """Prometheus trigger metadata, fallback behaviour and pod identity KEDA's release does not know."""
    try:
        data = load(f"keda@{version}.json")
    except MissingDataError as missing:
        return [f"keda {version}: {missing}"]
    issues = []
    name = f"{manifest['kind']}/{manifest['metadata']['name']}"
    spec = manifest.get("spec", {})
    for trigger in spec.get("triggers", []):
        if trigger["type"] != "prometheus":
            issues.append(f"keda {version}: {name} trigger type {trigger['type']!r} has no reference data")
            continue
        for key in trigger.get("metadata", {}):
            if key not in data["prometheus_metadata"]:
                issues.append(
                    f"keda {version}: {name} unknown prometheus metadata {key!r}"
                    + nearest(key, data["prometheus_metadata"])
                )
    behavior = spec.get("fallback", {}).get("behavior")
    if behavior is not None and behavior not in data["fallback_behaviors"]:
        issues.append(
            f"keda {version}: {name} fallback behavior {behavior!r}"
            + nearest(behavior, data["fallback_behaviors"])
        )
    identity = spec.get("podIdentity", {})
    if identity.get("provider") not in (None, *data["pod_identity_providers"]):
        issues.append(
            f"keda {version}: {name} podIdentity provider {identity['provider']!r}"
            + nearest(identity["provider"], data["pod_identity_providers"])
        )
    if identity.get("identityOwner") not in (None, *data["identity_owners"]):
        issues.append(
            f"keda {version}: {name} identityOwner {identity['identityOwner']!r}"
            + nearest(identity["identityOwner"], data["identity_owners"])
        )
    return issues


DCGM_METRIC = re.compile(r"\bDCGM_(?:FI|EXP)_[A-Z0-9_]+")
VLLM_METRIC = re.compile(r"\bvllm:[a-z_:]*[a-z]")
_PROMETHEUS_SUFFIXES = ("_bucket", "_sum", "_count", "_total", "_created")


def dcgm_metric_issues(names: Iterable[str], version: str) -> list[str]:
    """DCGM series gpufarm queries that the exporter release does not export by default."""
    try:
        data = load(f"dcgm-exporter@{version}-metrics.json")
    except MissingDataError as missing:
        return [f"dcgm-exporter {version}: {missing}"]
    issues = []
    for name in sorted(set(names)):
        if name in data["commented_counters"]:
            issues.append(
                f"dcgm-exporter {version}: {name} is commented out in default-counters.csv (not exported)"
            )
        elif name not in data["default_counters"]:
            issues.append(
                f"dcgm-exporter {version}: unknown metric {name!r}" + nearest(name, data["default_counters"])
            )
    return issues


def engine_series(name: str, engines: Iterable[str]) -> str | None:
    """Which of `engines` (values of gpufarm's Engine) exposes series `name`, per
    gpufarm/data/engine_metrics.yaml (a histogram's `_bucket`, `_sum`, `_count` included); None
    when none of them does."""
    from gpufarm.core.engine_metrics import engine_metrics

    for engine in engines:
        listed = engine_metrics(engine).metrics
        bases = [name] + [name.removesuffix(s) for s in ("_bucket", "_sum", "_count") if name.endswith(s)]
        if any(base in listed for base in bases):
            return engine
    return None


def engine_metric_issues(names: Iterable[str], engines: Iterable[str]) -> list[str]:
    """Engine series a template queries that none of the engines its models run exposes.

    Names carrying an engine's prefix (`vllm:`, `sglang:`) and TensorRT-LLM's unprefixed names are
    checked against the engines the tier runs: a name of an engine the tier does not run is an
    issue too (a query aimed at the wrong engine's series would never match)."""
    from gpufarm.core.engine_metrics import all_engine_metrics

    engines = list(engines)
    every = [e.engine for e in all_engine_metrics()]
    issues = []
    for name in sorted(set(names)):
        owner = engine_series(name, every)
        prefixed = name.split(":", 1)[0] if ":" in name else None
        if owner is None and prefixed in every:
            issues.append(f"{prefixed}: unknown metric {name!r} (not in gpufarm/data/engine_metrics.yaml)")
        elif owner is not None and owner not in engines:
            issues.append(f"{name!r} is {owner}'s, but no model of the tier runs {owner}")
    return issues


def vllm_metric_issues(names: Iterable[str], version: str) -> list[str]:
    """vLLM series gpufarm queries that the release does not expose (histogram/counter suffixes allowed)."""
    try:
        data = load(f"vllm@{version}.json")
    except MissingDataError as missing:
        return [f"vllm {version}: {missing}"]
    known = set(data["metrics"])
    issues = []
    for name in sorted(set(names)):
        base = next((name.removesuffix(s) for s in _PROMETHEUS_SUFFIXES if name.endswith(s)), name)
        if name not in known and base not in known:
            issues.append(f"vllm {version}: unknown metric {name!r}" + nearest(name, known))
    return issues


# --------------------------------------------------------------------------- labels


VERIFIED_LABELS = {
    "elbv2.k8s.aws/pod-readiness-gate-inject": (
        "kubernetes-sigs/aws-load-balancer-controller docs/deploy/pod_readiness_gate.md, the same from "
        "v2.0 to v3.6.3: 'apply the label elbv2.k8s.aws/pod-readiness-gate-inject: enabled to the pod "
        "namespace' (https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/deploy/"
        "pod_readiness_gate/)"
    ),
    "kubernetes.io/metadata.name": (
        "kubernetes/website content/en/docs/concepts/services-networking/network-policies.md, "
        "'Targeting a Namespace by its name': 'The Kubernetes control plane sets an immutable label "
        "kubernetes.io/metadata.name on all namespaces, the value of the label is the namespace name' "
        "(https://kubernetes.io/docs/concepts/services-networking/network-policies/)"
    ),
    **{
        f"pod-security.kubernetes.io/{mode}{suffix}": (
            "kubernetes/kubernetes staging/src/k8s.io/pod-security-admission/api/constants.go: "
            "EnforceLevelLabel, EnforceVersionLabel, AuditLevelLabel, AuditVersionLabel, WarnLevelLabel, "
            "WarnVersionLabel ('pod-security.kubernetes.io/' + mode [+ '-version'])"
        )
        for mode in ("enforce", "audit", "warn")
        for suffix in ("", "-version")
    },
}
"""Vendor labels confirmed in the vendor's documentation that ../shared/upstream-ref does not hold
(it records labels defined in code; these namespace labels are defined by the load balancer
controller's webhook configuration and by the Kubernetes control plane, and documented there)."""


def known_labels() -> dict[str, str]:
    """Vendor label key -> where it is defined (labels.json, manual.json, VERIFIED_LABELS)."""
    return {**load("labels.json")["keys"], **load("manual.json")["labels"], **VERIFIED_LABELS}


def label_issues(keys: Iterable[str]) -> list[str]:
    """Label keys in a vendor's domain that the vendor does not define, and keys of unknown domains."""
    manual = load("manual.json")
    vendors = manual["vendor_domains"]
    own = manual["project_prefixes"]
    known = known_labels()
    issues = []
    for key in sorted(set(keys)):
        if key in known or any(key.startswith(p) for p in own):
            continue
        domain, slash, _ = key.rpartition("/")
        if not slash:
            continue  # an unprefixed key is the user's own
        if any(domain == v or domain.endswith(f".{v}") for v in vendors):
            issues.append(f"label {key!r} is not defined by {domain}" + nearest(key, known))
        else:
            issues.append(f"label {key!r} has a domain that is neither gpufarm's nor a known vendor's")
    return issues


LABEL_RELEASES = {
    "leaderworkerset.sigs.k8s.io": ("lws", re.compile(r"/lws@v(\d+\.\d+\.\d+)")),
    "karpenter.sh": ("karpenter", re.compile(r"/v(\d+\.\d+)/")),
    "karpenter.k8s.aws": ("karpenter", re.compile(r"/v(\d+\.\d+)/")),
}
"""Label domain -> (chart that installs the controller defining it, the release in labels.json's source)."""


def label_release_issues(keys: Iterable[str], charts: dict[str, str]) -> list[str]:
    """Vendor labels whose reference data comes from another release than the chart the stack pins."""
    defined = load("labels.json")["keys"]
    issues = set()
    for key in keys:
        domain = key.rpartition("/")[0]
        if key not in defined or domain not in LABEL_RELEASES:
            continue
        chart, pattern = LABEL_RELEASES[domain]
        match = pattern.search(defined[key])
        assert match, f"labels.json names no release for {key}: {defined[key]}"
        pinned = charts.get(chart)
        if pinned is not None and not f"{pinned}.".startswith(f"{match.group(1)}."):
            issues.add(
                f"labels.json holds {domain} labels of {chart} {match.group(1)}, "
                f"the stack pins {chart} {pinned}: no label data for the pinned release"
            )
    return sorted(issues)


def label_keys(node: Any) -> Iterator[str]:
    """Every label key a manifest or values tree uses: metadata labels, selectors, node affinity
    terms, node selectors, topology keys, NodePool requirements."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("labels", "matchLabels", "nodeSelector") and isinstance(value, dict):
                yield from value
            elif key in ("matchExpressions", "requirements") and isinstance(value, list):
                yield from (term["key"] for term in value if isinstance(term, dict) and "key" in term)
            elif key == "topologyKey" and isinstance(value, str):
                yield value
            yield from label_keys(value)
    elif isinstance(node, list):
        for item in node:
            yield from label_keys(item)


# --------------------------------------------------------------------------- images


def image_issues(images: Iterable[str]) -> list[str]:
    """Images of a repository manual.json tracks whose tag it does not list as published."""
    published: dict[str, dict[str, str]] = load("manual.json")["images"]
    issues = []
    for image in sorted(set(images)):
        repository, tag = image_tag(image)
        if repository in published and tag and tag not in published[repository]:
            issues.append(
                f"image {image}: tag {tag!r} of {repository} is not confirmed published"
                + nearest(tag, published[repository])
            )
    return issues


def values_images(node: Any) -> Iterator[str]:
    """'repository:tag' of every image a Helm values tree sets as {repository, tag}."""
    if isinstance(node, dict):
        if isinstance(node.get("repository"), str) and isinstance(node.get("tag"), str):
            yield f"{node['repository']}:{node['tag']}"
        for value in node.values():
            yield from values_images(value)
    elif isinstance(node, list):
        for item in node:
            yield from values_images(item)


# --------------------------------------------------------------------------- manifests


def pod_specs(manifest: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The pod specs of a workload (Deployment, StatefulSet, DaemonSet, Job, LeaderWorkerSet)."""
    spec = manifest.get("spec", {})
    if "template" in spec and "spec" in spec["template"]:
        yield spec["template"]["spec"]
    lws = spec.get("leaderWorkerTemplate", {})
    for part in ("leaderTemplate", "workerTemplate"):
        if part in lws:
            yield lws[part]["spec"]


def containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """Init (and native sidecar) containers and containers of a pod spec."""
    return [*pod.get("initContainers", []), *pod.get("containers", [])]


def runs_vllm_serve(container: dict[str, Any]) -> bool:
    """Whether a container starts `vllm serve` (directly or from its entrypoint script)."""
    command = container.get("command", [])
    return command[:2] == ["vllm", "serve"] or any("vllm serve" in part for part in command)


def _config_maps(manifests: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (m["metadata"].get("namespace", ""), m["metadata"]["name"]): m
        for m in manifests
        if m["kind"] == "ConfigMap"
    }


def _mounted_config(
    manifest: dict[str, Any],
    pod: dict[str, Any],
    container: dict[str, Any],
    maps: dict[tuple[str, str], dict[str, Any]],
) -> Iterator[str]:
    """The data values of every ConfigMap a container mounts."""
    volumes = {v["name"]: v["configMap"]["name"] for v in pod.get("volumes", []) if "configMap" in v}
    for mount in container.get("volumeMounts", []):
        if mount["name"] in volumes:
            found = maps.get((manifest["metadata"].get("namespace", ""), volumes[mount["name"]]))
            assert found is not None, (
                f"{manifest['metadata']['name']} mounts a ConfigMap the stack does not create"
            )
            yield from found.get("data", {}).values()


def _mounted_yaml(
    manifest: dict[str, Any],
    pod: dict[str, Any],
    container: dict[str, Any],
    maps: dict[tuple[str, str], dict[str, Any]],
) -> Iterator[str]:
    """The YAML files (keys ending in .yaml or .yml) of every ConfigMap a container mounts.

    The gateway's ConfigMap also carries a Python callback module (gpufarm/k8s/demand.py), which
    the end-to-end test loads in the real proxy instead.
    """
    volumes = {v["name"]: v["configMap"]["name"] for v in pod.get("volumes", []) if "configMap" in v}
    for mount in container.get("volumeMounts", []):
        if mount["name"] in volumes:
            found = maps.get((manifest["metadata"].get("namespace", ""), volumes[mount["name"]]))
            assert found is not None, (
                f"{manifest['metadata']['name']} mounts a ConfigMap the stack does not create"
            )
            yield from (
                text for key, text in found.get("data", {}).items() if key.endswith((".yaml", ".yml"))
            )


def manifest_issues(
    manifests: list[dict[str, Any]], helm: list[tuple[str, str, dict[str, Any]]], template_text: str = ""
) -> list[str]:
    """Everything a set of manifests and Helm releases hands to an upstream component, checked.

    `helm` holds (chart, version, values) of each release; `template_text` is the whole template,
    scanned for the DCGM and vLLM series it queries (dashboards, alarms, scaler queries).
    """
    issues: list[str] = []
    charts = {chart: version for chart, version, _ in helm}
    for chart, version, values in helm:
        issues += helm_value_issues(chart, version, values)
        issues += label_issues(label_keys(values))
    maps = _config_maps(manifests)
    vllm_versions = {
        tag.removeprefix("v")
        for m in manifests
        for pod in pod_specs(m)
        for c in containers(pod)
        for repository, tag in [image_tag(c["image"])]
        if repository == "vllm/vllm-openai"
    }
    used_labels = [k for m in manifests for k in label_keys(m)] + [k for *_, v in helm for k in label_keys(v)]
    issues += label_release_issues(used_labels, charts)
    issues += image_issues(
        [c["image"] for m in manifests for pod in pod_specs(m) for c in containers(pod)]
        + [image for *_, v in helm for image in values_images(v)]
    )
    for manifest in manifests:
        issues += label_issues(label_keys(manifest))
        if manifest["kind"] in ("ScaledObject", "TriggerAuthentication"):
            issues += keda_issues(manifest, charts.get("keda", "<no keda chart in the stack>"))
        for pod in pod_specs(manifest):
            for container in containers(pod):
                issues += _container_issues(manifest, pod, container, maps, vllm_versions)
    if "dcgm-exporter" in charts:
        issues += dcgm_metric_issues(DCGM_METRIC.findall(template_text), charts["dcgm-exporter"])
    elif DCGM_METRIC.search(template_text):
        issues.append("the template queries DCGM series but installs no dcgm-exporter chart")
    for version in vllm_versions:
        issues += vllm_metric_issues(VLLM_METRIC.findall(template_text), version)
    return issues


def _container_issues(
    manifest: dict[str, Any],
    pod: dict[str, Any],
    container: dict[str, Any],
    maps: dict[tuple[str, str], dict[str, Any]],
    vllm_versions: set[str],
) -> list[str]:
    where = f"{manifest['kind']}/{manifest['metadata']['name']} container {container['name']}"
    repository, tag = image_tag(container["image"])
    args = list(container.get("args", []))
    issues: list[str] = []
    if runs_vllm_serve(container):
        version = tag.removeprefix("v") if repository == "vllm/vllm-openai" else None
        for v in [version] if version else sorted(vllm_versions) or ["<unknown: no vllm/vllm-openai image>"]:
            issues += [f"{where}: {i}" for i in vllm_arg_issues(args, v)]
    elif repository == "ghcr.io/berriai/litellm":
        version = tag.removeprefix("v")
        try:
            data = load(f"litellm@{version}.json")
            issues += [f"{where}: {i}" for i in flag_issues(args, data["cli_flags"], f"litellm {version}")]
        except MissingDataError as missing:
            issues.append(f"{where}: {missing}")
        for text in _mounted_yaml(manifest, pod, container, maps):
            issues += [f"{where}: {i}" for i in litellm_config_issues(yaml.safe_load(text), version)]
    elif repository in PICKER_DATA:
        data_file = PICKER_DATA[repository].format(tag=tag)
        try:
            issues += [f"{where}: {i}" for i in flag_issues(args, load(data_file)["flags"], data_file)]
        except MissingDataError as missing:
            issues.append(f"{where}: {missing}")
        for text in _mounted_config(manifest, pod, container, maps):
            config = yaml.safe_load(text)
            if isinstance(config, dict) and config.get("kind") == "EndpointPickerConfig":
                issues += [f"{where}: {i}" for i in picker_config_issues(config, data_file)]
    elif repository in SIDECAR_DATA:
        data_file = SIDECAR_DATA[repository].format(tag=tag)
        try:
            data = load(data_file)
            issues += [
                f"{where}: {i}"
                for i in flag_issues(
                    args, data["sidecar_flags"], data_file, deprecated=data["sidecar_deprecated_flags"]
                )
            ]
        except MissingDataError as missing:
            issues.append(f"{where}: {missing}")
    elif repository == ENVOY_REPOSITORY:
        key = f"envoy@{tag.removeprefix('distroless-v')}"
        manual = load("manual.json")
        if key not in manual:
            issues.append(f"{where}: no upstream reference data for {key} in manual.json")
        else:
            issues += [f"{where}: {i}" for i in flag_issues(args, manual[key]["flags"], key)]
    return issues
