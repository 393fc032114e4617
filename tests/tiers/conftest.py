"""Tier fixtures: each tier is synthesized once per test run and shared by the assertions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpufarm.app import build_app
from gpufarm.config import TierConfig, build_tier, load_preset, merge
from tests.assemblies import shared_assembly
from tests.conftest import cdk_context


def synthesize(configs: list[TierConfig], outdir: Path) -> dict[str, dict[str, Any]]:
    """Synthesize configs (with the compliance gate) and return stack name -> template."""
    app = build_app(configs, context=cdk_context(), outdir=str(outdir))
    assembly = app.synth()
    return {s.stack_name: s.template for s in assembly.stacks}


def synthesize_once(preset: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cloud assembly folder of `preset`, synthesized once per test run (gate included) and
    shared by every xdist worker and every test folder that synthesizes the same config
    (tests/assemblies.py)."""
    return shared_assembly([load_preset(preset)], tmp_path_factory)


def _template(folder: Path, preset: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / f"gpufarm-{preset}.template.json").read_text())
    return data


@pytest.fixture(scope="session")
def poc_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cloud assembly folder of the poc tier (the compliance gate has passed)."""
    return synthesize_once("poc", tmp_path_factory)


@pytest.fixture(scope="session")
def poc_template(poc_dir: Path) -> dict[str, Any]:
    """The synthesized poc template (the compliance gate has passed when this returns)."""
    return _template(poc_dir, "poc")


@pytest.fixture(scope="session")
def ec2_poc_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cloud assembly folder of the ec2-poc tier (no Kubernetes; the compliance gate has passed)."""
    return synthesize_once("ec2-poc", tmp_path_factory)


@pytest.fixture(scope="session")
def ec2_poc_template(ec2_poc_dir: Path) -> dict[str, Any]:
    """The synthesized ec2-poc template."""
    return _template(ec2_poc_dir, "ec2-poc")


@pytest.fixture(scope="session")
def sagemaker_poc_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cloud assembly folder of the sagemaker-poc tier (a SageMaker endpoint; the gate has passed)."""
    return synthesize_once("sagemaker-poc", tmp_path_factory)


@pytest.fixture(scope="session")
def sagemaker_poc_template(sagemaker_poc_dir: Path) -> dict[str, Any]:
    """The synthesized sagemaker-poc template."""
    return _template(sagemaker_poc_dir, "sagemaker-poc")


@pytest.fixture(scope="session")
def poc_document() -> dict[str, Any]:
    """The poc preset as a plain document, to derive variants from."""
    import yaml

    from gpufarm.config.loader import PRESET_DIR

    data: dict[str, Any] = yaml.safe_load((PRESET_DIR / "poc.yaml").read_text())
    return data


def variant(base: dict[str, Any], override: dict[str, Any]) -> TierConfig:
    """A tier built from a document with an override merged in."""
    return build_tier(json.loads(json.dumps(merge(base, override))))


@pytest.fixture(scope="session")
def production_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cloud assembly folder of the production tier (the compliance gate has passed)."""
    return synthesize_once("production", tmp_path_factory)


@pytest.fixture(scope="session")
def production_template(production_dir: Path) -> dict[str, Any]:
    """The synthesized production template (the compliance gate has passed when this returns)."""
    return _template(production_dir, "production")


@pytest.fixture(scope="session")
def production_document() -> dict[str, Any]:
    """The production preset as a plain document, to derive variants from."""
    import yaml

    from gpufarm.config.loader import PRESET_DIR

    data: dict[str, Any] = yaml.safe_load((PRESET_DIR / "production.yaml").read_text())
    return data


@pytest.fixture(scope="session")
def enterprise_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cloud assembly folder of the enterprise tier (the compliance gate has passed)."""
    return synthesize_once("enterprise", tmp_path_factory)


@pytest.fixture(scope="session")
def enterprise_template(enterprise_dir: Path) -> dict[str, Any]:
    """The synthesized enterprise template (both compliance packs have passed when this returns)."""
    return _template(enterprise_dir, "enterprise")


@pytest.fixture(scope="session")
def enterprise_document() -> dict[str, Any]:
    """The enterprise preset as a plain document, to derive variants from."""
    import yaml

    from gpufarm.config.loader import PRESET_DIR

    data: dict[str, Any] = yaml.safe_load((PRESET_DIR / "enterprise.yaml").read_text())
    return data
