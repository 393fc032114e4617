"""Reads from a tier's Kubernetes API: one small interface, one real client, the summaries status needs.

:class:`KubernetesReader` is everything `gpufarm status` asks the cluster: the nodes, and the pods
of a namespace. :class:`ApiServerReader` answers it over HTTPS with the API server's own
certificate authority and an EKS token (:func:`gpufarm.aws.eks.eks_token`), with nothing but
the standard library: `GET /api/v1/nodes` and `GET /api/v1/namespaces/<ns>/pods` return
`NodeList` and `PodList` documents, the same JSON `kubectl get nodes -o json` prints (Kubernetes
API reference, core/v1 Node "list" and Pod "list"). Tests answer the interface with recorded
`kubectl get -o json` documents.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from gpufarm.core.labels import NODEPOOL_LABEL, POOL_LABEL
from gpufarm.k8s.karpenter import NODEGROUP_LABEL
from gpufarm.k8s.labels import MODEL_LABEL

REQUEST_TIMEOUT_SECONDS = 15


class KubernetesReadError(Exception):
    """The API server could not be read (unreachable, refused the token, answered an error)."""


class KubernetesReader(Protocol):
    """What gpufarm reads from a cluster: items of `NodeList` and `PodList` as JSON objects."""

    def list_nodes(self) -> list[dict[str, Any]]:
        """Every node."""
        ...

    def list_pods(self, namespace: str, label_selector: str = "") -> list[dict[str, Any]]:
        """The pods of `namespace` that match `label_selector` (Kubernetes selector syntax)."""
        ...


class ApiServerReader:
    """:class:`KubernetesReader` over the API server's HTTPS endpoint with a bearer token."""

    def __init__(self, *, endpoint: str, certificate_authority: str, token: str) -> None:
        """`certificate_authority` is base64 PEM (DescribeCluster's `certificateAuthority.data`)."""
        self._endpoint = endpoint.rstrip("/")
        self._token = token
        pem = base64.b64decode(certificate_authority).decode("ascii") if certificate_authority else None
        self._tls = ssl.create_default_context(cadata=pem) if pem else ssl.create_default_context()

    def _get(self, path: str, query: dict[str, str]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        params = {k: v for k, v in query.items() if v}
        while True:
            url = f"{self._endpoint}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
            request = urllib.request.Request(
                url, headers={"Authorization": f"Bearer {self._token}", "Accept": "application/json"}
            )
            try:
                with urllib.request.urlopen(
                    request, timeout=REQUEST_TIMEOUT_SECONDS, context=self._tls
                ) as reply:
                    document = json.load(reply)
            except urllib.error.HTTPError as exc:
                hint = (
                    ": the caller has no access entry on the cluster (set cluster.admin_role_arn, or add one)"
                    if exc.code in (401, 403)
                    else ""
                )
                raise KubernetesReadError(f"GET {path}: HTTP {exc.code} {exc.reason}{hint}") from None
            except (urllib.error.URLError, OSError, ValueError) as exc:
                reason = getattr(exc, "reason", exc)
                raise KubernetesReadError(
                    f"cannot reach the API server at {self._endpoint}: {reason}"
                ) from None
            items += list(document.get("items", []))
            # List calls page with metadata.continue (Kubernetes API concepts, "Retrieving large
            # results sets in chunks").
            token = document.get("metadata", {}).get("continue")
            if not token:
                return items
            params["continue"] = str(token)

    def list_nodes(self) -> list[dict[str, Any]]:
        """Every node (`GET /api/v1/nodes`)."""
        return self._get("/api/v1/nodes", {"limit": "500"})

    def list_pods(self, namespace: str, label_selector: str = "") -> list[dict[str, Any]]:
        """Pods of `namespace` (`GET /api/v1/namespaces/<ns>/pods?labelSelector=...`)."""
        return self._get(
            f"/api/v1/namespaces/{urllib.parse.quote(namespace)}/pods",
            {"labelSelector": label_selector, "limit": "500"},
        )


@dataclass(frozen=True, kw_only=True)
class PoolNodes:
    """Nodes of one pool: how many there are and how many are Ready."""

    pool: str
    nodes: int
    ready: int
    instance_types: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class ModelPods:
    """A model's pods: how many exist, how many are Ready, and how many the tier asks for."""

    model: str
    pods: int
    ready: int
    desired: int | None
    """Replicas in the tier file; None when an autoscaler decides (KEDA, the wake trigger)."""


def _condition(item: dict[str, Any], kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in item.get("status", {}).get("conditions", []) or []
    )


def pool_of(node: dict[str, Any]) -> str:
    """The pool a node belongs to: gpufarm's own pool label, else the Karpenter NodePool (Karpenter
    and EKS Auto Mode label every node they launch), else the managed node group, else `(other)`."""
    labels = node.get("metadata", {}).get("labels", {}) or {}
    for key in (POOL_LABEL, NODEPOOL_LABEL, NODEGROUP_LABEL):
        if labels.get(key):
            return str(labels[key])
    return "(other)"


def nodes_per_pool(nodes: Iterable[dict[str, Any]]) -> list[PoolNodes]:
    """Nodes grouped by :func:`pool_of`, Ready counted from the `Ready` condition, sorted by pool."""
    pools: dict[str, list[dict[str, Any]]] = {}
    for node in nodes:
        pools.setdefault(pool_of(node), []).append(node)
    return [
        PoolNodes(
            pool=pool,
            nodes=len(members),
            ready=sum(_condition(n, "Ready") for n in members),
            instance_types=tuple(
                sorted(
                    {
                        str(t)
                        for n in members
                        if (
                            t := (n.get("metadata", {}).get("labels", {}) or {}).get(
                                "node.kubernetes.io/instance-type"
                            )
                        )
                    }
                )
            ),
        )
        for pool, members in sorted(pools.items())
    ]


def model_pods(pods: Iterable[dict[str, Any]], desired: dict[str, int | None]) -> list[ModelPods]:
    """Pods per model (label `gpufarm.io/model`), Ready from the pod's `Ready` condition.

    Every model in `desired` gets a row, with 0 pods when none runs; terminating pods (with a
    `deletionTimestamp`) are left out. A model with shares or prefill/decode pods counts all of
    them under its name.
    """
    counts: dict[str, list[dict[str, Any]]] = {name: [] for name in desired}
    for pod in pods:
        metadata = pod.get("metadata", {})
        model = (metadata.get("labels", {}) or {}).get(MODEL_LABEL)
        if model is None or metadata.get("deletionTimestamp"):
            continue
        counts.setdefault(str(model), []).append(pod)
    return [
        ModelPods(
            model=model,
            pods=len(members),
            ready=sum(_condition(p, "Ready") for p in members),
            desired=desired.get(model),
        )
        for model, members in sorted(counts.items())
    ]
