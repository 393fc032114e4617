"""Tier fixtures: each tier is synthesized once per test run and shared by the assertions."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from gpufarm.app import build_app
from gpufarm.config import TierConfig, build_tier, load_preset, merge
from tests.conftest import cdk_context


def synthesize(configs: list[TierConfig], outdir: Path) -> dict[str, dict[str, Any]]:
    """Synthesize configs (with the compliance gate) and return stack name -> template."""
    app = build_app(configs, context=cdk_context(), outdir=str(outdir))
    assembly = app.synth()
    return {s.stack_name: s.template for s in assembly.stacks}


_SYNTHESIZED = "synthesized"
"""The file a shared assembly folder holds once its synth has completed."""


def synthesize_once(preset: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cloud assembly folder of `preset`, synthesized once per test run (gate included).

    pytest-xdist runs a session fixture once per worker, not once per run
    (https://pytest-xdist.readthedocs.io/en/latest/how-to.html#making-session-scoped-fixtures-execute-only-once),
    so with `-n 2` both workers used to synthesize each preset whose tests they were given. The
    first worker to ask synthesizes into a folder that all workers of the run share (the parent
    of each worker's base temp folder) while holding a lock; the others wait for the lock and
    read the finished assembly. A synth that fails leaves no `synthesized` marker: the next
    worker tries again, and fails the same way. Without xdist the folder is this session's own.
    """
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = root / f"tier-{preset}"
    with (root / f"tier-{preset}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / _SYNTHESIZED).exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            synthesize([load_preset(preset)], folder)
            (folder / _SYNTHESIZED).touch()
    return folder


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
