"""Time to ready: each term recomputed here from the table's own figures, the table's shape, the warnings."""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufarm.config import ModelStoreKind, Provisioning, TierConfig
from gpufarm.config.fsx_capacity import fsx_storage_capacity_gib
from gpufarm.config.model import Engine, ImagePull
from gpufarm.core.cold_start import (
    ColdStartTableError,
    PullPath,
    cold_start_warnings,
    image_pull,
    load_cold_start_table,
    pull_path,
    time_to_ready,
    wake_gap_seconds,
)

from .factories import make_enterprise, make_production, make_tier, model_override, production_model

RAW: dict[str, Any] = yaml.safe_load(
    resources.files("gpufarm.data").joinpath("cold_start.yaml").read_text(encoding="utf-8")
)
SECTIONS = ("node_launch", "image_pull", "weight_load", "warm_up")


def _pull(engine: str, path: str, mode: str = "default") -> float:
    table = RAW["image_pull"]
    seconds = table["image_gib"][engine] * 1024 / table["throughput_mib_s"][path]
    return seconds * (1 - table["pull_mode_saving"][mode])


def test_every_section_has_a_source_and_a_date_and_estimates_name_its_figures() -> None:
    for name in SECTIONS:
        section = RAW[name]
        assert section["source"].strip()
        assert str(section["as_of"]) == "2026-12-02"
        figures = {
            k
            for key, values in section.items()
            if isinstance(values, dict) and key != "estimates"
            for k in values
        }
        assert set(section.get("estimates", {})) <= figures, name
        assert all(len(reason) > 40 for reason in section.get("estimates", {}).values())


def test_the_table_covers_every_choice_a_tier_can_make() -> None:
    table = RAW
    assert set(table["node_launch"]["seconds"]) == {p.value for p in Provisioning} | {"node-group"}
    assert set(table["image_pull"]["image_gib"]) == {e.value for e in Engine}
    assert set(table["image_pull"]["throughput_mib_s"]) == {p.value for p in PullPath}
    assert set(table["image_pull"]["pull_mode_saving"]) == {m.value for m in ImagePull}
    stores = {k.value for k in ModelStoreKind} - {ModelStoreKind.FSX_LUSTRE.value}
    assert set(table["weight_load"]["throughput_gib_s"]) == stores | {"hugging-face"}
    assert set(table["warm_up"]["seconds"]) == {e.value for e in Engine}


def test_production_model_on_fsx_from_the_table() -> None:
    tier = make_production()
    model = tier.models[0]
    ready = time_to_ready(tier, model)
    capacity = fsx_storage_capacity_gib(tier)
    fsx_gib_s = tier.model_store.fsx.throughput_per_tib * 1e6 * (capacity / 1024) / 1024**3
    expected = {
        "node launch": RAW["node_launch"]["seconds"]["karpenter"],
        # The production preset pulls through the account's ECR (images.pull_through_cache),
        # onto Bottlerocket pools with SOCI parallel pull.
        "image pull": _pull("vllm", "ecr-pull-through-cache", "soci-parallel-pull"),
        "weight load": model.weights_gib / fsx_gib_s,
        "engine warm-up": RAW["warm_up"]["seconds"]["vllm"],
    }
    assert {t.name: t.seconds for t in ready.terms} == pytest.approx(expected)
    assert ready.seconds == pytest.approx(sum(expected.values()))
    assert ready.startup_seconds == pytest.approx(expected["weight load"] + expected["engine warm-up"])
    assert not ready.weight_load.estimated  # the tier's own FSx setting
    assert ready.node_launch.estimated and ready.estimated
    assert ready.weight_load.formula == f"{model.weights_gib:.4g} GiB / FSx 250 MB/s/TiB x {capacity} GiB"


@pytest.mark.parametrize("kind", ["runai-streamer", "s3-mountpoint"])
def test_s3_stores_read_at_their_table_rate(kind: str) -> None:
    tier = make_production({"model_store": {"kind": kind}}, production_model(1, engine="vllm"))
    model = tier.models[1]
    ready = time_to_ready(tier, model)
    assert ready.weight_load.seconds == pytest.approx(
        model.weights_gib / RAW["weight_load"]["throughput_gib_s"][kind]
    )
    assert ready.weight_load.estimated is (kind in RAW["weight_load"].get("estimates", {}))


def test_the_streamer_loads_faster_than_mountpoint_by_the_table_ratio() -> None:
    streamer = make_production(
        {"model_store": {"kind": "runai-streamer"}}, production_model(1, engine="vllm")
    )
    mountpoint = make_production({"model_store": {"kind": "s3-mountpoint"}})
    fast = time_to_ready(streamer, streamer.models[0]).weight_load.seconds
    slow = time_to_ready(mountpoint, mountpoint.models[0]).weight_load.seconds
    rates = RAW["weight_load"]["throughput_gib_s"]
    assert slow / fast == pytest.approx(rates["runai-streamer"] / rates["s3-mountpoint"])


def test_pull_through_cache_changes_the_pull_path() -> None:
    tier = make_production({"images": {"pull_through_cache": True}})
    ready = time_to_ready(tier, tier.models[0])
    assert ready.image_pull.seconds == pytest.approx(
        _pull("vllm", "ecr-pull-through-cache", "soci-parallel-pull")
    )
    assert "ecr-pull-through-cache" in ready.image_pull.formula


def test_soci_parallel_pull_saves_the_tables_share_of_the_pull() -> None:
    saving = RAW["image_pull"]["pull_mode_saving"]["soci-parallel-pull"]
    assert 0 < saving < 1
    soci = make_production()
    assert {p.image_pull for p in soci.node_pools} == {ImagePull.SOCI_PARALLEL_PULL}
    plain = make_production(
        {"node_pools": [p.model_dump(mode="json") | {"image_pull": "default"} for p in soci.node_pools]}
    )
    fast = time_to_ready(soci, soci.models[0]).image_pull
    slow = time_to_ready(plain, plain.models[0]).image_pull
    assert slow.seconds == pytest.approx(_pull("vllm", "ecr-pull-through-cache"))
    assert fast.seconds == pytest.approx(slow.seconds * (1 - saving))
    assert fast.formula == slow.formula + f" x {1 - saving:g} soci-parallel-pull"


def test_a_model_on_a_reserved_node_group_pulls_without_the_pools_mode() -> None:
    tier = make_enterprise()
    on_group = next(m for m in tier.models if m.node_pool == "h100-multinode")
    term = time_to_ready(tier, on_group).image_pull
    assert term.seconds == pytest.approx(_pull(on_group.engine.value, "ecr-pull-through-cache"))
    assert "soci" not in term.formula


@pytest.mark.parametrize("share", [0.0, 0.25, 1.0])
def test_the_pull_term_scales_with_the_share_fetched(share: float) -> None:
    tier = make_production({"images": {"pull_through_cache": False}})
    term = image_pull(tier, tier.models[0], load_cold_start_table(), fetched_share=share)
    assert term.seconds == pytest.approx(_pull("vllm", "upstream-nat", "soci-parallel-pull") * share)


def test_the_cache_rules_only_first_deploy_still_pulls_through_nat() -> None:
    tier = make_production({"images": {"cache_rules_only": True}})
    assert pull_path(tier) is PullPath.UPSTREAM_NAT
    assert pull_path(make_production()) is PullPath.ECR_PULL_THROUGH_CACHE


def test_a_fetched_share_outside_zero_to_one_is_rejected() -> None:
    tier = make_production()
    with pytest.raises(ValueError) as caught:
        image_pull(tier, tier.models[0], load_cold_start_table(), fetched_share=1.5)
    assert str(caught.value) == "'fetched_share' must be between 0 and 1, got 1.5"


def test_auto_mode_hugging_face_and_engine_terms() -> None:
    tier = make_tier(model_override(weights_gib=16, engine="sglang"))
    ready = time_to_ready(tier, tier.models[0])
    assert ready.node_launch.seconds == RAW["node_launch"]["seconds"]["auto-mode"]
    assert ready.weight_load.seconds == pytest.approx(
        16 / RAW["weight_load"]["throughput_gib_s"]["hugging-face"]
    )
    assert ready.warm_up.seconds == RAW["warm_up"]["seconds"]["sglang"]
    assert ready.image_pull.seconds == pytest.approx(_pull("sglang", "upstream-nat"))


def test_without_weights_gib_the_load_and_total_are_unknown() -> None:
    tier = make_tier()
    ready = time_to_ready(tier, tier.models[0])
    assert ready.weight_load.seconds is None and ready.seconds is None
    assert ready.to_json()["seconds"] is None


def test_a_model_on_a_reserved_node_group_waits_for_no_node() -> None:
    tier = make_enterprise()
    ready = time_to_ready(tier, tier.models[0])
    assert ready.node_launch.seconds == 0 and ready.node_launch.formula == "node-group"


def test_the_wake_gap_adds_the_signal_to_the_time_to_ready() -> None:
    tier = make_production()
    batch = tier.models[1]
    ready = time_to_ready(tier, batch)
    assert batch.autoscaling is not None and ready.seconds is not None
    expected = (
        tier.observability.prometheus.scrape_interval_seconds + batch.autoscaling.polling_interval_seconds
    )
    assert wake_gap_seconds(tier, batch, ready) == pytest.approx(expected + ready.seconds)
    assert wake_gap_seconds(tier, tier.models[0], time_to_ready(tier, tier.models[0])) is None


def _total(tier: TierConfig, index: int) -> int:
    seconds = time_to_ready(tier, tier.models[index]).seconds
    assert seconds is not None
    return math.ceil(seconds)


def test_presets_draw_no_warning() -> None:
    assert cold_start_warnings(make_production()) == []
    assert cold_start_warnings(make_enterprise()) == []


def test_a_cooldown_shorter_than_a_wake_is_warned_about() -> None:
    tier = make_production(
        production_model(1, autoscaling={"min_replicas": 0, "max_replicas": 4, "cooldown_seconds": 120})
    )
    assert cold_start_warnings(tier) == [
        f"models[1].autoscaling.cooldown_seconds: 120 s is shorter than 'qwen3-32b-batch''s expected "
        f"time to ready ({_total(tier, 1)} s), so each wake costs more GPU time than parking saved; "
        "raise it to at least that unless the model idles far longer between uses"
    ]


def test_a_startup_timeout_shorter_than_the_load_is_warned_about() -> None:
    tier = make_production(production_model(0, startup_timeout_seconds=120))
    startup = time_to_ready(tier, tier.models[0]).startup_seconds
    assert startup is not None
    assert cold_start_warnings(tier) == [
        f"models[0].startup_timeout_seconds: 120 s is shorter than 'llama-3-3-70b''s expected weight "
        f"load and warm-up ({math.ceil(startup)} s), so the startup probe restarts the engine before it "
        "serves; raise it above that"
    ]


def test_a_table_that_is_not_one_is_rejected_with_its_path(tmp_path: Path) -> None:
    bad = tmp_path / "cold.yaml"
    bad.write_text("as_of: 2026-12-02\n", encoding="utf-8")
    with pytest.raises(ColdStartTableError) as caught:
        load_cold_start_table(bad)
    assert str(caught.value).startswith(f"{bad}: not a cold-start table: ")


def test_a_table_missing_a_figure_names_it() -> None:
    table = load_cold_start_table()
    partial = table.model_copy(update={"warm_up": table.warm_up.model_copy(update={"seconds": {"vllm": 60}})})
    tier = make_tier(model_override(engine="trtllm"))
    with pytest.raises(ColdStartTableError) as caught:
        time_to_ready(tier, tier.models[0], partial)
    assert str(caught.value) == "the cold-start table has no warm_up figure for 'trtllm'"
