"""FallbackGateway: the gateway manifest, its Pod Identity role scoped to the Bedrock ARNs, the guardrail."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Template

from gpufarm.config import TierConfig, load_preset
from gpufarm.config.model import GuardrailConfig
from gpufarm.constructs import enable_compliance_checks
from gpufarm.constructs.gateway import (
    CONTENT_FILTERS,
    INVOKE_ACTIONS,
    FallbackGateway,
    bedrock_grants,
    guardrail_properties,
)
from gpufarm.k8s import gateway as k8s_gateway
from tests.conftest import cdk_context, cfn_lint_errors, nag_violations
from tests.constructs.helpers import (
    CLUSTER_NAME,
    KUBERNETES_RESOURCE,
    REGION,
    imported_cluster,
    kinds,
    logical_id,
    manifest_of,
    resources,
)
from tests.unit.factories import make_production, make_tier, model_override, production_document

ACCOUNT = "123456789012"
NS = "gpufarm"
PROFILE = f"arn:aws:bedrock:us-east-1:{ACCOUNT}:inference-profile"
SECRET_NAME = "gpufarm/production/gateway-master-key"

LLAMA_FM = "meta.llama3-3-70b-instruct-v1:0"
CLAUDE_FM = "anthropic.claude-sonnet-4-20250514-v1:0"
NOVA_FM = "amazon.nova-pro-v1:0"
MISTRAL_FM = "mistral.mistral-large-2402-v1:0"


def _every_kind_of_target() -> TierConfig:
    """Production with a plain model ID (called elsewhere), a `us.`, a `global.` and an `eu.` profile."""
    models = production_document()["models"]
    parked = {**models[1], "autoscaling": {"min_replicas": 0, "max_replicas": 1, "queue_target": 10}}
    extra = [
        {
            **parked,
            "name": "mistral",
            "served_model_name": "mistral",
            "bedrock": {"model_id": MISTRAL_FM, "region": "us-west-2"},
        },
        {
            **parked,
            "name": "claude",
            "served_model_name": "claude",
            "bedrock": {"model_id": f"global.{CLAUDE_FM}"},
        },
        {
            **parked,
            "name": "nova",
            "served_model_name": "nova",
            "bedrock": {
                "model_id": f"eu.{NOVA_FM}",
                "region": "eu-west-1",
                "destination_regions": ["eu-west-1", "eu-central-1"],
            },
        },
    ]
    return make_production(
        {
            "models": models + extra,
            "fallback": {"guardrail": {"enabled": True, "content_filter_strength": "MEDIUM"}},
        }
    )


FULL = _every_kind_of_target()
POC = load_preset("poc")


def _stack(name: str, *, outdir: str | None = None, nag: bool = False) -> cdk.Stack:
    app = cdk.App(context=cdk_context(), outdir=outdir)
    if nag:
        enable_compliance_checks(app)
    return cdk.Stack(app, name, env=cdk.Environment(region=REGION, account=ACCOUNT))


@dataclass(frozen=True)
class Built:
    stack: cdk.Stack
    gateway: FallbackGateway
    after: eks.KubernetesManifest
    template: Template

    def resource(self, construct: Any) -> dict[str, Any]:
        found = self.template.to_json()["Resources"][logical_id(construct)]
        return dict(found)

    def statements(self) -> list[dict[str, Any]]:
        [policy] = resources(self.template, "AWS::IAM::Policy").values()
        found: list[dict[str, Any]] = policy["Properties"]["PolicyDocument"]["Statement"]
        return found

    def statement(self, sid: str) -> dict[str, Any]:
        [found] = [s for s in self.statements() if s.get("Sid") == sid]
        return found


def _build(tier: TierConfig, name: str) -> Built:
    stack = _stack(name)
    cluster = imported_cluster(stack)
    namespace_doc = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    after = eks.KubernetesManifest(
        stack, "Namespace", cluster=cluster, manifest=[namespace_doc], overwrite=True
    )
    gateway = FallbackGateway(stack, "Gateway", cluster=cluster, tier=tier, namespace=NS, after=after)
    return Built(stack, gateway, after, Template.from_stack(stack))


@pytest.fixture(scope="module")
def full() -> Built:
    """Every kind of Bedrock target, a guardrail and a master key."""
    return _build(FULL, "FullGateway")


@pytest.fixture(scope="module")
def poc() -> Built:
    """The poc preset: one model with a `us.` profile, no master key, no guardrail."""
    return _build(POC, "PocGateway")


def _guardrail_identifier(built: Built) -> dict[str, Any]:
    """The `bedrock:GuardrailIdentifier` value: the guardrail's ARN and its published version."""
    assert built.gateway.guardrail is not None and built.gateway.guardrail_version is not None
    return {
        "Fn::Join": [
            "",
            [
                {"Fn::GetAtt": [logical_id(built.gateway.guardrail), "GuardrailArn"]},
                ":",
                {"Fn::GetAtt": [logical_id(built.gateway.guardrail_version), "Version"]},
            ],
        ]
    }


# --------------------------------------------------------------------------- Bedrock ARNs


def test_plain_model_id_grants_its_foundation_model_in_its_call_region() -> None:
    tier = make_tier(model_override(bedrock={"model_id": MISTRAL_FM, "region": "us-west-2"}))
    grants = bedrock_grants(tier.models, region=REGION, partition="aws", account=ACCOUNT)
    assert grants.direct == (f"arn:aws:bedrock:us-west-2::foundation-model/{MISTRAL_FM}",)
    assert (grants.through_profiles, grants.profiles) == ((), ())


def test_us_profile_grants_the_profile_and_its_model_in_each_us_region() -> None:
    tier = make_tier(model_override(bedrock={"model_id": f"us.{LLAMA_FM}"}))
    grants = bedrock_grants(tier.models, region=REGION, partition="aws", account=ACCOUNT)
    assert grants.direct == grants.profiles == (f"{PROFILE}/us.{LLAMA_FM}",)
    assert grants.through_profiles == tuple(
        f"arn:aws:bedrock:{r}::foundation-model/{LLAMA_FM}"
        for r in ("us-east-1", "us-east-2", "us-west-1", "us-west-2")
    )


def test_global_profile_grants_the_profile_its_model_here_and_the_region_less_model() -> None:
    tier = make_tier(model_override(bedrock={"model_id": f"global.{CLAUDE_FM}"}))
    grants = bedrock_grants(tier.models, region=REGION, partition="aws", account=ACCOUNT)
    assert grants.direct == (f"{PROFILE}/global.{CLAUDE_FM}",)
    assert grants.through_profiles == (
        f"arn:aws:bedrock:us-east-1::foundation-model/{CLAUDE_FM}",
        f"arn:aws:bedrock:::foundation-model/{CLAUDE_FM}",
    )


def test_profile_called_elsewhere_grants_its_listed_destination_regions() -> None:
    grants = bedrock_grants(FULL.models, region=REGION, partition="aws-cn", account=ACCOUNT)
    assert f"arn:aws-cn:bedrock:eu-west-1:{ACCOUNT}:inference-profile/eu.{NOVA_FM}" in grants.profiles
    assert [a for a in grants.through_profiles if NOVA_FM in a] == [
        f"arn:aws-cn:bedrock:eu-west-1::foundation-model/{NOVA_FM}",
        f"arn:aws-cn:bedrock:eu-central-1::foundation-model/{NOVA_FM}",
    ]


def test_a_model_that_opts_out_grants_nothing() -> None:
    tier = make_tier(model_override(bedrock="none"))
    grants = bedrock_grants(tier.models, region=REGION, partition="aws", account=ACCOUNT)
    assert grants.all == ()


# --------------------------------------------------------------------------- the role


def test_role_is_trusted_by_eks_pod_identity(poc: Built) -> None:
    role = poc.resource(poc.gateway.role)["Properties"]
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {
            "Action": ["sts:AssumeRole", "sts:TagSession"],
            "Effect": "Allow",
            "Principal": {"Service": "pods.eks.amazonaws.com"},
        }
    ]
    assert "ManagedPolicyArns" not in role


def test_pod_identity_binds_the_gateway_service_account(poc: Built) -> None:
    assert poc.resource(poc.gateway.pod_identity)["Properties"] == {
        "ClusterName": CLUSTER_NAME,
        "Namespace": NS,
        "ServiceAccount": "gateway",
        "RoleArn": {"Fn::GetAtt": [logical_id(poc.gateway.role), "Arn"]},
    }


def test_poc_role_may_invoke_exactly_its_profile_and_the_model_behind_it(poc: Built) -> None:
    profile = f"{PROFILE}/us.meta.llama3-1-8b-instruct-v1:0"
    assert poc.statements() == [
        {
            "Sid": "InvokeModels",
            "Action": list(INVOKE_ACTIONS),
            "Effect": "Allow",
            "Resource": profile,
        },
        {
            "Sid": "InvokeModelsThroughProfiles",
            "Action": list(INVOKE_ACTIONS),
            "Effect": "Allow",
            "Resource": sorted(
                f"arn:aws:bedrock:{r}::foundation-model/meta.llama3-1-8b-instruct-v1:0"
                for r in ("us-east-1", "us-east-2", "us-west-1", "us-west-2")
            ),
            "Condition": {"ArnEquals": {"bedrock:InferenceProfileArn": [profile]}},
        },
    ]


def test_full_role_invokes_models_and_profiles_only_with_the_guardrail(full: Built) -> None:
    assert full.statement("InvokeModels") == {
        "Sid": "InvokeModels",
        "Action": list(INVOKE_ACTIONS),
        "Effect": "Allow",
        # The template lists resources sorted (@aws-cdk/aws-iam:minimizePolicies).
        "Resource": sorted(
            [
                f"{PROFILE}/us.{LLAMA_FM}",
                f"arn:aws:bedrock:us-west-2::foundation-model/{MISTRAL_FM}",
                f"{PROFILE}/global.{CLAUDE_FM}",
                f"arn:aws:bedrock:eu-west-1:{ACCOUNT}:inference-profile/eu.{NOVA_FM}",
            ]
        ),
        "Condition": {"StringEquals": {"bedrock:GuardrailIdentifier": _guardrail_identifier(full)}},
    }


def test_full_role_reaches_profile_models_only_through_the_profiles(full: Built) -> None:
    us_regions = ("us-east-1", "us-east-2", "us-west-1", "us-west-2")
    assert full.statement("InvokeModelsThroughProfiles") == {
        "Sid": "InvokeModelsThroughProfiles",
        "Action": list(INVOKE_ACTIONS),
        "Effect": "Allow",
        "Resource": sorted(
            [
                *(f"arn:aws:bedrock:{r}::foundation-model/{LLAMA_FM}" for r in us_regions),
                f"arn:aws:bedrock:us-east-1::foundation-model/{CLAUDE_FM}",
                f"arn:aws:bedrock:::foundation-model/{CLAUDE_FM}",
                f"arn:aws:bedrock:eu-west-1::foundation-model/{NOVA_FM}",
                f"arn:aws:bedrock:eu-central-1::foundation-model/{NOVA_FM}",
            ]
        ),
        "Condition": {
            "StringEquals": {"bedrock:GuardrailIdentifier": _guardrail_identifier(full)},
            "ArnEquals": {
                "bedrock:InferenceProfileArn": [
                    f"{PROFILE}/us.{LLAMA_FM}",
                    f"{PROFILE}/global.{CLAUDE_FM}",
                    f"arn:aws:bedrock:eu-west-1:{ACCOUNT}:inference-profile/eu.{NOVA_FM}",
                ]
            },
        },
    }


def test_full_role_may_apply_the_guardrail_and_read_the_master_key(full: Built) -> None:
    assert full.gateway.guardrail is not None
    assert full.statement("ApplyGuardrail") == {
        "Sid": "ApplyGuardrail",
        "Action": "bedrock:ApplyGuardrail",
        "Effect": "Allow",
        "Resource": {"Fn::GetAtt": [logical_id(full.gateway.guardrail), "GuardrailArn"]},
    }
    assert full.statement("ReadMasterKey") == {
        "Sid": "ReadMasterKey",
        "Action": "secretsmanager:GetSecretValue",
        "Effect": "Allow",
        "Resource": f"arn:aws:secretsmanager:us-east-1:{ACCOUNT}:secret:{SECRET_NAME}-??????",
    }


def test_role_allows_nothing_else(full: Built) -> None:
    assert [s["Sid"] for s in full.statements()] == [
        "InvokeModels",
        "InvokeModelsThroughProfiles",
        "ApplyGuardrail",
        "ReadMasterKey",
    ]
    assert all(s["Effect"] == "Allow" for s in full.statements())


def test_bedrock_resources_lists_every_granted_arn(full: Built) -> None:
    grants = bedrock_grants(FULL.models, region=REGION, partition="aws", account=ACCOUNT)
    assert full.gateway.bedrock_resources == list(grants.all)
    assert len(full.gateway.bedrock_resources) == 4 + 8


# --------------------------------------------------------------------------- guardrail


def test_no_guardrail_unless_enabled(poc: Built) -> None:
    assert poc.gateway.guardrail is None and poc.gateway.guardrail_version is None
    poc.template.resource_count_is("AWS::Bedrock::Guardrail", 0)
    poc.template.resource_count_is("AWS::Bedrock::GuardrailVersion", 0)


def test_guardrail_filters_content_both_ways_and_prompt_attacks_on_input(full: Built) -> None:
    assert full.gateway.guardrail is not None
    props = full.resource(full.gateway.guardrail)["Properties"]
    message = FULL.fallback.guardrail.blocked_message
    assert (props["BlockedInputMessaging"], props["BlockedOutputsMessaging"]) == (message, message)
    assert props["ContentPolicyConfig"] == {
        "FiltersConfig": [
            *(
                {"Type": kind, "InputStrength": "MEDIUM", "OutputStrength": "MEDIUM"}
                for kind in CONTENT_FILTERS
            ),
            {"Type": "PROMPT_ATTACK", "InputStrength": "HIGH", "OutputStrength": "NONE"},
        ]
    }
    assert len(props["Name"]) <= 50


def test_prompt_attack_filter_is_left_out_at_none() -> None:
    props = guardrail_properties(GuardrailConfig(enabled=True, prompt_attack_strength="NONE"), name="g")
    assert [f["type"] for f in props["content_policy_config"]["filtersConfig"]] == list(CONTENT_FILTERS)


def test_guardrail_version_is_published_from_the_guardrail(full: Built) -> None:
    assert full.gateway.guardrail is not None and full.gateway.guardrail_version is not None
    props = full.resource(full.gateway.guardrail_version)["Properties"]
    assert props["GuardrailIdentifier"] == {"Fn::GetAtt": [logical_id(full.gateway.guardrail), "GuardrailId"]}


def test_guardrail_settings_change_publishes_a_new_version() -> None:
    # The description is create-only: a new description replaces the version resource.
    def description(strength: str) -> str:
        tier = FULL.model_copy(
            update={
                "fallback": FULL.fallback.model_copy(
                    update={"guardrail": GuardrailConfig(enabled=True, content_filter_strength=strength)}  # type: ignore[arg-type]
                )
            }
        )
        built = _build(tier, f"Guardrail{strength}")
        assert built.gateway.guardrail_version is not None
        return str(built.resource(built.gateway.guardrail_version)["Properties"]["Description"])

    assert description("LOW") != description("HIGH")


def test_bedrock_calls_carry_the_guardrail_read_from_the_pod_environment(full: Built) -> None:
    assert full.gateway.guardrail is not None and full.gateway.guardrail_version is not None
    params = next(e for e in full.gateway.config["model_list"] if e["model_name"] == "claude@bedrock")[
        "litellm_params"
    ]
    assert params["guardrailConfig"] == {
        "guardrailIdentifier": "os.environ/GPUFARM_GUARDRAIL_IDENTIFIER",
        "guardrailVersion": "os.environ/GPUFARM_GUARDRAIL_VERSION",
    }
    [deployment] = [d for d in manifest_of(full.template, full.gateway.manifest) if d["kind"] == "Deployment"]
    env = {e["name"]: e["value"] for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["GPUFARM_GUARDRAIL_IDENTIFIER"] == {
        "Fn::GetAtt": [logical_id(full.gateway.guardrail), "GuardrailArn"]
    }
    assert env["GPUFARM_GUARDRAIL_VERSION"] == {
        "Fn::GetAtt": [logical_id(full.gateway.guardrail_version), "Version"]
    }


# --------------------------------------------------------------------------- the manifest


def test_one_manifest_holds_every_gateway_object(poc: Built) -> None:
    poc.template.resource_count_is(KUBERNETES_RESOURCE, 2)  # the gateway's and the test's namespace
    docs = manifest_of(poc.template, poc.gateway.manifest)
    assert kinds(docs) == ["ServiceAccount", "ConfigMap", "Deployment", "PodDisruptionBudget", "Service"]


def test_manifest_is_rendered_from_the_tier(poc: Built) -> None:
    config = k8s_gateway.litellm_config(POC)
    assert poc.gateway.config == config
    assert manifest_of(poc.template, poc.gateway.manifest) == k8s_gateway.gateway_manifests(
        POC, config=config, namespace=NS, region=REGION, master_key_secret_arn=None
    )


def test_master_key_secret_reaches_the_init_container(full: Built) -> None:
    [deployment] = [d for d in manifest_of(full.template, full.gateway.manifest) if d["kind"] == "Deployment"]
    [init] = deployment["spec"]["template"]["spec"]["initContainers"]
    assert {"name": "SECRET_ID", "value": SECRET_NAME} in init["env"]


def test_manifest_waits_for_the_namespace_and_the_pod_identity(full: Built) -> None:
    depends_on = set(full.resource(full.gateway.manifest)["DependsOn"])
    [policy_id] = resources(full.template, "AWS::IAM::Policy")
    assert {
        logical_id(full.after),
        logical_id(full.gateway.pod_identity),
        logical_id(full.gateway.role),
        policy_id,
    } <= depends_on


def test_attributes(full: Built) -> None:
    gateway = full.gateway
    assert (gateway.service_name, gateway.port, gateway.namespace) == ("gateway", 4000, NS)
    assert gateway.manifest.node.id == "Resource"


# --------------------------------------------------------------------------- invalid input


def _with_fallback(tier: TierConfig, **fields: Any) -> TierConfig:
    """A copy of `tier` with fallback fields changed, bypassing the tier validator."""
    return tier.model_copy(update={"fallback": tier.fallback.model_copy(update=fields)})


@pytest.mark.parametrize(
    ("tier", "namespace", "message"),
    [
        (
            _with_fallback(POC, enabled=False),
            NS,
            "'tier.fallback.enabled' must be true to build the gateway (set it, or leave the gateway "
            "out), got False",
        ),
        (
            POC,
            "Gateway_NS",
            "'namespace' must be a Kubernetes namespace name (a DNS label), got 'Gateway_NS'",
        ),
        (
            make_tier(
                {"environment": {"region": "us-west-2", "availability_zones": ["us-west-2a", "us-west-2b"]}},
            ),
            NS,
            "'tier.environment.region' must be the stack's region ('us-east-1'): the gateway calls Bedrock "
            "from the cluster's region, got 'us-west-2'",
        ),
        (
            _with_fallback(
                make_tier(model_override(bedrock="none")), guardrail=GuardrailConfig(enabled=True)
            ),
            NS,
            "'tier.fallback.guardrail.enabled' needs a model with a Bedrock fallback (the guardrail applies "
            "on that path only), got true with none",
        ),
        (_with_fallback(POC, replicas=1), NS, "'tier.fallback.replicas' must be at least 2, got 1"),
        (
            POC.model_copy(
                update={
                    "models": [
                        POC.models[0],
                        POC.models[0].model_copy(update={"name": "copy", "served_model_name": "qwen3-8b"}),
                    ]
                }
            ),
            NS,
            "models must have distinct client-facing names (served_model_name, else name), none ending "
            "in '@bedrock', got 'qwen3-8b' more than once",
        ),
    ],
    ids=[
        "fallback-disabled",
        "bad-namespace",
        "other-region",
        "guardrail-without-target",
        "one-replica",
        "same-name",
    ],
)
def test_invalid_input_is_rejected_with_an_exact_message(
    tier: TierConfig, namespace: str, message: str
) -> None:
    stack = _stack("Invalid")
    with pytest.raises(ValueError) as excinfo:
        FallbackGateway(stack, "Gateway", cluster=imported_cluster(stack), tier=tier, namespace=namespace)
    assert str(excinfo.value) == message


# --------------------------------------------------------------------------- compliance gates


@pytest.fixture(scope="module")
def compliant_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stack holding only the full gateway (existing cluster), synthesized with cdk-nag."""
    outdir = tmp_path_factory.mktemp("gateway-nag")
    stack = _stack("GatewayNag", outdir=str(outdir), nag=True)
    FallbackGateway(stack, "Gateway", cluster=imported_cluster(stack), tier=FULL, namespace=NS)
    stack.node.root.synth()  # type: ignore[attr-defined]  # raises on an unacknowledged finding
    return outdir / "GatewayNag.template.json"


def test_gateway_passes_cdk_nag(compliant_template: Path) -> None:
    # The fixture's synth raises on an unacknowledged finding; the report must be empty too.
    assert nag_violations(compliant_template.parent, annotations=False) == {}


def test_gateway_template_has_no_cfn_lint_errors(compliant_template: Path) -> None:
    assert cfn_lint_errors(compliant_template) == []
