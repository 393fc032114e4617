"""Write an engine's server flag list (gpufarm/data/<engine>_serve_flags.yaml) from its release wheel.

    python scripts/engine_serve_flags.py sglang sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl
    python scripts/engine_serve_flags.py trtllm tensorrt_llm-1.2.1-cp312-cp312-linux_x86_64.whl

The wheel is read as a zip file and its sources are parsed with `ast`; nothing in it is imported
or run. What each engine's parser registers:

- **sglang** (`sglang serve`, `python -m sglang.launch_server`): `ServerArgs.add_cli_args` in
  `sglang/srt/server_args.py` calls `add_cli_args_from_dataclass(parser, ServerArgs)`, which
  registers one flag per field of the namespace classes listed in `_INPUT_NAMESPACES`
  (`sglang/srt/arg_groups/fields/*.py`) whose annotation is `A[T, "help"]` or `A[T, Arg(...)]`:
  `Arg(cli_name=...)` or `--<field with - for _>`, plus `Arg(aliases=[...])`, unless
  `Arg(no_cli=True)` (`sglang/srt/arg_groups/arg_utils.py`). `add_cli_args` then adds a few
  flags by hand (`parser.add_argument("--config", ...)`); those are read too.
- **trtllm** (`trtllm-serve`): the `@click.option(...)` decorators of the `serve` command in
  `tensorrt_llm/commands/serve.py`, every option string that starts with `-`.

The output names the version, the wheel file, the source file and its sha256.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import sys
import zipfile
from pathlib import Path

SGLANG_SERVER_ARGS = "sglang/srt/server_args.py"
TRTLLM_SERVE = "tensorrt_llm/commands/serve.py"


def _annotation_flags(field: str, annotation: ast.expr) -> list[str]:
    """The option strings of one `name: A[T, ...]` field, or none when it has no CLI."""
    if not (isinstance(annotation, ast.Subscript) and isinstance(annotation.value, ast.Name)):
        return []
    if annotation.value.id not in ("A", "Annotated"):
        return []
    parts = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else []
    meta = parts[1:] if len(parts) > 1 else []
    arg = next(
        (m for m in meta if isinstance(m, ast.Call) and getattr(m.func, "id", None) == "Arg"),
        None,
    )
    if arg is None:
        if any(isinstance(m, ast.Constant) and isinstance(m.value, str) for m in meta):
            return ["--" + field.replace("_", "-")]
        return []
    keywords = {k.arg: k.value for k in arg.keywords if k.arg}
    no_cli = keywords.get("no_cli")
    if isinstance(no_cli, ast.Constant) and no_cli.value is True:
        return []
    cli_name = keywords.get("cli_name")
    names = [
        cli_name.value
        if isinstance(cli_name, ast.Constant) and isinstance(cli_name.value, str)
        else "--" + field.replace("_", "-")
    ]
    aliases = keywords.get("aliases")
    if isinstance(aliases, ast.List):
        names += [a.value for a in aliases.elts if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return names


def _class_fields(tree: ast.Module, name: str) -> list[str]:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            flags: list[str] = []
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    flags += _annotation_flags(item.target.id, item.annotation)
            return flags
    raise SystemExit(f"class {name!r} not found")


def _added_arguments(function: ast.AST) -> list[str]:
    """Option strings of every `parser.add_argument("-...", ...)` call inside `function`."""
    flags: list[str] = []
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            flags += [
                a.value
                for a in node.args
                if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")
            ]
    return flags


def sglang_flags(wheel: zipfile.ZipFile) -> list[str]:
    """Every option string of SGLang's server parser, read from the wheel's sources."""
    tree = ast.parse(wheel.read(SGLANG_SERVER_ARGS))
    imports: dict[str, str] = {}
    namespaces: list[str] = []
    add_cli_args: ast.AST | None = None
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                imports[alias.asname or alias.name] = node.module
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "_INPUT_NAMESPACES" for t in node.targets
        ):
            if isinstance(node.value, ast.List):
                namespaces = [e.id for e in node.value.elts if isinstance(e, ast.Name)]
        elif isinstance(node, ast.FunctionDef) and node.name == "add_cli_args":
            add_cli_args = node
    if not namespaces or add_cli_args is None:
        raise SystemExit(f"{SGLANG_SERVER_ARGS}: no _INPUT_NAMESPACES or add_cli_args")
    flags: list[str] = []
    for name in namespaces:
        path = imports[name].replace(".", "/") + ".py"
        flags += _class_fields(ast.parse(wheel.read(path)), name)
    return flags + _added_arguments(add_cli_args)


def trtllm_flags(source: bytes) -> list[str]:
    """Every option string of `trtllm-serve`'s `serve` command in `tensorrt_llm/commands/serve.py`."""
    tree = ast.parse(source)
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        commands = [
            d
            for d in node.decorator_list
            if isinstance(d, ast.Call)
            and getattr(d.func, "attr", None) == "command"
            and d.args
            and isinstance(d.args[0], ast.Constant)
            and d.args[0].value == "serve"
        ]
        if not commands:
            continue
        flags: list[str] = []
        for d in node.decorator_list:
            if isinstance(d, ast.Call) and getattr(d.func, "attr", None) == "option":
                flags += [
                    a.value
                    for a in d.args
                    if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")
                ]
        return [*flags, "--help"]
    raise SystemExit(f"{TRTLLM_SERVE}: no @click.command('serve')")


HEADERS = {
    "sglang": "The flags of SGLang's server (`sglang serve`, `python -m sglang.launch_server`)",
    "trtllm": "The options of TensorRT-LLM's `trtllm-serve`",
}


def render(
    engine: str, version: str, wheel_name: str, source_path: str, sha256: str, flags: list[str]
) -> str:
    """The YAML document gpufarm ships, flags sorted and unique."""
    lines = [
        f"# {HEADERS[engine]} in release {version}, which gpufarm checks",
        f"# `models[].extra_args` of `engine: {engine}` models against (gpufarm/config/engine_flags.py).",
        "# Written by scripts/engine_serve_flags.py from the release wheel (read with `ast`, not imported).",
        f"version: {version}",
        f"wheel: {wheel_name}",
        f"source: {source_path}",
        f"sha256: {sha256}",
        "flags:",
    ]
    lines += [f'  - "{flag}"' for flag in sorted(set(flags))]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("engine", choices=["sglang", "trtllm"])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--out", type=Path, help="default: gpufarm/data/<engine>_serve_flags.yaml")
    args = parser.parse_args(argv)
    version = args.wheel.name.split("-")[1]
    with zipfile.ZipFile(args.wheel) as wheel:
        path = SGLANG_SERVER_ARGS if args.engine == "sglang" else TRTLLM_SERVE
        source = wheel.read(path)
        flags = sglang_flags(wheel) if args.engine == "sglang" else trtllm_flags(source)
    out = (
        args.out
        or Path(__file__).resolve().parent.parent / "gpufarm" / "data" / f"{args.engine}_serve_flags.yaml"
    )
    out.write_text(
        render(args.engine, version, args.wheel.name, path, hashlib.sha256(source).hexdigest(), flags),
        encoding="utf-8",
    )
    print(f"{out}: {len(set(flags))} flags", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
