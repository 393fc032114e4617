"""`gpufarm plan`: known cases, exit codes, --json, --throughput-table and --write (synthesized once)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from gpufarm.cli import _output
from gpufarm.cli.main import app
from gpufarm.config import load_tier_file
from gpufarm.config.checks.images import RULE_PREFIX_MAX, rule_prefixes

RUNNER = CliRunner()

LLAMA_70B = ["--layers", "80", "--kv-heads", "8", "--head-dim", "128"]
QWEN3_8B = ["--layers", "36", "--kv-heads", "8", "--head-dim", "128"]


@pytest.fixture(autouse=True)
def _whole_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Messages are compared whole: standard error does not wrap at a non-terminal's 80 columns."""
    monkeypatch.setattr(_output.errors, "soft_wrap", True)


def plan(*args: str) -> Result:
    """Run `gpufarm plan` with the arguments."""
    return RUNNER.invoke(app, ["plan", *args])


def plan_json(*args: str) -> dict[str, Any]:
    """The --json document of a successful plan."""
    result = plan(*args, "--json")
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def llama_70b(precision: str, *more: str) -> dict[str, Any]:
    """Llama-3-70B at `precision`, 8192 tokens of context, 50 users at 20 tokens/s."""
    return plan_json(
        "--params-b", "70", "--precision", precision, *LLAMA_70B, "--context-length", "8192",
        "--concurrency", "50", "--target-tokens-per-s", "20", *more,
    )  # fmt: skip


# --------------------------------------------------------------------------- known cases


def test_70b_at_fp16_needs_140_gb_of_weights() -> None:
    assert llama_70b("fp16")["memory"]["weights_gb"] == 140.0


def test_70b_at_fp16_needs_more_than_one_80_gb_gpu() -> None:
    layout = llama_70b("fp16")["layout"]
    assert layout["gpus_per_replica"] * layout["gpu_memory_gib"] > 140


def test_70b_at_int4_needs_35_gb_of_weights() -> None:
    assert llama_70b("int4")["memory"]["weights_gb"] == 35.0


def test_kv_cache_per_sequence_of_llama_3_70b_at_8192_tokens() -> None:
    memory = llama_70b("fp16")["memory"]
    # 2 x 80 x 8 x 128 x 2 bytes x 8192 tokens.
    assert (memory["kv_cache_bytes_per_sequence"], memory["kv_cache_gb_per_sequence"]) == (
        2_684_354_560,
        2.68,
    )


def test_70b_is_production() -> None:
    assert llama_70b("fp8")["tier"] == "production"


def test_replicas_cover_the_users() -> None:
    document = llama_70b("fp8")
    layout = document["layout"]
    assert document["replicas"] == -(-50 // layout["sequences_per_replica"])


def test_the_json_has_the_monthly_cost_per_capacity_type() -> None:
    assert set(llama_70b("fp8")["monthly_cost_usd"]) == {"on-demand", "spot", "reserved"}


def test_reserved_capacity_costs_the_on_demand_rate() -> None:
    # An ODCR bills the on-demand rate; plan prices no commitment.
    cost = llama_70b("fp8")["monthly_cost_usd"]
    assert cost["reserved"] == cost["on-demand"]


def test_a_latency_slo_sets_the_per_user_rate() -> None:
    document = plan_json(
        "--params-b", "8", *QWEN3_8B, "--concurrency", "10", "--latency-slo-s", "8", "--output-tokens", "400",
    )  # fmt: skip
    assert document["demand"]["per_user_tokens_per_s"] == 50.0


def test_hidden_size_and_heads_give_the_head_dim() -> None:
    document = plan_json(
        "--params-b", "70", "--layers", "80", "--hidden-size", "8192", "--heads", "64", "--kv-heads", "8",
        "--concurrency", "10", "--target-tokens-per-s", "20",
    )  # fmt: skip
    assert document["model"]["head_dim"] == 128


def test_the_table_shows_the_memory_figures() -> None:
    result = plan(
        "--params-b",
        "70",
        "--precision",
        "fp16",
        *LLAMA_70B,
        "--concurrency",
        "50",
        "--target-tokens-per-s",
        "20",
    )
    assert result.exit_code == 0, result.output
    assert any(line.startswith("│ Weights") and "140.00" in line for line in result.stdout.splitlines())


def test_a_throughput_table_replaces_the_shipped_one(tmp_path: Path) -> None:
    table = tmp_path / "throughput.yaml"
    table.write_text(
        "as_of: 2026-11-30\nefficiency: 0.9\ngpus:\n"
        "  h100: {memory_bandwidth_gb_s: 3350, precisions: [fp8], source: own measurement}\n"
    )
    document = llama_70b("fp8", "--throughput-table", str(table))
    assert (document["throughput_table"]["efficiency"], document["layout"]["gpu"]) == (0.9, "h100")


# --------------------------------------------------------------------------- exit codes


def test_a_model_no_layout_holds_exits_1() -> None:
    result = plan("--params-b", "20000", *LLAMA_70B, "--concurrency", "1", "--target-tokens-per-s", "10")
    assert result.exit_code == 1
    assert result.stderr.startswith("no GPU layout serves a 20000B model at bf16 (40000.0 GB of weights")


BASE = ["--params-b", "70", *LLAMA_70B, "--concurrency", "10", "--target-tokens-per-s", "20"]


def _without(flag: str, args: list[str] = BASE) -> list[str]:
    i = args.index(flag)
    return args[:i] + args[i + 2 :]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (_without("--params-b"), "--params-b is required (billions of parameters)"),
        (_without("--layers"), "--layers is required (transformer layers, e.g. 80 for Llama-3-70B)"),
        (_without("--concurrency"), "--concurrency is required (concurrent users)"),
        (
            _without("--kv-heads"),
            "--kv-heads is required (key/value heads per layer, e.g. 8 for Llama-3-70B)",
        ),
        (_without("--head-dim"), "give --head-dim, or --hidden-size and --heads to derive it"),
        (
            _without("--target-tokens-per-s"),
            "give --target-tokens-per-s and/or --latency-slo-s (the speed each user needs)",
        ),
        ([*BASE, "--precision", "fp4"], "--precision must be one of fp16, bf16, fp8, int8, int4, got 'fp4'"),
        ([*BASE, "--kv-cache-dtype", "int8"], "--kv-cache-dtype must be one of auto, fp8, got 'int8'"),
        ([*BASE, "--engine", "tgi"], "--engine must be one of vllm, sglang, trtllm, got 'tgi'"),
        ([*BASE, "--engine", "vLLM"], "--engine must be one of vllm, sglang, trtllm, got 'vLLM'"),
        ([*BASE, "--params-b", "-1"], "--params-b must be above 0 (billions of parameters), got -1"),
        (
            [*BASE, "--moe-active-params-b", "90"],
            "--moe-active-params-b must be above 0 and at most --params-b (70), got 90",
        ),
        (
            [*BASE, "--context-length", "128"],
            "--context-length must be 256 to 1048576 tokens (vLLM's --max-model-len), got 128",
        ),
        (
            [*BASE, "--input-tokens", "8000"],
            "--input-tokens + --output-tokens (8512) must fit in --context-length (8192)",
        ),
        (
            [*BASE, "--hidden-size", "8192", "--heads", "64"],
            "give either --head-dim or --hidden-size and --heads, not both",
        ),
        (
            [*BASE, "--reserved-discount", "0.3"],
            "--reserved-discount was removed: reserved capacity bills at the on-demand rate (an ODCR); "
            "price the Savings Plan or Reserved Instance that lowers it with `gpufarm cost --commitment` "
            "on the written tier file (see docs/cli.md)",
        ),
        ([*BASE, "--weights", "org/model"], "--weights applies only with --write"),
        (
            [*BASE, "--public-weights", "--tier-name", "team-a"],
            "--tier-name, --public-weights apply only with --write",
        ),
        (
            [*BASE, "--write", "tier.yaml"],
            "--weights is required (a Hugging Face repo id or an S3 URI of the checkpoint, with --write)",
        ),
    ],
    ids=[
        "no-params",
        "no-layers",
        "no-concurrency",
        "no-kv-heads",
        "no-head-dim",
        "no-rate",
        "precision",
        "kv-cache-dtype",
        "engine-unknown",
        "engine-case",
        "negative-params",
        "moe-active-above-total",
        "short-context",
        "tokens-exceed-context",
        "head-dim-twice",
        "reserved-discount",
        "weights-without-write",
        "write-options-without-write",
        "write-without-weights",
    ],
)
def test_invalid_input_exits_2_with_the_message(args: list[str], message: str) -> None:
    result = plan(*args)
    assert result.exit_code == 2
    assert result.stderr.strip() == message


def test_write_to_a_missing_folder_exits_2(tmp_path: Path) -> None:
    result = plan(*BASE, "--write", str(tmp_path / "no" / "t.yaml"), "--weights", "org/model")
    assert result.exit_code == 2
    assert result.stderr.strip() == f"--write: the folder {str(tmp_path / 'no')!r} does not exist"


def test_an_invalid_throughput_table_exits_2(tmp_path: Path) -> None:
    table = tmp_path / "t.yaml"
    table.write_text("- 1\n")
    result = plan(*BASE, "--throughput-table", str(table))
    assert result.exit_code == 2
    assert result.stderr.strip() == f"the throughput table {str(table)!r} must hold a mapping, got a list"


def test_an_unreadable_price_file_exits_2(tmp_path: Path) -> None:
    result = plan(*BASE, "--prices", str(tmp_path / "none.yaml"))
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"cannot read the price file {str(tmp_path / 'none.yaml')!r}: No such file or directory"
    )


def test_an_unsafe_tier_file_exits_2_listing_every_problem_and_is_not_written(tmp_path: Path) -> None:
    target = tmp_path / "dsv3.yaml"
    result = plan(
        "--params-b", "671", "--moe-active-params-b", "37", "--precision", "fp8", "--layers", "61",
        "--kv-heads", "1", "--head-dim", "576", "--concurrency", "64", "--target-tokens-per-s", "20",
        "--write", str(target), "--weights", "deepseek-ai/DeepSeek-V3", "--max-replicas", "0",
    )  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"--write {str(target)!r}: not written; the tier would synthesize but not run safely:",
        "  - --hf-token-secret: the weights 'deepseek-ai/DeepSeek-V3' come from Hugging Face and gpufarm "
        "cannot tell offline whether the repo is gated; give --hf-token-secret SECRET (a Secrets Manager "
        "secret holding a token that can read it), or --public-weights if the repo is not gated",
        "  - --bedrock-model-id: the preset enterprise falls back to Bedrock when the model is busy or down "
        "(meta.llama3-1-405b-instruct-v1:0, us.meta.llama3-3-70b-instruct-v1:0); give --bedrock-model-id "
        "ID, or --no-fallback to write `bedrock: none`",
        "  - --max-replicas: must be at least the planned replicas (1), got 0",
    ]
    assert list(tmp_path.iterdir()) == []


def test_a_tier_file_the_config_rejects_exits_2_and_is_not_written(tmp_path: Path) -> None:
    target = tmp_path / "t.yaml"
    result = plan(
        *BASE, "--write", str(target), "--weights", "org/model", "--public-weights", "--no-fallback",
        "--tier-name", "Team_A",
    )  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"invalid {target}:",
        "  - name: must be a lowercase DNS label (a-z, 0-9, '-', starting with a letter, at most 40 "
        "characters), got 'Team_A'",
    ]
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- --write, then synth


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A plan for Qwen3-8B written as a tier file, and the plan's JSON."""
    target = tmp_path_factory.mktemp("plan") / "qwen.yaml"
    document = plan_json(
        "--params-b", "8.2", *QWEN3_8B, "--context-length", "16384", "--concurrency", "40",
        "--target-tokens-per-s", "25", "--write", str(target), "--weights", "Qwen/Qwen3-8B",
        "--bedrock-model-id", "us.meta.llama3-1-8b-instruct-v1:0", "--public-weights",
    )  # fmt: skip
    return target, document


def test_the_json_names_the_written_file(written: tuple[Path, dict[str, Any]]) -> None:
    target, document = written
    assert document["written"] == str(target)


def test_the_written_file_loads_as_the_planned_tier(written: tuple[Path, dict[str, Any]]) -> None:
    target, document = written
    tier = load_tier_file(target)
    model = tier.models[0]
    assert (tier.name, model.name, model.replicas, model.gpus, model.max_model_len) == (
        "qwen3-8b",
        "qwen3-8b",
        document["replicas"],
        document["layout"]["tensor_parallel"],
        16384,
    )


def test_the_written_file_synthesizes(written: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    target, _ = written
    result = RUNNER.invoke(app, ["synth", "--tier-file", str(target), "--out", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    (stack,) = json.loads(result.stdout)["stacks"]
    assert (stack["tier"], stack["nag"]["status"], stack["cfn_lint"]["status"]) == (
        "qwen3-8b",
        "passed",
        "passed",
    )


# --------------------------------------------------------------------------- --hf-config

CONFIGS = Path(__file__).resolve().parent / "hf_configs"
LLAMA_8B = str(CONFIGS / "llama-3.1-8b-instruct.json")
MIXTRAL = str(CONFIGS / "mixtral-8x7b-instruct.json")
DEMAND = ["--concurrency", "40", "--target-tokens-per-s", "25"]


@pytest.fixture(autouse=True)
def _no_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reaches Hugging Face: a fetch that is not replaced fails the test."""

    def refuse(url: str, headers: dict[str, str]) -> bytes:
        raise AssertionError(f"the test fetched {url}")

    monkeypatch.setattr("gpufarm.sizing.hf_config._urlopen", refuse)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)


def test_a_dense_config_json_gives_the_model_shape() -> None:
    document = plan_json("--hf-config", LLAMA_8B, *DEMAND)
    assert document["model"] == {
        "params_b": 8.03, "active_params_b": 8.03, "moe": False, "precision": "bf16", "layers": 32,
        "kv_heads": 8, "head_dim": 128, "kv_cache_dtype": "auto", "engine": "vllm",
    }  # fmt: skip
    assert document["hf_config"]["source"] == LLAMA_8B


def test_an_option_given_with_the_config_wins() -> None:
    document = plan_json("--hf-config", LLAMA_8B, *DEMAND, "--precision", "fp8", "--params-b", "8")
    assert (document["model"]["precision"], document["model"]["params_b"]) == ("fp8", 8.0)


def test_a_moe_config_json_plans_with_its_active_parameters_and_says_so() -> None:
    document = plan_json("--hf-config", MIXTRAL, *DEMAND)
    model = document["model"]
    assert (model["moe"], model["params_b"], model["active_params_b"]) == (True, 46.7, 12.88)
    assert document["notes"][1] == (
        "mixture of experts: memory holds all 46.7B parameters, decode speed counts the 12.88B one token "
        "activates; a batch routes its tokens to up to 8 experts (2 per token), so a step reads more than "
        "that: the replica throughput and the sequences the rate allows are upper bounds"
    )


def test_the_table_output_carries_the_notes() -> None:
    result = plan("--hf-config", MIXTRAL, *DEMAND)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    notes = lines[lines.index("Notes") + 1 :]
    assert notes[0] == f"  - model shape from {MIXTRAL}"
    assert [n.split(":", 1)[0] for n in notes[1:]] == ["  - mixture of experts", "  - throughput"]


def test_the_measured_anchor_range_is_in_the_output() -> None:
    from gpufarm.sizing import load_throughput_table

    document = plan_json("--hf-config", LLAMA_8B, *DEMAND)
    implied = [a.efficiency() for a in load_throughput_table().anchors]
    calibration = document["calibration"]
    tokens = document["layout"]["replica_tokens_per_s"]
    efficiency = document["layout"]["efficiency"]
    # The replica's throughput scales with the efficiency: the anchors' extremes bound it.
    assert calibration["anchor_efficiency_range"] == [round(min(implied), 4), round(max(implied), 4)]
    low, high = calibration["replica_tokens_per_s_range"]
    assert low == pytest.approx(tokens * min(implied) / efficiency, rel=1e-3)
    assert high == pytest.approx(tokens * max(implied) / efficiency, rel=1e-3)
    assert calibration["anchors_on_gpu"] == []  # no shipped anchor ran on the chosen GPU
    # The plan's own efficiency is the mean over every anchor, whatever its engine.
    mean = sum(implied) / len(implied)
    assert document["notes"][-1].startswith(
        f"throughput: efficiency {mean:.2f} (the mean of {len(implied)} measured anchor(s) of every engine;"
    )


def test_every_missing_option_is_reported_at_once() -> None:
    result = plan("--precision", "bf16")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "--params-b is required (billions of parameters)",
        "--layers is required (transformer layers, e.g. 80 for Llama-3-70B)",
        "--concurrency is required (concurrent users)",
        "--kv-heads is required (key/value heads per layer, e.g. 8 for Llama-3-70B)",
        "give --head-dim, or --hidden-size and --heads to derive it",
        "give --target-tokens-per-s and/or --latency-slo-s (the speed each user needs)",
    ]


def test_what_a_config_json_lacks_is_reported(tmp_path: Path) -> None:
    config = json.loads(Path(LLAMA_8B).read_text())
    del config["num_hidden_layers"], config["vocab_size"]
    partial = tmp_path / "config.json"
    partial.write_text(json.dumps(config))
    result = plan("--hf-config", str(partial), "--concurrency", "4")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "--params-b is required (billions of parameters)",
        "--layers is required (transformer layers, e.g. 80 for Llama-3-70B)",
        "give --target-tokens-per-s and/or --latency-slo-s (the speed each user needs)",
    ]


def test_a_quantization_gpufarm_cannot_read_needs_the_precision(tmp_path: Path) -> None:
    config = json.loads(Path(LLAMA_8B).read_text())
    config["quantization_config"] = {"quant_method": "compressed-tensors"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    result = plan("--hf-config", str(tmp_path), *DEMAND)
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "--precision is required: the config's quantization_config is not one gpufarm reads (fp8, awq or "
        "gptq at 4 or 8 bits)"
    )


def test_an_offline_repo_id_exits_2_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = plan("--hf-config", "Qwen/Qwen3-8B", *DEMAND)
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "--hf-config 'Qwen/Qwen3-8B': HF_HUB_OFFLINE is set, so the repo's config.json cannot be fetched; "
        "save https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json and pass its path"
    )


def test_an_unreachable_hub_exits_2_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from urllib.error import URLError

    def unreachable(url: str, headers: dict[str, str]) -> bytes:
        raise URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr("gpufarm.sizing.hf_config._urlopen", unreachable)
    result = plan("--hf-config", "Qwen/Qwen3-8B", *DEMAND)
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "--hf-config 'Qwen/Qwen3-8B': cannot reach Hugging Face ([Errno -3] Temporary failure in name "
        "resolution); save https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json and pass its path"
    )


def test_a_gated_repo_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from urllib.error import HTTPError

    def gated(url: str, headers: dict[str, str]) -> bytes:
        raise HTTPError(url, 401, "Unauthorized", {}, None)  # type: ignore[arg-type]

    monkeypatch.setattr("gpufarm.sizing.hf_config._urlopen", gated)
    result = plan("--hf-config", "meta-llama/Llama-3.1-8B-Instruct", *DEMAND)
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "--hf-config 'meta-llama/Llama-3.1-8B-Instruct': Hugging Face refused the download (HTTP 401): the "
        "repo is gated or private; set HF_TOKEN to a token with access, or save "
        "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/blob/main/config.json and pass its path"
    )


def test_a_repo_fetched_without_a_token_is_public(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fetched: list[tuple[str, dict[str, str]]] = []

    def hub(url: str, headers: dict[str, str]) -> bytes:
        fetched.append((url, headers))
        return Path(LLAMA_8B).read_bytes()

    monkeypatch.setattr("gpufarm.sizing.hf_config._urlopen", hub)
    target = tmp_path / "t.yaml"
    repo = "unsloth/Llama-3.1-8B-Instruct"
    result = plan(
        "--hf-config", repo, *DEMAND, "--write", str(target), "--weights", repo, "--no-fallback",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert fetched == [
        (f"https://huggingface.co/{repo}/resolve/main/config.json", {"User-Agent": "gpufarm-plan"})
    ]
    assert "hf_token_secret" not in load_tier_file(target).models[0].model_dump(exclude_none=True)


def test_neither_file_nor_repo_id_exits_2() -> None:
    result = plan("--hf-config", "no-such-config.json", *DEMAND)
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "--hf-config must be a config.json file or a Hugging Face repo id such as 'Qwen/Qwen3-8B', got "
        "'no-such-config.json' (no such file)"
    )


def test_help_marks_the_required_options() -> None:
    result = CliRunner(env={"COLUMNS": "250"}).invoke(app, ["plan", "--help"])
    assert result.exit_code == 0
    required = [line.split()[1] for line in result.stdout.splitlines() if "[required" in line]
    assert required == [
        "--params-b", "--layers", "--kv-heads", "--head-dim", "--concurrency", "--target-tokens-per-s",
        "--weights", "--bedrock-model-id", "--hf-token-secret",
    ]  # fmt: skip


def test_the_write_report_names_changes_inherited_and_review(tmp_path: Path) -> None:
    target = tmp_path / "t.yaml"
    result = plan(
        "--hf-config", LLAMA_8B, *DEMAND, "--write", str(target), "--weights", "meta-llama/Llama-3.1-8B",
        "--hf-token-secret", "gpufarm/hf-token", "--bedrock-model-id", "us.meta.llama3-1-8b-instruct-v1:0",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert lines[0] == f"wrote {target} (gpufarm synth --tier-file {target})"
    assert lines[1:3] == [
        "changed from the preset poc:",
        "  - name: llama-3-1-8b (stack gpufarm-llama-3-1-8b; the preset's name would deploy over "
        "gpufarm-poc)",
    ]
    assert (
        "inherited from the preset unchanged: removal_policy, environment, network, cluster, serving, "
        "ingress, fallback, observability"
    ) in lines
    assert lines[lines.index("review before a deploy:") + 1] == (
        "  - cluster.public_access_cidrs[0] = '198.51.100.0/24' is a documentation value (RFC 5737 "
        "TEST-NET-2, 198.51.100.0/24): replace it before deploying"
    )


def test_a_production_tier_written_for_huggingface_weights_synthesizes(tmp_path: Path) -> None:
    """The fixes --write makes on production (its own name, Mountpoint instead of the example FSx
    import, autoscaling, room for a rolling update) pass the synth gates."""
    target = tmp_path / "llama.yaml"
    result = plan(
        "--params-b", "70", "--precision", "fp8", *LLAMA_70B, "--concurrency", "100",
        "--target-tokens-per-s", "20", "--write", str(target),
        "--weights", "meta-llama/Llama-3.3-70B-Instruct", "--hf-token-secret", "gpufarm/hf-token",
        "--bedrock-model-id", "us.meta.llama3-3-70b-instruct-v1:0",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    tier = load_tier_file(target)
    assert (tier.name, tier.model_store.kind.value, tier.models[0].autoscaling is not None) == (
        "llama-3-3-70b-instruct",
        "s3-mountpoint",
        True,
    )
    # The name is too long to head the image cache's rule prefixes (ECR: 30 characters with the
    # upstream's part), so --write states a shortened prefix that keeps the name's start.
    prefix = tier.images.cache_prefix
    assert prefix.startswith("llama-3-3") and prefix != tier.name
    assert max(len(p) for p in rule_prefixes(prefix).values()) <= RULE_PREFIX_MAX
    assert "images.cache_prefix" in result.output
    out = tmp_path / "out"
    synth = RUNNER.invoke(app, ["synth", "--tier-file", str(target), "--out", str(out), "--json"])
    assert synth.exit_code == 0, synth.output
    (stack,) = json.loads(synth.stdout)["stacks"]
    assert (stack["stack"], stack["nag"]["status"], stack["cfn_lint"]["status"]) == (
        "gpufarm-llama-3-3-70b-instruct",
        "passed",
        "passed",
    )
    # The pod fits its node by the rules the estimate places pods by (it used to ask 95 of 95.19
    # allocatable vCPUs on a g7e.24xlarge, with the sidecars on top, and had no estimate).
    assert stack["estimate_error"] is None


# --------------------------------------------------------------------------- engines


def _two_engine_table(tmp_path: Path) -> Path:
    """h100 only; vLLM and SGLang measured alike on it, at efficiencies 0.4 and 0.3.

    Each anchor: one GPU at 1,000 GB/s, 4.995B fp16 parameters (9.99 GB) and 10 sequences of
    1,000 tokens at 1,000 bytes each (0.01 GB): 10 GB a step, 1,000 tokens/s at full bandwidth.
    """
    anchor = (
        "  - {{id: {id}, gpu: h100, gpus: 1, memory_bandwidth_gb_s: 1000, precision: fp16, "
        "model: {{name: org/m, active_params_b: 4.995, layers: 1, kv_heads: 1, head_dim: 250}}, "
        "concurrency: 10, workload: {{input_tokens: 900, output_tokens: 200}}, "
        "output_tokens_per_s: {tps}, engine: {engine}, software: test, source: test, date: 2026-12-02}}\n"
    )
    table = tmp_path / "engines.yaml"
    table.write_text(
        "as_of: 2026-12-02\nefficiency: 0.5\ngpus:\n"
        "  h100: {memory_bandwidth_gb_s: 3350, precisions: [fp16, fp8], source: test}\nanchors:\n"
        + anchor.format(id="v", tps=400, engine="vllm")
        + anchor.format(id="s", tps=300, engine="sglang")
    )
    return table


def test_compare_engines_json_has_each_engine_from_its_own_anchors(tmp_path: Path) -> None:
    document = llama_70b(
        "fp8",
        "--compare-engines",
        "--engine",
        "sglang",
        "--throughput-table",
        str(_two_engine_table(tmp_path)),
    )
    engines = document["engines"]
    rows = {r["engine"]: r for r in engines["rows"]}
    assert (engines["chosen"], engines["gpu"], engines["comparable"]) == ("sglang", "h100", True)
    assert (rows["vllm"]["efficiency"], rows["sglang"]["efficiency"]) == (0.4, 0.3)
    assert (rows["trtllm"]["anchors"], rows["trtllm"]["replicas"]) == ([], None)
    assert rows["trtllm"]["reason"] == "no measured anchor on h100 for a dense model"
    # Same layout as the plan; a lower efficiency never needs fewer replicas.
    assert rows["vllm"]["replicas"] <= rows["sglang"]["replicas"]
    assert document["model"]["engine"] == "sglang"


def test_without_compare_engines_the_json_has_none() -> None:
    assert llama_70b("fp8")["engines"] is None


def test_the_engine_table_lists_engines_without_an_anchor_within_80_columns(tmp_path: Path) -> None:
    result = CliRunner(env={"COLUMNS": "80"}).invoke(
        app,
        ["plan", *BASE, "--precision", "fp8", "--compare-engines", "--engine", "trtllm",
         "--throughput-table", str(_two_engine_table(tmp_path))],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    title = next(i for i, line in enumerate(lines) if line.startswith("Engines on "))
    section = lines[title : lines.index("Notes")]
    assert max(len(line) for line in section) <= 80
    body = "\n".join(section)
    assert "trtllm" in body and "(planned)" in body and "no" in body and "measured" in body
    assert body.rstrip().endswith("compare them like for like at those conditions")


def test_write_writes_the_planned_engine(tmp_path: Path) -> None:
    target = tmp_path / "t.yaml"
    result = plan(
        "--params-b", "8.2", *QWEN3_8B, "--concurrency", "10", "--target-tokens-per-s", "20",
        "--engine", "sglang", "--write", str(target), "--weights", "s3://models-bucket/qwen3-8b/",
        "--no-fallback",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    tier = load_tier_file(target)
    assert tier.models[0].engine.value == "sglang"
    assert "models[0].engine: sglang (--engine: the engine planned to serve it)" in result.stderr


def test_the_time_to_ready_is_that_of_the_planned_engine() -> None:
    document = plan_json(
        "--params-b", "8.2", *QWEN3_8B, "--concurrency", "10", "--target-tokens-per-s", "20",
        "--engine", "sglang",
    )  # fmt: skip
    assert document["time_to_ready"]["terms"]["engine warm-up"]["formula"] == "sglang"
