"""KV-cache-aware routing: one endpoint picker + Envoy router per model that enables it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from gpufarm.config.model import ModelConfig, ServingConfig
from gpufarm.constructs._util import construct_id
from gpufarm.constructs.cluster import through_image_cache
from gpufarm.k8s import kv_cache_routing as k8s_kv_cache_routing


class KvCacheRouting(Construct):
    """Puts a KV-cache-aware router in front of each model in `models`.

    Each model gets one manifest (child `Model<Name>`) with its router
    (:func:`gpufarm.k8s.kv_cache_routing.router_manifests`): the Gateway API Inference Extension's
    endpoint picker v1.5.0 in standalone mode with an Envoy sidecar, scoring the model's pods on
    queue depth, KV-cache use and prefix-cache hits, and the ClusterIP Service
    `vllm-<model>-router`. The load balancer's TargetGroupBinding and the gateway must use
    :meth:`service_of` and :attr:`port` for these models instead of the model's own Service.
    Models with `pipeline_parallel` of 2 or more are routed to their LeaderWorkerSet leaders only.
    A model with `prefill_decode` gets llm-d's endpoint picker instead (v0.9.0, same layout),
    choosing a decode pod and, for long uncached prompts, a prefill pod
    (:func:`gpufarm.k8s.prefill_decode.plugins_config`).

    No IAM role: the picker talks to the Kubernetes API only (read access to pods in
    `serving.namespace`, through a Role). The manifests are applied after `after` (the construct
    that creates `serving.namespace`). `node_selector` places the routers (default: any node;
    they need no GPU). `model_manifests` (default: none) gives the manifest that serves each model
    by name; its router is applied after it. Defaults: one router replica per model, 500m CPU and
    1 GiB for the picker.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: eks.ICluster,
        serving: ServingConfig,
        models: Sequence[ModelConfig],
        after: Construct | None = None,
        model_manifests: Mapping[str, Construct] | None = None,
        node_selector: Mapping[str, str] | None = None,
        epp_cpu: str = "500m",
        epp_memory: str = "1Gi",
    ) -> None:
        super().__init__(scope, id)
        _validate(models)
        self.namespace = serving.namespace
        self.port = k8s_kv_cache_routing.ROUTER_PORT
        """The routers' Service port (`http`) that a TargetGroupBinding names."""
        self.manifests: dict[str, eks.KubernetesManifest] = {}
        for model in models:
            docs = k8s_kv_cache_routing.router_manifests(
                model_name=model.name,
                namespace=serving.namespace,
                target_port=serving.port,
                leaders_only=model.pipeline_parallel > 1,
                node_selector=dict(node_selector) if node_selector else None,
                epp_cpu=epp_cpu,
                epp_memory=epp_memory,
                prefill_decode=model.prefill_decode,
            )
            manifest = eks.KubernetesManifest(
                self,
                f"Model{construct_id(model.name)}",
                cluster=cluster,
                manifest=through_image_cache(cluster, *docs),
                overwrite=True,
            )
            if after is not None:
                manifest.node.add_dependency(after)
            if model_manifests is not None and model.name in model_manifests:
                manifest.node.add_dependency(model_manifests[model.name])
            self.manifests[model.name] = manifest

    def fronting(self, manifests: Mapping[str, Construct]) -> dict[str, Construct]:
        """`manifests` (by model name) with each routed model's router in place of the model's own
        manifest: what must be applied before a model answers through its Service."""
        return {name: self.manifests.get(name, manifest) for name, manifest in manifests.items()}

    def service_of(self, model_name: str) -> str:
        """Name of the router Service in front of a routed model (`vllm-<model>-router`)."""
        if model_name not in self.manifests:
            raise ValueError(
                f"'model_name' must be one of the routed models ({', '.join(self.manifests)}), "
                f"got {model_name!r}"
            )
        return k8s_kv_cache_routing.router_name(model_name)


def _validate(models: Sequence[ModelConfig]) -> None:
    """Check the construct's inputs; raises ValueError on the first problem."""
    if not models:
        raise ValueError(
            "'models' must hold at least one model with KV-cache-aware or prefill/decode routing, got none"
        )
    counts = Counter(m.name for m in models)
    duplicates = sorted(name for name, n in counts.items() if n > 1)
    if duplicates:
        raise ValueError(
            f"'models' must have unique names, got {duplicates[0]!r} {counts[duplicates[0]]} times"
        )
