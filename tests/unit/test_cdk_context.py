"""gpufarm.cdk_context: the tested feature flags ship in the package and equal the repo's cdk.json."""

from __future__ import annotations

import json
from pathlib import Path

from gpufarm import cdk_context


def test_the_packaged_flags_are_the_repository_cdk_json_context(repo_root: Path) -> None:
    """The flags `cdk synth` uses in the repo are the ones an installed gpufarm synthesizes with."""
    repo = json.loads((repo_root / "cdk.json").read_text(encoding="utf-8"))["context"]
    assert cdk_context.tested_context() == repo


def test_tested_context_is_a_copy() -> None:
    first = cdk_context.tested_context()
    first["@aws-cdk/core:target-partitions"].append("aws-us-gov")
    first.clear()
    assert cdk_context.tested_context()["@aws-cdk/core:target-partitions"] == ["aws", "aws-cn"]


def test_the_tested_context_has_no_differences() -> None:
    assert cdk_context.flag_differences(cdk_context.tested_context()) == []


def test_cli_strings_for_booleans_count_as_the_same_value() -> None:
    """`cdk synth -c flag=true` hands the app the string "true"."""
    context = cdk_context.tested_context()
    context["@aws-cdk/aws-lambda:useCdkManagedLogGroup"] = "true"
    context["@aws-cdk/aws-lambda:createNewPoliciesWithAddToRolePolicy"] = "False"
    assert cdk_context.flag_differences(context) == []


def test_a_changed_and_an_unset_flag_are_named_with_both_values() -> None:
    context = cdk_context.tested_context()
    context["@aws-cdk/aws-lambda:useCdkManagedLogGroup"] = False
    del context["@aws-cdk/core:defaultCrossStackReferences"]
    differences = cdk_context.flag_differences(context)
    assert [d.describe() for d in differences] == [
        "@aws-cdk/aws-lambda:useCdkManagedLogGroup=false (gpufarm: true)",
        '@aws-cdk/core:defaultCrossStackReferences=unset (gpufarm: "weak")',
    ]
    count = len(cdk_context.tested_context())
    assert cdk_context.differences_warning(differences) == (
        f"2 of the {count} CDK feature flags gpufarm is tested under differ in this app, so its "
        "constructs may synthesize other resources than gpufarm tested (such as other cross-stack "
        "references, or Lambda functions without their log groups): "
        "@aws-cdk/aws-lambda:useCdkManagedLogGroup=false (gpufarm: true); "
        '@aws-cdk/core:defaultCrossStackReferences=unset (gpufarm: "weak"). '
        "Set gpufarm's flags with cdk.App(context=gpufarm.cdk_context.tested_context()) or in your "
        "cdk.json (docs/decisions/0055-runs-the-same-anywhere.md)"
    )


def test_the_context_line_says_a_local_cdk_json_is_not_read(tmp_path: Path) -> None:
    count = len(cdk_context.tested_context())
    assert cdk_context.describe_context(tmp_path) == (
        f"context: the {count} CDK feature flags gpufarm is tested under (gpufarm/data/cdk-context.json)"
    )
    (tmp_path / "cdk.json").write_text("{}")
    assert cdk_context.describe_context(tmp_path).endswith("; ./cdk.json here is not read")


def test_an_unset_flag_whose_default_is_gpufarms_value_does_not_differ() -> None:
    context = cdk_context.tested_context()
    for flag in (
        "@aws-cdk/aws-lambda:createNewPoliciesWithAddToRolePolicy",  # gpufarm: false
        "@aws-cdk/aws-lambda:useCdkManagedLogGroup",  # gpufarm: true
        "@aws-cdk/core:defaultCrossStackReferences",  # gpufarm: "weak"
    ):
        del context[flag]
    defaults = {
        "@aws-cdk/aws-lambda:createNewPoliciesWithAddToRolePolicy": False,
        "@aws-cdk/aws-lambda:useCdkManagedLogGroup": False,
    }
    asked: list[str] = []

    def default_of(flag: str) -> bool | None:
        asked.append(flag)
        return defaults.get(flag)

    differences = cdk_context.flag_differences(context, default_of=default_of)
    assert [d.describe() for d in differences] == [
        "@aws-cdk/aws-lambda:useCdkManagedLogGroup=unset, so false (gpufarm: true)",
        '@aws-cdk/core:defaultCrossStackReferences=unset (gpufarm: "weak")',
    ]
    # Only boolean flags have a default aws-cdk-lib can tell.
    assert asked == [
        "@aws-cdk/aws-lambda:createNewPoliciesWithAddToRolePolicy",
        "@aws-cdk/aws-lambda:useCdkManagedLogGroup",
    ]
