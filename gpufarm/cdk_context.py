"""The CDK context gpufarm is tested under: aws-cdk-lib's feature flags, shipped with the package.

A feature flag changes what aws-cdk-lib synthesizes (cross-stack references, log groups of
Lambda functions, default policies), and the CDK CLI reads them from the `context` of the
`cdk.json` in the folder it runs in. gpufarm's templates, snapshots and gates are tested with
the flags of the repository's `cdk.json`; this module carries the same flags inside the package
(`gpufarm/data/cdk-context.json`, kept equal to `cdk.json` by a test), so that `gpufarm synth`
gives the same templates from any folder and a CDK app of a user's own can compare its flags
with them (:func:`flag_differences`). No aws_cdk import: reading the flags starts no Node.
docs/decisions/0055-runs-the-same-anywhere.md.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONTEXT_FILE = Path(__file__).parent / "data" / "cdk-context.json"
"""The tested context: the `context` object of the repository's cdk.json."""

FEATURE_FLAG_WARNING_ID = "gpufarm:feature-flags"
"""ID of the warning a stack with gpufarm constructs gets when the app's feature flags differ."""


@functools.cache
def _tested() -> dict[str, Any]:
    document = json.loads(CONTEXT_FILE.read_text(encoding="utf-8"))
    if not isinstance(document, dict):  # the packaged file is gpufarm's own; a test keeps it so
        raise TypeError(f"{CONTEXT_FILE} must hold a JSON object")
    return document


def tested_context() -> dict[str, Any]:
    """The CDK context (feature flags) gpufarm is tested under, as a new dict.

    Pass it to your app to synthesize gpufarm's constructs as gpufarm tests them:
    ``cdk.App(context=tested_context())`` (the CDK CLI's `-c` and cdk.json values still win).
    """
    return copy.deepcopy(_tested())


UNSET = object()
"""The app's value of a flag it does not set (aws-cdk-lib then applies the flag's default)."""


def _normalized(value: Any) -> Any:
    # The CDK CLI passes `-c flag=true` as the string "true"; cdk.json gives JSON booleans.
    if isinstance(value, str) and value.strip().lower() in {"true", "false"}:
        return value.strip().lower() == "true"
    return value


@dataclass(frozen=True, kw_only=True)
class FlagDifference:
    """One feature flag whose value in an app is not the value gpufarm is tested under."""

    flag: str
    app_value: Any
    """The app's value, or :data:`UNSET`."""
    tested_value: Any
    default_value: Any = None
    """For an unset flag, the value aws-cdk-lib applies instead, when known (None otherwise)."""

    def describe(self) -> str:
        """`flag` = the app's value (gpufarm: its value), in one short phrase."""
        if self.app_value is not UNSET:
            app = json.dumps(self.app_value)
        elif self.default_value is None:
            app = "unset"
        else:
            app = f"unset, so {json.dumps(self.default_value)}"
        return f"{self.flag}={app} (gpufarm: {json.dumps(self.tested_value)})"


def flag_differences(
    app_context: Mapping[str, Any], *, default_of: Callable[[str], Any] | None = None
) -> list[FlagDifference]:
    """The tested flags whose value in `app_context` differs, in flag order.

    A flag the app leaves unset differs unless gpufarm's value is a boolean and `default_of(flag)`,
    the value aws-cdk-lib applies to the unset flag (None when unknown), is that value.
    """
    out: list[FlagDifference] = []
    for flag, tested in sorted(_tested().items()):
        value = app_context.get(flag, UNSET)
        if value is not UNSET:
            if _normalized(value) != tested:
                out.append(FlagDifference(flag=flag, app_value=value, tested_value=tested))
            continue
        default = default_of(flag) if default_of is not None and isinstance(tested, bool) else None
        if default is None or default != tested:
            out.append(FlagDifference(flag=flag, app_value=UNSET, tested_value=tested, default_value=default))
    return out


def differences_warning(differences: list[FlagDifference]) -> str:
    """The warning naming each differing flag with the app's value and gpufarm's."""
    return (
        f"{len(differences)} of the {len(_tested())} CDK feature flags gpufarm is tested under differ in "
        "this app, so its constructs may synthesize other resources than gpufarm tested (such as "
        "other cross-stack references, or Lambda functions without their log groups): "
        + "; ".join(d.describe() for d in differences)
        + ". Set gpufarm's flags with cdk.App(context=gpufarm.cdk_context.tested_context()) or in "
        "your cdk.json (docs/decisions/0055-runs-the-same-anywhere.md)"
    )


def describe_context(cwd: Path) -> str:
    """The one line `gpufarm synth` prints about the context it synthesizes with."""
    ignored = "; ./cdk.json here is not read" if (cwd / "cdk.json").is_file() else ""
    return (
        f"context: the {len(_tested())} CDK feature flags gpufarm is tested under "
        f"(gpufarm/data/cdk-context.json){ignored}"
    )
