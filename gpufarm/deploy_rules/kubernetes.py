"""Kubernetes and Helm through the EKS custom resources: what the API server and Helm refuse.

`Custom::AWSCDK-EKS-KubernetesResource` applies `Manifest`, a JSON list of objects (rendered
around its tokens here); `Custom::AWSCDK-EKS-HelmChart` runs `helm upgrade --install` in the
cluster's kubectl handler.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from gpufarm.deploy_rules.rule import Resource, Rule, Template, literal_str
from gpufarm.deploy_rules.shapes import TOKEN, render, resource

MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"
HELM_CHART = "Custom::AWSCDK-EKS-HelmChart"

_NAMES = "https://kubernetes.io/docs/concepts/overview/working-with-objects/names/"
_LABELS = "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set"
_HELM_NAMES = "https://helm.sh/docs/chart_template_guide/getting_started/"
_HELM_INSTALL = "https://helm.sh/docs/helm/helm_install/"
_CDK_HELM_CHART = "https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.aws_eks.HelmChartOptions.html"
_PROBE_API = "https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#Probe"

DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_SUBDOMAIN = rf"{DNS_LABEL}(\.{DNS_LABEL})*"
DNS_1035_LABEL = r"[a-z]([-a-z0-9]*[a-z0-9])?"
LABEL_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"

MAX_SUBDOMAIN = 253
MAX_LABEL = 63
MAX_RELEASE = 53
MAX_HELM_TIMEOUT_SECONDS = 870
"""The longest Helm --timeout the kubectl handler survives: its Lambda function stops at 15 minutes
(900 s) including its own start, so a Helm wait of 900 s is cut off first (aws/aws-cdk#22257, which
proposes 870 s)."""

LABEL_NAME_KINDS = {"Namespace": DNS_LABEL, "Service": DNS_1035_LABEL}
"""Kinds whose names are DNS labels (63 characters) rather than subdomains: "all namespace names
must be valid RFC 1123 DNS labels" (Namespaces); a Service's name is an RFC 1035 label, starting
with a letter (the API server's "a DNS-1035 label must consist of lower case alphanumeric
characters or '-', start with an alphabetic character...")."""

PATH_SEGMENT_KINDS = frozenset({"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"})
"""RBAC kinds, whose names are path segment names ("system:controller:..." is valid): not '.' or
'..', without '/' or '%'. Not judged here beyond that."""


def manifest_objects(value: Any) -> list[Mapping[str, Any]]:
    """The objects of a `Manifest` property, rendered around tokens; empty when unreadable."""
    text = render(value)
    if text is None:
        return []
    try:
        objects = json.loads(text, strict=False)
    except ValueError:
        return []
    return [o for o in objects if isinstance(o, Mapping)] if isinstance(objects, list) else []


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = obj.get("metadata")
    return metadata if isinstance(metadata, Mapping) else {}


def _known(value: Any) -> str | None:
    """A manifest string with no token in it, else None."""
    return value if isinstance(value, str) and TOKEN not in value else None


def _fits(value: str, pattern: str, max_length: int) -> bool:
    return len(value) <= max_length and re.fullmatch(pattern, value) is not None


def _describe(obj: Mapping[str, Any]) -> str:
    return f"{obj.get('kind', '?')} {_metadata(obj).get('name', '?')!r}"


def _object_names(res: Resource, _template: Template) -> Iterator[str]:
    # Object names and IDs: most names are DNS subdomain names (at most 253 characters, lowercase
    # alphanumeric, '-' or '.', starting and ending with an alphanumeric); some are DNS labels
    # (at most 63 characters, no '.'), RFC 1035 labels also starting with a letter; some are path
    # segment names. The namespace of an object is a Namespace's name.
    for obj in manifest_objects(res.prop("Manifest")):
        name = _known(_metadata(obj).get("name"))
        if name is None:
            continue
        kind = obj.get("kind")
        if kind in PATH_SEGMENT_KINDS:
            if name in (".", "..") or "/" in name or "%" in name:
                yield f"{_describe(obj)}: the name must be a path segment (not '.' or '..', no '/' or '%')"
            continue
        pattern = LABEL_NAME_KINDS.get(kind, DNS_SUBDOMAIN) if isinstance(kind, str) else DNS_SUBDOMAIN
        limit = MAX_LABEL if pattern != DNS_SUBDOMAIN else MAX_SUBDOMAIN
        if not _fits(name, pattern, limit):
            form = "a DNS label" if limit == MAX_LABEL else "a DNS subdomain"
            yield f"{_describe(obj)}: the name must be {form} of at most {limit} characters"
        namespace = _known(_metadata(obj).get("namespace"))
        if namespace is not None and not _fits(namespace, DNS_LABEL, MAX_LABEL):
            yield (
                f"{_describe(obj)}: namespace {namespace!r} is not a DNS label of at "
                f"most {MAX_LABEL} characters"
            )


def label_key_problem(key: str) -> str | None:
    """Why `key` is not a valid label key (optional DNS-subdomain prefix, '/', name), else None."""
    prefix, _, name = key.rpartition("/")
    if "/" in key and not _fits(prefix, DNS_SUBDOMAIN, MAX_SUBDOMAIN):
        return f"prefix {prefix!r} is not a DNS subdomain of at most {MAX_SUBDOMAIN} characters"
    if not _fits(name, LABEL_NAME, MAX_LABEL):
        return (
            f"name {name!r} is not 1 to {MAX_LABEL} alphanumerics, '-', '_' or '.', alphanumeric at both ends"
        )
    return None


def _labels(res: Resource, _template: Template) -> Iterator[str]:
    # Labels, syntax and character set: a key is an optional prefix (a DNS subdomain, at most 253
    # characters, then '/') and a name (at most 63 characters, alphanumerics, '-', '_', '.',
    # beginning and ending with an alphanumeric); a value is at most 63 such characters, or empty.
    for obj in manifest_objects(res.prop("Manifest")):
        labels = _metadata(obj).get("labels")
        for key, value in labels.items() if isinstance(labels, Mapping) else ():
            known_key = _known(key)
            problem = label_key_problem(known_key) if known_key is not None else None
            if problem:
                yield f"{_describe(obj)}: label key {key!r}: {problem}"
            known_value = _known(value)
            if known_value and not _fits(known_value, LABEL_NAME, MAX_LABEL):
                yield f"{_describe(obj)}: label {key!r} value {known_value!r} is not a valid label value"


def _release_name(res: Resource, _template: Template) -> Iterator[str]:
    # Helm: release names are limited to 53 characters (chart template guide, getting started);
    # helm refuses others with "invalid release name, must match regex
    # ^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$ and the length must not be
    # longer than 53".
    release = literal_str(res.prop("Release"))
    if release is not None and not _fits(release, DNS_SUBDOMAIN, MAX_RELEASE):
        yield f"Release {release!r} is not a DNS subdomain of at most {MAX_RELEASE} characters"
    namespace = literal_str(res.prop("Namespace"))
    if namespace is not None and not _fits(namespace, DNS_LABEL, MAX_LABEL):
        yield f"Namespace {namespace!r} is not a DNS label of at most {MAX_LABEL} characters"


def _version_pinned(res: Resource, _template: Template) -> Iterator[str]:
    # helm install, --version: "If this is not specified, the latest version is installed": a
    # chart from a repository without a version changes under the stack at every replacement.
    if res.prop("Repository") is not None and res.prop("Version") in (None, ""):
        yield f"chart {res.prop('Chart')!r} from a repository has no Version; pin one"


def duration_seconds(text: str) -> float | None:
    """A Go duration ("900s", "15m0s", "1h") in seconds, or None when it is not one."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    return sum(float(n) * scale[u] for n, u in parts)


def _timeout(res: Resource, _template: Template) -> Iterator[str]:
    # aws-cdk-lib HelmChartOptions.timeout: "Amount of time to wait for any individual Kubernetes
    # operation. Maximum 15 minutes." The kubectl handler is a Lambda function with the same
    # 15-minute limit (Lambda quotas), and it starts before Helm does: with a 15-minute wait the
    # function times out first, the connection is cut and the release is left in pending-upgrade,
    # which a later deploy cannot fix (aws/aws-cdk#22257, open; it proposes 870 s).
    text = literal_str(res.prop("Timeout"))
    seconds = duration_seconds(text) if text is not None else None
    if text is not None and seconds is None:
        yield f"Timeout {text!r} is not a duration such as '600s' or '14m0s'"
    elif seconds is not None and seconds > MAX_HELM_TIMEOUT_SECONDS:
        yield (
            f"Timeout {text} leaves the kubectl handler, a Lambda function stopped at 15 minutes, "
            f"no time to start and report; use at most {MAX_HELM_TIMEOUT_SECONDS}s"
        )


PROBES = ("startupProbe", "readinessProbe", "livenessProbe")
_PROBE_MINIMUMS = ("timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold")


def _pod_specs(obj: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The pod specs of a workload: a template's, or a LeaderWorkerSet's leader and worker."""
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return
    template = spec.get("template")
    if isinstance(template, Mapping) and isinstance(template.get("spec"), Mapping):
        yield template["spec"]
    group = spec.get("leaderWorkerTemplate")
    for part in ("leaderTemplate", "workerTemplate"):
        inner = group.get(part) if isinstance(group, Mapping) else None
        if isinstance(inner, Mapping) and isinstance(inner.get("spec"), Mapping):
            yield inner["spec"]


def _probe_problems(container: Mapping[str, Any], *, init: bool) -> Iterator[str]:
    name = container.get("name", "?")
    # Init containers "do not support lifecycle, livenessProbe, readinessProbe, or startupProbe";
    # a native sidecar (restartPolicy Always) does.
    if init and container.get("restartPolicy") != "Always":
        for probe in PROBES:
            if probe in container:
                yield f"init container {name!r} sets {probe}: only a sidecar (restartPolicy Always) may"
        return
    for probe in PROBES:
        fields = container.get(probe)
        if not isinstance(fields, Mapping):
            continue
        # Probe v1: timeoutSeconds, periodSeconds, successThreshold and failureThreshold have a
        # minimum value of 1; successThreshold "Must be 1 for liveness and startup".
        for field in _PROBE_MINIMUMS:
            value = fields.get(field)
            if isinstance(value, int) and value < 1:
                yield f"container {name!r} {probe}.{field} is {value}; the minimum is 1"
        success = fields.get("successThreshold")
        if probe != "readinessProbe" and isinstance(success, int) and success != 1:
            yield f"container {name!r} {probe}.successThreshold is {success}; it must be 1"


def _probes(res: Resource, _template: Template) -> Iterator[str]:
    for obj in manifest_objects(res.prop("Manifest")):
        for pod in _pod_specs(obj):
            for key, init in (("initContainers", True), ("containers", False)):
                containers = pod.get(key)
                for container in containers if isinstance(containers, list) else ():
                    if isinstance(container, Mapping):
                        for problem in _probe_problems(container, init=init):
                            yield f"{_describe(obj)}: {problem}"


def _deployment(*init_containers: dict[str, Any], probe: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "vllm-llama", "namespace": "gpufarm"},
        "spec": {
            "template": {
                "spec": {
                    "initContainers": list(init_containers),
                    "containers": [{"name": "vllm", "image": "vllm", "livenessProbe": probe}],
                }
            }
        },
    }


_TCP = {"tcpSocket": {"port": "data"}, "periodSeconds": 10}


def _manifest(*objects: dict[str, Any]) -> dict[str, Any]:
    return resource(
        MANIFEST,
        ServiceToken="arn:aws:lambda:us-east-1:123456789012:function:kubectl",
        ClusterName="gpufarm-poc",
        Manifest=json.dumps(list(objects)),
    )


def _config_map(
    name: str, namespace: str = "gpufarm", labels: dict[str, str] | None = None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {"app": "vllm"}}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {}}


def _chart(**properties: Any) -> dict[str, Any]:
    base = {
        "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:kubectl",
        "ClusterName": "gpufarm-poc",
        "Chart": "keda",
        "Release": "keda",
        "Repository": "https://kedacore.github.io/charts",
        "Version": "2.18.0",
        "Namespace": "keda",
        "Timeout": "600s",
    }
    return resource(HELM_CHART, **{**base, **properties})


RULES: tuple[Rule, ...] = (
    Rule(
        id="K8S-OBJECT-NAME",
        resource_type=MANIFEST,
        title="Object names are DNS subdomains (DNS labels for Namespaces and Services)",
        doc_url=_NAMES,
        check=_object_names,
        bad={
            "M": _manifest(
                _config_map("Llama_3.1-8B"),
                {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "8b"}},
            )
        },
        good={
            "M": _manifest(
                _config_map("llama-3.1-8b"),
                {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "llama-8b"}},
            )
        },
    ),
    Rule(
        id="K8S-LABELS",
        resource_type=MANIFEST,
        title="Label keys and values follow the Kubernetes label syntax",
        doc_url=_LABELS,
        check=_labels,
        bad={
            "M": _manifest(_config_map("vllm", labels={"gpufarm.io/model": "Llama 3.1 8B", "-tier": "poc"}))
        },
        good={
            "M": _manifest(_config_map("vllm", labels={"gpufarm.io/model": "Llama-3.1-8B", "tier": "poc"}))
        },
    ),
    Rule(
        id="K8S-PROBES",
        resource_type=MANIFEST,
        title="Probes: thresholds and periods of at least 1, success 1 for liveness and startup, "
        "none on plain init containers",
        doc_url=_PROBE_API,
        check=_probes,
        bad={
            "M": _manifest(
                _deployment(
                    {"name": "hf-token", "image": "aws-cli", "readinessProbe": _TCP},
                    probe={**_TCP, "successThreshold": 2, "failureThreshold": 0},
                )
            )
        },
        good={
            "M": _manifest(
                _deployment(
                    {"name": "agent", "image": "agent", "restartPolicy": "Always", "readinessProbe": _TCP},
                    probe={**_TCP, "successThreshold": 1, "failureThreshold": 4},
                )
            )
        },
    ),
    Rule(
        id="HELM-RELEASE-NAME",
        resource_type=HELM_CHART,
        title="A Helm release name is a DNS subdomain of at most 53 characters, its namespace a DNS label",
        doc_url=_HELM_NAMES,
        check=_release_name,
        bad={"C": _chart(Release="gpufarm-production-keda-event-driven-autoscaler-release")},
        good={"C": _chart(Release="keda")},
    ),
    Rule(
        id="HELM-VERSION-PINNED",
        resource_type=HELM_CHART,
        title="A chart from a repository pins its version",
        doc_url=_HELM_INSTALL,
        check=_version_pinned,
        bad={"C": _chart(Version="")},
        good={"C": _chart()},
    ),
    Rule(
        id="HELM-TIMEOUT",
        resource_type=HELM_CHART,
        title="A Helm timeout leaves the kubectl handler's 15-minute Lambda time to start and report",
        doc_url=_CDK_HELM_CHART,
        check=_timeout,
        bad={"C": _chart(Timeout="900s")},
        good={"C": _chart(Timeout="14m30s")},
    ),
)
