"""Generated tier files: each is rejected with exit 2 naming a field, or builds and passes the gates.

The documents come from :mod:`tests.property.model_strategies`: a preset (`extends: ...`) with a
few settings changed to values from inside and outside their domains. They go through the path
`cdk synth -c tier_file=...` takes (:func:`gpufarm.app.select`, a :class:`ConfigError` rendered as
the app renders it), so a failure here is a failure a user would see.

Validating is cheap and runs for many documents; synthesizing costs seconds, so only a few of
the valid ones are synthesized (one App each, in the session's one jsii process).
"""

from __future__ import annotations

import functools
import json
import re
import tempfile
import typing
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

import pytest
import yaml
from hypothesis import event, given, note, settings
from hypothesis import strategies as st
from pydantic import BaseModel, TypeAdapter, ValidationError

from gpufarm.app import EXIT_BAD_INPUT, EXIT_OK, build_app, select
from gpufarm.config import ConfigError, TierConfig
from gpufarm.config.loader import preset_names
from gpufarm.deploy_rules import check_template
from tests.conftest import cdk_context, nag_violations
from tests.property.conftest import examples
from tests.property.model_strategies import (
    Mutation,
    TierDocument,
    _model_of,
    _strip,
    render_path,
    resolved_preset,
    slots,
    tier_documents,
)

TOP_LEVEL = set(TierConfig.model_fields) | {"extends"}
ISSUE = re.compile(r"^  - (?P<path>[^\s:]+): (?P<message>\S.*)$")
PATH = re.compile(r"^[^\s.\[\]:]+(\[\d+\]|\.[^\s.\[\]:]+)*$")


def load(document: TierDocument, folder: Path) -> tuple[int, str, list[TierConfig]]:
    """Exit status, standard error and tiers of `cdk synth -c tier_file=<document>` up to synth."""
    file = folder / "tier.yaml"
    file.write_bytes(document.data)
    try:
        configs = select([], str(file), options=("-c tier", "-c tier_file"), source="context")
    except ConfigError as exc:
        return EXIT_BAD_INPUT, exc.render(), []
    return EXIT_OK, "", configs


def live(document: TierDocument) -> list[Mutation]:
    """Mutations no later one overwrote (a later one at the same place, above or below it)."""

    def related(a: Mutation, b: Mutation) -> bool:
        n = min(len(a.path), len(b.path))
        return a.path[:n] == b.path[:n]

    ms = document.mutations
    return [m for i, m in enumerate(ms) if not any(related(m, later) for later in ms[i + 1 :])]


@functools.cache
def _field_adapter(path: tuple[str | int, ...]) -> TypeAdapter[Any] | None:
    """A validator for the value at `path` alone: the field's type with its constraints."""
    model: type[BaseModel] | None = TierConfig
    annotation: Any = None
    field = None
    for part in path:
        if isinstance(part, int):
            if annotation is None or typing.get_origin(_strip(annotation)[0]) is not list:
                return None
            annotation = typing.get_args(_strip(annotation)[0])[0]
            model, field = _model_of(_strip(annotation)[0]), None
            continue
        if model is None or part not in model.model_fields:
            return None
        field = model.model_fields[part]
        annotation = field.annotation
        model = _model_of(_strip(annotation)[0])
    if field is None:
        return TypeAdapter(annotation) if annotation is not None else None
    return TypeAdapter(Annotated[field.annotation, field])


def refused_by_type(mutation: Mutation) -> bool:
    """The value, as YAML reads it, fails the field's own type and constraints.

    Such a value must be reported at the field's path (or below it, for a section), whatever
    else the document holds.
    """
    if mutation.kind == "unknown-key":
        return True
    adapter = _field_adapter(mutation.path)
    if adapter is None:
        return False
    value = yaml.safe_load(yaml.dump({"v": mutation.value}, Dumper=_dumper()))["v"]
    try:
        adapter.validate_json(json.dumps(value, default=str), strict=True)
    except ValidationError:
        return True
    return False


def _dumper() -> type[yaml.SafeDumper]:
    from tests.property.model_strategies import _Dumper

    return _Dumper


def assert_rejected_cleanly(document: TierDocument, file: Path, stderr: str) -> None:
    """Exit 2's message: the file, then one line per issue, each naming a field path."""
    lines = stderr.splitlines()
    assert lines[0] == f"invalid {file}:", stderr
    assert len(lines) > 1, f"no issue listed:\n{stderr}"
    paths = []
    for line in lines[1:]:
        match = ISSUE.match(line)
        assert match, f"issue line does not name a field path: {line!r}"
        path = match["path"]
        assert PATH.match(path), f"not a field path: {path!r} in {line!r}"
        added = {str(m.path[0]) for m in document.mutations if m.kind == "unknown-key"}
        assert re.split(r"[.\[]", path)[0] in TOP_LEVEL | added, f"unknown top-level setting in {line!r}"
        paths.append(path)
    if document.duplicate is not None:
        # The reader refuses a duplicated key before the model sees the document, so the
        # other changes are not judged in the same run.
        assert any(re.split(r"[.\[]", p)[0] == document.duplicate for p in paths), (
            f"{document.duplicate} is written twice, but no issue names it:\n{stderr}"
        )
        return
    for m in live(document):
        if refused_by_type(m):
            where = render_path(m.path)
            assert any(p == where or p.startswith((f"{where}.", f"{where}[")) for p in paths), (
                f"{m} is outside the field's type, but no issue names {where}:\n{stderr}"
            )


def _value_at(data: Any, path: tuple[str | int, ...]) -> Any:
    for part in path:
        data = data[part]
    return data


def assert_kept(document: TierDocument, config: TierConfig) -> None:
    """A valid document's changed settings are in the built tier, as YAML read them."""
    built = config.model_dump(mode="json")
    for m in live(document):
        if m.kind != "inside":
            continue
        expected = yaml.safe_load(yaml.dump({"v": m.value}, Dumper=_dumper()))["v"]
        assert _contains(_value_at(built, m.path), expected), f"{m} was not kept"


def _contains(built: Any, given: Any) -> bool:
    """`given` is in `built`: mappings key by key (the tier adds defaults), the rest equal."""
    if isinstance(given, dict):
        return isinstance(built, dict) and all(
            k in built and _contains(built[k], v) for k, v in given.items()
        )
    if isinstance(given, list):
        return (
            isinstance(built, list)
            and len(built) == len(given)
            and all(_contains(b, g) for b, g in zip(built, given, strict=True))
        )
    return bool(built == given)


@settings(max_examples=examples(250), deadline=timedelta(seconds=5))
@given(document=tier_documents())
def test_generated_tier_file_is_rejected_naming_a_field_or_builds(document: TierDocument) -> None:
    note(document.text)
    with tempfile.TemporaryDirectory() as folder:
        status, stderr, configs = load(document, Path(folder))
        event("rejected" if status == EXIT_BAD_INPUT else "built")
        assert document.duplicate is None or status == EXIT_BAD_INPUT, (
            f"{document.duplicate} is written twice, and the document was accepted"
        )
        if status == EXIT_BAD_INPUT:
            assert_rejected_cleanly(document, Path(folder) / "tier.yaml", stderr)
        else:
            assert [c.name for c in configs] == [configs[0].name]
            assert_kept(document, configs[0])


DRAWS_UNTIL_VALID = 60


@settings(max_examples=examples(3), deadline=None)
@given(data=st.data())
def test_valid_generated_tier_synthesizes_and_passes_the_gates(data: st.DataObject) -> None:
    """Up to 60 documents with in-domain changes are drawn until one validates; it is synthesized
    with the compliance gate (cdk-nag packs and deploy rules as validation plugins) and each
    template is checked against the deploy rules directly too.

    60, not 20: the ec2-poc preset refuses turning on the EKS-only settings every tier carries with
    their defaults (inspection, an NLB, node groups, capacity classes...), so more of its in-domain
    draws are rejected (cleanly, which the loop checks) before one validates."""
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(DRAWS_UNTIL_VALID):
            document = data.draw(tier_documents(kinds=("inside",), max_mutations=2))
            status, stderr, configs = load(document, Path(folder))
            if status == EXIT_OK:
                break
            assert_rejected_cleanly(document, Path(folder) / "tier.yaml", stderr)
        else:
            pytest.fail(
                f"no valid document in {DRAWS_UNTIL_VALID} draws: the generator no longer reaches valid tiers"
            )
        note(document.text)
        outdir = Path(folder) / "cdk.out"
        app = build_app(configs, context=cdk_context(), outdir=str(outdir))
        try:
            assembly = app.synth()
        except RuntimeError as exc:
            if "ValidationFailed" in str(exc):
                pytest.fail(f"compliance gate failed: {nag_violations(outdir, annotations=False)}")
            raise
        for stack in assembly.stacks:
            assert [v.render() for v in check_template(stack.template)] == []


def test_the_walk_reaches_every_setting_of_the_model() -> None:
    """New settings are generated without a change here: the walk over the presets reaches
    every field of every config class reachable from TierConfig."""
    reached = {
        (type_name, name)
        for preset in preset_names()
        for slot in slots(TierConfig, resolved_preset(preset))
        for type_name, name in [_owner(slot.path)]
    }
    expected: set[tuple[str, str]] = set()
    todo: list[type[BaseModel]] = [TierConfig]
    while todo:
        model = todo.pop()
        for name, field in model.model_fields.items():
            if (model.__name__, name) in expected:
                continue
            expected.add((model.__name__, name))
            annotation = _strip(field.annotation)[0]
            if typing.get_origin(annotation) is list:
                annotation = _strip(typing.get_args(annotation)[0])[0]
            if (section := _model_of(annotation)) is not None:
                todo.append(section)
    assert sorted(expected - reached) == []


def _owner(path: tuple[str | int, ...]) -> tuple[str, str]:
    """The config class holding the last key of `path`, and that key."""
    model: type[BaseModel] = TierConfig
    for part in path[:-1]:
        if isinstance(part, int):
            continue
        annotation = _strip(model.model_fields[part].annotation)[0]
        if typing.get_origin(annotation) is list:
            annotation = _strip(typing.get_args(annotation)[0])[0]
        section = _model_of(annotation)
        assert section is not None
        model = section
    return model.__name__, str(path[-1])
