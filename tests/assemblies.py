"""Cloud assemblies synthesized once per test run and shared by every test file and xdist worker.

A tier synth costs seconds (3-4 s for poc and production, 7-8 s for enterprise with its Control
Tower gate, on an idle core: benchmarks/README.md), and several test files check the same tier
or variant from different sides (its manifests, its upstream schemas, its checkov scan, `gpufarm
review` over it). :func:`shared_assembly` synthesizes a list of configs into a folder named by
a hash of the configs, so two files that build the same variant, even spelt differently, get
the same folder, and two different variants can never be handed each other's templates.

pytest-xdist runs a session fixture once per worker, not once per run
(https://pytest-xdist.readthedocs.io/en/latest/how-to.html#making-session-scoped-fixtures-execute-only-once),
so the folder sits in the directory all workers of the run share (the parent of each worker's
base temp folder). The first worker to ask synthesizes while holding a lock; the others wait
for the lock and read the finished assembly. A synth that fails leaves no `synthesized` marker:
the next caller tries again, and fails the same way. Without xdist the folder is this
session's own.

The folders are read-only by convention: a test that writes into an assembly makes its own.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from gpufarm.config import TierConfig
from tests.conftest import cdk_context

SYNTHESIZED = "synthesized"
"""The file a shared assembly folder holds once its synth has completed."""


def assembly_key(configs: list[TierConfig]) -> str:
    """A hash of everything the synth reads: the configs (in order) and the CDK context."""
    text = json.dumps(
        {"configs": [c.model_dump(mode="json") for c in configs], "context": cdk_context()}, sort_keys=True
    )
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def run_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The temp folder every xdist worker of this run shares (this session's own without xdist)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def shared_assembly(configs: list[TierConfig], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cloud assembly folder of `configs`, synthesized (gate included) once per test run."""
    from gpufarm.app import build_app

    root = run_root(tmp_path_factory)
    key = assembly_key(configs)
    folder = root / f"assembly-{key}"
    with (root / f"assembly-{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / SYNTHESIZED).exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build_app(configs, context=cdk_context(), outdir=str(folder)).synth()
            (folder / SYNTHESIZED).touch()
    return folder


def stack_template(folder: Path, stack_name: str) -> dict[str, Any]:
    """One stack's template from an assembly folder."""
    data: dict[str, Any] = json.loads((folder / f"{stack_name}.template.json").read_text())
    return data
