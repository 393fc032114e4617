"""`gpufarm plan`: size a model for serving and, optionally, write the tier file that runs it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, TypeVar, cast, get_args

import typer

from gpufarm.cli._output import EXIT_CHECK_FAILED, bad_input, config_errors, emit_json, errors, table
from gpufarm.pricing import PriceTableError, load_prices
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
from gpufarm.sizing.throughput import Precision, ThroughputTableError, load_throughput_table

DEFAULT_CONTEXT_LENGTH = 8192
DEFAULT_INPUT_TOKENS = 2048
DEFAULT_OUTPUT_TOKENS = 512

PRECISIONS: tuple[str, ...] = get_args(Precision)
KV_CACHE_DTYPES: tuple[str, ...] = get_args(KvCacheDtype)

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


def register(app: typer.Typer) -> None:
    """Add the `plan` command to the app."""

    @app.command()
    def plan(
        params_b: Annotated[
            float | None, typer.Option("--params-b", help="Parameters, billions (all experts).")
        ] = None,
        precision: Annotated[
            str, typer.Option("--precision", help="fp16, bf16, fp8, int8 or int4.")
        ] = "bf16",
        context_length: Annotated[
            int, typer.Option("--context-length", help="Context length, tokens (--max-model-len).")
        ] = DEFAULT_CONTEXT_LENGTH,
        concurrency: Annotated[int | None, typer.Option("--concurrency", help="Concurrent users.")] = None,
        layers: Annotated[int | None, typer.Option("--layers", help="Transformer layers.")] = None,
        kv_heads: Annotated[
            int | None, typer.Option("--kv-heads", help="Key/value heads per layer (default: --heads).")
        ] = None,
        head_dim: Annotated[
            int | None, typer.Option("--head-dim", help="Dimension of one attention head.")
        ] = None,
        hidden_size: Annotated[
            int | None,
            typer.Option("--hidden-size", help="Hidden size (with --heads, instead of --head-dim)."),
        ] = None,
        heads: Annotated[int | None, typer.Option("--heads", help="Attention heads per layer.")] = None,
        target_tokens_per_s: Annotated[
            float | None,
            typer.Option("--target-tokens-per-s", help="Decode speed each user needs, tokens/s."),
        ] = None,
        latency_slo_s: Annotated[
            float | None, typer.Option("--latency-slo-s", help="Time to generate --output-tokens, seconds.")
        ] = None,
        input_tokens: Annotated[
            int | None, typer.Option("--input-tokens", help="Prompt tokens per request (default 2048).")
        ] = None,
        output_tokens: Annotated[
            int | None, typer.Option("--output-tokens", help="Completion tokens per request (default 512).")
        ] = None,
        moe_active_params_b: Annotated[
            float | None,
            typer.Option("--moe-active-params-b", help="Parameters a token activates (MoE), billions."),
        ] = None,
        kv_cache_dtype: Annotated[
            str, typer.Option("--kv-cache-dtype", help="auto (16-bit) or fp8.")
        ] = "auto",
        throughput_table: Annotated[
            Path | None,
            typer.Option("--throughput-table", help="A throughput table replacing the shipped one."),
        ] = None,
        prices: Annotated[
            Path | None, typer.Option("--prices", help="A YAML file merged over the shipped price table.")
        ] = None,
        reserved_discount: Annotated[
            str | None,
            typer.Option("--reserved-discount", hidden=True, help="Removed: use gpufarm cost --commitment."),
        ] = None,
        write: Annotated[Path | None, typer.Option("--write", help="Write a tier file for the plan.")] = None,
        weights: Annotated[
            str | None, typer.Option("--weights", help="Hugging Face repo id or S3 URI (with --write).")
        ] = None,
        name: Annotated[
            str | None, typer.Option("--name", help="Model name in the tier file (default: from --weights).")
        ] = None,
        bedrock_model_id: Annotated[
            str | None,
            typer.Option("--bedrock-model-id", help="Bedrock fallback of the model (with --write)."),
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    ) -> None:
        """Size a model: weights and KV-cache memory, the cheapest GPU layout that holds it, replicas
        for the concurrency, its tier and monthly cost; --write a tier file that synthesizes."""
        model, demand = _inputs(
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
        )
        if reserved_discount is not None:
            bad_input(
                "--reserved-discount was removed: reserved capacity bills at the on-demand rate (an "
                "ODCR); price the Savings Plan or Reserved Instance that lowers it with "
                "`gpufarm cost --commitment` on the written tier file (see docs/cli.md)"
            )
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
        elif weights is not None or name is not None or bedrock_model_id is not None:
            bad_input("--weights, --name and --bedrock-model-id apply only with --write")
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
        written: str | None = None
        if write is not None and weights is not None:
            from gpufarm.sizing.tierfile import write_tier_file

            with config_errors(), _writing(write):
                write_tier_file(
                    result,
                    write,
                    name=name or model_name_from(weights),
                    weights=weights,
                    bedrock_model_id=bedrock_model_id,
                )
            written = str(write)
        if as_json:
            emit_json(
                {
                    **result.to_json(),
                    "throughput_table": {
                        "path": str(throughput_table) if throughput_table else "shipped",
                        "as_of": table_.as_of.isoformat(),
                        "efficiency": round(table_.derived_efficiency(), 4),
                    },
                    "written": written,
                }
            )
        else:
            _print(result)
        if written is not None:
            errors.print(
                f"wrote {written} (gpufarm synth --tier-file {written})", markup=False, soft_wrap=True
            )


def _inputs(
    *,
    params_b: float | None,
    precision: str,
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
) -> tuple[ModelSpec, Demand]:
    """The model and the demand from the options; exits 2 with the message on bad input."""
    params = _required("--params-b", params_b, "billions of parameters")
    layer_count = _required("--layers", layers, "transformer layers, e.g. 80 for Llama-3-70B")
    users = _required("--concurrency", concurrency, "concurrent users")
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
            params_b=params,
            precision=cast(Precision, _choice("--precision", precision, PRECISIONS)),
            layers=layer_count,
            kv_heads=kv,
            head_dim=dim,
            moe_active_params_b=moe_active_params_b,
            kv_cache_dtype=cast(KvCacheDtype, _choice("--kv-cache-dtype", kv_cache_dtype, KV_CACHE_DTYPES)),
        ),
        Demand(
            concurrency=users,
            context_length=context_length,
            input_tokens=in_tokens,
            output_tokens=out_tokens,
            target_tokens_per_s=target_tokens_per_s,
            latency_slo_s=latency_slo_s,
        ),
    )
