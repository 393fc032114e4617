"""Run the integration tests: compare snapshots offline, or deploy, assert and destroy.

    python integ/run.py snapshot [--update] [TIER...]   # offline; exit 1 on a changed template
    python integ/run.py deploy [--full] TIER...         # needs AWS credentials

The tests are CDK apps in the integ-runner's layout (`integ/cases/integ_<tier>.py`, the snapshot
in `integ_<tier>.py.snapshot/`). This script does what the integ-runner would: the integ-runner
2.197.10 (the newest release) cannot read the cloud assembly that aws-cdk-lib 2.275 writes
(docs/decisions/0032-integration-tests.md). A snapshot holds only the stacks' templates: asset
folders (tens of MB) and the assembly manifest are left out, and assets enter the comparison
through the hashes in the templates.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

INTEG_DIR = Path(__file__).resolve().parent
REPO = INTEG_DIR.parent
CASES = INTEG_DIR / "cases"
FULL = INTEG_DIR / "full"
TIERS = ("poc", "production", "enterprise")
CDK = REPO / "node_modules" / ".bin" / "cdk"
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def case_file(tier: str, *, full: bool = False) -> Path:
    """The integration test app of `tier`."""
    return FULL / f"integ_{tier}_full.py" if full else CASES / f"integ_{tier}.py"


def snapshot_dir(case: Path) -> Path:
    """Where the integ-runner keeps a test's snapshot: `<file>.snapshot/` beside it."""
    return case.with_name(case.name + ".snapshot")


SALT = "<synth time>"
"""What a snapshot holds instead of an assertion's `salt`."""


def normalize(template: dict[str, Any]) -> dict[str, Any]:
    """`template` without what changes on every synth.

    integ-tests gives each assertion custom resource a `salt` of `Date.now()`, so that every
    deploy runs it again (integ-tests-alpha 2.275.0-alpha.0, lib/assertions/sdk.js and
    assertions.js).
    """
    for resource in template.get("Resources", {}).values():
        props = resource.get("Properties")
        if (
            resource.get("Type", "").startswith("Custom::DeployAssert")
            and isinstance(props, dict)
            and "salt" in props
        ):
            props["salt"] = SALT
    return template


def synth(case: Path, outdir: Path) -> dict[str, Any]:
    """Synthesize one test app into `outdir`; its templates by file name."""
    env = {**os.environ, "CDK_OUTDIR": str(outdir)}
    done = subprocess.run([sys.executable, str(case)], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{case.name} did not synthesize (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return {f.name: normalize(json.loads(f.read_text())) for f in sorted(outdir.glob("*.template.json"))}


def read_snapshot(directory: Path) -> dict[str, Any]:
    """The committed templates of a snapshot, by file name (empty when there is none)."""
    return {f.name: json.loads(f.read_text()) for f in sorted(directory.glob("*.template.json"))}


def write_snapshot(templates: dict[str, Any], directory: Path) -> None:
    """Replace the snapshot in `directory` with `templates`."""
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*.template.json"):
        old.unlink()
    for name, template in templates.items():
        (directory / name).write_text(json.dumps(template, indent=1, sort_keys=True) + "\n")


def differences(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """What changed from the snapshot `expected` to `actual`, one line per template section entry."""
    lines: list[str] = []
    for name in sorted(set(expected) | set(actual)):
        if name not in actual:
            lines.append(f"{name}: template removed")
            continue
        if name not in expected:
            lines.append(f"{name}: new template (no snapshot)")
            continue
        old, new = expected[name], actual[name]
        for section in sorted(set(old) | set(new)):
            before, after = old.get(section), new.get(section)
            if before == after:
                continue
            if isinstance(before, dict) and isinstance(after, dict):
                for key in sorted(set(before) | set(after)):
                    if key not in after:
                        lines.append(f"{name}: [-] {section} {key}")
                    elif key not in before:
                        lines.append(f"{name}: [+] {section} {key}")
                    elif before[key] != after[key]:
                        lines.append(f"{name}: [~] {section} {key}")
            else:
                lines.append(f"{name}: [~] {section}")
    return lines


def snapshot(tiers: Sequence[str], *, update: bool, root: Path | None = None) -> int:
    """Compare (or with `update`, rewrite) each tier's snapshot; exit status 1 on any change.

    `root` holds the snapshot folders (default: beside the test files).
    """
    failed = []
    for tier in tiers:
        case = case_file(tier)
        committed = snapshot_dir(case) if root is None else root / snapshot_dir(case).name
        with tempfile.TemporaryDirectory(prefix="gpufarm-integ-") as out:
            actual = synth(case, Path(out))
        if update:
            write_snapshot(actual, committed)
            print(f"{case.name}: snapshot written ({len(actual)} templates)")
            continue
        changes = differences(read_snapshot(committed), actual)
        if changes:
            failed.append(case.name)
            print(f"{case.name}: snapshot changed", *(f"  {line}" for line in changes), sep="\n")
        else:
            print(f"{case.name}: no change")
    if failed:
        print(
            f"{len(failed)} snapshot(s) changed: review the changes, then run `make integ-update` "
            "and commit the snapshots",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return EXIT_OK


def assertion_failures(outputs: dict[str, dict[str, str]], assert_stack: str) -> list[str]:
    """The failed or missing integ-tests assertions in `cdk deploy --outputs-file` output.

    Each assertion writes an `AssertionResults...` output holding `{"status": "success"}` or
    `{"status": "fail", "message": ...}` (integ-tests-alpha 2.275.0-alpha.0,
    lib/assertions/providers/lambda-handler/assertion.js).
    """
    results = {k: v for k, v in outputs.get(assert_stack, {}).items() if k.startswith("AssertionResults")}
    if not results:
        return [f"{assert_stack}: no assertion results in the stack outputs"]
    failures = []
    for key, value in sorted(results.items()):
        result = json.loads(value)
        if result.get("status") != "success":
            failures.append(f"{key}: {result.get('message', result)}")
    return failures


def has_credentials() -> bool:
    """Whether boto3 finds AWS credentials (environment, profile, SSO or instance role)."""
    import boto3
    from botocore.exceptions import BotoCoreError

    try:
        return boto3.session.Session().get_credentials() is not None
    except BotoCoreError as exc:  # a named profile that does not exist, a broken config file
        print(exc, file=sys.stderr)
        return False


def deploy(tier: str, *, full: bool) -> int:
    """Deploy a tier's test, wait for its assertions, then destroy it whatever happened."""
    sys.path.insert(0, str(REPO))
    from gpufarm.config import load_tier_file
    from integ.cleanup import main as cleanup
    from integ.harness import tier_file

    stack = load_tier_file(tier_file(tier, full=full)).stack_name
    app = f"{sys.executable} {case_file(tier, full=full)}"
    status = EXIT_FAILED
    with tempfile.TemporaryDirectory(prefix="gpufarm-integ-") as work:
        outputs_file = Path(work) / "outputs.json"
        cdk = [str(CDK), "--app", app, "--output", str(Path(work) / "cdk.out")]
        try:
            subprocess.run(
                [*cdk, "deploy", "--all", "--require-approval", "never", "--outputs-file", str(outputs_file)],
                check=True,
            )
            failures = assertion_failures(json.loads(outputs_file.read_text()), f"{stack}-assert")
            print(*(failures or [f"{stack}: every assertion passed"]), sep="\n")
            status = EXIT_FAILED if failures else EXIT_OK
        except subprocess.CalledProcessError as exc:
            print(f"{stack}: deploy failed (exit {exc.returncode})", file=sys.stderr)
        finally:
            destroyed = subprocess.run([*cdk, "destroy", "--all", "--force"], check=False).returncode == 0
            if destroyed:
                if cleanup([stack, f"{stack}-probe", f"{stack}-assert"]) != EXIT_OK:
                    status = EXIT_FAILED
            else:
                print(f"{stack}: destroy failed; delete the stacks by hand", file=sys.stderr)
                status = EXIT_FAILED
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(prog="integ/run.py", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    snap = commands.add_parser("snapshot", help="compare the synthesized templates with the snapshots")
    snap.add_argument("--update", action="store_true", help="rewrite the snapshots instead")
    snap.add_argument("tiers", nargs="*", metavar="TIER", help=f"any of {', '.join(TIERS)} (default: all)")
    dep = commands.add_parser("deploy", help="deploy, assert and destroy (needs AWS credentials)")
    dep.add_argument("--full", action="store_true", help="the full preset instead of the default variant")
    dep.add_argument("tiers", nargs="*", metavar="TIER", help=f"any of {', '.join(TIERS)} (default: all)")
    args = parser.parse_args(argv)
    unknown = [t for t in args.tiers if t not in TIERS]
    if unknown:
        parser.error(f"unknown tier {unknown[0]!r}; choose from {', '.join(TIERS)}")
    args.tiers = args.tiers or list(TIERS)
    if args.command == "snapshot":
        return snapshot(args.tiers, update=args.update)
    if not has_credentials():
        print(
            "make integ deploys real stacks and needs AWS credentials; none were found (set "
            "AWS_PROFILE or AWS_ACCESS_KEY_ID, or run `aws sso login`). Without credentials, "
            "`make test` runs the same tests in snapshot mode.",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    return max(deploy(tier, full=args.full) for tier in args.tiers)


if __name__ == "__main__":
    sys.exit(main())
