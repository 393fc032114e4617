"""The flags `vllm serve` accepts in the vLLM release gpufarm pins, read the way vLLM reads them.

`models[].extra_args` is appended to gpufarm's own `vllm serve` arguments. A flag that the
release does not have (one it removed, like `--swap-space` and `--disable-log-requests`, which
0.31 lacks, or a misspelt one) makes vLLM exit at start-up, after the node was bought and the
image pulled; the tier validator refuses it at config time instead, with the nearest known name.

The list ships as `gpufarm/data/vllm_serve_flags.yaml` (its source is named there). Arguments
are read as vLLM's `FlexibleArgumentParser` reads them: in a `--` argument, `_` and `-` are the
same between `--` and the first `.` (`--max_model_len` is `--max-model-len`); `--flag=value`
carries its value; `--json-flag.key=value` sets one key of a JSON flag; `-O3`, `-O=3` and `-O 3`
are `--optimization-level`. vLLM's boolean flags also take a `--no-<flag>` form
(vllm/engine/arg_utils.py gives the boolean fields of its config classes argparse's
BooleanOptionalAction, "Creates --no-<name> and --<name> flags"); the list does not say which
flags are boolean, so `--no-<flag>` is accepted for any known `--<flag>`. An argument that does
not start with `-`, or is a number, is a value.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml

VLLM_FLAGS_FILE = "vllm_serve_flags.yaml"
"""The shipped flag list, in `gpufarm/data/`."""


@dataclass(frozen=True, kw_only=True)
class FlagArg:
    """One flag among a model's `extra_args`: its position, the entry as given, and the flag it names."""

    index: int
    arg: str
    flag: str


@cache
def _data() -> dict[str, Any]:
    text = (resources.files("gpufarm") / "data" / VLLM_FLAGS_FILE).read_text(encoding="utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def vllm_flags_version() -> str:
    """The vLLM release the shipped flag list describes ('0.31.0')."""
    return str(_data()["version"])


def known_flags() -> frozenset[str]:
    """Every option string of `vllm serve` in that release (`--max-model-len`, `-tp`, ...)."""
    return frozenset(_data()["flags"])


def flag_args(args: list[str]) -> list[FlagArg]:
    """The entries of `args` that name a flag, each with the flag as vLLM reads it."""
    found: list[FlagArg] = []
    for i, arg in enumerate(args):
        flag = _flag_of(arg)
        if flag is not None:
            found.append(FlagArg(index=i, arg=arg, flag=flag))
    return found


def is_known_flag(flag: str) -> bool:
    """Whether `vllm serve` of the pinned release has `flag` (or `--<flag>` for a `--no-<flag>`)."""
    known = known_flags()
    return flag in known or (flag.startswith("--no-") and f"--{flag[len('--no-') :]}" in known)


SHORT_FLAGS: dict[str, str] = {
    "-tp": "--tensor-parallel-size",
    "-pp": "--pipeline-parallel-size",
    "-q": "--quantization",
}
"""Short option strings of `vllm serve` that gpufarm reserves, with the long flag each is an alias of.

vLLM registers them beside the long name (`parallel_group.add_argument("--tensor-parallel-size",
"-tp", ...)`, `"--pipeline-parallel-size", "-pp"`, `model_group.add_argument("--quantization",
"-q", ...)` in vllm/engine/arg_utils.py, vllm-project/vllm), so either spelling sets the same
setting. The list's other short options (`-r`, `-n`, `-dp`, ...) are not mapped: their long
flags were not confirmed from a vLLM source, so they are not reserved.
"""


def long_form(flag: str) -> str:
    """The long flag that `flag` sets: `-tp` -> `--tensor-parallel-size`; other flags unchanged."""
    return SHORT_FLAGS.get(flag, flag)


def nearest_flag(flag: str) -> str | None:
    """The known flag closest to `flag` by spelling, or None when none is close."""
    matches = difflib.get_close_matches(flag, sorted(known_flags()), n=1, cutoff=0.6)
    return matches[0] if matches else None


def applies_to(image: str) -> bool:
    """Whether the list describes the vLLM in `image`: its tag is the list's release (`v0.31.0`).

    An image pinned by digest alone, or tagged with another release, is not checked against it.
    """
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" not in last:
        return False
    tag = last.rsplit(":", 1)[1]
    return tag.removeprefix("v") == vllm_flags_version()


def _flag_of(arg: str) -> str | None:
    if arg.startswith("--"):
        name = arg.split("=", 1)[0][2:].split(".", 1)[0]
        return f"--{name.replace('_', '-')}"
    if arg.startswith("-O") and not arg.startswith("-O."):
        return "--optimization-level"
    if arg.startswith("-") and not _is_number(arg):
        return arg.split("=", 1)[0].split(".", 1)[0]
    return None


def _is_number(arg: str) -> bool:
    try:
        float(arg)
    except ValueError:
        return False
    return True
