"""The fallback gateway: LiteLLM in front of the vLLM models, Amazon Bedrock when they cannot answer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_bedrock as bedrock
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from gpufarm.config.bedrock import (
    GLOBAL_PREFIX,
    CapacityKind,
    call_region,
    capacity_arn,
    destination_regions,
    foundation_model_id,
    profile_prefix,
    routing_model_id,
)
from gpufarm.config.model import GuardrailConfig, ModelConfig, TierConfig
from gpufarm.config.names import is_dns_1123_label
from gpufarm.constructs._util import acknowledge, pod_identity_role
from gpufarm.constructs.cluster import manifest_on
from gpufarm.constructs.serving import secret_arn
from gpufarm.core.endpoints import GatewayRoute, gateway_route
from gpufarm.k8s import gateway as k8s_gateway

INVOKE_ACTIONS = ("bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream")
"""What the gateway calls Bedrock with (they also authorize Converse and ConverseStream)."""
CONTENT_FILTERS = ("HATE", "INSULTS", "SEXUAL", "VIOLENCE", "MISCONDUCT")
"""Guardrail content filters applied at the configured strength to prompts and answers."""


@dataclass(frozen=True)
class BedrockGrants:
    """The Bedrock resources the gateway may invoke, as ARNs.

    `direct`: foundation models named by plain model IDs (in their call region) and the
    inference profiles; invoked as they are. `through_profiles`: the foundation models a
    profile routes to (each destination region; the call region and the region-less ARN for
    `global.` profiles); invoked only through one of `profiles`.
    """

    direct: tuple[str, ...]
    through_profiles: tuple[str, ...]
    profiles: tuple[str, ...]

    @property
    def all(self) -> tuple[str, ...]:
        """Every ARN of either kind, each once, in order."""
        return tuple(dict.fromkeys(self.direct + self.through_profiles))


def bedrock_grants(
    models: Sequence[ModelConfig], *, region: str, partition: str, account: str
) -> BedrockGrants:
    """The ARNs of the Bedrock models and profiles that `models` fall back to.

    A plain model ID grants `arn:<partition>:bedrock:<call region>::foundation-model/<id>`. A
    geographic profile (`us.`, `eu.`...) grants the profile
    (`arn:<partition>:bedrock:<call region>:<account>:inference-profile/<profile id>`) and its
    foundation model in every destination region. A `global.` profile grants the profile, its
    foundation model in the call region and the region-less foundation-model ARN that Bedrock
    authorizes global routing against. `region` is the stack's region (the default call region).

    A provisioned-model ARN grants that ARN alone: the Provisioned Throughput serves the request
    itself, in its own region. An application-inference-profile ARN grants the profile and, as
    the Bedrock user guide requires for any inference profile named in a policy ("you must also
    specify the foundation model in each Region associated with it",
    https://docs.aws.amazon.com/bedrock/latest/userguide/inference-profiles-prereq.html), the
    foundation model of its `base_model_id` in each region that model or system profile routes
    to, allowed only through the profile.
    """
    direct: dict[str, None] = {}
    through: dict[str, None] = {}
    profiles: dict[str, None] = {}
    for model in models:
        target = model.bedrock_target
        if target is None:
            continue
        calling = call_region(target, region)
        arn = capacity_arn(target.model_id)
        routed = routing_model_id(target)
        fm_id = foundation_model_id(routed)
        prefix = profile_prefix(routed)
        if arn is not None:
            direct[target.model_id] = None
            if arn.kind is CapacityKind.PROVISIONED_MODEL:
                continue
            profiles[target.model_id] = None
        elif prefix is None:
            direct[f"arn:{partition}:bedrock:{calling}::foundation-model/{fm_id}"] = None
            continue
        else:
            profile = f"arn:{partition}:bedrock:{calling}:{account}:inference-profile/{target.model_id}"
            direct[profile] = None
            profiles[profile] = None
        regions = [calling, ""] if prefix == GLOBAL_PREFIX else destination_regions(target, region)
        for destination in regions:
            through[f"arn:{partition}:bedrock:{destination}::foundation-model/{fm_id}"] = None
    only_through = tuple(resource for resource in through if resource not in direct)
    return BedrockGrants(direct=tuple(direct), through_profiles=only_through, profiles=tuple(profiles))


def guardrail_properties(config: GuardrailConfig, *, name: str) -> dict[str, Any]:
    """`AWS::Bedrock::Guardrail` properties (CDK keyword arguments) for a guardrail config.

    Hate, insults, sexual, violence and misconduct filters at `content_filter_strength` on
    prompts and answers; the prompt-attack filter at `prompt_attack_strength` on prompts only
    (Bedrock evaluates it on input; its output strength must be NONE), left out when NONE.
    """
    strength = config.content_filter_strength
    filters: list[dict[str, Any]] = [
        {"type": kind, "inputStrength": strength, "outputStrength": strength} for kind in CONTENT_FILTERS
    ]
    if config.prompt_attack_strength != "NONE":
        filters.append(
            {
                "type": "PROMPT_ATTACK",
                "inputStrength": config.prompt_attack_strength,
                "outputStrength": "NONE",
            }
        )
    return {
        "name": name,
        "description": "gpufarm: content filters on requests the fallback gateway sends to Amazon Bedrock",
        "blocked_input_messaging": config.blocked_message,
        "blocked_outputs_messaging": config.blocked_message,
        "content_policy_config": {"filtersConfig": filters},
    }


def bedrock_guardrail(
    scope: Construct, config: GuardrailConfig
) -> tuple[bedrock.CfnGuardrail, bedrock.CfnGuardrailVersion]:
    """The gateway's guardrail (`Guardrail`) and a published version of it (`GuardrailVersion`) in `scope`.

    A version is immutable and its description can only be set at creation: a description that
    names the guardrail settings publishes a new version whenever they change, and the gateways
    roll onto it (their environment names the version).
    """
    guardrail = bedrock.CfnGuardrail(
        scope,
        "Guardrail",
        **guardrail_properties(
            config, name=cdk.Names.unique_resource_name(scope, max_length=50, separator="-")
        ),
    )
    settings = k8s_gateway.config_hash(guardrail_properties(config, name=""))[:16]
    version = bedrock.CfnGuardrailVersion(
        scope,
        "GuardrailVersion",
        guardrail_identifier=guardrail.attr_guardrail_id,
        description=f"gpufarm fallback guardrail, settings {settings}",
    )
    return guardrail, version


def grant_gateway(
    scope: Construct,
    role: iam.Role,
    tier: TierConfig,
    *,
    grants: BedrockGrants,
    guardrail: bedrock.CfnGuardrail | None,
    version: bedrock.CfnGuardrailVersion | None,
) -> None:
    """What the gateway's role may do, whichever compute runs it (pods or instances).

    `bedrock:InvokeModel` and `bedrock:InvokeModelWithResponseStream` on `grants.direct`, and on
    `grants.through_profiles` only through one of `grants.profiles`; with a guardrail, every
    invocation must carry it (`bedrock:GuardrailIdentifier`) and `bedrock:ApplyGuardrail` on it;
    `secretsmanager:GetSecretValue` on `tier.fallback.master_key_secret` when set.
    """
    conditions: dict[str, Any] = {}
    if guardrail is not None and version is not None:
        conditions["StringEquals"] = {
            "bedrock:GuardrailIdentifier": f"{guardrail.attr_guardrail_arn}:{version.attr_version}"
        }
    if grants.direct:
        role.add_to_policy(
            iam.PolicyStatement(
                sid="InvokeModels",
                actions=list(INVOKE_ACTIONS),
                resources=list(grants.direct),
                conditions=conditions or None,
            )
        )
    if grants.through_profiles:
        role.add_to_policy(
            iam.PolicyStatement(
                sid="InvokeModelsThroughProfiles",
                actions=list(INVOKE_ACTIONS),
                resources=list(grants.through_profiles),
                conditions={
                    **conditions,
                    "ArnEquals": {"bedrock:InferenceProfileArn": list(grants.profiles)},
                },
            )
        )
    if guardrail is not None:
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ApplyGuardrail",
                actions=["bedrock:ApplyGuardrail"],
                resources=[guardrail.attr_guardrail_arn],
            )
        )
    secret = tier.fallback.master_key_secret
    if secret:
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadMasterKey",
                actions=["secretsmanager:GetSecretValue"],
                resources=[secret_arn(scope, secret)],
            )
        )


class FallbackGateway(Construct):
    """LiteLLM gateway in front of a tier's vLLM models, falling back to Amazon Bedrock.

    Creates a Pod Identity role for the service account `gateway` in `namespace`, allowed only
    `bedrock:InvokeModel` and `bedrock:InvokeModelWithResponseStream` on the models and
    inference profiles the tier's models name (:func:`bedrock_grants`; foundation models behind
    a profile only through that profile), `secretsmanager:GetSecretValue` on
    `tier.fallback.master_key_secret` when set, and, with `tier.fallback.guardrail.enabled`, an
    `AWS::Bedrock::Guardrail` with a published version that every Bedrock call must carry (the
    invoke permissions require it) and `bedrock:ApplyGuardrail` on it. One manifest applies the
    ServiceAccount, ConfigMap (the generated LiteLLM config), Deployment, PodDisruptionBudget and
    ClusterIP Service `gateway` (port `tier.fallback.port`), after `after` (e.g. the serving
    namespace) and after the role and association, so pods start with credentials.

    Clients send a model's `served_model_name` (else `name`); the response header
    ``x-litellm-model-id`` names the backend that answered (`vllm-<model>` or
    `bedrock-<model>`). A tier whose models name no Bedrock target still gets a gateway that
    fronts vLLM. Default `after`: none. On an :class:`~gpufarm.constructs.InferenceCluster`'s
    cluster the manifest waits for its system nodes (:meth:`InferenceCluster.add_manifest`).

    `load_balancer_url` (`http://<load balancer>:<gateway listener port>`, from
    :meth:`InferenceAlb.add_gateway_listener`: the ALB's name, or on an internet-facing ALB the
    internal NLB's in front of it), for a tier whose gateway calls the models through the load
    balancer (:func:`gpufarm.core.endpoints.gateway_route`: every ALB tier), makes each model's
    `api_base` its route there, set in the pods' environment, so the load balancer picks the
    replica (:attr:`route` is then `LOAD_BALANCER`). Without it, or for another tier, the gateway
    calls the models' Services. Pass it whenever
    `gateway_route(tier)` says `LOAD_BALANCER`, as the tier stack does:
    :class:`ServingNetworkPolicies` lets the gateway reach the load balancer's listener then,
    not the pods. Default: none.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: eks.ICluster,
        tier: TierConfig,
        namespace: str,
        after: Construct | None = None,
        load_balancer_url: str | None = None,
    ) -> None:
        super().__init__(scope, id)
        stack = cdk.Stack.of(self)
        _validate(tier, namespace, stack.region)
        load_balanced = load_balancer_url is not None and gateway_route(tier) is GatewayRoute.LOAD_BALANCER
        self.route = GatewayRoute.LOAD_BALANCER if load_balanced else GatewayRoute.SERVICE
        """How the gateway reaches the models' replicas."""
        fb = tier.fallback
        region = tier.environment.region
        self.tier = tier
        self.namespace = namespace
        self.service_name = k8s_gateway.NAME
        self.port = fb.port
        grants = bedrock_grants(tier.models, region=region, partition=stack.partition, account=stack.account)
        self.bedrock_resources: list[str] = list(grants.all)

        self.guardrail: bedrock.CfnGuardrail | None = None
        self.guardrail_version: bedrock.CfnGuardrailVersion | None = None
        guardrail_values: tuple[str, str] | None = None
        if fb.guardrail.enabled:
            self.guardrail, self.guardrail_version = bedrock_guardrail(self, fb.guardrail)
            guardrail_values = (self.guardrail.attr_guardrail_arn, self.guardrail_version.attr_version)

        self.role = pod_identity_role(
            self, "Role", description="Fallback gateway: invoke the configured Amazon Bedrock models"
        )
        grant_gateway(
            self, self.role, tier, grants=grants, guardrail=self.guardrail, version=self.guardrail_version
        )
        acknowledge(
            self.role,
            "NIST.800.53.R5-IAMNoInlinePolicy",
            "The gateway's Pod Identity role may invoke only the Bedrock models (and guardrail, and "
            "read only the master-key secret) that this tier's config names; the grant is inline so "
            "that it belongs to this role alone, changes with the models, and is deleted with it.",
        )
        self.pod_identity = eks.CfnPodIdentityAssociation(
            self,
            "PodIdentity",
            cluster_name=cluster.cluster_name,
            namespace=namespace,
            service_account=k8s_gateway.SERVICE_ACCOUNT,
            role_arn=self.role.role_arn,
        )

        self.config: dict[str, Any] = k8s_gateway.litellm_config(
            tier,
            guardrail=k8s_gateway.guardrail_env_refs() if guardrail_values else None,
            load_balanced=load_balanced,
        )
        self.manifest = manifest_on(
            cluster,
            self,
            "Resource",
            *k8s_gateway.gateway_manifests(
                tier,
                config=self.config,
                namespace=namespace,
                region=region,
                master_key_secret_arn=fb.master_key_secret,
                guardrail=guardrail_values,
                load_balancer_url=load_balancer_url if load_balanced else None,
            ),
            overwrite=True,
        )
        # The master-key init container reads the secret as the pod starts: role, policy and
        # association first.
        self.manifest.node.add_dependency(self.pod_identity, self.role)
        if after is not None:
            self.manifest.node.add_dependency(after)


def _validate(tier: TierConfig, namespace: str, stack_region: str) -> None:
    """Check the inputs; raises ValueError on the first problem."""
    fb = tier.fallback
    if not fb.enabled:
        raise ValueError(
            "'tier.fallback.enabled' must be true to build the gateway (set it, or leave the "
            "gateway out), got False"
        )
    if not is_dns_1123_label(namespace):
        raise ValueError(f"'namespace' must be a Kubernetes namespace name (a DNS label), got {namespace!r}")
    if not cdk.Token.is_unresolved(stack_region) and stack_region != tier.environment.region:
        raise ValueError(
            f"'tier.environment.region' must be the stack's region ({stack_region!r}): the gateway "
            f"calls Bedrock from the cluster's region, got {tier.environment.region!r}"
        )
    if fb.guardrail.enabled and not any(m.bedrock_target for m in tier.models):
        raise ValueError(
            "'tier.fallback.guardrail.enabled' needs a model with a Bedrock fallback (the guardrail "
            "applies on that path only), got true with none"
        )
    if fb.replicas < 2:
        raise ValueError(f"'tier.fallback.replicas' must be at least 2, got {fb.replicas}")
