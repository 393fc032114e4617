"""The server flags each engine's pinned release accepts, and how each engine reads its arguments.

`models[].extra_args` is appended to the arguments gpufarm derives from the model config. A flag
the release does not have makes the server exit at start-up, after the node was bought and the
image pulled; the tier validator refuses it at config time instead, naming the nearest known flag.

One list per engine ships in `gpufarm/data/`:

- vLLM: `vllm_serve_flags.yaml`, read as vLLM's `FlexibleArgumentParser` reads arguments
  (:mod:`gpufarm.config.vllm_flags`: `_` and `-` alike, `--no-<flag>`, `-O3`);
- SGLang: `sglang_serve_flags.yaml` (scripts/engine_serve_flags.py, from the sglang wheel). Its
  parser is a plain `argparse.ArgumentParser`: an option is its exact string (`--tp-size`, not
  `--tp_size`), `--flag=value` carries its value, and booleans are `store_true` with no
  `--no-` form (`sglang/srt/arg_groups/arg_utils.py`, `add_cli_args_from_dataclass`);
- TensorRT-LLM: `trtllm_serve_flags.yaml`. `trtllm-serve` is a click command: an option is its
  exact string (`--tp_size`), `--option=value` carries its value (click's parser splits long
  options at `=`).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml

from gpufarm.config.sections.serving import Engine
from gpufarm.config.vllm_flags import VLLM_FLAGS_FILE, FlagArg, is_known_flag
from gpufarm.config.vllm_flags import flag_args as vllm_flag_args

FLAG_FILES: dict[Engine, str] = {
    Engine.VLLM: VLLM_FLAGS_FILE,
    Engine.SGLANG: "sglang_serve_flags.yaml",
    Engine.TRTLLM: "trtllm_serve_flags.yaml",
}
"""Engine -> its shipped flag list in `gpufarm/data/`."""


@dataclass(frozen=True, kw_only=True)
class FlagList:
    """The flags of one engine's server in one release, and how that server reads an argument."""

    engine: Engine
    version: str
    flags: frozenset[str]
    source: str

    def flag_args(self, args: list[str]) -> list[FlagArg]:
        """The entries of `args` that name a flag, each with the flag as this engine reads it."""
        if self.engine is Engine.VLLM:
            return vllm_flag_args(args)
        found = []
        for i, arg in enumerate(args):
            if arg.startswith("-") and not _is_number(arg):
                found.append(FlagArg(index=i, arg=arg, flag=arg.split("=", 1)[0]))
        return found

    def is_known(self, flag: str) -> bool:
        """Whether the release's server has `flag`."""
        if self.engine is Engine.VLLM:
            return is_known_flag(flag)
        return flag in self.flags

    def nearest(self, flag: str) -> str | None:
        """The known flag closest to `flag` by spelling, or None when none is close."""
        matches = difflib.get_close_matches(flag, sorted(self.flags), n=1, cutoff=0.6)
        return matches[0] if matches else None

    def applies_to(self, image: str) -> bool:
        """Whether the list describes the server in `image`: its tag is the list's release
        (`v0.5.23` or `0.5.23`). An image pinned by digest alone, or tagged with another
        release, is not checked against it."""
        name = image.split("@", 1)[0]
        last = name.rsplit("/", 1)[-1]
        if ":" not in last:
            return False
        return last.rsplit(":", 1)[1].removeprefix("v") == self.version


@cache
def flag_list(engine: Engine) -> FlagList:
    """The shipped flag list of `engine`."""
    text = (resources.files("gpufarm") / "data" / FLAG_FILES[engine]).read_text(encoding="utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    return FlagList(
        engine=engine,
        version=str(data["version"]),
        flags=frozenset(data["flags"]),
        source=str(data.get("source", FLAG_FILES[engine])),
    )


def _is_number(arg: str) -> bool:
    try:
        float(arg)
    except ValueError:
        return False
    return True
