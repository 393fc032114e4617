"""docs/deploy-rules.md, generated from the rule catalogue so the list cannot drift from the code."""

from __future__ import annotations

import sys
from itertools import groupby

from gpufarm.deploy_rules.catalog import RULES

REGENERATE = "python -m gpufarm.deploy_rules.reference > docs/deploy-rules.md"

_INTRO = """\
Rules that AWS APIs, Kubernetes admission and Helm enforce when CloudFormation creates or updates
a resource, and that cfn-lint's schemas and cdk-nag do not express: cross-property constraints,
name formats and lengths, value ranges and per-resource quotas. `gpufarm.deploy_rules` checks
every synthesized template against them as a CDK validation plugin (`gpufarm-deploy-rules`),
added by `enable_compliance_checks` beside the cdk-nag packs, so `make synth`, `gpufarm synth`,
the tier tests and any app that calls `enable_compliance_checks(app)` fail on a breach: the
validation report names the resource, the rule and its documentation, and synth exits 1.

A deploy rule cannot be acknowledged the way a cdk-nag finding can: the API refuses the
resource whatever the reason, so the fix is always to change the template. Quotas that depend
on the account (Elastic IPs, VPCs, endpoints, target groups, security-group rules) are not here:
`gpufarm preflight` compares them with the account's applied quotas.

Each rule carries a template that breaks it and one that keeps it; the tests run both.
"""


def render_reference() -> str:
    """The Markdown list of every rule, grouped by resource type."""
    out = [
        "# Deploy rules",
        "",
        f"<!-- Generated from gpufarm/deploy_rules by `{REGENERATE}`; do not edit. -->",
        "",
        _INTRO,
        f"{len(RULES)} rules over {len({r.resource_type for r in RULES})} resource types.",
        "",
    ]
    for resource_type, rules in groupby(
        sorted(RULES, key=lambda r: (r.resource_type, r.id)), key=lambda r: r.resource_type
    ):
        out += [f"## `{resource_type}`", "", "| rule | what the API enforces | source |", "|---|---|---|"]
        out += [f"| `{r.id}` | {r.title} | [doc]({r.doc_url}) |" for r in rules]
        out.append("")
    return "\n".join(out)


def main() -> int:
    """Print the reference to standard output."""
    sys.stdout.write(render_reference())
    return 0


if __name__ == "__main__":
    sys.exit(main())
