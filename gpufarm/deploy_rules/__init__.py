"""Deploy rules: what AWS APIs refuse at create or update time, checked at synth.

`DeployRulesPlugin` is the CDK validation plugin (added by
:func:`gpufarm.constructs.enable_compliance_checks`); `check_template` checks one template
document; `RULES` is the catalogue (docs/deploy-rules.md).
"""

from gpufarm.deploy_rules.catalog import RULES, check_template, covered_types
from gpufarm.deploy_rules.plugin import DeployRulesPlugin
from gpufarm.deploy_rules.rule import Resource, Rule, Template, Violation

__all__ = [
    "RULES",
    "DeployRulesPlugin",
    "Resource",
    "Rule",
    "Template",
    "Violation",
    "check_template",
    "covered_types",
]
