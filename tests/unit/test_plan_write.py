"""`gpufarm plan --write` is safe by default: what it refuses, what it fixes and says, and config.json
shapes read from Hugging Face configs (dense, mixture of experts, latent attention)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufarm.config import ModelStoreKind, load_preset
from gpufarm.sizing import ModelSpec, Plan, load_throughput_table, make_plan
from gpufarm.sizing.hf_config import HfConfigError, count_parameters, read_hf_config
from gpufarm.sizing.plan import Demand
from gpufarm.sizing.tierfile import UnsafeTierError, WriteOptions, plan_tier, write_tier_file
from tests.unit.test_sizing import PRICES

CONFIGS = Path(__file__).resolve().parents[1] / "cli" / "hf_configs"
SHIPPED = load_throughput_table()


def _plan(params_b: float, *, precision: str = "bf16", users: int = 40, **shape: int) -> Plan:
    model = ModelSpec(params_b=params_b, precision=precision, **shape)  # type: ignore[arg-type]
    wanted = Demand(concurrency=users, context_length=8192, input_tokens=2048, output_tokens=512,
                    target_tokens_per_s=20)  # fmt: skip
    return make_plan(model, wanted, table=SHIPPED, prices=PRICES)


POC = _plan(8.0, layers=32, kv_heads=8, head_dim=128)
PRODUCTION = _plan(70.0, precision="fp8", users=100, layers=80, kv_heads=8, head_dim=128)
ENTERPRISE = _plan(671.0, precision="fp8", users=64, layers=61, kv_heads=1, head_dim=576)

SAFE = {"hf_token_secret": "gpufarm/hf-token", "bedrock_model_id": "us.meta.llama3-1-8b-instruct-v1:0"}


def options(**changes: object) -> WriteOptions:
    fields: dict[str, object] = {"name": "llama", "weights": "meta-llama/Llama-3.1-8B-Instruct", **SAFE}
    fields.update(changes)
    return WriteOptions(**fields)  # type: ignore[arg-type]


def test_the_plans_land_on_the_three_tiers() -> None:
    assert (POC.tier, PRODUCTION.tier, ENTERPRISE.tier) == ("poc", "production", "enterprise")


# --------------------------------------------------------------------------- refused


@pytest.mark.parametrize(
    ("plan", "changes", "problem"),
    [
        (
            POC,
            {"hf_token_secret": None},
            "--hf-token-secret: the weights 'meta-llama/Llama-3.1-8B-Instruct' come from Hugging Face and "
            "gpufarm cannot tell offline whether the repo is gated; give --hf-token-secret SECRET (a Secrets "
            "Manager secret holding a token that can read it), or --public-weights if the repo is not gated",
        ),
        (
            POC,
            {"weights": "s3://my-models/llama/"},
            "--hf-token-secret: applies to Hugging Face weights only, got 's3://my-models/llama/'",
        ),
        (POC, {"public_weights": True}, "--public-weights: give it or --hf-token-secret, not both"),
        (POC, {"no_fallback": True}, "--no-fallback: give it or --bedrock-model-id, not both"),
        (
            POC,
            {"bedrock_model_id": None},
            "--bedrock-model-id: the preset poc falls back to Bedrock when the model is busy or down "
            "(us.meta.llama3-1-8b-instruct-v1:0); give --bedrock-model-id ID, or --no-fallback to write "
            "`bedrock: none`",
        ),
        (
            ENTERPRISE,
            {"bedrock_model_id": None, "no_fallback": True},
            "--no-fallback: the preset enterprise applies a Bedrock guardrail (fallback.guardrail.enabled), "
            "which needs a model with a Bedrock fallback; give --bedrock-model-id ID",
        ),
        (
            POC,
            {"tier_name": "production"},
            "--tier-name: the tier would be named 'production' and deploy over the preset's stack "
            "gpufarm-production; give --tier-name NAME",
        ),
        (
            POC,
            {"name": "poc"},
            "--name: the tier would be named 'poc' and deploy over the preset's stack gpufarm-poc; give "
            "--tier-name NAME",
        ),
        (
            POC,
            {"max_replicas": 3},
            "--max-replicas: the preset poc runs fixed replicas (no KEDA autoscaling); leave it out",
        ),
        (
            PRODUCTION,
            {"max_replicas": 0},
            f"--max-replicas: must be at least the planned replicas ({PRODUCTION.chosen.replicas}), got 0",
        ),
    ],
    ids=[
        "hf-no-token",
        "token-with-s3",
        "public-and-token",
        "fallback-twice",
        "fallback-dropped",
        "guardrail-without-fallback",
        "tier-name-is-a-preset",
        "model-name-is-a-preset",
        "max-replicas-without-keda",
        "max-replicas-below-plan",
    ],
)
def test_an_unsafe_plan_is_refused_naming_the_option(
    plan: Plan, changes: dict[str, object], problem: str
) -> None:
    with pytest.raises(UnsafeTierError) as refused:
        plan_tier(plan, options(**changes))
    assert [str(p) for p in refused.value.problems] == [problem]


def test_every_problem_is_listed_at_once(tmp_path: Path) -> None:
    with pytest.raises(UnsafeTierError) as refused:
        write_tier_file(POC, tmp_path / "t.yaml", options(hf_token_secret=None, bedrock_model_id=None))
    assert [p.option for p in refused.value.problems] == ["--hf-token-secret", "--bedrock-model-id"]
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- fixed, and said


def changes_of(plan: Plan, **opts: object) -> dict[str, str]:
    return {c.path: f"{c.value} ({c.why})" for c in plan_tier(plan, options(**opts)).changes}


def test_the_tier_is_named_after_the_model_not_the_preset() -> None:
    tier_plan = plan_tier(POC, options())
    assert tier_plan.document["name"] == "llama"
    assert changes_of(POC)["name"] == (
        "llama (stack gpufarm-llama; the preset's name would deploy over gpufarm-poc)"
    )


def test_tier_name_sets_the_stack() -> None:
    assert plan_tier(POC, options(tier_name="team-a")).document["name"] == "team-a"


def test_the_pool_leaves_room_for_a_rolling_update() -> None:
    layout, replicas = POC.chosen.layout, POC.chosen.replicas
    pool = plan_tier(POC, options()).document["node_pools"][0]
    # A Deployment starts one replica more before it stops one (maxSurge 1).
    assert pool["gpu_limit"] == layout.instances_for(replicas + 1) * layout.gpus_per_instance
    assert pool["gpu_limit"] > POC.chosen.instances * layout.gpus_per_instance


def test_a_pool_named_after_another_gpu_is_renamed() -> None:
    gpu = POC.chosen.layout.gpu
    assert gpu != "l40s"  # the poc preset's pool is named l40s
    document = plan_tier(POC, options()).document
    assert document["node_pools"][0]["name"] == document["models"][0]["node_pool"] == gpu
    assert changes_of(POC)["node_pools[0].name"] == f"{gpu} (was l40s; the planned GPUs are {gpu})"


def test_enterprise_names_follow_the_planned_gpu() -> None:
    gpu = ENTERPRISE.chosen.layout.gpu
    document = plan_tier(ENTERPRISE, options(weights="s3://my-models/ds/v3/", hf_token_secret=None)).document
    assert (document["node_groups"][0]["name"], document["node_pools"][0]["name"]) == (
        f"{gpu}-base" if gpu != "h100" else "h100-base",
        f"{gpu}-burst" if gpu != "h100" else "h100-burst",
    )
    assert document["models"][0]["capacity_class"] == document["node_groups"][0]["capacity_class"] == gpu


def test_a_huggingface_model_on_fsx_does_not_import_the_example_bucket() -> None:
    document = plan_tier(PRODUCTION, options()).document
    assert document["model_store"] == {"kind": ModelStoreKind.S3_MOUNTPOINT.value}
    assert changes_of(PRODUCTION)["model_store.kind"] == (
        "s3-mountpoint (the weights come from Hugging Face; the preset's FSx file system imports "
        "s3://gpufarm-production-models/ (the preset's example model bucket), and Mountpoint builds "
        "nothing without S3 weights)"
    )


def test_autoscaling_is_kept_on_a_preset_that_scales() -> None:
    replicas = PRODUCTION.chosen.replicas
    model = plan_tier(PRODUCTION, options(max_replicas=replicas + 3)).document["models"][0]
    assert model["autoscaling"] == {"min_replicas": replicas, "max_replicas": replicas + 3}


def test_no_fallback_is_written_and_said() -> None:
    tier_plan = plan_tier(POC, options(bedrock_model_id=None, no_fallback=True))
    assert tier_plan.document["models"][0]["bedrock"] == "none"
    assert changes_of(POC, bedrock_model_id=None, no_fallback=True)["models[0].bedrock"] == (
        "none (--no-fallback: no Bedrock answers for it)"
    )


def test_what_was_inherited_dropped_and_to_review(tmp_path: Path) -> None:
    written = write_tier_file(PRODUCTION, tmp_path / "t.yaml", options())
    assert written.plan.inherited == [
        key for key in load_preset("production").model_dump(exclude_unset=True)
        if key not in {"name", "description", "models", "node_pools", "node_groups", "model_store"}
    ]  # fmt: skip
    assert written.plan.dropped == ["models llama-3-3-70b, qwen3-32b-batch", "node pool batch"]
    assert written.review[0].startswith("ingress.certificate_arn = 'arn:aws:acm:us-east-1:111122223333:")
    assert written.review[-1] == (
        "environment.region = 'us-east-1', availability_zones = us-east-1a, us-east-1b, us-east-1c: "
        "where the stack deploys"
    )
    text = (tmp_path / "t.yaml").read_text()
    assert "# Review before a deploy:\n#   - ingress.certificate_arn = " in text


# --------------------------------------------------------------------------- config.json


def test_a_dense_config_gives_its_shape() -> None:
    shape = read_hf_config(str(CONFIGS / "llama-3.1-8b-instruct.json"))
    # Llama-3.1-8B: 32 layers, 8 KV heads of 4096 / 32 = 128; 8.03B parameters as Meta publishes.
    assert (shape.layers, shape.kv_heads, shape.head_dim, shape.precision, shape.params_b) == (
        32, 8, 128, "bf16", 8.03,
    )  # fmt: skip
    assert (shape.moe, shape.active_params_b) == (False, None)


def test_a_mixture_of_experts_config_counts_all_and_active_parameters() -> None:
    shape = read_hf_config(str(CONFIGS / "mixtral-8x7b-instruct.json"))
    # Mistral publishes 46.7B parameters, 12.9B active (2 of 8 experts per token).
    assert (shape.moe, shape.experts, shape.experts_per_token, shape.params_b, shape.active_params_b) == (
        True, 8, 2, 46.7, 12.88,
    )  # fmt: skip


def test_deepseek_v3_reads_fp8_and_its_latent_cache() -> None:
    shape = read_hf_config(str(CONFIGS / "deepseek-v3.json"))
    # 671B total, about 37B active (the published figures); the MLA cache holds kv_lora_rank +
    # qk_rope_head_dim = 512 + 64 values per token and layer.
    assert (shape.precision, shape.kv_heads, shape.head_dim, round(shape.params_b or 0)) == (
        "fp8",
        1,
        576,
        671,
    )
    assert 36 < (shape.active_params_b or 0) < 38
    assert shape.latent_attention


def test_parameters_need_the_keys_that_size_the_matrices() -> None:
    config = json.loads((CONFIGS / "llama-3.1-8b-instruct.json").read_text())
    del config["vocab_size"]
    assert count_parameters(config) is None


def test_a_file_that_is_not_json_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text("{")
    with pytest.raises(HfConfigError) as refused:
        read_hf_config(str(bad))
    assert str(refused.value) == (
        f"--hf-config {str(bad)!r}: not JSON (Expecting property name enclosed in double quotes at line 1)"
    )


def test_a_folder_is_read_through_its_config_json(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text((CONFIGS / "mixtral-8x7b-instruct.json").read_text())
    assert read_hf_config(str(tmp_path)).experts == 8


# --------------------------------------------------------------------------- pods fit their nodes


def test_every_planned_pod_fits_its_instance_by_the_rules_cost_places_pods_by() -> None:
    from gpufarm.estimate.allocation import pods_per_node
    from gpufarm.sizing.plan import candidate_layouts, pod_resources

    unfit = []
    for layout in candidate_layouts(PRICES):
        cpu, memory = pod_resources(layout)
        wanted = layout.replicas_per_instance
        if pods_per_node(layout.instance_type, layout.tensor_parallel, cpu, memory) < wanted:
            unfit.append((layout.describe(), cpu, memory))
    # The pods of every replica an instance holds are scheduled on it: a whole g7e.24xlarge used
    # to give its one pod 95 of the 95.19 vCPUs the node allocates, with the sidecars' 0.5 on top.
    assert unfit == []
