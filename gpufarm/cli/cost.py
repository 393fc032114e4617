"""`gpufarm cost`: a tier's monthly bill, line by line, from the dated price table or live prices."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.markup import escape

from gpufarm.assembly import AssemblyError, read_assembly
from gpufarm.cli import _cold_start
from gpufarm.cli._output import bad_input, config_errors, emit_json, errors, progress, table
from gpufarm.config import TierConfig, load_preset, load_tier_file, preset_names
from gpufarm.config.model import TIER_METADATA_KEY
from gpufarm.config.regions import regional_tiers
from gpufarm.eks_support import today
from gpufarm.estimate import CostEstimate, EstimateError, instance_types_of, monthly_cost
from gpufarm.estimate.billing import check_capacity_block_days, parse_commitment
from gpufarm.estimate.report import LEVELS
from gpufarm.estimate.usage import Usage, load_usage
from gpufarm.pricing import (
    STALE_AFTER_DAYS,
    PriceNotFoundError,
    PriceTable,
    PriceTableError,
    load_prices,
)

REMOVED_RESERVED_DISCOUNT = (
    "--reserved-discount was removed: reserved capacity bills at the on-demand rate (an ODCR) or "
    "its Capacity Block rate; give the Savings Plan or Reserved Instance that lowers it with "
    "--commitment, such as --commitment kind=ec2-instance-savings-plan,family=p5,usd_per_hour=30,"
    "discount=0.4,term=3y (see docs/cli.md)"
)


def assembly_tiers(directory: str | Path) -> list[tuple[str, TierConfig]]:
    """(stack name, tier config) of every stack in a cloud assembly that carries a gpufarm tier.

    Reads the assembly with :func:`gpufarm.assembly.read_assembly` (nested assemblies too) and
    each stack's template `Metadata["gpufarm:tier"]`. Raises AssemblyError when the folder is not
    a cloud assembly, a template cannot be read, a stack's tier is not valid or no stack carries
    a tier.
    """
    root = Path(directory)
    found: list[tuple[str, TierConfig]] = []
    for stack in read_assembly(root):
        metadata = (stack.template.get("Metadata") or {}).get(TIER_METADATA_KEY)
        if metadata is None:
            continue
        try:
            tier = TierConfig.model_validate(metadata)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise AssemblyError(
                f"cannot read the cloud assembly {str(root)!r}: stack {stack.artifact_id!r} carries a "
                f"tier that is not valid ({where}: {first['msg']})"
            ) from None
        found.append((stack.artifact_id, tier))
    if not found:
        raise AssemblyError(
            f"cannot read the cloud assembly {str(root)!r}: no stack carries Metadata "
            f"{TIER_METADATA_KEY!r} (synthesize it with this version of gpufarm)"
        )
    return found


def _tiers(tier: str | None, tier_file: Path | None, assembly: Path | None) -> list[tuple[str, TierConfig]]:
    given = [
        flag
        for flag, value in (("--tier", tier), ("--tier-file", tier_file), ("--assembly", assembly))
        if value
    ]
    if len(given) != 1:
        got = f"{', '.join(given[:-1])} and {given[-1]}" if given else "none"
        bad_input(f"give exactly one of --tier, --tier-file or --assembly, got {got}")
    if tier is not None:
        if tier not in preset_names():
            bad_input(f"unknown tier {tier!r}: the presets are {', '.join(preset_names())}")
        with config_errors():
            cfg = load_preset(tier)
        return [(t.stack_name, t) for t in regional_tiers(cfg)]
    if tier_file is not None:
        with config_errors():
            cfg = load_tier_file(tier_file)
        # With `regions`, one estimate per region's stack, each tier as that region builds it.
        return [(t.stack_name, t) for t in regional_tiers(cfg)]
    assert assembly is not None
    try:
        return assembly_tiers(assembly)
    except AssemblyError as exc:
        bad_input(str(exc))


def _check_share(flag: str, value: float, *, below_one: bool, example: str) -> None:
    high = value >= 1 if below_one else value > 1
    if math.isnan(value) or value < 0 or high:
        bound = "to below 1" if below_one else "to 1"
        bad_input(f"{flag} must be a share from 0 {bound} (such as {example}), got {value:g}")


def _live_table(base: PriceTable, region: str, tiers: list[tuple[str, TierConfig]]) -> tuple[PriceTable, str]:
    """Live EC2 prices for the tiers' instance types; the table and a warning when AWS fails."""
    from gpufarm.aws.pricing import LivePricingError, live_prices  # boto3 only when asked

    types = sorted({t for _, cfg in tiers for t in instance_types_of(cfg)})
    zones = sorted(
        {
            z
            for _, cfg in tiers
            if cfg.environment.region == region
            for z in cfg.environment.availability_zones
        }
    )
    try:
        with progress(f"Reading live EC2 prices for {region}"):
            return live_prices(region, types, base=base, availability_zones=zones or None), ""
    except LivePricingError as exc:
        return base, (
            f"warning: live prices unavailable ({exc}); using the price table dated {base.as_of.isoformat()}"
        )


def _print(stack: str, estimate: CostEstimate) -> None:
    rows = [
        (
            escape(f"{line.item} [{line.unit}]"),
            line.capacity_type or "",
            line.quantity,
            line.unit_price,
            line.monthly_usd,
            line.expected_monthly_usd,
            line.peak_monthly_usd,
        )
        for line in estimate.lines
    ]
    table(
        f"{stack}: monthly cost (prices {estimate.price_region}, {estimate.prices_as_of})",
        (escape("Item [unit]"), "Capacity", "Floor qty", "$ / unit", "Floor $", "Expected $", "Ceiling $"),
        rows,
        drop_first=("$ / unit", "Floor qty"),
    )
    totals: list[list[str | float]] = [
        ["Total", *(estimate.total_at(level) for level in LEVELS)],
        ["Same capacity all on-demand", *(estimate.all_on_demand_at(level) for level in LEVELS)],
        ["Saving vs all on-demand", *(f"{estimate.saving_at(level):.1%}" for level in LEVELS)],
    ]
    by = [
        estimate.by_capacity_type(),
        estimate.by_capacity_type(expected=True),
        estimate.by_capacity_type(peak=True),
    ]
    totals += [[f"Instances: {kind}", by[0][kind], by[1][kind], by[2][kind]] for kind in by[0] if by[2][kind]]
    per_million = [
        estimate.usd_per_million_tokens,
        estimate.expected_usd_per_million_tokens,
        estimate.peak_usd_per_million_tokens,
    ]
    if all(value is not None for value in per_million):
        totals.append(["$ per 1M tokens", *(v if v is not None else 0.0 for v in per_million)])
    table(f"{stack}: totals (USD)", ("", "Floor", "Expected", "Ceiling"), totals)
    table(
        f"{stack}: where the prices come from",
        ("Section", "Read", "Source"),
        [
            (name, estimate.price_dates.get(name, ""), escape(" ".join(estimate.price_sources[name].split())))
            for name in estimate.sections_used()
        ],
    )
    for note in estimate.notes:
        errors.print(f"note: {note}", markup=False)


def register(app: typer.Typer) -> None:
    """Add the `cost` command to the app."""

    @app.command()
    def cost(
        tier: Annotated[
            str | None, typer.Option("--tier", help="A preset tier (poc, production, ...).")
        ] = None,
        tier_file: Annotated[Path | None, typer.Option("--tier-file", help="A tier YAML file.")] = None,
        assembly: Annotated[
            Path | None,
            typer.Option("--assembly", help="A cloud assembly (cdk.out): one estimate per stack."),
        ] = None,
        prices: Annotated[
            Path | None, typer.Option("--prices", help="A YAML file merged over the shipped price table.")
        ] = None,
        commitment: Annotated[
            list[str] | None,
            typer.Option(
                "--commitment",
                help="A Savings Plan or Reserved Instance the account holds (not created by the stack), "
                "as key=value pairs separated by commas, such as 'kind=ec2-instance-savings-plan, "
                "family=p5, usd_per_hour=30, discount=0.4, term=3y'. Repeat for several.",
            ),
        ] = None,
        busy_share: Annotated[
            float | None,
            typer.Option(
                "--busy-share",
                help="Share of the month every autoscaled model runs at its most replicas, 0-1, for the "
                "expected figure (default: each model's autoscaling.expected_busy_share).",
            ),
        ] = None,
        capacity_block_days: Annotated[
            int | None,
            typer.Option(
                "--capacity-block-days",
                help="Days of the Capacity Block behind capacity-block node groups (default: blocks "
                "bought back to back all month).",
            ),
        ] = None,
        reserved_discount: Annotated[
            str | None, typer.Option("--reserved-discount", hidden=True, help="Removed: use --commitment.")
        ] = None,
        fallback_share: Annotated[
            float, typer.Option("--fallback-share", help="Share of tokens answered by Bedrock, 0-1.")
        ] = 0.0,
        tokens_per_month: Annotated[
            float | None,
            typer.Option(
                "--tokens-per-month", help="Tokens served in a month (for $/1M tokens and Bedrock)."
            ),
        ] = None,
        nat_gb_per_month: Annotated[
            float | None,
            typer.Option(
                "--nat-gb-per-month",
                help="GB through the NAT gateways in a month (default: derived from image and weight pulls).",
            ),
        ] = None,
        usage_file: Annotated[
            Path | None,
            typer.Option("--usage", help="A YAML file of usage assumptions (docs/cli.md lists the keys)."),
        ] = None,
        live: Annotated[
            bool, typer.Option("--live", help="Read EC2 prices from the AWS Price List API and spot history.")
        ] = False,
        region: Annotated[
            str | None, typer.Option("--region", help="Region of the live prices (default: the tier's).")
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    ) -> None:
        """Monthly cost of a tier: GPU and system instances by capacity type, reservations and
        commitments as billed, load balancers, NAT, FSx, AMP and the Bedrock fallback, at floor,
        expected and ceiling, next to the same capacity all on-demand, and $ per 1M tokens."""
        if reserved_discount is not None:
            bad_input(REMOVED_RESERVED_DISCOUNT)
        if busy_share is not None:
            _check_share("--busy-share", busy_share, below_one=False, example="0.3")
        commitments = []
        for spec in commitment or []:
            try:
                commitments.append(parse_commitment(spec))
            except EstimateError as exc:
                bad_input(f"--commitment: {exc}")
        if capacity_block_days is not None:
            try:
                check_capacity_block_days(capacity_block_days)
            except EstimateError as exc:
                bad_input(f"--capacity-block-days: {exc}")
        _check_share("--fallback-share", fallback_share, below_one=False, example="0.05")
        if tokens_per_month is not None and not tokens_per_month > 0:
            bad_input(f"--tokens-per-month must be a number of tokens above 0, got {tokens_per_month:g}")
        if nat_gb_per_month is not None and (nat_gb_per_month < 0 or math.isnan(nat_gb_per_month)):
            bad_input(f"--nat-gb-per-month must be at least 0, got {nat_gb_per_month:g}")
        if fallback_share > 0 and tokens_per_month is None:
            bad_input(
                f"--fallback-share {fallback_share:g} needs --tokens-per-month "
                "(the tokens the tier serves in a month)"
            )
        if region is not None and not live:
            bad_input("--region applies only with --live (the price table is for us-east-1)")
        tiers = _tiers(tier, tier_file, assembly)
        usage = Usage()
        if usage_file is not None:
            with config_errors():
                usage = load_usage(usage_file)
        try:
            table_prices = load_prices(prices)
        except PriceTableError as exc:
            bad_input(str(exc))
        warnings: list[str] = []
        day = today()
        stale = table_prices.staleness(day)
        if stale:
            errors.print(f"warning: {stale}", markup=False)
        # Live prices for each region a stack deploys to (a tier with `regions` has several), or
        # for --region alone; the table otherwise (us-east-1, each estimate notes its region).
        tables: dict[str, PriceTable] = {}
        if live:
            for wanted in [region] if region else list(dict.fromkeys(c.environment.region for _, c in tiers)):
                assert wanted is not None
                tables[wanted], warning = _live_table(table_prices, wanted, tiers)
                if warning:
                    warnings.append(warning)
                    errors.print(warning, markup=False)
            table_prices = tables[region or tiers[0][1].environment.region]
        estimates: list[tuple[str, CostEstimate]] = []
        for stack, cfg in tiers:
            try:
                estimate = monthly_cost(
                    cfg,
                    prices=tables.get(region or cfg.environment.region, table_prices),
                    commitments=commitments,
                    busy_share=busy_share,
                    capacity_block_days=capacity_block_days,
                    fallback_share=fallback_share,
                    tokens_per_month=tokens_per_month,
                    nat_gb_per_month=nat_gb_per_month,
                    day=day,
                    usage=usage,
                )
            except (EstimateError, PriceNotFoundError) as exc:
                bad_input(f"{stack}: {exc}")
            estimates.append((stack, estimate))
        # Each model's time to ready (gpufarm.core.cold_start), printed after its tier's cost.
        ready = {stack: _cold_start.tier_times(stack, cfg) for stack, cfg in tiers}
        configs = dict(tiers)
        for _, cfg in tiers:
            warnings += _cold_start.warn(cfg)
        if as_json:
            emit_json(
                {
                    "estimates": [
                        {
                            "stack": stack,
                            **est.to_json(),
                            "time_to_ready": _cold_start.times_json(configs[stack], ready[stack]),
                        }
                        for stack, est in estimates
                    ],
                    "estimated_figures": table_prices.estimated_figures(),
                    "price_table": {
                        "as_of": table_prices.oldest_as_of().isoformat(),
                        "age_days": table_prices.age_days(day),
                        "stale_after_days": STALE_AFTER_DAYS,
                        "stale": stale is not None,
                        "warning": stale,
                    },
                    "usage": usage.to_json(),
                    "warnings": warnings,
                }
            )
            return
        for stack, est in estimates:
            _print(stack, est)
            _cold_start.print_times(f"{stack}: time to ready (seconds)", configs[stack], ready[stack])
