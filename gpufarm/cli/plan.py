"""`gpufarm plan`: size a model for serving and, optionally, write the tier file that runs it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, cast, get_args

import typer

from gpufarm.cli import _cold_start
from gpufarm.cli._output import (
    EXIT_CHECK_FAILED,
    bad_input,
    config_errors,
    console,
    emit_json,
    errors,
    say,
    table,
)
from gpufarm.config.model import Engine
from gpufarm.pricing import PriceTableError, load_prices
from gpufarm.sizing.engine_compare import EngineComparison, compare_engines, conditions
from gpufarm.sizing.hf_config import HfConfigError, HfShape, read_hf_config
from gpufarm.sizing.plan import (
    GB,
    Demand,
    KvCacheDtype,
    ModelSpec,
    NoLayoutError,
    Plan,
    PlanInputError,
    head_dim_of,
    kv_heads_of,
    make_plan,
    model_name_from,
)
from gpufarm.sizing.throughput import Precision, ThroughputTable, ThroughputTableError, load_throughput_table

if TYPE_CHECKING:
    from gpufarm.sizing.tierfile import Written

DEFAULT_CONTEXT_LENGTH = 8192
DEFAULT_INPUT_TOKENS = 2048
DEFAULT_OUTPUT_TOKENS = 512

PRECISIONS: tuple[str, ...] = get_args(Precision)
KV_CACHE_DTYPES: tuple[str, ...] = get_args(KvCacheDtype)
ENGINES: tuple[str, ...] = tuple(e.value for e in Engine)

T = TypeVar("T")


def _choice(flag: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        bad_input(f"{flag} must be one of {', '.join(allowed)}, got {value!r}")
    return value


def _required(flag: str, value: T | None, what: str) -> T:
    if value is None:
        bad_input(f"{flag} is required ({what})")
    return value


@contextmanager
def _writing(path: Path) -> Iterator[None]:
    """Exit 2 naming --write when the tier file cannot be written (an unwritable folder)."""
    try:
        yield
    except OSError as exc:
        bad_input(f"--write {str(path)!r}: cannot write it: {exc.strerror or exc}")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _print(plan: Plan) -> None:
    sizing, layout, demand = plan.chosen, plan.chosen.layout, plan.demand
    table(
        "Memory",
        ("Item", "GB", "Formula"),
        [
            (
                "Weights",
                round(plan.weights_bytes / GB, 2),
                f"{plan.model.params_b:g}B params x {plan.model.bytes_per_param:g} bytes "
                f"({plan.model.precision})",
            ),
            (
                "KV cache per sequence",
                round(plan.kv_bytes_per_sequence / GB, 2),
                f"2 x {plan.model.layers} layers x {plan.model.kv_heads} KV heads x {plan.model.head_dim} "
                f"x {plan.model.kv_cache_bytes:g} bytes x {demand.context_length} tokens",
            ),
            (
                "Usable per replica",
                round(sizing.usable_bytes / GB, 2),
                f"{_count(layout.gpus_per_replica, 'GPU')} x {layout.gpu_memory_gib} GiB x 0.9",
            ),
            (
                "KV budget per replica",
                round(sizing.kv_budget_bytes / GB, 2),
                "usable - weights - runtime reserve",
            ),
        ],
    )
    table(
        "Plan",
        ("", "Value"),
        [
            ("Layout", layout.describe()),
            ("Per-user rate needed", f"{demand.per_user_tokens_per_s:g} tokens/s"),
            (
                "Sequences per replica",
                f"{sizing.sequences_per_replica} (memory {sizing.sequences_by_memory}, "
                f"rate {sizing.sequences_by_rate}; limited by {sizing.limited_by})",
            ),
            (
                "Replica throughput",
                f"{sizing.replica_tokens_per_s:,.0f} tokens/s "
                f"({sizing.per_sequence_tokens_per_s:.1f} per sequence)",
            ),
            (
                "Replicas",
                f"{sizing.replicas} = ceil({demand.concurrency} users / {sizing.sequences_per_replica})",
            ),
            ("Instances", f"{sizing.instances} x {layout.instance_type} ({_count(sizing.gpus, 'GPU')})"),
            ("Tier", f"{plan.tier} ({plan.tier_reason})"),
        ],
    )
    costs = plan.monthly_cost_usd
    table(
        f"Monthly cost of the {sizing.instances} x {layout.instance_type}, running all month "
        f"(USD, prices as of {plan.prices_as_of})",
        ("Capacity type", "$ / month"),
        # Reserved capacity (an ODCR) bills the on-demand rate: a row of its own would only repeat
        # it. Only a commitment lowers it, and `plan` prices none (`gpufarm cost --commitment`).
        [
            (kind, cost)
            for kind, cost in costs.items()
            if kind != "reserved" or cost != costs.get("on-demand")
        ],
        caption="Reserved capacity (an On-Demand Capacity Reservation) bills the on-demand rate; "
        "price the Savings Plan or Reserved Instance that lowers it with gpufarm cost --commitment.",
    )
    if plan.alternatives:
        table(
            "Next cheapest layouts",
            ("Layout", "Replicas", "Instances", "On-demand $ / month"),
            [
                (s.layout.describe(), s.replicas, s.instances, s.on_demand_hourly * plan.hours_per_month)
                for s in plan.alternatives
            ],
        )


def _print_engines(comparison: EngineComparison) -> None:
    """The engines side by side on the planned layout; anchors, reasons and comparability under it."""
    rows: list[tuple[Any, ...]] = []
    notes: list[str] = []
    for row in comparison.rows:
        name = row.engine.value + (" (planned)" if row.engine is comparison.chosen else "")
        if not row.anchors:
            rows.append((name, "no measured anchor", None, None, None, None, None))
            continue
        notes.append(f"{row.engine.value}: {', '.join(f'{a.id} ({conditions(a)})' for a in row.anchors)}")
        anchors = _count(len(row.anchors), "anchor")
        sizing = row.sizing
        if sizing is None:
            rows.append((name, anchors, row.efficiency, None, None, None, None))
            notes.append(f"{row.engine.value} cannot serve it on this layout: {row.reason}")
            continue
        rows.append(
            (
                name,
                anchors,
                row.efficiency,
                round(sizing.replica_tokens_per_s),
                sizing.replicas,
                sizing.gpus,
                row.on_demand_monthly,
            )
        )
    table(
        f"Engines on {comparison.layout_description}, each from its own anchors",
        (
            "Engine",
            "Measured",
            "Efficiency",
            "Tokens/s per replica",
            "Replicas",
            "GPUs",
            "On-demand $ / month",
        ),
        rows,
        caption="\n".join([*notes, comparison.statement]),
    )


MODEL_PANEL = "Model (required: give each, or --hf-config)"
DEMAND_PANEL = "Demand"
WRITE_PANEL = "Write a tier file (--write)"
TABLE_PANEL = "Tables"
ENGINE_PANEL = "Serving engine"


def _notes(plan: Plan, table_: ThroughputTable, shape: HfShape | None) -> list[str]:
    """What the figures rest on: where the shape came from, MoE and the throughput calibration."""
    notes: list[str] = []
    if shape is not None:
        notes.append(f"model shape from {shape.source}")
        notes += shape.notes
    model, _sizing = plan.model, plan.chosen
    if model.moe_active_params_b is not None:
        per_token = shape.experts_per_token if shape and shape.experts_per_token else None
        routed = (
            f"a batch routes its tokens to up to {shape.experts} experts ({per_token} per token)"
            if shape is not None and shape.experts and per_token
            else "a batch routes its tokens to many experts"
        )
        notes.append(
            f"mixture of experts: memory holds all {model.params_b:g}B parameters, decode speed counts the "
            f"{model.moe_active_params_b:g}B one token activates; {routed}, so a step reads more than "
            "that: the replica throughput and the sequences the rate allows are upper bounds"
        )
    notes.append(_calibration(plan, table_))
    return notes


def calibration_range(plan: Plan, table_: ThroughputTable) -> dict[str, Any]:
    """How the efficiency behind the throughput was fixed, and the throughput it implies at the
    lowest and highest efficiency the table's anchors measured."""
    gpu = plan.chosen.layout.gpu
    spec = table_.gpus.get(gpu)
    efficiency = plan.chosen.efficiency
    measured = [a for a in table_.anchors if a.gpu == gpu]
    implied = [a.efficiency() for a in table_.anchors]
    if spec is not None and spec.efficiency is not None:
        basis = f"set for {gpu} in the throughput table"
    elif table_.efficiency is not None:
        basis = "the throughput table's efficiency"
    else:
        basis = f"the mean of {len(implied)} measured anchor(s) of every engine"
    low, high = (min(implied), max(implied)) if implied else (efficiency, efficiency)
    tokens = plan.chosen.replica_tokens_per_s
    return {
        "gpu": gpu,
        "efficiency": round(efficiency, 4),
        "basis": basis,
        "anchors_on_gpu": [a.id for a in measured],
        "anchor_efficiency_range": [round(low, 4), round(high, 4)],
        "replica_tokens_per_s_range": [
            round(tokens * low / efficiency, 1),
            round(tokens * high / efficiency, 1),
        ],
    }


def _calibration(plan: Plan, table_: ThroughputTable) -> str:
    c = calibration_range(plan, table_)
    where = (
        f"measured on {c['gpu']} by {', '.join(c['anchors_on_gpu'])}"
        if c["anchors_on_gpu"]
        else f"no anchor was measured on {c['gpu']}"
    )
    low, high = c["anchor_efficiency_range"]
    tokens_low, tokens_high = c["replica_tokens_per_s_range"]
    return (
        f"throughput: efficiency {c['efficiency']:.2f} ({c['basis']}; {where}); the anchors imply "
        f"{low:.2f} to {high:.2f}, which gives {tokens_low:,.0f} to {tokens_high:,.0f} tokens/s per replica "
        f"rather than {plan.chosen.replica_tokens_per_s:,.0f}; an anchor measured on your GPUs, model and "
        "traffic narrows it (docs/cli.md, The throughput table)"
    )


def register(app: typer.Typer) -> None:
    """Add the `plan` command to the app."""

    @app.command()
    def plan(
        hf_config: Annotated[
            str | None,
            typer.Option(
                "--hf-config",
                help="A model's Hugging Face config.json (a file) or repo id (fetched): gives the shape "
                "options below; an option given as well wins.",
                rich_help_panel=MODEL_PANEL,
            ),
        ] = None,
        params_b: Annotated[
            float | None,
            typer.Option(
                "--params-b",
                help="\\[required] Parameters, billions (all experts).",
                rich_help_panel=MODEL_PANEL,
            ),
        ] = None,
        layers: Annotated[
            int | None,
            typer.Option("--layers", help="\\[required] Transformer layers.", rich_help_panel=MODEL_PANEL),
        ] = None,
        kv_heads: Annotated[
            int | None,
            typer.Option(
                "--kv-heads",
                help="\\[required] Key/value heads per layer (or --heads for multi-head attention).",
                rich_help_panel=MODEL_PANEL,
            ),
        ] = None,
        head_dim: Annotated[
            int | None,
            typer.Option(
                "--head-dim",
                help="\\[required] Dimension of one attention head (or --hidden-size and --heads).",
                rich_help_panel=MODEL_PANEL,
            ),
        ] = None,
        hidden_size: Annotated[
            int | None,
            typer.Option(
                "--hidden-size",
                help="Hidden size (with --heads, instead of --head-dim).",
                rich_help_panel=MODEL_PANEL,
            ),
        ] = None,
        heads: Annotated[
            int | None,
            typer.Option("--heads", help="Attention heads per layer.", rich_help_panel=MODEL_PANEL),
        ] = None,
        precision: Annotated[
            str | None,
            typer.Option(
                "--precision",
                help="fp16, bf16, fp8, int8 or int4 (default: from --hf-config, else bf16).",
                rich_help_panel=MODEL_PANEL,
            ),
        ] = None,
        moe_active_params_b: Annotated[
            float | None,
            typer.Option(
                "--moe-active-params-b",
                help="Parameters a token activates (MoE), billions.",
                rich_help_panel=MODEL_PANEL,
            ),
        ] = None,
        kv_cache_dtype: Annotated[
            str, typer.Option("--kv-cache-dtype", help="auto (16-bit) or fp8.", rich_help_panel=MODEL_PANEL)
        ] = "auto",
        concurrency: Annotated[
            int | None,
            typer.Option(
                "--concurrency", help="\\[required] Concurrent users.", rich_help_panel=DEMAND_PANEL
            ),
        ] = None,
        target_tokens_per_s: Annotated[
            float | None,
            typer.Option(
                "--target-tokens-per-s",
                help="\\[required: this and/or --latency-slo-s] Decode speed each user needs, tokens/s.",
                rich_help_panel=DEMAND_PANEL,
            ),
        ] = None,
        latency_slo_s: Annotated[
            float | None,
            typer.Option(
                "--latency-slo-s",
                help="Time to generate --output-tokens, seconds.",
                rich_help_panel=DEMAND_PANEL,
            ),
        ] = None,
        context_length: Annotated[
            int,
            typer.Option(
                "--context-length",
                help="Context length, tokens (--max-model-len).",
                rich_help_panel=DEMAND_PANEL,
            ),
        ] = DEFAULT_CONTEXT_LENGTH,
        input_tokens: Annotated[
            int | None,
            typer.Option(
                "--input-tokens",
                help="Prompt tokens per request (default 2048).",
                rich_help_panel=DEMAND_PANEL,
            ),
        ] = None,
        output_tokens: Annotated[
            int | None,
            typer.Option(
                "--output-tokens",
                help="Completion tokens per request (default 512).",
                rich_help_panel=DEMAND_PANEL,
            ),
        ] = None,
        engine: Annotated[
            str,
            typer.Option(
                "--engine",
                help="vllm, sglang or trtllm: the engine that serves the model (written with --write).",
                rich_help_panel=ENGINE_PANEL,
            ),
        ] = Engine.VLLM.value,
        compare: Annotated[
            bool,
            typer.Option(
                "--compare-engines",
                help="Size the planned layout with each engine's own measured anchors, side by side.",
                rich_help_panel=ENGINE_PANEL,
            ),
        ] = False,
        throughput_table: Annotated[
            Path | None,
            typer.Option(
                "--throughput-table",
                help="A throughput table replacing the shipped one.",
                rich_help_panel=TABLE_PANEL,
            ),
        ] = None,
        prices: Annotated[
            Path | None,
            typer.Option(
                "--prices",
                help="A YAML file merged over the shipped price table.",
                rich_help_panel=TABLE_PANEL,
            ),
        ] = None,
        reserved_discount: Annotated[
            str | None,
            typer.Option("--reserved-discount", hidden=True, help="Removed: use gpufarm cost --commitment."),
        ] = None,
        write: Annotated[
            Path | None,
            typer.Option("--write", help="Write a tier file for the plan.", rich_help_panel=WRITE_PANEL),
        ] = None,
        weights: Annotated[
            str | None,
            typer.Option(
                "--weights",
                help="\\[required with --write] Hugging Face repo id or S3 URI of the checkpoint.",
                rich_help_panel=WRITE_PANEL,
            ),
        ] = None,
        name: Annotated[
            str | None,
            typer.Option(
                "--name",
                help="Model name in the tier file (default: from --weights).",
                rich_help_panel=WRITE_PANEL,
            ),
        ] = None,
        tier_name: Annotated[
            str | None,
            typer.Option(
                "--tier-name",
                help="The tier's name; the stack is gpufarm-NAME (default: the model name).",
                rich_help_panel=WRITE_PANEL,
            ),
        ] = None,
        bedrock_model_id: Annotated[
            str | None,
            typer.Option(
                "--bedrock-model-id",
                help="\\[required with --write on a preset with a fallback, or --no-fallback] The model's "
                "Bedrock fallback.",
                rich_help_panel=WRITE_PANEL,
            ),
        ] = None,
        no_fallback: Annotated[
            bool,
            typer.Option(
                "--no-fallback",
                help="Write `bedrock: none`: no Bedrock fallback.",
                rich_help_panel=WRITE_PANEL,
            ),
        ] = False,
        hf_token_secret: Annotated[
            str | None,
            typer.Option(
                "--hf-token-secret",
                help="\\[required with --write and Hugging Face weights, or --public-weights] Secrets "
                "Manager secret holding a Hugging Face token.",
                rich_help_panel=WRITE_PANEL,
            ),
        ] = None,
        public_weights: Annotated[
            bool,
            typer.Option(
                "--public-weights",
                help="The Hugging Face repo is not gated: no token secret.",
                rich_help_panel=WRITE_PANEL,
            ),
        ] = False,
        max_replicas: Annotated[
            int | None,
            typer.Option(
                "--max-replicas",
                help="Most replicas on a preset that autoscales (default: twice the planned).",
                rich_help_panel=WRITE_PANEL,
            ),
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    ) -> None:
        """Size a model: weights and KV-cache memory, the cheapest GPU layout that holds it, replicas
        for the concurrency, its tier and monthly cost; --write a tier file that is safe to deploy."""
        if reserved_discount is not None:
            bad_input(
                "--reserved-discount was removed: reserved capacity bills at the on-demand rate (an "
                "ODCR); price the Savings Plan or Reserved Instance that lowers it with "
                "`gpufarm cost --commitment` on the written tier file (see docs/cli.md)"
            )
        shape: HfShape | None = None
        if hf_config is not None:
            try:
                shape = read_hf_config(hf_config)
            except HfConfigError as exc:
                bad_input(str(exc))
        model, demand = _inputs(
            shape=shape,
            params_b=params_b,
            precision=precision,
            context_length=context_length,
            concurrency=concurrency,
            layers=layers,
            kv_heads=kv_heads,
            head_dim=head_dim,
            hidden_size=hidden_size,
            heads=heads,
            target_tokens_per_s=target_tokens_per_s,
            latency_slo_s=latency_slo_s,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            moe_active_params_b=moe_active_params_b,
            kv_cache_dtype=kv_cache_dtype,
            engine=engine,
        )
        write_only = {
            "--weights": weights,
            "--name": name,
            "--tier-name": tier_name,
            "--bedrock-model-id": bedrock_model_id,
            "--hf-token-secret": hf_token_secret,
            "--max-replicas": max_replicas,
            "--no-fallback": no_fallback or None,
            "--public-weights": public_weights or None,
        }
        if write is not None:
            _required(
                "--weights", weights, "a Hugging Face repo id or an S3 URI of the checkpoint, with --write"
            )
            if write.is_dir():
                bad_input(
                    f"--write {str(write)!r}: is a folder; give the tier file's name, "
                    f"such as {str(write / 'tier.yaml')!r}"
                )
            if not write.parent.is_dir():
                bad_input(f"--write: the folder {str(write.parent)!r} does not exist")
        elif given := [flag for flag, value in write_only.items() if value is not None]:
            bad_input(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} only with --write")
        try:
            table_ = load_throughput_table(throughput_table)
        except ThroughputTableError as exc:
            bad_input(str(exc))
        try:
            price_table = load_prices(prices)
        except PriceTableError as exc:
            bad_input(str(exc))
        try:
            result = make_plan(model, demand, table=table_, prices=price_table)
        except PlanInputError as exc:
            bad_input(str(exc))
        except NoLayoutError as exc:
            errors.print(str(exc), markup=False, soft_wrap=True)
            raise SystemExit(EXIT_CHECK_FAILED) from None
        written: Written | None = None
        if write is not None and weights is not None:
            from gpufarm.sizing.tierfile import UnsafeTierError, WriteOptions, write_tier_file

            model_name = name or model_name_from(weights)
            # A repo whose config.json was fetched without a token is public: it is not gated.
            fetched_public = shape is not None and shape.public and hf_config == weights
            options = WriteOptions(
                name=model_name,
                weights=weights,
                bedrock_model_id=bedrock_model_id,
                no_fallback=no_fallback,
                hf_token_secret=hf_token_secret,
                public_weights=public_weights or fetched_public,
                tier_name=tier_name,
                max_replicas=max_replicas,
            )
            try:
                with config_errors(), _writing(write):
                    written = write_tier_file(result, write, options)
            except UnsafeTierError as exc:
                bad_input(
                    f"--write {str(write)!r}: not written; the tier would synthesize but not run safely:\n"
                    + "\n".join(f"  - {p}" for p in exc.problems)
                )
        notes = _notes(result, table_, shape)
        comparison = compare_engines(result, table=table_, prices=price_table) if compare else None
        # The planned model's time to ready, on the tier it was written to or else its preset.
        ready_tier, ready = _cold_start.planned_time_to_ready(
            preset=result.tier,
            name=name or (model_name_from(weights) if weights else "planned"),
            weights=weights,
            gpus=result.chosen.layout.gpus_per_replica,
            weights_bytes=result.weights_bytes,
            written=written.tier if written is not None else None,
            engine=result.model.engine,
        )
        if as_json:
            emit_json(
                {
                    **result.to_json(),
                    "throughput_table": {
                        "path": str(throughput_table) if throughput_table else "shipped",
                        "as_of": table_.as_of.isoformat(),
                        "efficiency": round(table_.derived_efficiency(), 4),
                    },
                    "calibration": calibration_range(result, table_),
                    "engines": comparison.to_json() if comparison is not None else None,
                    "hf_config": _shape_json(shape),
                    "notes": notes,
                    "written": str(write) if written is not None else None,
                    "tier_file": _written_json(written),
                    "time_to_ready": _cold_start.times_json(ready_tier, [ready])[0],
                }
            )
        else:
            _print(result)
            _cold_start.print_times(f"Time to ready on {result.tier} (seconds)", ready_tier, [ready])
            if comparison is not None:
                _print_engines(comparison)
            console.print("Notes", markup=False)
            for note in notes:
                say(f"  - {note}")
        if written is not None:
            _report_written(str(write), result.tier, written)


def _shape_json(shape: HfShape | None) -> dict[str, Any] | None:
    if shape is None:
        return None
    return {
        "source": shape.source,
        "model_type": shape.model_type,
        "params_b": shape.params_b,
        "active_params_b": shape.active_params_b,
        "experts": shape.experts,
        "experts_per_token": shape.experts_per_token,
        "latent_attention": shape.latent_attention,
    }


def _written_json(written: Written | None) -> dict[str, Any] | None:
    if written is None:
        return None
    return {
        "name": written.tier.name,
        "changes": [{"path": c.path, "value": c.value, "why": c.why} for c in written.plan.changes],
        "inherited": written.plan.inherited,
        "dropped": written.plan.dropped,
        "review": written.review,
    }


def _report_written(path: str, preset: str, written: Written) -> None:
    lines = [
        f"wrote {path} (gpufarm synth --tier-file {path})",
        f"changed from the preset {preset}:",
        *(f"  - {c}" for c in written.plan.changes),
        f"inherited from the preset unchanged: {', '.join(written.plan.inherited)}",
        f"dropped with the preset's lists: {'; '.join(written.plan.dropped)}",
        "review before a deploy:",
        *(f"  - {item}" for item in written.review),
    ]
    for line in lines:
        errors.print(line, markup=False, soft_wrap=True)


_MISSING = {
    "--params-b": "--params-b is required (billions of parameters)",
    "--layers": "--layers is required (transformer layers, e.g. 80 for Llama-3-70B)",
    "--concurrency": "--concurrency is required (concurrent users)",
    "--kv-heads": "--kv-heads is required (key/value heads per layer, e.g. 8 for Llama-3-70B)",
    "--head-dim": "give --head-dim, or --hidden-size and --heads to derive it",
    "--precision": "--precision is required: the config's quantization_config is not one gpufarm reads "
    "(fp8, awq or gptq at 4 or 8 bits)",
    "--target-tokens-per-s": "give --target-tokens-per-s and/or --latency-slo-s (the speed each user needs)",
}


def _inputs(
    *,
    shape: HfShape | None,
    params_b: float | None,
    precision: str | None,
    context_length: int,
    concurrency: int | None,
    layers: int | None,
    kv_heads: int | None,
    head_dim: int | None,
    hidden_size: int | None,
    heads: int | None,
    target_tokens_per_s: float | None,
    latency_slo_s: float | None,
    input_tokens: int | None,
    output_tokens: int | None,
    moe_active_params_b: float | None,
    kv_cache_dtype: str,
    engine: str = Engine.VLLM.value,
) -> tuple[ModelSpec, Demand]:
    """The model and the demand from the options (and the config.json `shape`, where an option is
    not given); exits 2 listing every missing option at once, or with the message of a bad one."""
    from_shape = shape is not None and head_dim is None and hidden_size is None and heads is None
    if shape is not None:
        params_b = params_b if params_b is not None else shape.params_b
        layers = layers if layers is not None else shape.layers
        if from_shape:
            head_dim = shape.head_dim
            kv_heads = kv_heads if kv_heads is not None else shape.kv_heads
        if moe_active_params_b is None and params_b == shape.params_b:
            moe_active_params_b = shape.active_params_b
        if precision is None:
            precision = shape.precision
    missing = [
        flag
        for flag, value in (("--params-b", params_b), ("--layers", layers), ("--concurrency", concurrency))
        if value is None
    ]
    if kv_heads is None and heads is None:
        missing.append("--kv-heads")
    if head_dim is None and (hidden_size is None or heads is None):
        missing.append("--head-dim")
    if precision is None and shape is not None and shape.quantization is not None:
        missing.append("--precision")
    if target_tokens_per_s is None and latency_slo_s is None:
        missing.append("--target-tokens-per-s")
    if missing:
        bad_input("\n".join(_MISSING[flag] for flag in missing))
    assert params_b is not None and layers is not None and concurrency is not None
    try:
        dim = head_dim_of(head_dim=head_dim, hidden_size=hidden_size, heads=heads)
        kv = kv_heads_of(kv_heads=kv_heads, heads=heads)
    except PlanInputError as exc:
        bad_input(str(exc))
    out_tokens = (
        output_tokens if output_tokens is not None else min(DEFAULT_OUTPUT_TOKENS, context_length // 4)
    )
    in_tokens = (
        input_tokens if input_tokens is not None else min(DEFAULT_INPUT_TOKENS, context_length - out_tokens)
    )
    return (
        ModelSpec(
            params_b=params_b,
            precision=cast(Precision, _choice("--precision", precision or "bf16", PRECISIONS)),
            layers=layers,
            kv_heads=kv,
            head_dim=dim,
            moe_active_params_b=moe_active_params_b,
            kv_cache_dtype=cast(KvCacheDtype, _choice("--kv-cache-dtype", kv_cache_dtype, KV_CACHE_DTYPES)),
            engine=Engine(_choice("--engine", engine, ENGINES)),
        ),
        Demand(
            concurrency=concurrency,
            context_length=context_length,
            input_tokens=in_tokens,
            output_tokens=out_tokens,
            target_tokens_per_s=target_tokens_per_s,
            latency_slo_s=latency_slo_s,
        ),
    )
