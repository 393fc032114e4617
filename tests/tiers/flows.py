"""A tier's network flows, read from its synthesized template, and the NetworkPolicies that govern them.

The flows a tier needs are derived here from what the template deploys, independently of
gpufarm.k8s.network_policy: the TargetGroupBindings and target groups (the load balancer's
flows), the gateway's config (its backends), the routers' endpoint pickers (their endpoint
selector and target port), the prefill/decode sidecars and NIXL settings, the LeaderWorkerSet
groups, the managed scraper, the Pod Identity associations, the init containers that read
secrets, the weights each model downloads and the VPC endpoints. :func:`check_closed_world`
then evaluates every pair of endpoints on every port of interest: a needed flow the policies
deny fails, and so does a flow they allow that is not needed.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

from gpufarm.config.model import TIER_METADATA_KEY
from gpufarm.core.engines import ENGINES
from tests.netpol import Endpoint, allowed, is_isolated
from tests.tiers.helpers import flatten, manifests, resources

LWS_GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
INTERNET = "198.51.100.7"
"""An address on the internet (TEST-NET-2): Hugging Face, a public AWS endpoint, anything."""
OFF_VPC_POD = "100.64.0.10"
"""A pod address outside the VPC's CIDR (as with VPC CNI custom networking on a secondary CIDR)."""
POD_IDENTITY = "169.254.170.23"
KUBERNETES_SERVICE_IPS = ("10.100.0.1", "172.20.0.1")
"""The two addresses EKS may give the `kubernetes` Service (the first of 10.100.0.0/16 or
172.20.0.0/16, whichever it picks when no service CIDR is set)."""
FOREIGN_NS = "apps"
EXTRA_PORTS = (
    22,
    53,
    80,
    443,
    3000,
    5600,
    6379,
    8000,
    8080,
    8081,
    8200,
    8265,
    9002,
    9090,
    10001,
    19000,
    19001,
    29500,
    40000,
)
"""Ports probed besides every container port: Ray's (GCS, client, dashboard), NCCL's usual
bootstrap port and an ephemeral one, Envoy's and the picker's, DNS, HTTPS, SSH, the agent's."""
ANY = -1


@dataclass(frozen=True)
class Pod:
    """A pod a workload of the tier runs (one per Deployment role, one per LWS group member)."""

    id: str
    endpoint: Endpoint
    workload: str
    containers: tuple[dict[str, Any], ...]
    init_containers: tuple[dict[str, Any], ...]
    service_account: str | None
    group: str | None = None
    """`<lws>/<group index>` for LeaderWorkerSet pods."""


@dataclass
class Tier:
    """The endpoints of one synthesized tier and the flows it needs."""

    namespace: str
    vpc_cidr: str
    auto_mode: bool
    pods: list[Pod]
    policies: list[dict[str, Any]]
    specials: dict[str, Endpoint]
    needed: set[tuple[str, str, int, str]] = field(default_factory=set)
    """(source id, destination id, port or ANY, protocol)."""
    needs_anywhere: dict[str, set[tuple[int, str]]] = field(default_factory=dict)
    """Pod id -> (port, protocol) it may send to any address outside the namespace's pods."""

    def endpoint(self, name: str) -> Endpoint:
        return self.specials[name] if name in self.specials else self.pod(name).endpoint

    def pod(self, pod_id: str) -> Pod:
        (found,) = [p for p in self.pods if p.id == pod_id]
        return found

    def all_ids(self) -> list[str]:
        return [*self.specials, *(p.id for p in self.pods)]

    def allowed(self, source: str, destination: str, port: int, protocol: str = "TCP") -> bool:
        return allowed(self.policies, self.endpoint(source), self.endpoint(destination), port, protocol)

    def need(self, source: str, destination: str, port: int, protocol: str = "TCP") -> None:
        self.needed.add((source, destination, port, protocol))


def _ports(containers: tuple[dict[str, Any], ...]) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for c in containers for p in c.get("ports", []) if "name" in p}


def _vpc_cidr(template: dict[str, Any]) -> str:
    """The CIDR of the tier's own VPC (not the inspection VPC's)."""
    (cidr,) = [
        v["Properties"]["CidrBlock"]
        for k, v in resources(template, "AWS::EC2::VPC").items()
        if k.startswith("Network")
    ]
    return str(cidr)


def _auto_mode(template: dict[str, Any]) -> bool:
    ((_, cluster),) = resources(template, "AWS::EKS::Cluster").items()
    return bool(cluster["Properties"].get("ComputeConfig", {}).get("Enabled"))


def _addresses(cidr: str) -> Iterator[str]:
    network = ipaddress.ip_network(cidr)
    for offset in range(1000, network.num_addresses):
        yield str(network.network_address + offset)


def _pod_templates(doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], str | None]]:
    """(pod id, pod template, LWS group) of one workload manifest: one pod per role or group member."""
    name = doc["metadata"]["name"]
    if doc["kind"] == "Deployment":
        yield name, doc["spec"]["template"], None
    elif doc["kind"] == "LeaderWorkerSet":
        lws = doc["spec"]["leaderWorkerTemplate"]
        for group in range(doc["spec"]["replicas"]):
            for worker in range(lws["size"]):
                source = lws["leaderTemplate"] if worker == 0 else lws["workerTemplate"]
                labels = {
                    **source["metadata"]["labels"],
                    LWS_GROUP_INDEX: str(group),
                    LWS_WORKER_INDEX: str(worker),
                }
                yield (
                    f"{name}-{group}-{worker}",
                    {**source, "metadata": {**source["metadata"], "labels": labels}},
                    f"{name}/{group}",
                )


def read_tier(template: dict[str, Any]) -> Tier:
    """The tier's pods, its NetworkPolicies and the special endpoints flows are probed against."""
    docs = manifests(template)
    tier_meta = template["Metadata"][TIER_METADATA_KEY]
    namespace = tier_meta["serving"]["namespace"]
    cidr = _vpc_cidr(template)
    addresses = _addresses(cidr)
    vpc_host = next(addresses)
    pods: list[Pod] = []
    for doc in docs:
        if (
            doc["kind"] not in ("Deployment", "LeaderWorkerSet")
            or doc["metadata"].get("namespace") != namespace
        ):
            continue
        for pod_id, pod_template, group in _pod_templates(doc):
            spec = pod_template["spec"]
            containers = tuple(spec["containers"])
            inits = tuple(spec.get("initContainers", []))
            endpoint = Endpoint(
                ip=next(addresses),
                namespace=namespace,
                labels=dict(pod_template["metadata"]["labels"]),
                ports=_ports(containers + inits),
            )
            pods.append(
                Pod(
                    pod_id,
                    endpoint,
                    doc["metadata"]["name"],
                    containers,
                    inits,
                    spec.get("serviceAccountName"),
                    group,
                )
            )
    specials = {
        # A load balancer's or the managed scraper's network interface, a VPC endpoint, the
        # cluster endpoint: an address in the VPC that is not a pod.
        "vpc-host": Endpoint(ip=vpc_host),
        "internet": Endpoint(ip=INTERNET),
        "pod-identity-agent": Endpoint(ip=POD_IDENTITY),
        **{f"kubernetes-service-{ip}": Endpoint(ip=ip) for ip in KUBERNETES_SERVICE_IPS},
        "kube-dns": Endpoint(ip=next(addresses), namespace="kube-system", labels={"k8s-app": "kube-dns"}),
        "kube-system-pod": Endpoint(ip=next(addresses), namespace="kube-system", labels={"app": "other"}),
        # Another namespace's pod with a VPC address (the VPC CNI's default) and one without.
        "foreign-pod": Endpoint(ip=next(addresses), namespace=FOREIGN_NS, labels={"app": "client"}),
        "foreign-pod-off-vpc": Endpoint(ip=OFF_VPC_POD, namespace=FOREIGN_NS, labels={"app": "client"}),
    }
    policies = [d for d in docs if d["kind"] == "NetworkPolicy"]
    tier = Tier(namespace, cidr, _auto_mode(template), pods, policies, specials)
    _derive_needed(tier, template, docs, tier_meta)
    return tier


def _service_pods(tier: Tier, service: dict[str, Any]) -> list[Pod]:
    selector = service["spec"]["selector"]
    return [p for p in tier.pods if all(p.endpoint.labels.get(k) == v for k, v in selector.items())]


def _target_port(pod: Pod, service: dict[str, Any], port: int) -> int:
    (entry,) = [p for p in service["spec"]["ports"] if p["port"] == port]
    target = entry.get("targetPort", port)
    return pod.endpoint.ports[target] if isinstance(target, str) else int(target)


def _vpc_endpoint_services(template: dict[str, Any]) -> set[str]:
    names = set()
    for endpoint in resources(template, "AWS::EC2::VPCEndpoint").values():
        if endpoint["Properties"].get("VpcEndpointType") == "Interface":
            # com.amazonaws.<region>.<service>, the service possibly dotted (ecr.api)
            names.add(".".join(flatten(endpoint["Properties"]["ServiceName"]).split(".")[3:]))
    return names


def _https_to(tier: Tier, pod: Pod, service: str, endpoints: set[str]) -> None:
    """A pod calls an AWS service over HTTPS: through its VPC endpoint, else anywhere through NAT."""
    if service in endpoints:
        tier.need(pod.id, "vpc-host", 443)
    else:
        tier.needs_anywhere.setdefault(pod.id, set()).add((443, "TCP"))


def _derive_needed(
    tier: Tier, template: dict[str, Any], docs: list[dict[str, Any]], meta: dict[str, Any]
) -> None:
    ns = tier.namespace
    services = {
        d["metadata"]["name"]: d
        for d in docs
        if d["kind"] == "Service" and d["metadata"].get("namespace") == ns
    }
    groups = resources(template, "AWS::ElasticLoadBalancingV2::TargetGroup")
    endpoints = _vpc_endpoint_services(template)
    # The load balancer: each binding's Service port, the target group's control and health ports.
    for binding in (d for d in docs if d["kind"] == "TargetGroupBinding"):
        service = services[binding["spec"]["serviceRef"]["name"]]
        group = groups[flatten(binding["spec"]["targetGroupARN"]).removeprefix("<Ref:").removesuffix(">")][
            "Properties"
        ]
        for pod in _service_pods(tier, service):
            ports = {_target_port(pod, service, binding["spec"]["serviceRef"]["port"])}
            if "TargetControlPort" in group:
                ports.add(int(group["TargetControlPort"]))
            if group.get("HealthCheckPort", "traffic-port") != "traffic-port":
                ports.add(int(group["HealthCheckPort"]))
            for port in ports:
                tier.need("vpc-host", pod.id, port)
    # The gateway's backends: each api_base names a Service and its port.
    config_maps = {
        d["metadata"]["name"]: d
        for d in docs
        if d["kind"] == "ConfigMap" and d["metadata"].get("namespace") == ns
    }
    gateway_pods = [p for p in tier.pods if p.workload == "gateway"]
    bedrock_entries: list[dict[str, Any]] = []
    if "gateway-config" in config_maps:
        config = yaml.safe_load(config_maps["gateway-config"]["data"]["config.yaml"])
        for entry in config["model_list"]:
            base = entry["litellm_params"].get("api_base")
            if not base:
                bedrock_entries.append(entry)
                continue
            if base.startswith("os.environ/"):
                # The model's route on the load balancer's gateway listener (ADR 0050): the URL
                # is in the gateway pods' environment; the load balancer's private addresses
                # are in the VPC.
                name = base.removeprefix("os.environ/")
                for gateway in gateway_pods:
                    (url,) = [
                        e["value"] for c in gateway.containers for e in c.get("env", []) if e["name"] == name
                    ]
                    lb_port = re.match(r"http://<GetAtt:[^>]+\.DNSName>:(\d+)/", url)
                    assert lb_port, url
                    tier.need(gateway.id, "vpc-host", int(lb_port[1]))
                continue
            match = re.match(r"http://([^.]+)\.[^:]+:(\d+)/", base)
            assert match, base
            service, port = services[match[1]], int(match[2])
            for backend in _service_pods(tier, service):
                for gateway in gateway_pods:
                    tier.need(gateway.id, backend.id, _target_port(backend, service, port))
    # Routers: the picker's endpoint selector and target port; the picker watches pods (API server).
    for router in (p for p in tier.pods if any(c["name"] == "epp" for c in p.containers)):
        (epp,) = [c for c in router.containers if c["name"] == "epp"]
        args = epp["args"]
        selector = dict(pair.split("=", 1) for pair in args[args.index("--endpoint-selector") + 1].split(","))
        port = int(args[args.index("--endpoint-target-ports") + 1])
        for pod in tier.pods:
            if all(pod.endpoint.labels.get(k) == v for k, v in selector.items()):
                tier.need(router.id, pod.id, port)
        tier.need(router.id, "vpc-host", 443)
        for ip in KUBERNETES_SERVICE_IPS:
            tier.need(router.id, f"kubernetes-service-{ip}", 443)
    # Prefill/decode: a decode pod's sidecar posts to prefill pods; NIXL runs between the roles.
    for decode in (p for p in tier.pods if any(c["name"] == "routing-sidecar" for c in p.init_containers)):
        group_label = decode.endpoint.labels["gpufarm.io/pd-group"]
        for prefill in tier.pods:
            labels = prefill.endpoint.labels
            if labels.get("gpufarm.io/pd-group") == group_label and labels.get("llm-d.ai/role") == "prefill":
                tier.need(decode.id, prefill.id, ANY)
                tier.need(prefill.id, decode.id, ANY)
    # LeaderWorkerSet groups: every member reaches every other on every port (Ray, NCCL, Gloo).
    for pod in tier.pods:
        for other in tier.pods:
            if pod.group is not None and pod.group == other.group and pod.id != other.id:
                tier.need(pod.id, other.id, ANY)
    # The managed scraper: vLLM pods on their (non-init) container port named http.
    if resources(template, "AWS::APS::Scraper"):
        for pod in tier.pods:
            if pod.endpoint.labels.get("app.kubernetes.io/name") != "vllm":
                continue
            for container in pod.containers:
                for port in container.get("ports", []):
                    if port.get("name") == "http":
                        tier.need("vpc-host", pod.id, port["containerPort"])
    # The managed scraper's `gateway` job: gateway pods on their container port named metrics.
    for scraper in resources(template, "AWS::APS::Scraper").values():
        blob = yaml.safe_load(scraper["Properties"]["ScrapeConfiguration"]["ConfigurationBlob"])
        if not any(job["job_name"] == "gateway" for job in blob["scrape_configs"]):
            continue
        for pod in tier.pods:
            if pod.endpoint.labels.get("app.kubernetes.io/component") != "gateway":
                continue
            for container in pod.containers:
                for port in container.get("ports", []):
                    if port.get("name") == "metrics":
                        tier.need("vpc-host", pod.id, port["containerPort"])
    # DNS, Pod Identity, Secrets Manager, Bedrock, Hugging Face.
    associated = {
        (flatten(a["Properties"]["Namespace"]), flatten(a["Properties"]["ServiceAccount"]))
        for a in resources(template, "AWS::EKS::PodIdentityAssociation").values()
    }
    for pod in tier.pods:
        for protocol in ("UDP", "TCP"):
            tier.need(pod.id, "kube-dns", 53, protocol)
            if tier.auto_mode:  # CoreDNS is no pod there: port 53 anywhere
                tier.needs_anywhere.setdefault(pod.id, set()).add((53, protocol))
        if (ns, pod.service_account) in associated:
            tier.need(pod.id, "pod-identity-agent", 80)
        if any("secretsmanager" in " ".join(c.get("args", [])) for c in pod.init_containers):
            _https_to(tier, pod, "secretsmanager", endpoints)
        if pod.workload == "gateway":
            # Bedrock through the VPC's endpoint, which serves the tier's region only.
            region = meta["environment"]["region"]
            regions = {e["litellm_params"].get("aws_region_name", region) for e in bedrock_entries}
            _https_to(tier, pod, "bedrock-runtime" if regions <= {region} else "bedrock-elsewhere", endpoints)
        weights = _weights_source(tier, pod)
        if weights is not None and not weights.startswith("/models/"):
            tier.needs_anywhere.setdefault(pod.id, set()).add((443, "TCP"))


def _weights_source(tier: Tier, pod: Pod) -> str | None:
    """What the engine loads: its first argument, or the value of SGLang's `--model-path` (LWS
    workers load what their leader names)."""
    if pod.group is not None:
        (leader,) = [
            p for p in tier.pods if p.group == pod.group and p.endpoint.labels[LWS_WORKER_INDEX] == "0"
        ]
        pod = leader
    for container in pod.containers:
        if container["name"] in ENGINES and container.get("args"):
            args = container["args"]
            flag = ENGINES[container["name"]].model_flag
            source: str = args[args.index(flag) + 1] if flag else args[0]
            return source
    return None


def _probe_ports(tier: Tier) -> list[int]:
    ports = set(EXTRA_PORTS)
    for pod in tier.pods:
        ports.update(pod.endpoint.ports.values())
    return sorted(ports)


def is_needed(tier: Tier, source: str, destination: str, port: int, protocol: str) -> bool:
    """Whether the tier needs this flow, by the flows derived from its template.

    A flow from or to an endpoint outside the namespace with an address in the VPC (another
    namespace's pod, kube-system's) is needed when the same flow from or to a VPC address is:
    ipBlocks see addresses, and the VPC CNI gives pods VPC addresses.
    """
    network = ipaddress.ip_network(tier.vpc_cidr)
    aliases = {
        name: "vpc-host"
        for name, endpoint in tier.specials.items()
        if ipaddress.ip_address(endpoint.ip) in network
    }
    for src in {source, aliases.get(source, source)}:
        for dst in {destination, aliases.get(destination, destination)}:
            if (src, dst, port, protocol) in tier.needed or (src, dst, ANY, protocol) in tier.needed:
                return True
    namespace_pods = {p.id for p in tier.pods}
    if destination not in namespace_pods and (port, protocol) in tier.needs_anywhere.get(source, set()):
        return True
    # Endpoints gpufarm does not fence send and receive freely among themselves.
    unfenced = {
        "vpc-host",
        "internet",
        "pod-identity-agent",
        *(f"kubernetes-service-{ip}" for ip in KUBERNETES_SERVICE_IPS),
        "kube-dns",
        "kube-system-pod",
        "foreign-pod",
        "foreign-pod-off-vpc",
    }
    return source in unfenced and destination in unfenced


def check_closed_world(tier: Tier, *, only: Callable[[str, str], bool] | None = None) -> list[str]:
    """Every (source, destination, port, protocol) whose evaluation differs from the tier's needs."""
    problems = []
    ids = tier.all_ids()
    ports = _probe_ports(tier)
    for source in ids:
        for destination in ids:
            if source == destination or (only is not None and not only(source, destination)):
                continue
            for protocol in ("TCP", "UDP"):
                for port in ports if protocol == "TCP" else [53, 4789]:
                    got = tier.allowed(source, destination, port, protocol)
                    want = is_needed(tier, source, destination, port, protocol)
                    if got != want:
                        verdict = "allowed but not needed" if got else "needed but denied"
                        problems.append(f"{source} -> {destination} {protocol}/{port}: {verdict}")
    return problems


def unselected_pods(tier: Tier) -> list[str]:
    """Pods of the tier that no NetworkPolicy isolates for ingress or for egress."""
    return [
        p.id
        for p in tier.pods
        if not (
            is_isolated(tier.policies, p.endpoint, "Ingress")
            and is_isolated(tier.policies, p.endpoint, "Egress")
        )
    ]


def dump(tier: Tier) -> str:
    """The derived needs, for a failing assertion's message."""
    return json.dumps(sorted(map(list, tier.needed)), indent=1)
