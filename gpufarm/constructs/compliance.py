"""The compliance gate: cdk-nag rule packs and AWS Control Tower's proactive controls, run as
CDK validation plugins on every synth."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import platform
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import jsii
from cdk_nag import AwsSolutionsChecks, NIST80053R5Checks

from gpufarm.config.model import CompliancePack
from gpufarm.deploy_rules import DeployRulesPlugin


def enable_compliance_checks(app: cdk.App) -> None:
    """Gate every stack of `app` on the AwsSolutions pack and on gpufarm's deploy rules.

    Unacknowledged cdk-nag findings and any deploy-rule breach fail synth. Findings are written to
    `<outdir>/validation-report.json`; each accepted cdk-nag finding is acknowledged on the
    construct it concerns, with a reason about that resource. Deploy rules (what AWS APIs refuse
    at create or update time, docs/deploy-rules.md) are never acknowledged: the API refuses the
    resource whatever the reason.
    """
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), DeployRulesPlugin())


class _StackNist80053R5(NIST80053R5Checks):
    """The NIST 800-53 R5 pack over one stack only.

    A validation plugin is handed the whole app; a tier that asks for this pack must not make
    the other tiers of the same app answer to it.
    """

    def __init__(self, stack: cdk.Stack) -> None:
        super().__init__(stack)
        self._stack = stack

    def validate(self, context: Any) -> Any:
        return self.validate_scope(self._stack)


CONTROL_TOWER_PLUGIN = "ControlTower"
"""The name the Control Tower pack reports under; aws-cdk-lib matches an acknowledgement id
`<plugin name>::<rule>` against the plugin's findings (aws-cdk-lib 2.275.0,
core/lib/private/synthesis-validation.js, `collectSuppressions`)."""

_CFNGUARD_DIST = "cdklabs.cdk-validator-cfnguard"
_CT_ID = re.compile(r"\[(CT\.[A-Z0-9]+\.PR\.[0-9]+)\]:\s*(.+)")
_FIX = re.compile(r"\[FIX\]:\s*(.+)")
_DOC_LINK = re.compile(r"^\| \[(CT\.[A-Z0-9]+\.PR\.[0-9]+)\]\((https://[^)]+)\)", re.MULTILINE)
_GUARD_FINDINGS = (0, 5, 19)
"""cfn-guard's exit codes for a completed run: 0 compliant, 5 and 19 with findings (as the
plugin's lib/utils.js accepts them)."""


def control_tower_rule(control: str) -> str:
    """The acknowledgement id of one Control Tower proactive control, e.g. `CT.S3.PR.2`."""
    return f"{CONTROL_TOWER_PLUGIN}::{control}"


def _bundle() -> Path:
    """The cfn-guard binary and Control Tower rules shipped in `cdklabs.cdk-validator-cfnguard`.

    The package bundles cfn-guard (`bin/<ubuntu|macos>/<x86_64|aarch64>/cfn-guard`), the
    controls' guard rules (`rules/control-tower/cfn-guard/`) and their metadata
    (`rules/control-tower/metadata/`) inside its jsii tarball; they are unpacked once per
    version into the temp folder. Nothing is downloaded at synth.
    """
    version = metadata.version(_CFNGUARD_DIST)
    system = {"Linux": "ubuntu", "Darwin": "macos"}.get(platform.system())
    machine = {"x86_64": "x86_64", "AMD64": "x86_64", "arm64": "aarch64", "aarch64": "aarch64"}.get(
        platform.machine()
    )
    if system is None or machine is None:
        raise RuntimeError(
            f"{_CFNGUARD_DIST} ships cfn-guard for Linux and macOS on x86_64 and arm64 only, "
            f"not {platform.system()} {platform.machine()}"
        )
    home = Path(tempfile.gettempdir()) / f"gpufarm-cfnguard-{version}-{system}-{machine}-{os.getuid()}"
    if (home / "cfn-guard").exists() and (home / "rules" / "control-tower" / "metadata").is_dir():
        return home
    tarball = (
        resources.files("cdklabs.cdk_validator_cfnguard")
        / "_jsii"
        / f"cdk-validator-cfnguard@{version}.jsii.tgz"
    )
    staging = Path(tempfile.mkdtemp(prefix=f"{home.name}-"))
    binary = f"package/bin/{system}/{machine}/cfn-guard"
    with resources.as_file(tarball) as path, tarfile.open(path) as archive:
        wanted = [
            m
            for m in archive.getmembers()
            if m.name in (binary, "package/README.md")
            or m.name.startswith(
                ("package/rules/control-tower/cfn-guard/", "package/rules/control-tower/metadata/")
            )
        ]
        archive.extractall(staging, members=wanted, filter="data")
    package = staging / "package"
    os.replace(package / binary.removeprefix("package/"), package / "cfn-guard")
    (package / "cfn-guard").chmod(0o755)
    with contextlib.suppress(OSError):  # another process unpacked it first
        package.rename(home)
    shutil.rmtree(staging, ignore_errors=True)
    return home


@functools.cache
def _rule_types(home: Path) -> dict[Path, frozenset[str]]:
    """Each bundled guard rule file -> the resource types it evaluates (its metadata's
    `EvaluatedResourceTypes`)."""
    rules = home / "rules" / "control-tower"
    if not any((rules / "metadata").glob("*/*.metadata.json")):
        raise RuntimeError(f"no Control Tower rule metadata under {rules / 'metadata'}")
    return {
        rules / "cfn-guard" / meta.parent.name / meta.name.replace(".metadata.json", ".guard"): frozenset(
            json.loads(meta.read_text())["EvaluatedResourceTypes"]
        )
        for meta in sorted((rules / "metadata").glob("*/*.metadata.json"))
    }


def _walk(node: Any) -> Iterator[tuple[str, Any]]:
    """Every key/value pair in a JSON document, depth first."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


@jsii.implements(cdk.IPolicyValidationPlugin)
class _StackControlTower:
    """AWS Control Tower's proactive controls, run by cfn-guard over one stack's template.

    The rules and the cfn-guard binary are those of `cdklabs.cdk-validator-cfnguard` (see
    :func:`_bundle`), run as its `CfnGuardValidator` runs them. That class itself is not used:
    its report names a resource for every location cfn-guard prints, and for controls whose
    guard clauses compare literals (CT.KMS.PR.3, CT.LAMBDA.PR.3) some locations are empty, so
    it reports a finding without a resource, which only an acknowledgement on the whole app
    could cover and which jsii cannot hand to Python. Here a finding names the resources whose
    properties failed, by logical ID, and a failed control that names none fails the plugin.
    As with the NIST pack, a tier that asks for this pack does not make the other tiers of the
    same app answer to it.
    """

    def __init__(self, stack: cdk.Stack) -> None:
        self._template_file = stack.template_file

    @property
    def name(self) -> str:
        return CONTROL_TOWER_PLUGIN

    @property
    def version(self) -> str | None:
        return metadata.version(_CFNGUARD_DIST)

    @property
    def rule_ids(self) -> list[str] | None:
        return None

    def validate(self, context: cdk.IPolicyValidationContext) -> cdk.PolicyValidationPluginReport:
        violations: list[cdk.PolicyViolation] = []
        for template in context.template_paths:
            if Path(template).name == self._template_file:
                violations.extend(control_tower_violations(template))
        return cdk.PolicyValidationPluginReport(success=not violations, violations=violations)


def control_tower_violations(template: str, *, every_rule: bool = False) -> list[cdk.PolicyViolation]:
    """The Control Tower proactive controls `template` breaks, one violation per control.

    Only the controls that evaluate a resource type the template holds are run (a control
    skips a template without its types), which takes about a third of the CPU time of running
    all of them over the enterprise template; `every_rule` runs all of them.
    """
    home = _bundle()
    if every_rule:
        rules = [home / "rules" / "control-tower" / "cfn-guard"]
    else:
        types = {r.get("Type") for r in json.loads(Path(template).read_text()).get("Resources", {}).values()}
        rules = [rule for rule, evaluated in _rule_types(home).items() if evaluated & types]
    if not rules:
        return []
    run = subprocess.run(
        [
            str(home / "cfn-guard"),
            "validate",
            *[arg for rule in rules for arg in ("--rules", str(rule))],
            "--data",
            template,
            "--output-format",
            "json",
            "--show-summary",
            "none",
            "--structured",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode not in _GUARD_FINDINGS:
        raise RuntimeError(f"cfn-guard exited with {run.returncode}: {run.stderr.strip()}")
    docs = dict(_DOC_LINK.findall((home / "README.md").read_text()))
    found: dict[str, tuple[str, str, dict[str, list[str]]]] = {}
    for result in json.loads(run.stdout or "[]"):
        for failed in result.get("not_compliant") or []:
            rule = failed.get("Rule", failed)
            control, description, fix = rule["name"], "", ""
            locations: dict[str, list[str]] = {}
            for key, value in _walk(rule):
                if key == "custom_message" and value:
                    for line in str(value).splitlines():
                        if match := _CT_ID.search(line):
                            control, description = match[1], match[2].strip()
                        elif match := _FIX.search(line):
                            fix = match[1].strip()
                elif key == "path" and isinstance(value, str) and value.startswith("/Resources/"):
                    paths = locations.setdefault(value.split("/")[2], [])
                    if value not in paths:
                        paths.append(value)
            if not locations:
                raise RuntimeError(f"cfn-guard reported {control} ({rule['name']}) without a resource")
            _, _, seen = found.setdefault(control, (description, fix, {}))
            for logical_id, paths in locations.items():
                merged = seen.setdefault(logical_id, [])
                merged += [p for p in paths if p not in merged]
    return [
        cdk.PolicyViolation(
            rule_name=control,
            # aws-cdk-lib recomputes a report's success from its unacknowledged findings'
            # severities once one of its findings is acknowledged: a finding without one passes.
            severity="error",
            description=description,
            fix=fix or None,
            rule_metadata={"DocumentationUrl": docs[control]} if control in docs else None,
            violating_resources=[
                cdk.PolicyViolatingResource(
                    resource_logical_id=logical_id, locations=paths, template_path=template
                )
                for logical_id, paths in sorted(resources_.items())
            ],
        )
        for control, (description, fix, resources_) in sorted(found.items())
    ]


def require_compliance_pack(stack: cdk.Stack, pack: CompliancePack) -> None:
    """Gate `stack` on `pack` as well (AwsSolutions gates every stack already).

    Default: nothing beyond AwsSolutions. NIST 800-53 R5 findings are acknowledged with
    `NIST.800.53.R5-<rule>` ids next to the resources they concern, as AwsSolutions' are;
    Control Tower findings with :func:`control_tower_rule` ids (`ControlTower::CT.S3.PR.2`).
    """
    app = stack.node.root
    if pack is CompliancePack.NIST_800_53_R5:
        cdk.Validations.of(app).add_plugins(_StackNist80053R5(stack))
    elif pack is CompliancePack.CONTROL_TOWER:
        cdk.Validations.of(app).add_plugins(_StackControlTower(stack))
