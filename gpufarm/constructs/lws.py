"""Multi-node serving: the LeaderWorkerSet controller, and a LeaderWorkerSet + leader Service per model."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence, Set
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from gpufarm.config.model import ModelConfig, ServingConfig, TargetOptimizerConfig
from gpufarm.constructs._util import construct_id, pod_identity_role
from gpufarm.constructs.cluster import helm_chart_on, through_image_cache
from gpufarm.constructs.crd_chart import CrdChart, crd_chart_version
from gpufarm.constructs.serving import _fsx_sub_paths, secret_arn
from gpufarm.k8s import lws as k8s_lws
from gpufarm.k8s import storage as k8s_storage

CHART_TIMEOUT = cdk.Duration.minutes(10)
"""How long Helm waits for the controller pods (and their webhook) to be ready."""

CRD_CHART = "lws-crds"
"""The chart gpufarm ships with the LeaderWorkerSet CRD of :data:`gpufarm.k8s.lws.LWS_CHART_VERSION`."""


class LeaderWorkerSetController(Construct):
    """The LeaderWorkerSet controller (Helm chart `lws` from `oci://registry.k8s.io/lws/charts/lws`), pinned.

    Installs the `leaderworkerset.x-k8s.io` CRD as its own Helm release first (:attr:`crds`, a
    :class:`~gpufarm.constructs.crd_chart.CrdChart` of the chart `lws-crds` shipped with gpufarm,
    so a version bump upgrades the schema), then the controller and its webhooks in `lws-system`
    (created), two replicas with the image pinned to the chart's release
    (:func:`gpufarm.k8s.lws.lws_controller_values`); Helm waits up to 10 minutes for them.
    Default `chart_version`: :data:`gpufarm.k8s.lws.LWS_CHART_VERSION`, the only one whose CRD
    gpufarm ships. The control plane must reach the webhook on the controller pods (TCP 9443),
    as for any admission webhook.
    `image_digests` (default: none) supplies digests the image table lacks (a tier's
    `images.digests`).
    On an :class:`~gpufarm.constructs.InferenceCluster`'s cluster the chart waits for its system
    nodes (:meth:`InferenceCluster.add_helm_chart`).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: eks.ICluster,
        chart_version: str = k8s_lws.LWS_CHART_VERSION,
        image_digests: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(scope, id)
        shipped = crd_chart_version(CRD_CHART)
        if chart_version != shipped:
            raise ValueError(
                f"'chart_version' must be {shipped!r}, the LWS release whose CRD gpufarm ships "
                f"(gpufarm/charts/{CRD_CHART}), got {chart_version!r}"
            )
        self.chart_version = chart_version
        self.namespace = k8s_lws.LWS_NAMESPACE
        self.values = k8s_lws.lws_controller_values(chart_version, image_digests)
        self.crds = CrdChart(self, "Crds", cluster=cluster, chart=CRD_CHART, namespace=self.namespace)
        self.chart = helm_chart_on(
            cluster,
            self,
            "Resource",
            chart=k8s_lws.LWS_CHART,
            repository=k8s_lws.LWS_REPOSITORY,
            version=chart_version,
            release=k8s_lws.LWS_CHART,
            namespace=self.namespace,
            create_namespace=True,
            values=self.values,
            wait=True,
            timeout=CHART_TIMEOUT,
        )
        # The chart's own crds/ then finds the CRD in place; Helm skips an existing CRD.
        self.chart.node.add_dependency(self.crds.chart)


class MultiNodeServing(Construct):
    """Serves models larger than one node: a LeaderWorkerSet and a leader-only Service per model.

    Each model in `models` (every one with `pipeline_parallel` of 2 or more) gets one manifest
    with its LeaderWorkerSet (:func:`gpufarm.k8s.lws.vllm_leader_worker_set`) and the Service
    `vllm-<model>-leader` in front of its leaders (:meth:`service_of`), plus a read-only
    Mountpoint volume for `s3://` weights not read from FSx. `node_selectors` gives each model's
    node labels (for a capacity class: `{"gpufarm.io/capacity-class": "<class>"}`).

    The manifests are applied after the controller's chart (its CRD and webhook) and after
    `after` (the construct that creates `serving.namespace`, and the FSx claim when used).
    `controller` defaults to a :class:`LeaderWorkerSetController` created here (child
    `Controller`); pass one to share it. `fsx_claim` with `fsx_import_path`: `s3://` weights are
    read from that FSx for Lustre claim, each model at its folder under the import path.
    Models in `efa_models` request `efa_devices[name]` EFA interfaces per pod (default 1).
    Models with `hf_token_secret` run as the service account `vllm-multinode`, whose Pod Identity
    role may read exactly their secrets (through a customer-managed policy: no inline policy).
    `target_optimizer` (enabled) puts the target control agent on the leaders and its data port
    on the Services. Defaults: no FSx, no EFA, no agent, a 300-second drain per leader.

    The Service `vllm-<model>` is the controller's headless Service (every pod, workers
    included): the gateway and TargetGroupBindings must use :meth:`service_of`.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: eks.ICluster,
        serving: ServingConfig,
        models: Sequence[ModelConfig],
        node_selectors: Mapping[str, Mapping[str, str]],
        region: str,
        after: Construct | None = None,
        fsx_claim: str | None = None,
        fsx_import_path: str | None = None,
        efa_models: Set[str] = frozenset(),
        efa_devices: Mapping[str, int] | None = None,
        termination_grace_seconds: int = 300,
        target_optimizer: TargetOptimizerConfig | None = None,
        controller: LeaderWorkerSetController | None = None,
        image_digests: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(scope, id)
        efa_devices = dict(efa_devices or {})
        _validate(models, node_selectors, efa_models, efa_devices)
        sub_paths = _fsx_sub_paths(models, fsx_claim, fsx_import_path)
        self.serving = serving
        self.namespace = serving.namespace
        self.controller = controller or LeaderWorkerSetController(
            self, "Controller", cluster=cluster, image_digests=image_digests
        )

        self.role: iam.Role | None = None
        self.policy: iam.ManagedPolicy | None = None
        self.pod_identity: eks.CfnPodIdentityAssociation | None = None
        self.service_account_manifest: eks.KubernetesManifest | None = None
        secrets = sorted({m.hf_token_secret for m in models if m.hf_token_secret})
        if secrets:
            self.role = pod_identity_role(
                self, "PodRole", description="Multi-node vLLM pods: read the Hugging Face token secrets"
            )
            # A customer-managed policy rather than an inline one: NIST 800-53 R5 allows no inline policies.
            self.policy = iam.ManagedPolicy(
                self,
                "PodPolicy",
                description="Multi-node vLLM pods: read the Hugging Face token secrets of their models",
                statements=[
                    iam.PolicyStatement(
                        actions=["secretsmanager:GetSecretValue"],
                        resources=[secret_arn(self, s) for s in secrets],
                    )
                ],
                roles=[self.role],
            )
            self.pod_identity = eks.CfnPodIdentityAssociation(
                self,
                "PodIdentity",
                cluster_name=cluster.cluster_name,
                namespace=serving.namespace,
                service_account=k8s_lws.SERVICE_ACCOUNT,
                role_arn=self.role.role_arn,
            )
            self.service_account_manifest = eks.KubernetesManifest(
                self,
                "ServiceAccount",
                cluster=cluster,
                manifest=[k8s_lws.multinode_service_account(serving.namespace)],
                overwrite=True,
            )
            if after is not None:
                self.service_account_manifest.node.add_dependency(after)

        self.leader_worker_sets: dict[str, dict[str, Any]] = {}
        self.model_manifests: dict[str, eks.KubernetesManifest] = {}
        for model in models:
            on_fsx = model.name in sub_paths
            docs = []
            if model.is_s3 and not on_fsx:
                docs += k8s_storage.s3_weights_volume(
                    model_name=model.name, namespace=serving.namespace, s3_uri=model.weights, region=region
                )
            lws = k8s_lws.vllm_leader_worker_set(
                model,
                serving,
                node_selector=node_selectors[model.name],
                region=region,
                termination_grace_seconds=termination_grace_seconds,
                fsx_claim=fsx_claim if on_fsx else None,
                fsx_sub_path=sub_paths.get(model.name),
                efa=model.name in efa_models,
                efa_devices=efa_devices.get(model.name, 1),
                target_optimizer=target_optimizer,
            )
            self.leader_worker_sets[model.name] = lws
            docs.append(lws)
            docs.append(k8s_lws.vllm_multinode_service(model, serving, target_optimizer=target_optimizer))
            manifest = eks.KubernetesManifest(
                self,
                f"Model{construct_id(model.name)}",
                cluster=cluster,
                manifest=through_image_cache(cluster, *docs),
                overwrite=True,
            )
            manifest.node.add_dependency(self.controller.chart)
            if after is not None:
                manifest.node.add_dependency(after)
            if self.service_account_manifest is not None and self.pod_identity and self.policy:
                # The token init container needs its credentials when the first pod starts.
                manifest.node.add_dependency(self.service_account_manifest, self.pod_identity, self.policy)
            self.model_manifests[model.name] = manifest

    def service_of(self, model_name: str) -> str:
        """Name of the Service in front of a multi-node model's leaders (`vllm-<model>-leader`)."""
        if model_name not in self.model_manifests:
            raise ValueError(
                f"'model_name' must be one of the multi-node models ({', '.join(self.model_manifests)}), "
                f"got {model_name!r}"
            )
        return k8s_lws.leader_service_name(model_name)


def _validate(
    models: Sequence[ModelConfig],
    node_selectors: Mapping[str, Mapping[str, str]],
    efa_models: Set[str],
    efa_devices: Mapping[str, int],
) -> None:
    """Check the construct's inputs; raises ValueError on the first problem."""
    if not models:
        raise ValueError("'models' must hold at least one multi-node model, got none")
    counts = Counter(m.name for m in models)
    duplicates = sorted(name for name, n in counts.items() if n > 1)
    if duplicates:
        raise ValueError(
            f"'models' must have unique names, got {duplicates[0]!r} {counts[duplicates[0]]} times"
        )
    names = [m.name for m in models]
    missing = [n for n in names if n not in node_selectors]
    if missing:
        raise ValueError(f"'node_selectors' must give node labels for every model, missing {missing}")
    given_names: tuple[tuple[str, Set[str] | Mapping[str, object]], ...] = (
        ("node_selectors", node_selectors),
        ("efa_models", efa_models),
        ("efa_devices", efa_devices),
    )
    for label, given in given_names:
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise ValueError(f"'{label}' must name only the given models ({', '.join(names)}), got {unknown}")
    without_efa = sorted(set(efa_devices) - set(efa_models))
    if without_efa:
        raise ValueError(f"'efa_devices' must name only models in 'efa_models', got {without_efa}")
