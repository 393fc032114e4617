"""Hypothesis strategies for tier documents, built by walking the pydantic config model.

Nothing here lists the settings by hand: :func:`slots` walks :class:`TierConfig` (field types,
enums, literals, numeric bounds, defaults) over a preset's resolved document, so a field added to
the model is mutated by the next run without a change here.

A generated document is a preset (`extends: poc|production|enterprise`) with one to three
mutations: a value from inside the field's domain (bounds, members, the preset's own value, the
default), or from outside it (a wrong type, a number past a bound or huge, an odd string, an
unquoted YAML-special scalar), or a key the model does not know.
"""

from __future__ import annotations

import copy
import enum
import functools
import itertools
import math
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import annotated_types
import yaml
from hypothesis import strategies as st
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from gpufarm.config.loader import _resolve_preset, preset_names
from gpufarm.config.model import TierConfig

Path = tuple[str | int, ...]
"""Where a value sits in a tier document: keys and list indexes."""


def render_path(path: Path) -> str:
    """A document path as the loader's messages spell it (`models[0].gpus`)."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# --------------------------------------------------------------------------- walking the model


@dataclass(frozen=True)
class Slot:
    """One setting of a document: its path, its type (Optional and Annotated removed) and field."""

    path: Path
    annotation: Any
    field: FieldInfo
    optional: bool
    current: Any
    """The preset's value at `path`, or :data:`MISSING` when the preset leaves the default."""


MISSING: Any = object()


def _strip(annotation: Any) -> tuple[Any, bool, list[Any]]:
    """(type, optional, metadata) with `Annotated` and `| None` unwrapped."""
    metadata: list[Any] = []
    optional = False
    while True:
        if typing.get_origin(annotation) is typing.Annotated:
            args = typing.get_args(annotation)
            annotation, metadata = args[0], [*metadata, *args[1:]]
            continue
        if typing.get_origin(annotation) in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(members) < len(typing.get_args(annotation)):
                optional = True
                annotation = members[0] if len(members) == 1 else typing.Union[tuple(members)]  # noqa: UP007
                continue
        return annotation, optional, metadata


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The config class a value of this type is a mapping for (a union's one model member too)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        models = [a for a in typing.get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
        return models[0] if len(models) == 1 else None
    return None


def slots(model: type[BaseModel], document: Any, prefix: Path = ()) -> Iterator[Slot]:
    """Every setting of `model` reachable in `document`, depth first, sections included.

    Sections the document holds as mappings are entered; lists of sections are entered item by
    item; an optional section or a list of sections the document leaves out is entered with no
    values, so its fields are reached too.
    """
    doc = document if isinstance(document, dict) else {}
    for name, field in model.model_fields.items():
        annotation, optional, _ = _strip(field.annotation)
        path = (*prefix, name)
        current = doc.get(name, MISSING)
        yield Slot(path, annotation, field, optional, current)
        section = _model_of(annotation)
        if section is not None:
            yield from slots(section, current if isinstance(current, dict) else {}, path)
            continue
        if typing.get_origin(annotation) is list:
            (item,) = typing.get_args(annotation)
            item_model = _model_of(_strip(item)[0])
            if item_model is not None:
                # An empty or absent list is entered as one empty item: its fields are reached
                # too, and setting one makes the list (whose other required fields then miss).
                items = current if isinstance(current, list) and current else [{}]
                for i, value in enumerate(items):
                    yield from slots(item_model, value, (*path, i))


# --------------------------------------------------------------------------- values


class Raw(str):
    """A scalar written into the YAML text as typed, unquoted (`yes`, `0o17`, `.inf`, `12:30`)."""


class _Dumper(yaml.SafeDumper):
    pass


def _represent_raw(dumper: yaml.SafeDumper, value: Raw) -> yaml.ScalarNode:
    # The tag YAML would resolve the plain text to, so the emitter writes it plain (unquoted).
    tag = dumper.resolve(yaml.ScalarNode, str(value), (True, False))
    return dumper.represent_scalar(tag, str(value))


_Dumper.add_representer(Raw, _represent_raw)


def dump(document: dict[str, Any]) -> str:
    """The document as YAML text, keys in order, :class:`Raw` scalars unquoted."""
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=2**16)


YAML_SPECIAL = [
    # YAML 1.1 booleans and nulls, octal/hex/sexagesimal/exponent numbers, infinities, a date.
    Raw(s)
    for s in ("yes", "no", "on", "off", "Y", "null", "~", "017", "0o17", "0x1F", "1e3", "12:30:00")
] + [Raw(s) for s in (".inf", "-.inf", ".nan", "2001-12-14", "1_000")]

ODD_STRINGS = st.one_of(
    st.sampled_from(
        [
            "",
            " ",
            "x" * 5000,
            "ünïcødé",
            "日本語のモデル",
            "emoji-🚀",
            "\u200b",
            "line\nbreak",
            "tab\tchar",
            "-",
            "a" * 64,
            "UPPER",
            "0",
            "None",
            "true",
            "${AWS::Region}",
            "../../etc/passwd",
        ]
    ),
    st.text(max_size=40),
)

HUGE_NUMBERS = st.sampled_from([-1, 0, -(2**63), 2**63, 10**30, -(10**30), 1e308, -1e308, 0.5, -0.0])


def _bounds(field: FieldInfo, metadata: list[Any]) -> tuple[float | None, float | None, bool]:
    """(lowest, highest, strict) from the field's ge/gt/le/lt constraints."""
    low = high = None
    strict = False
    for item in [*field.metadata, *metadata]:
        if isinstance(item, annotated_types.Ge):
            low = item.ge
        elif isinstance(item, annotated_types.Gt):
            low, strict = item.gt, True
        elif isinstance(item, annotated_types.Le):
            high = item.le
        elif isinstance(item, annotated_types.Lt):
            high = item.lt
    return low, high, strict


def _has_validator(field: FieldInfo, annotation: Any) -> bool:
    """The field's type carries a check of its own (a pattern, a closed set of numbers, ...)."""
    metadata = [*field.metadata, *_strip(field.annotation)[2]]
    checks = [m for m in metadata if not isinstance(m, annotated_types.BaseMetadata)]
    return bool(checks) or (typing.get_origin(annotation) is list and _list_item_checked(annotation))


def _list_item_checked(annotation: Any) -> bool:
    (item,) = typing.get_args(annotation)
    return bool([m for m in _strip(item)[2] if not isinstance(m, annotated_types.BaseMetadata)])


def _default(field: FieldInfo) -> Any:
    if field.default is not PydanticUndefined:
        value = field.default
    elif field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
    else:
        return MISSING
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, list):
        return [v.value if isinstance(v, enum.Enum) else v for v in value]
    return value


def inside(slot: Slot) -> st.SearchStrategy[Any]:
    """Values the field's own type admits: members, in-bound numbers, the preset's or default value.

    Cross-field rules (validate.py) may still refuse them; that is for the loader to say.
    """
    annotation, field = slot.annotation, slot.field
    known = [v for v in (slot.current, _default(field)) if v is not MISSING]
    choices: list[st.SearchStrategy[Any]] = [st.sampled_from(known)] if known else []
    if slot.optional:
        choices.append(st.none())
    low, high, strict = _bounds(field, _strip(field.annotation)[2])
    if _model_of(annotation) is not None:
        pass  # a section: its preset or default value (above), or its fields one by one
    elif isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        choices.append(st.sampled_from([m.value for m in annotation]))
    elif typing.get_origin(annotation) is typing.Literal:
        choices.append(st.sampled_from(typing.get_args(annotation)))
    elif annotation is bool:
        choices.append(st.booleans())
    elif annotation is int and not _has_validator(field, annotation):
        lo = int(low) + (1 if strict else 0) if low is not None else -5
        hi = int(high) if high is not None else max(lo, 0) + 100_000
        choices.append(st.integers(min_value=lo, max_value=hi))
    elif annotation is float:
        choices.append(
            st.floats(
                min_value=low if low is not None else -1e6,
                max_value=high if high is not None else 1e6,
                exclude_min=strict,
                allow_nan=False,
                allow_infinity=False,
            )
        )
    elif annotation is str and not _has_validator(field, annotation):
        max_len = next((m.max_length for m in field.metadata if hasattr(m, "max_length")), None)
        min_len = next((m.min_length for m in field.metadata if hasattr(m, "min_length")), 0) or 0
        choices.append(st.text(min_size=min_len, max_size=min(max_len or 60, 60)))
    elif typing.get_origin(annotation) is list:
        (item,) = typing.get_args(annotation)
        item_type = _strip(item)[0]
        if isinstance(item_type, type) and issubclass(item_type, enum.Enum):
            choices.append(st.lists(st.sampled_from([m.value for m in item_type]), unique=True, max_size=6))
        elif isinstance(slot.current, list) and _model_of(item_type) is None:
            choices.append(
                st.lists(st.sampled_from(slot.current), unique=True) if slot.current else st.just([])
            )
    if not choices:
        return st.nothing()
    return st.one_of(choices)


def outside(slot: Slot) -> st.SearchStrategy[Any]:
    """Values from outside the field's domain, or at its edges: the loader must name the field."""
    annotation, field = slot.annotation, slot.field
    low, high, _ = _bounds(field, _strip(field.annotation)[2])
    edges: list[Any] = []
    for bound in (low, high):
        if bound is not None:
            edges += [bound - 1, bound + 1, bound]
    if annotation is float and low is not None:
        edges.append(low - 0.001)
    return st.one_of(
        st.sampled_from(edges) if edges else st.nothing(),
        HUGE_NUMBERS,
        ODD_STRINGS,
        st.sampled_from(YAML_SPECIAL),
        st.sampled_from([True, False, None, [], [1, "a"], {}, {"x": 1}, ["", None]]),
    )


# --------------------------------------------------------------------------- documents


@dataclass(frozen=True)
class Mutation:
    """One change to a preset document."""

    path: Path
    value: Any
    kind: str
    """'inside' (the field's own domain), 'outside' or 'unknown-key' (a key the model lacks)."""

    def __str__(self) -> str:
        return f"{self.kind} {render_path(self.path)} = {self.value!r}"


@dataclass(frozen=True)
class TierDocument:
    """A generated tier file: `extends: <preset>` with the mutated sections."""

    preset: str
    mutations: tuple[Mutation, ...]
    text: str
    encoding: str = "utf-8"
    """How the file is saved: 'utf-8', 'utf-8-sig' (with a byte-order mark) or 'utf-8-crlf'."""
    duplicate: str | None = None
    """A top-level key written twice (first with the preset's value), or None."""

    @property
    def data(self) -> bytes:
        """The file's bytes."""
        if self.encoding == "utf-8-crlf":
            return self.text.replace("\n", "\r\n").encode("utf-8")
        return self.text.encode(self.encoding)


ENCODINGS = ("utf-8", "utf-8-sig", "utf-8-crlf")
"""Encodings a tier file is accepted in; the command-line property feeds UTF-16, Latin-1 and
binary files, which the loader refuses naming the file."""

DUPLICATE_KEYS = True
"""Whether documents may write a touched section twice: test_tier_documents requires such a
document to be rejected naming the duplicated key."""


_PRESETS: dict[str, dict[str, Any]] = {}


def resolved_preset(name: str) -> dict[str, Any]:
    """A preset's document with its own `extends` chain merged (cached; copy before changing)."""
    if name not in _PRESETS:
        _PRESETS[name] = _resolve_preset(name, seen=(), chain=()).data
    return _PRESETS[name]


def _set(document: dict[str, Any], path: Path, value: Any) -> None:
    """Put `value` at `path`, making the sections on the way (an earlier mutation may have
    replaced one with a scalar: the later one wins)."""
    node: Any = document
    for part, below in itertools.pairwise(path):
        want: type = list if isinstance(below, int) else dict
        child = node[part] if isinstance(part, int) else node.get(part)
        if not isinstance(child, want):
            child = want()
            node[part] = child
        if isinstance(below, int):
            child.extend({} for _ in range(below + 1 - len(child)))
        node = child
    # A copy: the value may be the cached preset's own list or mapping, and a later mutation
    # below it must change neither the preset nor the recorded mutation.
    node[path[-1]] = copy.deepcopy(value)


UNKNOWN_KEYS = st.one_of(
    st.sampled_from(
        [
            "nmae",
            "Name",
            "Replicas",
            "replica",
            "gpu",
            "extra",
            "enabled_",
            "tls",
            "ünknown",
            "0",
            "<<",
            "null",
        ]
    ),
    st.from_regex(r"[A-Za-z][A-Za-z_]{0,12}", fullmatch=True),
)


@st.composite
def mutation(draw: st.DrawFn, preset: str, kinds: tuple[str, ...]) -> Mutation:
    """One mutation of `preset` of one of `kinds`."""
    candidates = [slot for slot, _ in _slot_strategies(preset, "outside")]
    kind = draw(st.sampled_from(kinds))
    if kind == "unknown-key":
        sections = [()] + [s.path for s in candidates if _model_of(s.annotation) is not None and s.current]
        where = draw(st.sampled_from(sections))
        key = draw(UNKNOWN_KEYS)
        # Only a key the model does not define at that place.
        holder = _section_model(where)
        if holder is not None and key in holder.model_fields:
            key += "_x"
        return Mutation((*where, key), draw(st.sampled_from([1, "x", True, {"a": 1}])), kind)
    slot, strategy = draw(st.sampled_from(_slot_strategies(preset, kind)))
    return Mutation(slot.path, draw(strategy), kind)


@functools.cache
def _slot_strategies(preset: str, kind: str) -> list[tuple[Slot, st.SearchStrategy[Any]]]:
    """Each setting of the preset with its values of `kind` ('inside' or 'outside'), where any."""
    pairs = [
        (s, inside(s) if kind == "inside" else outside(s)) for s in slots(TierConfig, resolved_preset(preset))
    ]
    return [(s, strategy) for s, strategy in pairs if not strategy.is_empty]


def _section_model(path: Path) -> type[BaseModel] | None:
    model: type[BaseModel] | None = TierConfig
    for part in path:
        if model is None:
            return None
        if isinstance(part, int):
            continue
        annotation = _strip(model.model_fields[part].annotation)[0]
        if typing.get_origin(annotation) is list:
            annotation = _strip(typing.get_args(annotation)[0])[0]
        model = _model_of(annotation)
    return model


@st.composite
def tier_documents(
    draw: st.DrawFn,
    kinds: tuple[str, ...] = ("inside", "outside", "unknown-key"),
    max_mutations: int = 3,
) -> TierDocument:
    """A preset with 1 to `max_mutations` mutations, written as a user tier file would be."""
    preset = draw(st.sampled_from(preset_names()))
    mutations = draw(st.lists(mutation(preset, kinds), min_size=1, max_size=max_mutations))
    document = copy.deepcopy(resolved_preset(preset))
    for m in mutations:
        _set(document, m.path, m.value)
    # `extends` merges mappings key by key and replaces lists: every touched top-level
    # section is written in full, as mutated, so the merge gives back exactly `document`.
    touched = list(dict.fromkeys(str(m.path[0]) for m in mutations))
    text = dump({"extends": preset, **{key: document[key] for key in touched}})
    duplicate = None
    if DUPLICATE_KEYS and draw(st.booleans()):
        duplicate = draw(st.sampled_from(touched))
        original = resolved_preset(preset).get(duplicate, {})
        text = dump({"extends": preset, duplicate: original}) + text.split("\n", 1)[1]
    encoding = draw(st.sampled_from(ENCODINGS))
    return TierDocument(preset, tuple(mutations), text, encoding, duplicate)


def is_number(value: Any) -> bool:
    """An int or float (not a bool), finite or not."""
    return isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(float(value))
