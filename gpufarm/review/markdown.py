"""The review as a Markdown pull-request comment."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from gpufarm.review.capacity import TierFacts
from gpufarm.review.iam import IamGrant
from gpufarm.review.report import Review, StackReview


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def _table(columns: Iterable[str], rows: Iterable[Iterable[Any]]) -> list[str]:
    cols = list(columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return [*lines, ""]


def _usd(value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return "n/a"
    if signed:
        sign = "+" if value > 0.005 else "-" if value < -0.005 else "±"
        return f"{sign}${abs(value):,.2f}"
    return f"${value:,.2f}"


def _gpus(facts: TierFacts | None) -> str:
    if facts is None or not facts.gpus:
        return "n/a"
    return " / ".join(str(facts.gpus.get(k, 0)) for k in ("reserved", "on-demand", "spot"))


def _iam_rows(grants: list[IamGrant], change: str) -> list[list[str]]:
    """Grants grouped by principal, kind, effect and resource, with their actions in one cell."""
    grouped: dict[tuple[str, str, str, str, str, bool], list[IamGrant]] = defaultdict(list)
    for g in grants:
        grouped[(g.principal, g.via, g.kind, g.effect, g.resource, g.conditional)].append(g)
    rows = []
    for (principal, via, kind, effect, resource, conditional), members in sorted(grouped.items()):
        wildcard = any(g.wildcard for g in members)
        rows.append(
            [
                ("**" + change + "**") if wildcard and change == "added" else change,
                _code(principal) + (f" via {_code(via)}" if via else ""),
                kind if effect == "Allow" else f"{kind} ({effect})",
                ", ".join(_code(a) for a in sorted(g.action for g in members)),
                _code(resource) + (" (conditional)" if conditional else ""),
                "**yes**" if wildcard else "",
            ]
        )
    return rows


def _orphan_markdown(stack: StackReview) -> list[str]:
    facts = stack.base
    bill = f" ({_usd(facts.monthly_usd)} a month at the floor)" if facts and facts.monthly_usd else ""
    beside = f" next to {_code(stack.renamed_to)}, which takes over its tier" if stack.renamed_to else ""
    return [
        f"### {stack.name}",
        "",
        f"**The stack leaves the app, but nothing deletes it.** `cdk deploy` never deletes a stack that "
        f"is no longer in the app: {_code(stack.name)} keeps running and billing{bill}{beside}. "
        "Nothing in it changes.",
        "",
        (
            "What to do: if the rename is intended, deploy the new stack, move traffic to it, then delete "
            f"the old one (`cdk destroy {stack.name}` from the base commit, or delete the CloudFormation "
            "stack). If it is not, keep the tier's old `name`."
            if stack.renamed_to
            else f"What to do: to remove it, run `cdk destroy {stack.name}` from the base commit (or delete "
            "the CloudFormation stack); resources with a Retain policy stay in the account."
        ),
        "",
    ]


def _failures_markdown(stack: StackReview) -> list[str]:
    if not stack.failures:
        return []
    lines = [
        "#### This deploy will fail",
        "",
        f"**{len(stack.failures)} change(s) CloudFormation or the service refuses**: the deploy fails and "
        "the stack rolls back.",
        "",
    ]
    return lines + _table(
        ["Resource", "Type", "Why", "What to do"],
        [[_code(f.logical_id), f.resource_type, f.reason, f.fix] for f in stack.failures],
    )


def _tier_markdown(stack: StackReview) -> list[str]:
    if not stack.tier_changes:
        return []
    lines = ["#### Tier changes", ""]
    return lines + _table(
        ["Field", "Base", "Head"],
        [[_code(c.path), _value(c.before), _value(c.after)] for c in stack.tier_changes],
    )


def _value(text: str | None) -> str:
    return "_(absent)_" if text is None else _code(text)


def _kubernetes_markdown(stack: StackReview) -> list[str]:
    rows = []
    for change in stack.changes:
        for obj in change.objects or ():
            if not obj.fields:
                rows.append([_code(obj.label), obj.change, "", "", ""])
            for f in obj.fields:
                rows.append([_code(obj.label), obj.change, _code(f.path), _value(f.before), _value(f.after)])
    if not rows:
        return []
    return ["#### Kubernetes objects", "", *_table(["Object", "Change", "Field", "Before", "After"], rows)]


def _stack_markdown(stack: StackReview) -> list[str]:
    if stack.status == "orphaned":
        return _orphan_markdown(stack)
    lines = [f"### {stack.name}", ""]
    if stack.status == "unchanged":
        return [*lines, "No changes.", ""]
    if stack.status == "added":
        lines += ["New stack: every resource below is created.", ""]
        if stack.renamed_from:
            lines += [
                f"It carries the tier of {_code(stack.renamed_from)} under a new name. That stack stays "
                "deployed and billing: the bill of this one comes on top of it.",
                "",
            ]
    lines += _failures_markdown(stack)
    lines += _tier_markdown(stack)
    lines += ["#### Replacements", ""]
    critical = stack.critical_replacements
    other = [r for r in stack.replacements if not r.critical]
    if critical:
        lines += [
            f"**{len(critical)} stateful or traffic-bearing resource(s) replaced or deleted**: an outage or "
            "data loss unless planned.",
            "",
        ]
        lines += _table(
            ["Resource", "Type", "Why", "Old resource"],
            [
                [
                    _code(r.logical_id) + (f" → {_code(r.new_logical_id)}" if r.new_logical_id else ""),
                    r.resource_type,
                    r.reason,
                    r.old_resource,
                ]
                for r in critical
            ],
        )
    else:
        lines += ["No stateful or traffic-bearing resource is replaced.", ""]
    if other:
        lines += ["Other replacements:", ""]
        lines += _table(
            ["Resource", "Type", "Why"],
            [
                [
                    _code(r.logical_id) + (f" → {_code(r.new_logical_id)}" if r.new_logical_id else ""),
                    r.resource_type,
                    r.reason,
                ]
                for r in other
            ],
        )
    lines += ["#### Public exposure", ""]
    if stack.exposure_opened or stack.exposure_closed:
        lines += _table(
            ["Change", "Resource", "Type", "Exposure"],
            [
                ["**opened**", _code(e.logical_id), e.resource_type, e.description]
                for e in stack.exposure_opened
            ]
            + [
                ["closed", _code(e.logical_id), e.resource_type, e.description] for e in stack.exposure_closed
            ],
        )
    else:
        lines += ["No change.", ""]
    lines += ["#### IAM", ""]
    wildcards = [g for g in stack.iam_added if g.wildcard]
    if stack.iam_added or stack.iam_removed:
        summary = f"{len(stack.iam_added)} grant(s) added, {len(stack.iam_removed)} removed"
        if wildcards:
            summary += f", **{len(wildcards)} new wildcard grant(s)**"
        lines += [summary + ".", ""]
        lines += _table(
            ["Change", "Principal", "Kind", "Actions", "Resource", "Wildcard"],
            _iam_rows(stack.iam_added, "added") + _iam_rows(stack.iam_removed, "removed"),
        )
    else:
        lines += ["No change.", ""]
    lines += _capacity_and_cost(stack)
    lines += _kubernetes_markdown(stack)
    lines += ["#### Resources", ""]
    counts = stack.counts_by_type()
    if counts:
        lines += _table(
            ["Type", "Added", "Removed", "Modified", "Replaced"],
            [[t, c["added"], c["removed"], c["modified"], c["replaced"]] for t, c in counts.items()],
        )
        lines += [f"<details><summary>{len(stack.changes)} changed resource(s)</summary>", ""]
        for change in sorted(stack.changes, key=lambda c: (c.change, c.resource_type, c.logical_id)):
            detail = f": {', '.join(change.properties)}" if change.properties else ""
            renamed = f" → {_code(change.new_logical_id)}" if change.new_logical_id else ""
            lines.append(
                f"- {change.change} {_code(change.logical_id)}{renamed} ({change.resource_type}){detail}"
            )
            lines += [f"  - {_code(v.path)}: {_value(v.before)} → {_value(v.after)}" for v in change.values]
        lines += ["", "</details>", ""]
    return lines


def _capacity_and_cost(stack: StackReview) -> list[str]:
    lines = ["#### GPU capacity and monthly cost", ""]
    base, head = stack.base, stack.head
    keys = ("reserved", "on-demand", "spot")
    rows = []
    for key in keys:
        before = base.gpus.get(key, 0) if base and base.gpus else None
        after = head.gpus.get(key, 0) if head and head.gpus else None
        delta = "" if before is None or after is None or before == after else f"{after - before:+d}"
        rows.append(
            [
                f"GPUs {key} (at peak)",
                "n/a" if before is None else before,
                "n/a" if after is None else after,
                delta,
            ]
        )
    for label, figure, attribute in (
        ("Monthly cost, floor", "floor", "monthly_usd"),
        ("Monthly cost, expected", "expected", "expected_monthly_usd"),
        ("Monthly cost, ceiling", "ceiling", "peak_monthly_usd"),
    ):
        change = stack.cost_delta(figure)
        rows.append(
            [
                label,
                _usd(getattr(base, attribute) if base else None),
                _usd(getattr(head, attribute) if head else None),
                _usd(change, signed=True) if change is not None else "",
            ]
        )
    lines += _table(["", "Base", "Head", "Change"], rows)
    notes = [n for n in (base.note if base else "", head.note if head else "") if n]
    lines += [f"_{n}_" for n in dict.fromkeys(notes)] + ([""] if notes else [])
    return lines


def _summary_markdown(stack: StackReview) -> list[str]:
    facts = stack.head
    lines = [f"### {stack.name}", ""]
    total = sum(stack.resource_counts.values())
    lines += [f"{total} resources of {len(stack.resource_counts)} types.", ""]
    if facts is not None:
        lines += _table(
            [
                "GPUs reserved / on-demand / spot (at peak)",
                "Monthly cost, floor",
                "Monthly cost, expected",
                "Monthly cost, ceiling",
            ],
            [
                [
                    _gpus(facts),
                    _usd(facts.monthly_usd),
                    _usd(facts.expected_monthly_usd),
                    _usd(facts.peak_monthly_usd),
                ]
            ],
        )
        if facts.note:
            lines += [f"_{facts.note}_", ""]
    lines += ["#### Public exposure", ""]
    lines += (
        _table(
            ["Resource", "Type", "Exposure"],
            [[_code(e.logical_id), e.resource_type, e.description] for e in stack.exposure],
        )
        if stack.exposure
        else ["Nothing is reachable from outside private networks.", ""]
    )
    lines += ["#### IAM wildcards", ""]
    lines += (
        _table(
            ["Principal", "Kind", "Actions", "Resource", "Wildcard"],
            [row[1:] for row in _iam_rows(stack.iam_wildcards, "present")],
        )
        if stack.iam_wildcards
        else ["No wildcard grant.", ""]
    )
    lines += [
        f"<details><summary>{len(stack.critical_resources)} stateful or traffic-bearing resources</summary>",
        "",
    ]
    lines += _table(
        ["Resource", "Type", "Deletion policy"], [[_code(i), t, p] for i, t, p in stack.critical_resources]
    )
    lines += ["</details>", ""]
    lines += ["<details><summary>Resources by type</summary>", ""]
    lines += _table(["Type", "Count"], list(stack.resource_counts.items()))
    lines += ["</details>", ""]
    return lines


def render_markdown(review: Review) -> str:
    """The review as a Markdown report for a pull request comment."""
    lines = ["## gpufarm review", ""]
    if review.mode == "summary":
        lines += [f"Summary of {_code(review.head_label)}." if review.head_label else "Summary.", ""]
        for stack in review.stacks:
            lines += _summary_markdown(stack)
        return "\n".join(lines).rstrip() + "\n"
    if review.base_label or review.head_label:
        lines += [f"Base {_code(review.base_label)} → head {_code(review.head_label)}.", ""]
    rows = []
    for s in review.stacks:
        wildcards = sum(1 for g in s.iam_added if g.wildcard)
        status = f"**{s.status}**" if s.status == "orphaned" else s.status
        if s.failures:
            status += f" (**deploy fails: {len(s.failures)}**)"
        rows.append(
            [
                s.name,
                status,
                f"**{len(s.critical_replacements)}**" if s.critical_replacements else "0",
                f"+{len(s.exposure_opened)} / -{len(s.exposure_closed)}",
                f"+{len(s.iam_added)} / -{len(s.iam_removed)}"
                + (f" (**{wildcards} wildcard**)" if wildcards else ""),
                f"{_gpus(s.base)} → {_gpus(s.head)}",
                _usd(s.cost_delta(), signed=True) if s.cost_delta() is not None else "n/a",
            ]
        )
    lines += _table(
        [
            "Stack",
            "Status",
            "Stateful/traffic replacements",
            "Exposure opened / closed",
            "IAM grants added / removed",
            "GPUs reserved / on-demand / spot (at peak)",
            "Monthly cost change, floor",
        ],
        rows,
    )
    total = review.cost_delta()
    if len(review.stacks) > 1 and total is not None:
        lines += [f"Monthly cost change over all stacks (floor): {_usd(total, signed=True)}.", ""]
    for stack in review.stacks:
        lines += _stack_markdown(stack)
    lines += [f"<sub>Replacements judged from {review.create_only_source}.</sub>", ""]
    return "\n".join(lines).rstrip() + "\n"
