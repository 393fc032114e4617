"""AWS Identity and Access Management: the size and count limits IAM enforces on roles and policies.

IAM does not count white space in a policy's size; a token counts as nothing here, so a size
found above a limit is above it whatever CloudFormation resolves.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpufarm.deploy_rules.checks import items
from gpufarm.deploy_rules.rule import Resource, Rule, Template, literal_str, ref_target
from gpufarm.deploy_rules.shapes import each, policy_size, referenced, resource

ROLE = "AWS::IAM::Role"
POLICY = "AWS::IAM::Policy"
MANAGED_POLICY = "AWS::IAM::ManagedPolicy"
INSTANCE_PROFILE = "AWS::IAM::InstanceProfile"

_QUOTAS = "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html"
_INSTANCE_PROFILE = "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-iam-instanceprofile.html"

ROLE_INLINE_POLICY_CHARS = 10_240
MANAGED_POLICY_CHARS = 6_144
MAX_MANAGED_POLICIES_PER_ROLE = 20

_TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ],
}


def _statement(padding: int) -> dict[str, Any]:
    """A policy of about `padding` characters: one statement on objects under a long prefix."""
    resource_arn = "arn:aws:s3:::gpufarm-models/" + "p" * padding
    return {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": resource_arn}],
    }


def _inline_documents(role: Resource, template: Template) -> list[Any]:
    """Every inline policy of `role`: its own `Policies` and each `AWS::IAM::Policy` naming it."""
    own = [p.get("PolicyDocument") for p in each(role.prop("Policies"))]
    attached = [
        policy.prop("PolicyDocument")
        for policy in template.of_type(POLICY)
        if any(ref_target(r) == role.logical_id for r in items(policy.prop("Roles")))
    ]
    return own + attached


def _aggregate(documents: list[Any]) -> int:
    return sum(policy_size(d) for d in documents if d is not None)


def _role_inline_size(res: Resource, _template: Template) -> Iterator[str]:
    # IAM quotas, character limits: "Role policy size cannot exceed 10,240 characters" (the sum of
    # all inline policies of a role); "IAM does not count white space".
    size = _aggregate([p.get("PolicyDocument") for p in each(res.prop("Policies"))])
    if size > ROLE_INLINE_POLICY_CHARS:
        yield (
            f"its inline policies total at least {size} characters; a role's cannot "
            f"exceed {ROLE_INLINE_POLICY_CHARS}"
        )


def _policy_role_size(res: Resource, template: Template) -> Iterator[str]:
    # Same quota, reached by AWS::IAM::Policy resources attached to one role of the template.
    for role_ref in items(res.prop("Roles")):
        role = template.get(ref_target(role_ref))
        if role is None or role.type != ROLE:
            continue
        size = _aggregate(_inline_documents(role, template))
        if size > ROLE_INLINE_POLICY_CHARS:
            yield (
                f"role {role.logical_id}'s inline policies, this one included, total at least {size} "
                f"characters; a role's cannot exceed {ROLE_INLINE_POLICY_CHARS}"
            )


def _managed_policy_size(res: Resource, _template: Template) -> Iterator[str]:
    # IAM quotas, character limits: "Managed policy size cannot exceed 6,144 characters."
    size = policy_size(res.prop("PolicyDocument"))
    if size > MANAGED_POLICY_CHARS:
        yield (
            f"the policy has at least {size} characters; a managed policy cannot "
            f"exceed {MANAGED_POLICY_CHARS}"
        )


def _managed_policy_count(res: Resource, template: Template) -> Iterator[str]:
    # IAM quotas: managed policies attached to a role, 10 by default, at most 20 whatever the
    # account asks for. Between the two, `gpufarm preflight` compares with the account's quota.
    arns = res.prop("ManagedPolicyArns")
    count = len(arns) if isinstance(arns, list) else 0
    count += sum(
        1
        for policy in template.of_type(MANAGED_POLICY)
        if any(ref_target(r) == res.logical_id for r in items(policy.prop("Roles")))
    )
    if count > MAX_MANAGED_POLICIES_PER_ROLE:
        yield f"{count} managed policies attached; a role can have at most {MAX_MANAGED_POLICIES_PER_ROLE}"


def _role_names(res: Resource, template: Template) -> Iterator[str]:
    # AWS::IAM::InstanceProfile, Roles: "The name of the role to associate with the instance
    # profile", pattern [a-zA-Z0-9+=,.@\-_]+ (no ':' or '/'): `Ref` on a role gives its name; its
    # ARN (or any other attribute) is refused.
    roles = res.prop("Roles")
    for role in roles if isinstance(roles, list) else []:
        literal = literal_str(role)
        target = referenced(role, template, ROLE)
        if literal is not None and literal.startswith("arn:"):
            yield f"Roles entry {literal!r} is an ARN; an instance profile takes the role's name"
        elif target is not None and isinstance(role, dict) and "Fn::GetAtt" in role:
            yield (
                f"Roles entry is an attribute of {target.logical_id}; an instance "
                "profile takes its name (Ref)"
            )


def _role(**properties: Any) -> dict[str, Any]:
    return resource(ROLE, AssumeRolePolicyDocument=_TRUST, **properties)


def _inline(name: str, padding: int) -> dict[str, Any]:
    return {"PolicyName": name, "PolicyDocument": _statement(padding)}


def _attached(padding: int) -> dict[str, Any]:
    return resource(POLICY, PolicyName="Extra", PolicyDocument=_statement(padding), Roles=[{"Ref": "Role"}])


_AWS_MANAGED = [f"arn:aws:iam::aws:policy/P{i}" for i in range(MAX_MANAGED_POLICIES_PER_ROLE + 1)]

RULES: tuple[Rule, ...] = (
    Rule(
        id="IAM-ROLE-INLINE-POLICY-SIZE",
        resource_type=ROLE,
        title="A role's inline policies total at most 10,240 characters, white space not counted",
        doc_url=_QUOTAS,
        check=_role_inline_size,
        bad={"Role": _role(Policies=[_inline("A", 6_000), _inline("B", 6_000)])},
        good={"Role": _role(Policies=[_inline("A", 4_000), _inline("B", 4_000)])},
    ),
    Rule(
        id="IAM-ROLE-MANAGED-POLICIES",
        resource_type=ROLE,
        title="A role has at most 20 managed policies attached",
        doc_url=_QUOTAS,
        check=_managed_policy_count,
        bad={"Role": _role(ManagedPolicyArns=_AWS_MANAGED)},
        good={"Role": _role(ManagedPolicyArns=_AWS_MANAGED[:MAX_MANAGED_POLICIES_PER_ROLE])},
    ),
    Rule(
        id="IAM-POLICY-ROLE-SIZE",
        resource_type=POLICY,
        title="The inline policies of each role a policy joins total at most 10,240 characters",
        doc_url=_QUOTAS,
        check=_policy_role_size,
        bad={"Role": _role(Policies=[_inline("A", 6_000)]), "Extra": _attached(6_000)},
        good={"Role": _role(Policies=[_inline("A", 4_000)]), "Extra": _attached(4_000)},
    ),
    Rule(
        id="IAM-MANAGED-POLICY-SIZE",
        resource_type=MANAGED_POLICY,
        title="A managed policy has at most 6,144 characters, white space not counted",
        doc_url=_QUOTAS,
        check=_managed_policy_size,
        bad={"P": resource(MANAGED_POLICY, PolicyDocument=_statement(6_100))},
        good={"P": resource(MANAGED_POLICY, PolicyDocument=_statement(6_000))},
    ),
    Rule(
        id="IAM-INSTANCE-PROFILE-ROLE-NAME",
        resource_type=INSTANCE_PROFILE,
        title="An instance profile names its role, not the role's ARN",
        doc_url=_INSTANCE_PROFILE,
        check=_role_names,
        bad={"Role": _role(), "P": resource(INSTANCE_PROFILE, Roles=[{"Fn::GetAtt": ["Role", "Arn"]}])},
        good={"Role": _role(), "P": resource(INSTANCE_PROFILE, Roles=[{"Ref": "Role"}])},
    ),
)
