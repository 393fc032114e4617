"""The review: stacks matched by name and compared (diff mode), or one assembly summarized."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpufarm.config.model import TIER_METADATA_KEY
from gpufarm.review.capacity import TierFacts, tier_facts
from gpufarm.review.exposure import Exposure, exposures
from gpufarm.review.iam import IamGrant, iam_grants
from gpufarm.review.replacements import DeployFailure, Replacement, ResourceChange, diff_resources
from gpufarm.review.resource_classes import CreateOnlyProperties, is_critical
from gpufarm.review.rules import reference_url, rules_for
from gpufarm.review.templates import StackTemplate, load_assembly
from gpufarm.review.values import ValueChange, tier_changes

# `cdk deploy` never deletes a stack that left the app: "cdk deploy leaves stack deployed if a
# stack is removed from application" is the CDK's intended behaviour (aws/aws-cdk#13676, open as
# aws/aws-cdk-cli#787); only `cdk destroy` or a CloudFormation DeleteStack removes it.
_ORPHAN_SOURCE = "https://github.com/aws/aws-cdk-cli/issues/787"


@dataclass(frozen=True, kw_only=True)
class StackReview:
    """What changes in one stack (diff mode) or what it holds (summary mode)."""

    name: str
    status: str
    """'changed', 'unchanged', 'added' (new stack), 'orphaned' (left the app: still deployed, never
    deleted by a deploy) or 'summary'."""
    changes: list[ResourceChange] = field(default_factory=list)
    replacements: list[Replacement] = field(default_factory=list)
    failures: list[DeployFailure] = field(default_factory=list)
    """Changes CloudFormation or the service refuses: the deploy fails and rolls back."""
    tier_changes: tuple[ValueChange, ...] = ()
    """The tier config's fields that change (from the templates' `gpufarm:tier` metadata)."""
    renamed_from: str | None = None
    """An added stack: the orphaned stack whose tier it continues (a tier rename)."""
    renamed_to: str | None = None
    """An orphaned stack: the added stack that continues its tier."""
    exposure_opened: list[Exposure] = field(default_factory=list)
    exposure_closed: list[Exposure] = field(default_factory=list)
    iam_added: list[IamGrant] = field(default_factory=list)
    iam_removed: list[IamGrant] = field(default_factory=list)
    base: TierFacts | None = None
    head: TierFacts | None = None
    resource_counts: dict[str, int] = field(default_factory=dict)
    """Summary mode: resources by type."""
    critical_resources: list[tuple[str, str, str]] = field(default_factory=list)
    """Summary mode: (logical ID, type, deletion policy) of stateful and traffic-bearing resources."""
    exposure: list[Exposure] = field(default_factory=list)
    """Summary mode: what the stack exposes."""
    iam_wildcards: list[IamGrant] = field(default_factory=list)
    """Summary mode: wildcard grants."""

    @property
    def critical_replacements(self) -> list[Replacement]:
        """Replacements of stateful or traffic-bearing resources."""
        return [r for r in self.replacements if r.critical]

    def counts_by_type(self) -> dict[str, dict[str, int]]:
        """Type -> {'added', 'removed', 'modified', 'replaced'} counts."""
        out: dict[str, dict[str, int]] = {}
        for change in self.changes:
            row = out.setdefault(
                change.resource_type, dict.fromkeys(("added", "removed", "modified", "replaced"), 0)
            )
            row[change.change] += 1
        return dict(sorted(out.items()))

    def gpu_delta(self) -> dict[str, int]:
        """Change in GPUs by capacity type (head minus base)."""
        before = self.base.gpus if self.base else {}
        after = self.head.gpus if self.head else {}
        return {k: after.get(k, 0) - before.get(k, 0) for k in sorted(set(before) | set(after))}

    def cost_delta(self, figure: str = "floor") -> float | None:
        """Change of the monthly bill at `figure` ('floor', 'expected' or 'ceiling'), USD (None when
        either side has no estimate)."""
        attribute = {
            "floor": "monthly_usd",
            "expected": "expected_monthly_usd",
            "ceiling": "peak_monthly_usd",
        }[figure]
        before = getattr(self.base, attribute) if self.base else None
        after = getattr(self.head, attribute) if self.head else None
        if self.status == "added" and after is not None:
            return float(after)
        if self.status == "orphaned":
            return 0.0 if before is not None else None
        if before is None or after is None:
            return None
        return float(after - before)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        out: dict[str, Any] = {"name": self.name, "status": self.status}
        if self.status == "summary":
            out |= {
                "resource_counts": self.resource_counts,
                "critical_resources": [
                    {"logical_id": i, "type": t, "deletion_policy": p} for i, t, p in self.critical_resources
                ],
                "exposure": [e.to_dict() for e in self.exposure],
                "iam_wildcards": [g.to_dict() for g in self.iam_wildcards],
                "tier": self.head.to_dict() if self.head else None,
            }
            return out
        return out | {
            "renamed_from": self.renamed_from,
            "renamed_to": self.renamed_to,
            "deploy_failures": [f.to_dict() for f in self.failures],
            "tier_changes": [c.to_dict() for c in self.tier_changes],
            "replacements": [r.to_dict() for r in self.replacements],
            "exposure": {
                "opened": [e.to_dict() for e in self.exposure_opened],
                "closed": [e.to_dict() for e in self.exposure_closed],
            },
            "iam": {
                "added": [g.to_dict() for g in self.iam_added],
                "removed": [g.to_dict() for g in self.iam_removed],
                "new_wildcards": [g.to_dict() for g in self.iam_added if g.wildcard],
            },
            "resources": {"by_type": self.counts_by_type(), "changes": [c.to_dict() for c in self.changes]},
            "gpus": {
                "base": self.base.gpus if self.base else {},
                "head": self.head.gpus if self.head else {},
                "delta": self.gpu_delta(),
            },
            "monthly_cost": {
                "base_usd": self.base.monthly_usd if self.base else None,
                "head_usd": self.head.monthly_usd if self.head else None,
                "delta_usd": self.cost_delta(),
                "base_peak_usd": self.base.peak_monthly_usd if self.base else None,
                "head_peak_usd": self.head.peak_monthly_usd if self.head else None,
                "peak_delta_usd": self.cost_delta("ceiling"),
                "base_expected_usd": self.base.expected_monthly_usd if self.base else None,
                "head_expected_usd": self.head.expected_monthly_usd if self.head else None,
                "expected_delta_usd": self.cost_delta("expected"),
            },
            "notes": [
                n for n in (self.base.note if self.base else "", self.head.note if self.head else "") if n
            ],
        }


@dataclass(frozen=True, kw_only=True)
class Review:
    """The review of an assembly change (diff mode) or of one assembly (summary mode)."""

    mode: str
    """'diff' or 'summary'."""
    stacks: list[StackReview]
    base_label: str = ""
    head_label: str = ""
    create_only_source: str = ""

    @property
    def critical_replacements(self) -> int:
        """Replacements of stateful or traffic-bearing resources over all stacks."""
        return sum(len(s.critical_replacements) for s in self.stacks)

    @property
    def deploy_failures(self) -> int:
        """Changes that make the deploy fail, over all stacks."""
        return sum(len(s.failures) for s in self.stacks)

    def cost_delta(self, figure: str = "floor") -> float | None:
        """Change of the monthly bill over all stacks (orphaned stacks keep theirs), USD; None when
        no stack has an estimate."""
        deltas = [d for s in self.stacks if (d := s.cost_delta(figure)) is not None]
        return sum(deltas) if deltas else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "mode": self.mode,
            "base": self.base_label or None,
            "head": self.head_label,
            "create_only_source": self.create_only_source,
            "critical_replacements": self.critical_replacements,
            "deploy_failures": self.deploy_failures,
            "monthly_cost_delta_usd": self.cost_delta() if self.mode == "diff" else None,
            "stacks": [s.to_dict() for s in self.stacks],
        }


def _tier(stack: StackTemplate | None) -> dict[str, Any] | None:
    metadata = (stack.template.get("Metadata") or {}).get(TIER_METADATA_KEY) if stack else None
    return metadata if isinstance(metadata, dict) else None


def _review_stack(
    name: str, base: StackTemplate | None, head: StackTemplate | None, create_only: CreateOnlyProperties
) -> StackReview:
    if head is None and base is not None:
        # Left the app: a deploy does not touch it. It keeps its resources, exposure and bill.
        facts = tier_facts(base)
        return StackReview(name=name, status="orphaned", base=facts, head=facts)
    either = head or base
    empty = StackTemplate(name=name, region=either.region if either else "us-east-1", template={})
    old, new = base or empty, head or empty
    diff = diff_resources(old, new, create_only)
    old_exp, new_exp = exposures(old), exposures(new)
    old_iam, new_iam = iam_grants(old), iam_grants(new)
    status = "added" if base is None else "changed" if diff.changes else "unchanged"
    return StackReview(
        name=name,
        status=status,
        changes=diff.changes,
        replacements=diff.replacements,
        failures=diff.failures,
        tier_changes=tier_changes(_tier(base), _tier(head)),
        exposure_opened=sorted(new_exp - old_exp),
        exposure_closed=sorted(old_exp - new_exp),
        iam_added=sorted(new_iam - old_iam),
        iam_removed=sorted(old_iam - new_iam),
        base=tier_facts(base) if base else None,
        head=tier_facts(head) if head else None,
    )


_SCOPE = "\x00"
"""Joins a custom name with the properties that scope it, in :func:`_custom_names` keys."""


def _custom_names(stack: StackTemplate) -> dict[tuple[str, str], str]:
    """(type, name and its scope as written) -> logical ID of the stack's custom-named resources."""
    out = {}
    for lid, resource in stack.resources.items():
        rules = rules_for(str(resource.get("Type")))
        if rules is None or not rules.names:
            continue
        props = resource.get("Properties") or {}
        scoped = [props.get(p) for p in rules.names]
        # Only a literal name in a literal scope is the same in both stacks; one built from a
        # reference (a function's log group, `/aws/lambda/${Function}`, a rule namespace in the
        # stack's own workspace) resolves to each stack's own resource.
        if all(v is None or isinstance(v, str) for v in scoped) and isinstance(scoped[0], str):
            out[(str(resource["Type"]), _SCOPE.join(str(v) for v in scoped if v is not None))] = lid
    return out


def _pair_renames(
    reviews: dict[str, StackReview],
    base: Mapping[str, StackTemplate],
    head: Mapping[str, StackTemplate],
) -> None:
    """Pair each orphaned gpufarm stack with the added gpufarm stack whose tier differs least: a
    renamed tier. The added stack gets the tier diff and the custom names the orphan still holds."""
    orphans = [n for n, r in reviews.items() if r.status == "orphaned" and _tier(base[n]) is not None]
    added = [n for n, r in reviews.items() if r.status == "added" and _tier(head[n]) is not None]
    for orphan in orphans:
        if not added:
            break
        old_tier = _tier(base[orphan])
        new = min(added, key=lambda n: (len(tier_changes(old_tier, _tier(head[n]))), n))
        added.remove(new)
        taken = _custom_names(base[orphan])
        clashes = [
            DeployFailure(
                logical_id=lid,
                resource_type=rtype,
                reason=(
                    f"its custom name '{value.split(_SCOPE)[0]}' is still held by {taken[(rtype, value)]} of "
                    f"{orphan}, which stays deployed, so creating it fails and this deploy rolls back"
                ),
                fix=f"give it another name, or destroy {orphan} first",
                source=reference_url(rtype),
            )
            for (rtype, value), lid in sorted(_custom_names(head[new]).items())
            if (rtype, value) in taken
        ]
        reviews[orphan] = replace(reviews[orphan], renamed_to=new)
        reviews[new] = replace(
            reviews[new],
            renamed_from=orphan,
            tier_changes=tier_changes(old_tier, _tier(head[new])),
            failures=[*reviews[new].failures, *clashes],
        )


def review_assemblies(
    base: Mapping[str, StackTemplate] | None,
    head: Mapping[str, StackTemplate],
    *,
    base_label: str = "",
    head_label: str = "",
    create_only: CreateOnlyProperties | None = None,
) -> Review:
    """Compare two assemblies stack by stack (stacks matched by name); with no base, summarize head."""
    create_only = create_only or CreateOnlyProperties()
    if base is None:
        return Review(
            mode="summary",
            stacks=[summarize_stack(head[name]) for name in sorted(head)],
            head_label=head_label,
            create_only_source=create_only.source,
        )
    names = sorted(set(base) | set(head))
    reviews = {n: _review_stack(n, base.get(n), head.get(n), create_only) for n in names}
    _pair_renames(reviews, base, head)
    return Review(
        mode="diff",
        stacks=[reviews[n] for n in names],
        base_label=base_label,
        head_label=head_label,
        create_only_source=create_only.source,
    )


def summarize_stack(stack: StackTemplate) -> StackReview:
    """What one stack holds: resources by type, critical resources, exposure, wildcards, GPUs, cost."""
    resources = stack.resources
    counts = Counter(str(r.get("Type")) for r in resources.values())
    critical = sorted(
        (lid, str(r["Type"]), str(r.get("DeletionPolicy", "Delete")))
        for lid, r in resources.items()
        if is_critical(str(r.get("Type")))
    )
    return StackReview(
        name=stack.name,
        status="summary",
        resource_counts=dict(sorted(counts.items())),
        critical_resources=critical,
        exposure=sorted(exposures(stack)),
        iam_wildcards=sorted(g for g in iam_grants(stack) if g.wildcard),
        head=tier_facts(stack),
    )


def review_paths(base: str | Path | None, head: str | Path) -> Review:
    """Load and review assemblies from folders (`base` None: summarize `head`)."""
    base_stacks = load_assembly(base) if base is not None else None
    head_stacks = load_assembly(head)
    return review_assemblies(
        base_stacks, head_stacks, base_label=str(base) if base is not None else "", head_label=str(head)
    )
