"""A small evaluator of Kubernetes NetworkPolicies: may this source reach that destination on this port?

It implements the `networking.k8s.io/v1` semantics as the Kubernetes documentation states them
(https://kubernetes.io/docs/concepts/services-networking/network-policies/; source
kubernetes/website `content/en/docs/concepts/services-networking/network-policies.md`):

* a pod is isolated for ingress (egress) when some policy in its namespace selects it and lists
  `Ingress` (`Egress`) in `policyTypes`; `policyTypes` defaults to `Ingress`, plus `Egress` when the
  policy has egress rules; a pod no policy isolates accepts (sends) everything;
* an isolated pod accepts (sends) what the union of the rules of the policies that select it
  allows; a rule with no `from` (`to`) matches every peer, with no `ports` every port;
* a peer is a `podSelector` (pods of the policy's namespace), a `namespaceSelector` (every pod of
  the matching namespaces), both in one peer (those pods of those namespaces), or an `ipBlock`
  (addresses in `cidr` and not in any `except`);
* a port entry matches its `protocol` (default TCP) and its `port` (a number, a range up to
  `endPort`, a name looked up in the destination pod's container ports, or absent: every port);
* a connection between two pods is allowed only when the source's egress and the destination's
  ingress both allow it.

ipBlocks are matched against every endpoint's address, pods' included: the documentation leaves it
to the network plugin whether an ipBlock matches pod addresses, and the VPC CNI gives pods
addresses from the VPC's subnets, so the evaluator takes the permissive reading. Label selectors
support `matchLabels` and `matchExpressions` (In, NotIn, Exists, DoesNotExist).

No PyPI library fit: np-guard's `network-config-analyzer` 2.1.0 pins PyYAML==6.0.2 and
networkx==3.2.1 exactly, which conflict with this project's pins (constraints.txt).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class Endpoint:
    """One end of a connection: a pod (namespace and labels) or an address outside the cluster.

    `namespace_labels` defaults to the automatic `kubernetes.io/metadata.name` label; `ports`
    maps a pod's named container ports to numbers (for policies that name ports).
    """

    ip: str
    namespace: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    namespace_labels: Mapping[str, str] | None = None
    ports: Mapping[str, int] = field(default_factory=dict)

    @property
    def is_pod(self) -> bool:
        return self.namespace is not None

    def ns_labels(self) -> Mapping[str, str]:
        if self.namespace_labels is not None:
            return self.namespace_labels
        return {NAMESPACE_NAME_LABEL: self.namespace} if self.namespace else {}


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether a LabelSelector matches `labels` (an empty selector matches everything)."""
    selector = selector or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ValueError(f"unknown selector operator {operator!r}")
    return True


def _in_block(block: Mapping[str, Any], ip: str) -> bool:
    address = ipaddress.ip_address(ip)
    if address not in ipaddress.ip_network(block["cidr"], strict=False):
        return False
    return not any(address in ipaddress.ip_network(c, strict=False) for c in block.get("except") or [])


def peer_matches(peer: Mapping[str, Any], policy_namespace: str, endpoint: Endpoint) -> bool:
    """Whether one `from`/`to` entry of a policy in `policy_namespace` matches `endpoint`."""
    if "ipBlock" in peer:
        return _in_block(peer["ipBlock"], endpoint.ip)
    if not endpoint.is_pod:
        return False
    if "namespaceSelector" in peer:
        if not selects(peer["namespaceSelector"], endpoint.ns_labels()):
            return False
    elif endpoint.namespace != policy_namespace:
        return False
    return "podSelector" not in peer or selects(peer["podSelector"], endpoint.labels)


def port_matches(
    entries: list[Mapping[str, Any]] | None, port: int, protocol: str, destination: Endpoint
) -> bool:
    """Whether a rule's `ports` admit `port`/`protocol` on `destination` (no entries: every port)."""
    if not entries:
        return True
    for entry in entries:
        if entry.get("protocol", "TCP") != protocol:
            continue
        wanted = entry.get("port")
        if wanted is None:
            return True
        if isinstance(wanted, str):
            if destination.ports.get(wanted) == port:
                return True
            continue
        if wanted <= port <= entry.get("endPort", wanted):
            return True
    return False


def _types(policy: Mapping[str, Any]) -> list[str]:
    spec = policy["spec"]
    if "policyTypes" in spec:
        return list(spec["policyTypes"])
    return ["Ingress", *(["Egress"] if spec.get("egress") else [])]


def _selecting(policies: Iterable[Mapping[str, Any]], pod: Endpoint, kind: str) -> list[Mapping[str, Any]]:
    return [
        p
        for p in policies
        if p["metadata"]["namespace"] == pod.namespace
        and kind in _types(p)
        and selects(p["spec"].get("podSelector"), pod.labels)
    ]


def _side_allows(
    policies: list[Mapping[str, Any]],
    pod: Endpoint,
    peer: Endpoint,
    destination: Endpoint,
    port: int,
    protocol: str,
    kind: str,
) -> bool:
    selecting = _selecting(policies, pod, kind)
    if not selecting:
        return True
    rules_key, peers_key = ("ingress", "from") if kind == "Ingress" else ("egress", "to")
    for policy in selecting:
        for rule in policy["spec"].get(rules_key) or []:
            peers = rule.get(peers_key)
            if peers and not any(peer_matches(p, policy["metadata"]["namespace"], peer) for p in peers):
                continue
            if port_matches(rule.get("ports"), port, protocol, destination):
                return True
    return False


def is_isolated(policies: Iterable[Mapping[str, Any]], pod: Endpoint, kind: str) -> bool:
    """Whether some policy selects `pod` for `kind` ('Ingress' or 'Egress')."""
    return bool(_selecting(list(policies), pod, kind))


def allowed(
    policies: Iterable[Mapping[str, Any]],
    source: Endpoint,
    destination: Endpoint,
    port: int,
    protocol: str = "TCP",
) -> bool:
    """Whether `source` may open a connection to `destination` on `port`/`protocol`."""
    found = list(policies)
    if source.is_pod and not _side_allows(found, source, destination, destination, port, protocol, "Egress"):
        return False
    return not destination.is_pod or _side_allows(
        found, destination, source, destination, port, protocol, "Ingress"
    )
