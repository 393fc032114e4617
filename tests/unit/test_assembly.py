"""The one cloud-assembly reader (gpufarm.assembly.read_assembly) that review and cost share."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpufarm.assembly import AssemblyError, AssemblyStack, read_assembly


def _write(folder: Path, artifacts: dict[str, Any], templates: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for file, template in templates.items():
        (folder / file).write_text(json.dumps(template))
    (folder / "manifest.json").write_text(json.dumps({"version": "48.0.0", "artifacts": artifacts}))
    return folder


def _stack(file: str, **extra: Any) -> dict[str, Any]:
    return {"type": "aws:cloudformation:stack", "properties": {"templateFile": file}, **extra}


def test_stacks_in_artifact_id_order_with_nested_assemblies_in_place(tmp_path: Path) -> None:
    _write(
        tmp_path / "out" / "assembly-Stage",
        {"inner": _stack("inner.json", environment="aws://123456789012/eu-west-1")},
        {"inner.json": {"Resources": {}}},
    )
    folder = _write(
        tmp_path / "out",
        {
            "z-stack": {**_stack("z.json"), "properties": {"templateFile": "z.json", "stackName": "Zed"}},
            "Stage": {"type": "cdk:cloud-assembly", "properties": {"directoryName": "assembly-Stage"}},
            "a-stack": _stack(
                "a.json", displayName="Stage/a", environment="aws://unknown-account/unknown-region"
            ),
            "Tree": {"type": "cdk:tree", "properties": {"file": "tree.json"}},
        },
        {"z.json": {"Resources": {}}, "a.json": {"Metadata": {"k": 1}}},
    )
    assert read_assembly(folder) == [
        AssemblyStack(artifact_id="inner", name="inner", region="eu-west-1", template={"Resources": {}}),
        AssemblyStack(
            artifact_id="a-stack", name="Stage/a", region="us-east-1", template={"Metadata": {"k": 1}}
        ),
        AssemblyStack(artifact_id="z-stack", name="Zed", region="us-east-1", template={"Resources": {}}),
    ]


def test_an_assembly_without_stacks_reads_as_none(tmp_path: Path) -> None:
    folder = _write(tmp_path / "out", {"Tree": {"type": "cdk:tree", "properties": {"file": "t.json"}}}, {})
    assert read_assembly(folder) == []


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "'{dir}/missing' is not a folder"),
        (
            "empty",
            "'{dir}/empty' is not a cloud assembly (no manifest.json); give the folder `cdk synth` or "
            "`gpufarm synth` wrote (cdk.out)",
        ),
        (
            "no-template",
            "cannot read the template of 's' ('{dir}/no-template/s.json'): No such file or directory",
        ),
        ("loop", "'{dir}/loop': a nested assembly leads back to a folder already read"),
    ],
)
def test_a_folder_that_cannot_be_read_is_rejected(tmp_path: Path, setup: str, message: str) -> None:
    if setup == "empty":
        (tmp_path / "empty").mkdir()
    if setup == "no-template":
        _write(tmp_path / setup, {"s": _stack("s.json")}, {})
    if setup == "loop":
        _write(
            tmp_path / setup,
            {"again": {"type": "cdk:cloud-assembly", "properties": {"directoryName": "."}}},
            {},
        )
    with pytest.raises(AssemblyError) as raised:
        read_assembly(tmp_path / setup)
    assert str(raised.value) == message.format(dir=tmp_path)
