"""Review a change to a cloud assembly: what deploying HEAD over BASE would do, as a PR report.

Pure: reads two `cdk.out` folders (or one), no AWS call, no CDK. Per stack it finds:

- **Deploy failures**: a replacement of a resource that keeps its custom name, a cluster moved
  onto a replaced VPC's subnets, a custom name an orphaned stack still holds
  (:data:`~gpufarm.review.rules.REPLACEMENT_RULES`). A stack that left the app is *orphaned*: a
  deploy never deletes it, and it keeps its bill.
- **Replacements**, stateful and traffic-bearing resources first. A resource is replaced when a
  property marked "Update requires: Replacement" changes (the rules table for every emitted type,
  joined with the registry schemas cfn-lint bundles, plus :data:`REPLACEMENT_SUPPLEMENT`), when a
  create-only property refers to a resource that is itself replaced, or when a logical ID
  disappears while one of the same type appears (a construct ID changed).
- **Values**: each changed property before -> after, Kubernetes objects field by field, and the
  tier config's fields from the `gpufarm:tier` metadata.
- **Public exposure**: internet-facing load balancers, ingress from CIDRs outside private
  address space (0.0.0.0/0 above all), a public Kubernetes API endpoint, endpoint services open
  to other accounts.
- **IAM**: grants (principal, effect, action, resource) added and removed in roles, inline and
  managed policies, trust policies and attached managed policies; wildcards flagged.
- **GPU capacity** by capacity type and the **monthly cost**, from the tier config each
  template carries in `Metadata["gpufarm:tier"]` (:mod:`gpufarm.estimate`).

The package, one module per job:

- :mod:`~gpufarm.review.templates`: the stacks of an assembly (read by :func:`gpufarm.assembly.read_assembly`)
  and template values rendered as text;
- :mod:`~gpufarm.review.rules`: replacement, custom-name and same-VPC rules per resource type;
- :mod:`~gpufarm.review.resource_classes`: stateful and traffic-bearing types, create-only properties;
- :mod:`~gpufarm.review.replacements`, :mod:`~gpufarm.review.exposure`, :mod:`~gpufarm.review.iam`,
  :mod:`~gpufarm.review.capacity`: the check families;
- :mod:`~gpufarm.review.values`: before -> after of properties, manifests and the tier config;
- :mod:`~gpufarm.review.report`: the review of two assemblies or the summary of one;
- :mod:`~gpufarm.review.markdown`: the report as Markdown;
- :mod:`~gpufarm.review.gates`: the `--fail-on` gates.
"""

from __future__ import annotations

from gpufarm.review.capacity import TierFacts, tier_facts
from gpufarm.review.exposure import Exposure, exposures, is_public_cidr
from gpufarm.review.iam import IamGrant, iam_grants
from gpufarm.review.markdown import render_markdown
from gpufarm.review.replacements import DeployFailure, Replacement, ResourceChange, diff_resources
from gpufarm.review.report import Review, StackReview, review_assemblies, review_paths, summarize_stack
from gpufarm.review.resource_classes import (
    CREATE_ONLY_FALLBACK,
    REPLACEMENT_SUPPLEMENT,
    STATEFUL_TYPES,
    TRAFFIC_TYPES,
    CreateOnlyProperties,
    is_critical,
)
from gpufarm.review.rules import NO_RULES, REPLACEMENT_RULES, TypeRules
from gpufarm.review.templates import StackTemplate, load_assembly, references, render
from gpufarm.review.values import ObjectChange, ValueChange

__all__ = [
    "CREATE_ONLY_FALLBACK",
    "NO_RULES",
    "REPLACEMENT_RULES",
    "REPLACEMENT_SUPPLEMENT",
    "STATEFUL_TYPES",
    "TRAFFIC_TYPES",
    "CreateOnlyProperties",
    "DeployFailure",
    "Exposure",
    "IamGrant",
    "ObjectChange",
    "Replacement",
    "ResourceChange",
    "Review",
    "StackReview",
    "StackTemplate",
    "TierFacts",
    "TypeRules",
    "ValueChange",
    "diff_resources",
    "exposures",
    "iam_grants",
    "is_critical",
    "is_public_cidr",
    "load_assembly",
    "references",
    "render",
    "render_markdown",
    "review_assemblies",
    "review_paths",
    "summarize_stack",
    "tier_facts",
]
