"""The warning a stack gets when its app's CDK feature flags are not those gpufarm is tested under.

gpufarm's constructs cannot be made independent of every aws-cdk-lib feature flag (a flag changes
what aws-cdk-lib's own L2 constructs synthesize), so they say at synth which flags differ instead:
one warning (ID :data:`gpufarm.cdk_context.FEATURE_FLAG_WARNING_ID`) on the stack, naming each flag,
the app's value and gpufarm's (docs/decisions/0055-runs-the-same-anywhere.md).
"""

from __future__ import annotations

import weakref

import aws_cdk as cdk
from constructs import Construct

from gpufarm.cdk_context import FEATURE_FLAG_WARNING_ID, differences_warning, flag_differences

_CHECKED: weakref.WeakSet[cdk.Stack] = weakref.WeakSet()
"""Stacks already compared, so a stack with several gpufarm constructs is warned once."""


def check_feature_flags(scope: Construct) -> None:
    """Warn on `scope`'s stack when the app's feature flags differ from gpufarm's tested ones.

    Called by the constructs a gpufarm deployment starts from (InferenceNetwork,
    InferenceCluster, Karpenter, VllmServing); once per stack. Reads the context in one call.
    """
    stack = cdk.Stack.of(scope)
    if stack in _CHECKED:
        return
    _CHECKED.add(stack)
    context = stack.node.get_all_context()
    flags = cdk.FeatureFlags.of(stack)

    def default_of(flag: str) -> bool | None:
        # aws-cdk-lib's value for an unset boolean flag; it throws for flags of other types.
        try:
            enabled = flags.is_enabled(flag)
        except RuntimeError:
            return None
        return enabled if isinstance(enabled, bool) else None

    differences = flag_differences(context if isinstance(context, dict) else {}, default_of=default_of)
    if differences:
        cdk.Annotations.of(stack).add_warning_v2(FEATURE_FLAG_WARNING_ID, differences_warning(differences))
