"""vLLM serving: one Deployment and Service per model, applied through the cluster's kubectl provider."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from gpufarm.config.model import ModelConfig, RunaiStreamerConfig, ServingConfig, TargetOptimizerConfig
from gpufarm.constructs._util import acknowledge, construct_id, pod_identity_role
from gpufarm.constructs.cluster import through_image_cache
from gpufarm.constructs.feature_flags import check_feature_flags
from gpufarm.constructs.model_store import grant_model_read
from gpufarm.k8s import serving as k8s_serving
from gpufarm.k8s import storage as k8s_storage
from gpufarm.k8s.labels import workload_name
from gpufarm.k8s.security import PodSecurityLevel, level_for, psa_version


def secret_arn(scope: Construct, ref: str) -> str:
    """The ARN pattern IAM needs for a secret given by name or ARN.

    A name matches any version suffix Secrets Manager appended (`<name>-??????`).
    """
    if ref.startswith("arn:"):
        return ref
    return cdk.Stack.of(scope).format_arn(
        service="secretsmanager",
        resource="secret",
        resource_name=f"{ref}-??????",
        arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
    )


class VllmServing(Construct):
    """Serves models with vLLM on an existing cluster.

    Renders a namespace and, per model, a Deployment + ClusterIP Service (and a read-only S3
    volume for `s3://` weights). Models reading a gated Hugging Face repo get a service account
    whose Pod Identity role may read exactly the named secrets. A model without `node_pool`
    runs on `default_pool`. A model with `shares` gets a Deployment + Service
    `vllm-<model>-<share>` per share instead (each with the share's placement, replicas and
    GPUs; :meth:`service_of` with the share names its Service), in the model's one manifest.

    `target_optimizer` (enabled) adds the ALB target control agent to every pod and the agent's
    data port to every Service (pass the same config to :class:`InferenceAlb`). `fsx_claim` with
    `fsx_import_path`: `s3://` weights are read from that FSx for Lustre claim (which must exist
    in the namespace), each model at its folder under the import path, and no Mountpoint volume
    is rendered. `node_selectors` maps a model (`<model>/<share>` for a share) to the node
    labels its pods select (default: the Karpenter/Auto Mode NodePool of its pool);
    `node_affinities` (same keys) places the models of the on-premises class instead. Defaults: no
    agent, Mountpoint volumes.

    A model with `prefill_decode` gets its decode pods as the model's Deployment (vLLM behind the
    disaggregation sidecar) and a second Deployment `vllm-<model>-prefill` in the same manifest,
    on the same nodes (:func:`gpufarm.k8s.serving.vllm_deployment`); put the router of
    :class:`gpufarm.constructs.kv_cache_routing.KvCacheRouting` in front of it. `efa_devices` maps such a
    model to the EFA interfaces (decode pod, prefill pod) its pods request when it moves the KV
    cache over EFA (default: none, TCP).

    Rollouts behind a TargetGroupBinding: `readiness_gates` labels the namespace so the AWS Load
    Balancer Controller gates each new pod's readiness on its target health; where the
    controller cannot (EKS Auto Mode), `min_ready_seconds` holds each rollout step instead
    (:func:`gpufarm.k8s.binding.min_ready_seconds`). Defaults: no label, 0.

    Pod Security Admission: the namespace enforces `pod_security` at the rules of
    `kubernetes_version` and audits and warns at `restricted`
    (:func:`gpufarm.k8s.security.namespace_labels`). Pass the level every pod of the namespace
    passes, those of other constructs included (:func:`gpufarm.k8s.security.level_for`); default:
    derived from this construct's pods alone (`privileged` when `efa_devices` requests EFA
    interfaces, else `restricted`), at the rules of the `latest` release.

    `streamer` (the tier's `runai-streamer` model store): vLLM reads each `s3://` model's weights
    from S3 with the Run:ai Model Streamer, as the service account whose Pod Identity role may
    list and get exactly those prefixes (:func:`gpufarm.constructs.model_store.grant_model_read`);
    no Mountpoint volume, no CSI driver. Not with `fsx_claim`. Default: volumes.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: eks.ICluster,
        config: ServingConfig,
        models: Sequence[ModelConfig],
        default_pool: str,
        region: str,
        termination_grace_seconds: int = 300,
        target_optimizer: TargetOptimizerConfig | None = None,
        fsx_claim: str | None = None,
        fsx_import_path: str | None = None,
        node_selectors: Mapping[str, Mapping[str, str]] | None = None,
        node_affinities: Mapping[str, Mapping[str, Any]] | None = None,
        efa_devices: Mapping[str, tuple[int, int]] | None = None,
        readiness_gates: bool = False,
        min_ready_seconds: int = 0,
        pod_security: PodSecurityLevel | None = None,
        kubernetes_version: str | None = None,
        streamer: RunaiStreamerConfig | None = None,
    ) -> None:
        super().__init__(scope, id)
        check_feature_flags(self)
        if streamer is not None and fsx_claim is not None:
            raise ValueError("'streamer' and 'fsx_claim' are two model stores: give one, got both")
        sub_paths = _fsx_sub_paths(models, fsx_claim, fsx_import_path)
        self.config = config
        self.namespace = config.namespace
        if pod_security is None:
            pod_security = level_for(efa_engines=any(any(d) for d in (efa_devices or {}).values()))
        self.pod_security = pod_security
        namespace_docs = [
            k8s_serving.namespace(
                config.namespace,
                readiness_gates=readiness_gates,
                pod_security=pod_security,
                pod_security_version=psa_version(kubernetes_version),
            )
        ]
        secrets = sorted({m.hf_token_secret for m in models if m.hf_token_secret})
        streamed = [m.weights for m in models if m.is_s3] if streamer is not None else []
        self.role: iam.Role | None = None
        if secrets or streamed:
            namespace_docs.append(k8s_serving.service_account(config.namespace))
            jobs = [
                ("stream model weights from S3", streamed),
                ("read the Hugging Face token secrets", secrets),
            ]
            self.role = role = pod_identity_role(
                self, "PodRole", description="vLLM pods: " + " and ".join(j for j, on in jobs if on)
            )
            if secrets:
                role.add_to_policy(
                    iam.PolicyStatement(
                        actions=["secretsmanager:GetSecretValue"],
                        resources=[secret_arn(self, s) for s in secrets],
                    )
                )
            if streamed:
                grant_model_read(role, streamed, reader="The Run:ai Model Streamer in the vLLM pods")
            acknowledge(
                role,
                "NIST.800.53.R5-IAMNoInlinePolicy",
                "The vLLM pods' Pod Identity role may only read the named Hugging Face token secrets "
                "and the streamed models' prefixes; the grant is inline so that it belongs to this "
                "role alone: it cannot be attached to another principal and is deleted with the role.",
            )
            eks.CfnPodIdentityAssociation(
                self,
                "PodIdentity",
                cluster_name=cluster.cluster_name,
                namespace=config.namespace,
                service_account=k8s_serving.SERVICE_ACCOUNT,
                role_arn=role.role_arn,
            )
        self.namespace_manifest = eks.KubernetesManifest(
            self, "Namespace", cluster=cluster, manifest=namespace_docs, overwrite=True
        )
        self.model_manifests: dict[str, eks.KubernetesManifest] = {}
        for model in models:
            docs = []
            on_fsx = model.name in sub_paths
            if model.is_s3 and not on_fsx and streamer is None:
                docs += k8s_storage.s3_weights_volume(
                    model_name=model.name, namespace=config.namespace, s3_uri=model.weights, region=region
                )
            for share, part in model.parts():
                key = model.name if share is None else f"{model.name}/{share}"
                deployment = functools.partial(
                    k8s_serving.vllm_deployment,
                    part,
                    config,
                    pool_name=part.node_pool or default_pool,
                    region=region,
                    termination_grace_seconds=termination_grace_seconds,
                    fsx_claim=fsx_claim if on_fsx else None,
                    fsx_sub_path=sub_paths.get(model.name),
                    node_selector=(node_selectors or {}).get(key),
                    node_affinity=(node_affinities or {}).get(key),
                    share=share,
                    min_ready_seconds=min_ready_seconds,
                    streamer=streamer,
                )
                if model.prefill_decode is None:
                    docs.append(deployment(target_optimizer=target_optimizer))
                else:
                    decode_efa, prefill_efa = (efa_devices or {}).get(model.name, (0, 0))
                    docs.append(deployment(prefill_decode_role="decode", efa_devices=decode_efa))
                    docs.append(deployment(prefill_decode_role="prefill", efa_devices=prefill_efa))
                docs.append(
                    k8s_serving.vllm_service(part, config, target_optimizer=target_optimizer, share=share)
                )
            manifest = eks.KubernetesManifest(
                self,
                f"Model{construct_id(model.name)}",
                cluster=cluster,
                manifest=through_image_cache(cluster, *docs),
                overwrite=True,
            )
            manifest.node.add_dependency(self.namespace_manifest)
            self.model_manifests[model.name] = manifest

    def service_of(self, model_name: str, share: str | None = None) -> str:
        """Name of the Service in front of a model's pods (or of one share's)."""
        return workload_name(model_name, share)


def _fsx_sub_paths(
    models: Sequence[ModelConfig], fsx_claim: str | None, fsx_import_path: str | None
) -> dict[str, str]:
    """Model name -> folder in the FSx claim, for each `s3://` model ({} without FSx)."""
    if (fsx_claim is None) != (fsx_import_path is None):
        given, missing = ("fsx_claim", "fsx_import_path") if fsx_claim else ("fsx_import_path", "fsx_claim")
        raise ValueError(
            f"'{missing}' is required with '{given}' (the claim holds the import path's objects)"
        )
    if fsx_import_path is None:
        return {}
    paths: dict[str, str] = {}
    for model in models:
        if not model.is_s3:
            continue
        try:
            paths[model.name] = k8s_storage.fsx_sub_path(fsx_import_path, model.weights)
        except ValueError:
            raise ValueError(
                f"model {model.name!r} must have its weights under 'fsx_import_path' "
                f"({fsx_import_path!r}), got {model.weights!r}"
            ) from None
    return paths
