"""The docs cannot drift: the config reference is generated from the model, and README examples run."""

from __future__ import annotations

import json
import re
import types
import typing
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from gpufarm.cdk_context import FEATURE_FLAG_WARNING_ID
from gpufarm.config import TierConfig, build_tier, load_tier_file, merge
from gpufarm.config.loader import PRESET_DIR
from gpufarm.config.reference import CROSS_FIELD_RULES, REGENERATE, field_paths, render_reference

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "config-reference.md"


def _walk(cls: type[BaseModel], prefix: str = "") -> list[str]:
    """Every field path of `cls`, found independently of gpufarm.config.reference."""
    paths = []
    for name, field in cls.model_fields.items():
        path = f"{prefix}.{name}" if prefix else name
        paths.append(path)
        annotation = field.annotation
        # `Section | None` and `Section | Literal[...]`: the section is walked like a required one.
        if typing.get_origin(annotation) in (typing.Union, types.UnionType):
            sections = [
                a for a in typing.get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)
            ]
            if len(sections) == 1:
                annotation = sections[0]
            # `list[Section] | None`: the list's sections are walked like a required list's.
            others = [a for a in typing.get_args(annotation) if a is not type(None)]
            if not sections and len(others) == 1:
                annotation = others[0]
        if typing.get_origin(annotation) is list:
            (item,) = typing.get_args(annotation)
            if isinstance(item, type) and issubclass(item, BaseModel):
                paths += _walk(item, f"{path}[]")
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
            paths += _walk(annotation, path)
    return paths


ALL_PATHS = _walk(TierConfig)


def test_reference_is_up_to_date() -> None:
    assert REFERENCE.read_text(encoding="utf-8") == render_reference(), (
        f"docs/config-reference.md is stale; regenerate it with `{REGENERATE}`"
    )


def test_walk_reaches_nested_sections() -> None:
    assert "node_pools[].gpu_limit" in ALL_PATHS
    assert "network.flow_logs.retention_days" in ALL_PATHS
    assert "ingress.access_logs.enabled" in ALL_PATHS
    assert "models[].autoscaling.min_replicas" in ALL_PATHS
    assert "ingress.oidc.client_secret" in ALL_PATHS
    assert "models[].bedrock.model_id" in ALL_PATHS


def test_reference_lists_the_same_paths_as_the_model() -> None:
    assert sorted(field_paths()) == sorted(ALL_PATHS)


@pytest.mark.parametrize("path", ALL_PATHS)
def test_every_field_has_a_row(path: str) -> None:
    assert f"| `{path}` |" in render_reference()


@pytest.mark.parametrize(("path", "rule"), CROSS_FIELD_RULES, ids=[p for p, _ in CROSS_FIELD_RULES])
def test_cross_field_rules_name_real_fields(path: str, rule: str) -> None:
    assert path in ALL_PATHS
    assert rule.endswith(".")


# --------------------------------------------------------------------------- examples in the docs

README = REFERENCE.parents[1] / "README.md"


def _code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def test_getting_started_tier_file_example_is_valid(tmp_path: Path) -> None:
    """The `extends: poc` example of docs/getting-started.md loads, with both of its models."""
    blocks = _code_blocks((REFERENCE.parent / "getting-started.md").read_text(encoding="utf-8"), "yaml")
    (example,) = [b for b in blocks if b.startswith("# my.yaml\nextends: poc")]
    (tmp_path / "my.yaml").write_text(example, encoding="utf-8")
    tier = load_tier_file(tmp_path / "my.yaml")
    assert tier.stack_name == "gpufarm-team-a"
    assert [m.name for m in tier.models] == ["qwen3-8b", "llama-70b"]


def test_enterprise_shares_example_is_valid() -> None:
    """The split-model example in enterprise.md, with the lists it elides restated from the preset."""
    blocks = _code_blocks((REFERENCE.parent / "enterprise.md").read_text(encoding="utf-8"), "yaml")
    # The example reads from the bucket of the page's own tier file; the preset's models from its.
    (example,) = [
        yaml.safe_load(b.replace("s3://acme-llm-weights/", "s3://gpufarm-enterprise-models/"))
        for b in blocks
        if b.startswith("# shares:")
    ]
    document = yaml.safe_load((PRESET_DIR / "enterprise.yaml").read_text(encoding="utf-8"))
    split = {m["name"]: m for m in example["models"]}
    tier = build_tier(
        merge(
            document,
            {
                "node_pools": [*document["node_pools"], *example["node_pools"]],
                "models": [split.get(m["name"], m) for m in document["models"]],
            },
        )
    )
    (model,) = [m for m in tier.models if m.shares]
    parts = [(name, part.replicas, part.gpus) for name, part in model.parts()]
    assert parts == [("h100", 2, 4), ("l40s", 1, 4)]


def test_readme_constructs_example_synthesizes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's CDK app builds and passes the cdk-nag gate (examples that no longer run mislead),
    says where it wrote, and its stacks carry no feature-flag warning (it uses gpufarm's flags)."""
    (example,) = [
        b for b in _code_blocks(README.read_text(encoding="utf-8"), "python") if "class InferenceStack" in b
    ]
    # gpufarm is imported before aws_cdk, so that jsii starts with gpufarm's Node.
    assert example.index("from gpufarm.") < example.index("import aws_cdk")
    # As `python app.py` runs it from a folder: no CDK CLI, so no CDK_OUTDIR.
    monkeypatch.delenv("CDK_OUTDIR", raising=False)
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.md", "exec"), {"__name__": "readme_example"})
    assert capsys.readouterr().err.splitlines()[-1] == f"cloud assembly written to {tmp_path / 'cdk.out'}"
    out = tmp_path / "cdk.out"
    assert FEATURE_FLAG_WARNING_ID not in (out / "manifest.json").read_text(encoding="utf-8")
    template = json.loads((out / "Inference.template.json").read_text(encoding="utf-8"))
    assert "QwenBaseUrl" in template["Outputs"]
