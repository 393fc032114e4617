"""Read a tier from a preset or a user file, resolve `extends`, validate, and explain errors.

A user file may start with ``extends: <preset>`` (or a path to another tier file, relative to the
file): mappings merge key by key, and any other value (lists included) replaces the inherited one.
"""

from __future__ import annotations

import json
import typing
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from gpufarm.config._typing import is_union, split_optional
from gpufarm.config.errors import ConfigError, ConfigIssue
from gpufarm.config.model import TierConfig
from gpufarm.config.validate import validate_tier
from gpufarm.config.yaml_reader import Document, Origin, read_document, render_path
from gpufarm.config.yaml_reader import Path_ as DocPath
from gpufarm.debug import kind_of

PRESET_DIR = Path(__file__).parent
"""Folder holding the preset tier files (`<name>.yaml`)."""


def preset_names() -> list[str]:
    """Names of the shipped presets, sorted."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def load_preset(name: str) -> TierConfig:
    """Load and validate a shipped preset by name (``poc``, ...)."""
    document = _resolve_preset(name, seen=(), chain=())
    return _build(document, source=f"preset {name!r}", top=_preset_shown(name))


def load_tier_file(path: str | Path) -> TierConfig:
    """Load and validate a user tier file, following its `extends` chain.

    The file is read within bounded time and memory (:mod:`gpufarm.config.yaml_reader`); an
    empty or blank path is refused rather than read as the current folder.
    """
    if not str(path).strip():
        raise ConfigError(
            [
                ConfigIssue(
                    path="tier_file", message=f"must be the path of a tier YAML file, got {str(path)!r}"
                )
            ],
            source="tier selection",
        )
    file = Path(path)
    return _build(_read_with_extends(file, seen=(), chain=()), source=str(file), top=str(file))


def build_tier(
    document: dict[str, Any], *, source: str = "tier config", origins: dict[DocPath, Origin] | None = None
) -> TierConfig:
    """Validate a merged tier document; raise :class:`ConfigError` listing every issue.

    `origins` (from :func:`~gpufarm.config.yaml_reader.read_document`) lets messages show a value
    as the file wrote it when YAML converted it (``012345670123``, ``no``, ``1.10``).
    """
    return _build(Document(data=document, origins=dict(origins or {})), source=source, top=source)


def _build(document: Document, *, source: str, top: str) -> TierConfig:
    origins = {render_path(path): origin for path, origin in document.origins.items()}
    try:
        # JSON mode in strict: strings may become enums, but '8' never silently becomes 8.
        cfg = TierConfig.model_validate_json(json.dumps(document.data, default=str), strict=True)
    except ValidationError as exc:
        issues = [_issue(err, origins) for err in _resolve_unions(exc.errors())]
        raise ConfigError(_placed(issues, origins, document.via, top), source=source) from None
    found = validate_tier(cfg)
    if found:
        found = [_written(issue, origins) for issue in found]
        raise ConfigError(_placed(found, origins, document.via, top), source=source)
    return cfg


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge `override` into a copy of `base`: mappings merge, everything else replaces."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


# --------------------------------------------------------------------------- reading files


def _preset_shown(name: str) -> str:
    return f"preset {name!r}"


def _resolve_preset(name: str, seen: tuple[str, ...], chain: tuple[str, ...], source: str = "") -> Document:
    """The preset's document; `source` names the file whose `extends` asked for it, if any."""
    if name not in preset_names():
        raise ConfigError(
            [
                ConfigIssue(
                    path="extends" if seen else "tier",
                    message=f"must be one of {', '.join(repr(n) for n in preset_names())}, got {name!r}",
                )
            ],
            source=source or "tier selection",
        )
    return _read_with_extends(PRESET_DIR / f"{name}.yaml", seen=seen, chain=chain, preset=name)


def _through(shown: str, chain: tuple[str, ...]) -> str:
    """How errors name a file: with the `extends` chain that reached it, if any."""
    return f"{shown} (reached through {' extends '.join(chain)})" if len(chain) > 1 else shown


def _covered(override: dict[str, Any], path: DocPath) -> bool:
    """Whether merging `override` replaces the value at `path` of the base document."""
    node: Any = override
    for part in path:
        if not isinstance(node, dict):
            return True
        if part not in node:
            return False
        node = node[part]
    return True


def _read_with_extends(
    file: Path, seen: tuple[str, ...], chain: tuple[str, ...], preset: str | None = None, written: str = ""
) -> Document:
    """The file's document merged over the one it extends.

    `chain` names the files that led here as each `extends` wrote them; `written` is how the one
    that extends this file names it.
    """
    shown = _preset_shown(preset) if preset else str(file)
    chain = (*chain, preset or written or str(file))
    source = _through(shown, chain)
    key = str(file.resolve())
    if key in seen:
        raise ConfigError(
            [ConfigIssue(path="extends", message=f"forms a cycle: {' -> '.join((*seen, key))}")],
            source=source,
        )
    document = read_document(file, source=source, shown=shown)
    if preset is None:  # a preset's values are documented; a team file's may be out of sight
        document.via[shown] = " extends ".join(chain)
    parent = document.data.pop("extends", None)
    document.origins.pop(("extends",), None)
    if parent is None:
        return document
    if not isinstance(parent, str):
        raise ConfigError(
            [ConfigIssue(path="extends", message=f"must be a preset name or a file path, got {parent!r}")],
            source=source,
        )
    if parent.endswith((".yaml", ".yml")):
        base = _read_with_extends((file.parent / parent), seen=(*seen, key), chain=chain, written=parent)
    else:
        base = _resolve_preset(parent, seen=(*seen, key), chain=chain, source=source)
    origins = {path: o for path, o in base.origins.items() if not _covered(document.data, path)}
    return Document(
        data=merge(base.data, document.data),
        origins=origins | document.origins,
        via=base.via | document.via,
    )


def _placed(
    issues: list[ConfigIssue], origins: dict[str, Origin], via: dict[str, str], top: str
) -> list[ConfigIssue]:
    """Issues about a value that a user file further up the `extends` chain set say where it was set.

    Values from a preset are not annotated: the preset is documented and shipped, and its name is
    in the file's own `extends` chain.
    """
    out = []
    for issue in issues:
        origin = origins.get(issue.path)
        if origin is not None and origin.file != top and origin.file in via:
            issue = ConfigIssue(
                path=issue.path,
                message=f"{issue.message} (set in {origin.file}, line {origin.line}; {via[origin.file]})",
            )
        out.append(issue)
    return out


def _written(issue: ConfigIssue, origins: dict[str, Origin]) -> ConfigIssue:
    """A check's issue about a value YAML converted also says what the file wrote."""
    origin = origins.get(issue.path)
    if origin is None or origin.text is None:
        return issue
    return ConfigIssue(
        path=issue.path,
        message=f"{issue.message} (written {origin.text}, which YAML reads as {origin.read_as})",
    )


# --------------------------------------------------------------------------- pydantic errors


def _model_names(root: type[BaseModel]) -> frozenset[str]:
    """The class names of every model reachable from `root`: the tags pydantic gives union members."""
    seen: dict[str, type[BaseModel]] = {}
    todo: list[Any] = [root]
    while todo:
        annotation = todo.pop()
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if annotation.__name__ in seen:
                continue
            seen[annotation.__name__] = annotation
            todo += [field.annotation for field in annotation.model_fields.values()]
        else:
            todo += list(typing.get_args(annotation))
    return frozenset(seen)


_MODEL_NAMES = _model_names(TierConfig)


def _union_tag(part: int | str) -> bool:
    """pydantic names the member of a union an error came from: 'literal[...]' or a model's class
    name. Only gpufarm's own model names count, so a user's capitalised key (`Name:`) stays in the
    path it was written at."""
    return isinstance(part, str) and (part.startswith("literal[") or part in _MODEL_NAMES)


def _resolve_unions(errors: list[ErrorDetails]) -> list[ErrorDetails]:
    """Errors of `Section | Literal[...]` fields, reported once in the user's terms.

    pydantic reports a failure against every member. A mapping was meant for the section: keep
    the section's errors (without the member name in the path). Anything else gets one error
    naming the literals and 'a mapping'.
    """
    out: list[ErrorDetails] = []
    unions: dict[tuple[int | str, ...], list[tuple[str, ErrorDetails]]] = {}
    for err in errors:
        loc = tuple(err["loc"])
        at = next((i for i, part in enumerate(loc) if _union_tag(part)), None)
        if at is None:
            out.append(err)
        else:
            unions.setdefault(loc[:at], []).append((str(loc[at]), {**err, "loc": loc[:at] + loc[at + 1 :]}))
    for prefix, members in unions.items():
        section = [e for tag, e in members if not tag.startswith("literal[")]
        # The section's own type error (its loc ends at the union) means no mapping was given;
        # a type error deeper in (a sub-section given a scalar) is the section's to report.
        if section and not any(
            e["type"] in ("model_type", "model_attributes_type") and tuple(e["loc"]) == prefix
            for e in section
        ):
            out += section
            continue
        literals = [e for tag, e in members if tag.startswith("literal[")]
        given = (literals or section)[0].get("input")
        expected = " or ".join(str(e.get("ctx", {}).get("expected")) for e in literals)
        out.append(
            {
                "type": "union_mismatch",
                "loc": prefix,
                "msg": "",
                "input": given,
                "ctx": {"expected": f"{expected} or a mapping" if expected else "a mapping"},
            }
        )
    return out


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _model_at(loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The config class that holds the field at `loc` (used to list the allowed keys)."""
    current: Any = TierConfig
    for part in loc:
        current = _unwrap(current)
        if isinstance(part, int):
            args = typing.get_args(current)
            current = args[0] if args else None
        elif isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(part)
            current = field.annotation if field else None
        else:
            return None
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    """Strip Optional/Annotated so lists and models can be walked."""
    if typing.get_origin(annotation) is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    inner, optional = split_optional(annotation)
    if is_union(inner):  # `Section | Literal[...]`: keys belong to the section
        models = [a for a in typing.get_args(inner) if isinstance(a, type) and issubclass(a, BaseModel)]
        return models[0] if len(models) == 1 else inner
    return _unwrap(inner) if optional else annotation


def _issue(err: ErrorDetails, origins: dict[str, Origin] | None = None) -> ConfigIssue:
    loc = tuple(err["loc"])
    kind = err["type"]
    given = err.get("input")
    ctx = err.get("ctx", {})
    # A value YAML converted is shown as written: `012345670123`, not the octal number it became.
    origin = (origins or {}).get(_path(loc))
    written = origin.text if origin is not None and not isinstance(given, dict | list) else None
    got = (
        f"got {written} (which YAML reads as {origin.read_as})"
        if origin and written
        else f"got {_show(given)}"
    )
    messages = {
        "missing": "is required",
        "int_type": f"must be an integer, {got}",
        "int_from_float": f"must be a whole number, {got}",
        "float_type": f"must be a number, {got}",
        "bool_type": f"must be true or false, {got}",
        "list_type": f"must be a list, {got}",
        "model_type": f"must be a mapping, {got}",
        "model_attributes_type": f"must be a mapping, {got}",
        "dict_type": f"must be a mapping, {got}",
        "enum": f"must be one of {ctx.get('expected')}, {got}",
        "literal_error": f"must be one of {ctx.get('expected')}, {got}",
        "union_mismatch": f"must be {ctx.get('expected')}, {got}",
        "greater_than_equal": f"must be >= {ctx.get('ge')}, {got}",
        "greater_than": f"must be > {ctx.get('gt')}, {got}",
        "less_than_equal": f"must be <= {ctx.get('le')}, {got}",
        "less_than": f"must be < {ctx.get('lt')}, {got}",
        "string_pattern_mismatch": f"must match the pattern {ctx.get('pattern')}, {got}",
        # The value itself can be long: show its length, not the text.
        "string_too_long": f"must be at most {ctx.get('max_length')} characters, "
        f"got {len(given) if isinstance(given, str) else _show(given)}",
    }
    if kind == "extra_forbidden":
        holder = _model_at(loc[:-1])
        allowed = ", ".join(holder.model_fields) if holder else "see the config reference"
        return ConfigIssue(path=_path(loc), message=f"is not a known setting (allowed: {allowed})")
    if kind == "string_type":
        shown = written if written is not None else json.dumps(given) if isinstance(given, bool) else given
        hint = f" (quote it: '{shown}')" if isinstance(given, int | float | bool) else ""
        return ConfigIssue(path=_path(loc), message=f"must be a string{hint}, {got}")
    if kind in ("too_short", "too_long"):
        bound = "at least" if kind == "too_short" else "at most"
        limit = ctx.get("min_length" if kind == "too_short" else "max_length")
        return ConfigIssue(
            path=_path(loc), message=f"must have {bound} {limit} item(s), got {ctx.get('actual_length')}"
        )
    if kind == "value_error":
        return ConfigIssue(path=_path(loc), message=str(err["msg"]).removeprefix("Value error, "))
    return ConfigIssue(path=_path(loc), message=messages.get(kind, f"{err['msg']}, {got}"))


def _show(value: Any) -> str:
    """A value as the YAML it came from reads, not as Python prints it (`None`, `True`)."""
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, dict):
        return "a mapping"
    if value is None or isinstance(value, bool):
        return kind_of(value)
    return repr(value)
