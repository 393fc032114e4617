"""NetworkPolicies of the serving namespace: deny everything, then allow the flows the tier needs.

Every policy is derived from the tier config and the labels and ports the workload builders use
(:mod:`gpufarm.k8s.serving`, :mod:`gpufarm.k8s.lws`, :mod:`gpufarm.k8s.prefill_decode`,
:mod:`gpufarm.k8s.kv_cache_routing`, :mod:`gpufarm.k8s.gateway`), never from a list written per model.
docs/decisions/0039-netpol-default-deny-and-flows.md explains each flow and its sources.

Kubernetes semantics this module relies on (https://kubernetes.io/docs/concepts/services-networking/network-policies/):
a pod selected by a policy with `Ingress` (`Egress`) in `policyTypes` accepts (sends) only what
some selecting policy allows; allowed sets are unions; a connection between two pods needs the
source's egress and the destination's ingress to allow it; replies of an allowed connection are
always allowed; traffic between a pod and the node it runs on is always allowed (the kubelet's
probes need no rule).
"""

from __future__ import annotations

from typing import Any

from gpufarm.config.bedrock import call_region
from gpufarm.config.model import InterfaceEndpoint, ModelConfig, Provisioning, TierConfig
from gpufarm.core.demand import METRICS_PORT, exports_metrics
from gpufarm.core.endpoints import GATEWAY_LISTENER_PORT, GatewayRoute, gateway_route
from gpufarm.core.prefill_decode import DECODE_ENGINE_PORT
from gpufarm.core.weights import streams_weights
from gpufarm.k8s import gateway as gw
from gpufarm.k8s import prefill_decode
from gpufarm.k8s.kv_cache_routing import ENVOY_READY_PORT, ROUTER_PORT, router_selector
from gpufarm.k8s.labels import common_labels, model_selector
from gpufarm.k8s.lws import GROUP_INDEX_LABEL, RAY_CLIENT_PORT, RAY_PORT, leader_selector

API = "networking.k8s.io/v1"

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""Immutable label the control plane sets on every namespace, its value the namespace's name
(https://kubernetes.io/docs/concepts/services-networking/network-policies/, "Targeting a Namespace
by its name")."""

DNS_NAMESPACE = "kube-system"
DNS_SELECTOR = {"k8s-app": "kube-dns"}
"""The cluster DNS pods: the `k8s-app: kube-dns` label of the upstream CoreDNS manifests, which
AWS's published CoreDNS manifests for EKS keep beside `eks.amazonaws.com/component: coredns` (on
the Deployment and its ConfigMap). The managed add-on's pod template was not read directly; if a
release dropped the label, DNS from the serving namespace would stop (the flow tests cannot see
that), so it is named in docs/decisions/0039-netpol-default-deny-and-flows.md."""
DNS_PORT = 53

POD_IDENTITY_AGENT_CIDR = "169.254.170.23/32"
"""Where the EKS Pod Identity agent serves credentials on every node: the agent listens on the
link-local 169.254.170.23 (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-agent-setup.html),
and EKS injects `AWS_CONTAINER_CREDENTIALS_FULL_URI=http://169.254.170.23/v1/credentials` into
pods of associated service accounts (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-how-it-works.html)."""
POD_IDENTITY_AGENT_PORT = 80
"""The credentials URI is plain `http://` with no port: 80."""

HTTPS_PORT = 443
ANYWHERE = "0.0.0.0/0"

KUBERNETES_SERVICE_CIDRS = ("10.100.0.1/32", "172.20.0.1/32")
"""The `kubernetes` Service's ClusterIP in every EKS cluster gpufarm creates. gpufarm sets no
service CIDR, and then "Kubernetes assigns addresses from either the 10.100.0.0/16 or
172.20.0.0/16 CIDR blocks" (EKS API, KubernetesNetworkConfigRequest.serviceIpv4Cidr:
https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/eks/aws.sdk.kotlin.services.eks.model/-kubernetes-network-config-request/service-ipv4-cidr.html);
the API server takes the first address of that range for the Service (kubernetes/kubernetes
pkg/controlplane/services.go, ServiceIPRange: `GetIndexedIP(&serviceClusterIPRange, 1)`).
A pod's connection to it is addressed to the ClusterIP and translated on the node; whether the
VPC CNI's policy agent judges it before or after translation is not documented, so egress is
allowed to both the ClusterIP and the endpoint's addresses in the VPC."""

RAY_FENCED_PORTS = (RAY_PORT, RAY_CLIENT_PORT)
"""Ray ports of a group's head that nothing outside the group may reach (the tests name them)."""

DEFAULT_DENY = "default-deny"
DNS_POLICY = "allow-dns"


def _policy(
    name: str,
    namespace: str,
    pod_selector: dict[str, str],
    *,
    ingress: list[dict[str, Any]] | None = None,
    egress: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A NetworkPolicy; `policyTypes` lists only the directions it has rules for.

    A policy that lists a type without rules denies that direction for the pods it selects; the
    default-deny policy does that for every pod, so the others only add what they allow.
    """
    types = [t for t, rules in (("Ingress", ingress), ("Egress", egress)) if rules is not None]
    spec: dict[str, Any] = {"podSelector": {"matchLabels": dict(pod_selector)}, "policyTypes": types}
    if ingress is not None:
        spec["ingress"] = ingress
    if egress is not None:
        spec["egress"] = egress
    return {
        "apiVersion": API,
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace, "labels": common_labels("network-policy")},
        "spec": spec,
    }


def _tcp(*ports: int) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": port} for port in sorted(set(ports))]


ALL_TCP = [{"protocol": "TCP"}]
"""A `ports` list admitting every TCP port (a port entry without `port`)."""


def _pods(selector: dict[str, str]) -> dict[str, Any]:
    """A peer: pods of the policy's own namespace matching `selector`."""
    return {"podSelector": {"matchLabels": dict(selector)}}


def _cidr(cidr: str) -> dict[str, Any]:
    return {"ipBlock": {"cidr": cidr}}


def _namespace(name: str) -> dict[str, Any]:
    """A peer: every pod of the namespace `name`."""
    return {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: name}}}


def default_deny(namespace: str) -> dict[str, Any]:
    """Selects every pod of `namespace` for ingress and egress and allows nothing."""
    return {
        "apiVersion": API,
        "kind": "NetworkPolicy",
        "metadata": {"name": DEFAULT_DENY, "namespace": namespace, "labels": common_labels("network-policy")},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
    }


def dns_egress(tier: TierConfig) -> dict[str, Any]:
    """Every pod of the namespace may query the cluster DNS on UDP and TCP 53.

    On EKS Auto Mode CoreDNS is not a pod: it runs as a system service on every node
    (https://docs.aws.amazon.com/eks/latest/userguide/auto-networking.html, "CoreDNS
    considerations"), so no pod selector can name it; the rule allows port 53 to any destination
    there. Elsewhere it names the CoreDNS pods of kube-system.
    """
    ports = [{"protocol": "UDP", "port": DNS_PORT}, {"protocol": "TCP", "port": DNS_PORT}]
    rule: dict[str, Any] = {"ports": ports}
    if tier.cluster.provisioning is not Provisioning.AUTO_MODE:
        rule["to"] = [
            {
                "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: DNS_NAMESPACE}},
                "podSelector": {"matchLabels": dict(DNS_SELECTOR)},
            }
        ]
    return {
        "apiVersion": API,
        "kind": "NetworkPolicy",
        "metadata": {
            "name": DNS_POLICY,
            "namespace": tier.serving.namespace,
            "labels": common_labels("network-policy"),
        },
        "spec": {"podSelector": {}, "policyTypes": ["Egress"], "egress": [rule]},
    }


def _endpoints(tier: TierConfig) -> set[InterfaceEndpoint]:
    """The interface endpoints of the tier's VPC (the gateway's stack adds Bedrock's)."""
    found = set(tier.network.interface_endpoints)
    if tier.fallback.enabled:
        found.add(InterfaceEndpoint.BEDROCK_RUNTIME)
    return found


def _aws_https(
    tier: TierConfig, services: set[InterfaceEndpoint], *, other_region: bool = False
) -> list[str]:
    """CIDRs a pod calling `services` over HTTPS must reach.

    The VPC when every service has an interface endpoint with private DNS in it (the endpoint's
    addresses are in the VPC's subnets), else anywhere: the regional endpoints are public
    addresses behind NAT, which an IP rule cannot narrow. Empty for no service.
    """
    if not services:
        return []
    if services <= _endpoints(tier) and not other_region:
        return [tier.network.cidr]
    return [ANYWHERE]


def _egress_https(cidrs: list[str]) -> list[dict[str, Any]]:
    return [{"to": [_cidr(c) for c in sorted(set(cidrs))], "ports": _tcp(HTTPS_PORT)}] if cidrs else []


def _pod_identity() -> dict[str, Any]:
    return {"to": [_cidr(POD_IDENTITY_AGENT_CIDR)], "ports": _tcp(POD_IDENTITY_AGENT_PORT)}


def _model_egress(tier: TierConfig, model: ModelConfig) -> list[dict[str, Any]]:
    """What a vLLM pod sends outside its group: the weights' download and the token's secret.

    `s3://` weights reach the pod as a CSI volume: the driver's node service mounts it
    (`NodePublishVolume`; the FSx for Lustre client is the node kernel's, and the file system's
    security group admits the nodes: docs/decisions/0012-fsx-model-store.md), so the pod's own
    network carries no S3 or Lustre traffic and needs no rule. Hugging Face weights are downloaded
    over HTTPS from the internet. A token read from Secrets Manager needs the Pod Identity agent too.
    With the `runai-streamer` store the pod reads S3 itself, over HTTPS with its Pod Identity
    credentials: S3 answers on its public addresses (through the VPC's gateway endpoint when there
    is one, which routes by prefix list), and an ipBlock cannot name a prefix list, so the rule
    is HTTPS to anywhere, as for Hugging Face.
    """
    streamed = streams_weights(tier, model)
    cidrs: list[str] = [] if model.is_s3 and not streamed else [ANYWHERE]
    rules: list[dict[str, Any]] = [_pod_identity()] if streamed else []
    if model.hf_token_secret:
        cidrs += _aws_https(tier, {InterfaceEndpoint.SECRETS_MANAGER})
        rules = [_pod_identity()]
    return _egress_https(cidrs) + rules


def _load_balancer_peers(tier: TierConfig) -> list[dict[str, Any]]:
    """Where the load balancer's connections and health checks come from: the VPC.

    An ALB, and an NLB with client IP preservation off (gpufarm's target groups set
    `preserve_client_ip.enabled` to false: gpufarm/constructs/nlb.py), open their connections to
    IP targets from their own private addresses, which are in the VPC's subnets. Pods have VPC
    addresses too (VPC CNI), so this ipBlock also admits any pod on exactly these ports: see
    docs/decisions/0039-netpol-default-deny-and-flows.md.
    """
    return [_cidr(tier.network.cidr)]


def _lb_ports(tier: TierConfig, serving_port: int) -> list[int]:
    """The pod ports a load balancer's target group reaches: vLLM's, or the Target Optimizer agent's."""
    optimizer = tier.ingress.target_optimizer
    if optimizer.enabled:
        return [optimizer.data_port, optimizer.control_port]
    return [serving_port]


def _scraper_peers(tier: TierConfig) -> list[dict[str, Any]]:
    """The managed scraper reaches pods from its network interfaces in the VPC's private subnets."""
    return [_cidr(tier.network.cidr)] if tier.observability.prometheus.enabled else []


def _clients(tier: TierConfig) -> list[dict[str, Any]]:
    """Pods of the namespaces `serving.allowed_client_namespaces` names."""
    return [_namespace(n) for n in tier.serving.allowed_client_namespaces]


def _serving_ingress(tier: TierConfig) -> list[dict[str, Any]]:
    """Who reaches a model's serving pods (its plain pods or its leaders) when no router fronts it."""
    port = tier.serving.port
    rules: list[dict[str, Any]] = []
    callers = list(_clients(tier))
    if _gateway_calls_pods(tier):
        callers.insert(0, _pods(gw.SELECTOR))
    if callers:
        rules.append({"from": callers, "ports": _tcp(port)})
    rules.append({"from": _load_balancer_peers(tier), "ports": _tcp(*_lb_ports(tier, port))})
    if scraper := _scraper_peers(tier):
        rules.append({"from": scraper, "ports": _tcp(port)})
    return rules


def _routed_ingress(tier: TierConfig, model: ModelConfig, metrics_port: int) -> list[dict[str, Any]]:
    """Who reaches a routed model's serving pods: its router on the serving port, the scraper on metrics."""
    rules: list[dict[str, Any]] = [
        {"from": [_pods(router_selector(model.name))], "ports": _tcp(tier.serving.port)}
    ]
    if scraper := _scraper_peers(tier):
        rules.append({"from": scraper, "ports": _tcp(metrics_port)})
    return rules


def single_node_policies(tier: TierConfig, model: ModelConfig) -> list[dict[str, Any]]:
    """The policies of a single-node model's pods (all its shares), and of its prefill pods."""
    ns = tier.serving.namespace
    egress = _model_egress(tier, model)
    pd = model.prefill_decode
    if pd is None:
        ingress = _routed_ingress(tier, model, tier.serving.port) if model.routed else _serving_ingress(tier)
        return [_policy(f"vllm-{model.name}", ns, model_selector(model.name), ingress=ingress, egress=egress)]
    # Prefill/decode: decode pods take the router's requests on the sidecar (the serving port) and
    # nothing else from outside the model; a model's decode pods and prefill pods reach each other
    # on every port (the sidecar posts prompts to prefill pods; NIXL's side channel and its
    # transport's connections run between the two roles), never pods of the same role.
    decode_pods, prefill_pods = model_selector(model.name), prefill_decode.prefill_selector(model.name)
    decode = _policy(
        f"vllm-{model.name}",
        ns,
        decode_pods,
        ingress=[
            *_routed_ingress(tier, model, DECODE_ENGINE_PORT),
            {"from": [_pods(prefill_pods)], "ports": ALL_TCP},
        ],
        egress=[{"to": [_pods(prefill_pods)], "ports": ALL_TCP}, *egress],
    )
    prefill = _policy(
        prefill_decode.prefill_name(model.name),
        ns,
        prefill_pods,
        ingress=[
            *_routed_ingress(tier, model, tier.serving.port),
            {"from": [_pods(decode_pods)], "ports": ALL_TCP},
        ],
        egress=[{"to": [_pods(decode_pods)], "ports": ALL_TCP}, *egress],
    )
    return [decode, prefill]


def multi_node_policies(tier: TierConfig, model: ModelConfig) -> list[dict[str, Any]]:
    """The policies of a LeaderWorkerSet model: its leaders' serving port, and one fence per group.

    Pods of one group reach each other on every TCP port (Ray's GCS, raylets, object managers and
    workers, NCCL and Gloo all pick ports of their own); nothing outside the group reaches a
    worker, and only the leader's serving port is open to callers. LWS labels every pod of a group
    with the group's index (:data:`gpufarm.k8s.lws.GROUP_INDEX_LABEL`, `0..replicas-1`); a
    LeaderWorkerSet's replicas are fixed in gpufarm (no autoscaling), so the indexes are known here.
    """
    ns = tier.serving.namespace
    ingress = _routed_ingress(tier, model, tier.serving.port) if model.routed else _serving_ingress(tier)
    policies = [_policy(f"vllm-{model.name}-leader", ns, leader_selector(model.name), ingress=ingress)]
    egress = _model_egress(tier, model)
    for index in range(model.replicas):
        group = {**model_selector(model.name), GROUP_INDEX_LABEL: str(index)}
        policies.append(
            _policy(
                f"vllm-{model.name}-group-{index}",
                ns,
                group,
                ingress=[{"from": [_pods(group)], "ports": ALL_TCP}],
                egress=[{"to": [_pods(group)], "ports": ALL_TCP}, *egress],
            )
        )
    return policies


def _gateway_calls_pods(tier: TierConfig) -> bool:
    """Whether the tier's gateway calls the models' pods (their Services), not the load balancer."""
    return tier.fallback.enabled and gateway_route(tier) is GatewayRoute.SERVICE


def _backend(tier: TierConfig, model: ModelConfig) -> tuple[dict[str, str], int]:
    """The pods and port the gateway (or an in-cluster client) calls for a model."""
    if model.routed:
        return router_selector(model.name), ROUTER_PORT
    if model.pipeline_parallel > 1:
        return leader_selector(model.name), tier.serving.port
    return model_selector(model.name), tier.serving.port


def router_policy(tier: TierConfig, model: ModelConfig) -> dict[str, Any]:
    """A routed model's router: requests in from the load balancer, the gateway and clients; out to its pods.

    The load balancer's target group sends requests to Envoy (:data:`ROUTER_PORT`) and checks
    `/ready` on :data:`ENVOY_READY_PORT`. The picker watches the model's pods through the
    Kubernetes API: at the `kubernetes` Service's ClusterIP (:data:`KUBERNETES_SERVICE_CIDRS`),
    which the node translates to the cluster endpoint's private addresses in the VPC's subnets.
    """
    ns = tier.serving.namespace
    callers = list(_clients(tier))
    if _gateway_calls_pods(tier):
        callers.insert(0, _pods(gw.SELECTOR))
    ingress: list[dict[str, Any]] = []
    if callers:
        ingress.append({"from": callers, "ports": _tcp(ROUTER_PORT)})
    ingress.append({"from": _load_balancer_peers(tier), "ports": _tcp(ROUTER_PORT, ENVOY_READY_PORT)})
    if model.prefill_decode is not None:
        targets = {prefill_decode.PREFILL_DECODE_GROUP_LABEL: model.name}
    elif model.pipeline_parallel > 1:
        targets = leader_selector(model.name)
    else:
        targets = model_selector(model.name)
    egress = [
        {"to": [_pods(targets)], "ports": _tcp(tier.serving.port)},
        {
            "to": [_cidr(c) for c in (tier.network.cidr, *KUBERNETES_SERVICE_CIDRS)],
            "ports": _tcp(HTTPS_PORT),
        },
    ]
    return _policy(
        f"vllm-{model.name}-router", ns, router_selector(model.name), ingress=ingress, egress=egress
    )


def gateway_policy(tier: TierConfig) -> dict[str, Any]:
    """The gateway: requests in from the load balancer and clients; out to each model and to AWS.

    When it counts demand for models that scale to zero, the managed scraper also reaches its
    metrics port.

    It calls each model where its Service points (the router, the leaders or the pods), or, when
    it calls the models' routes on the load balancer (`gateway_route`), the load balancer's
    gateway listener (:data:`GATEWAY_LISTENER_PORT`, on the load balancer's private addresses in
    the VPC's subnets) and no pod; Amazon Bedrock (through the VPC's endpoint unless a model's
    fallback calls another region), Secrets Manager for its master key, and the Pod Identity
    agent for credentials.
    """
    ns = tier.serving.namespace
    ingress: list[dict[str, Any]] = []
    if clients := _clients(tier):
        ingress.append({"from": clients, "ports": _tcp(tier.fallback.port)})
    ingress.append({"from": _load_balancer_peers(tier), "ports": _tcp(tier.fallback.port)})
    if exports_metrics(tier) and (scraper := _scraper_peers(tier)):
        # The managed scraper reads the demand counter that wakes parked models.
        ingress.append({"from": scraper, "ports": _tcp(METRICS_PORT)})
    egress: list[dict[str, Any]] = []
    if _gateway_calls_pods(tier):
        for model in tier.models:
            selector, port = _backend(tier, model)
            egress.append({"to": [_pods(selector)], "ports": _tcp(port)})
    else:
        egress.append({"to": [_cidr(tier.network.cidr)], "ports": _tcp(GATEWAY_LISTENER_PORT)})
    services = {InterfaceEndpoint.BEDROCK_RUNTIME}
    if tier.fallback.master_key_secret:
        services.add(InterfaceEndpoint.SECRETS_MANAGER)
    region = tier.environment.region
    other_region = any(
        (target := m.bedrock_target) is not None and call_region(target, region) != region
        for m in tier.models
    )
    egress += _egress_https(_aws_https(tier, services, other_region=other_region))
    egress.append(_pod_identity())
    return _policy(gw.NAME, ns, gw.SELECTOR, ingress=ingress, egress=egress)


def network_policies(tier: TierConfig) -> list[dict[str, Any]]:
    """Every NetworkPolicy of the serving namespace, in apply order: deny first, then each flow."""
    policies = [default_deny(tier.serving.namespace), dns_egress(tier)]
    for model in tier.models:
        if model.pipeline_parallel > 1:
            policies += multi_node_policies(tier, model)
        else:
            policies += single_node_policies(tier, model)
        if model.routed:
            policies.append(router_policy(tier, model))
    if tier.fallback.enabled:
        policies.append(gateway_policy(tier))
    return policies
