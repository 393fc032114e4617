"""What a stack asks of the load balancer in front of the models, whichever kind it is.

:class:`LoadBalancer` is the protocol the tier stack holds; :class:`InferenceAlb` (routes by path)
and :class:`InferenceNlb` (a listener per model) implement it. :class:`InferenceLoadBalancer` is
their common base: the TargetGroupBinding building, the gateway's binding (`bind_default`),
binding a tier's endpoints and the target-group names the alarms and the dashboard read are
written there once.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from constructs import Construct

from gpufarm.config.model import LoadBalancerKind, PrivateLinkConfig
from gpufarm.constructs._util import construct_id
from gpufarm.core.endpoints import Endpoint, services_of, weights_of
from gpufarm.k8s.binding import AUTO_MODE_TGB_API, target_group_binding

if TYPE_CHECKING:
    from gpufarm.constructs.private_link import InferencePrivateLink

GATEWAY_TARGET_GROUP = "gateway"
"""The key of the gateway's target group in :meth:`InferenceLoadBalancer.target_group_full_names`."""


@runtime_checkable
class LoadBalancer(Protocol):
    """The load balancer in front of the models, as the tier stack uses it (ALB or NLB)."""

    @property
    def kind(self) -> LoadBalancerKind:
        """Which load balancer this is: the alarms and the dashboard read its metrics by kind."""
        ...

    @property
    def load_balancer(self) -> elbv2.BaseLoadBalancer:
        """The ELB load balancer itself."""
        ...

    @property
    def connections(self) -> ec2.Connections:
        """The load balancer's security-group connections."""
        ...

    @property
    def dns_name(self) -> str:
        """DNS name of the load balancer."""
        ...

    @property
    def load_balancer_full_name(self) -> str:
        """`app/<name>/<id>` or `net/<name>/<id>`, the CloudWatch `LoadBalancer` dimension."""
        ...

    @property
    def scheme(self) -> str:
        """'https' or 'http', as clients must call the listener(s)."""
        ...

    @property
    def target_ports(self) -> list[int]:
        """Pod ports the load balancer connects to."""
        ...

    @property
    def target_groups(self) -> dict[str, elbv2.CfnTargetGroup]:
        """Model -> its target group, for models without weights."""
        ...

    @property
    def weighted_target_groups(self) -> dict[str, dict[str, elbv2.CfnTargetGroup]]:
        """Model -> group -> target group, for models with weights."""
        ...

    @property
    def default_target_group(self) -> elbv2.CfnTargetGroup | None:
        """The gateway's target group once :meth:`route_default_to` was called."""
        ...

    def base_url(self, model_name: str) -> str:
        """The OpenAI `base_url` of a model."""
        ...

    def base_url_default(self) -> str:
        """The OpenAI `base_url` of the default route (the gateway)."""
        ...

    def binding_name(self, service: str) -> str:
        """The TargetGroupBinding name of a Service."""
        ...

    def add_gateway_listener(self, *, port: int, callers: ec2.ISecurityGroup) -> str:
        """A listener on `port`, open to `callers` only, on which the gateway calls each model's
        route (balanced as a client's request is); returns its base URL. ALB only (through an
        internal NLB when the ALB is internet-facing)."""
        ...

    def route_default_to(self, *, port: int, health_check_path: str) -> elbv2.CfnTargetGroup:
        """Send what no model route takes to one IP target group (the gateway)."""
        ...

    def allow_targets_in(self, target_security_group: ec2.ISecurityGroup) -> None:
        """Open the target ports from the load balancer to the pods' security group."""
        ...

    def bind_services(
        self,
        *,
        cluster: eks.ICluster,
        namespace: str,
        services: Mapping[str, str | Mapping[str, str]],
        api_version: str = AUTO_MODE_TGB_API,
        after: Mapping[str, Construct] | None = None,
    ) -> dict[str, eks.KubernetesManifest]:
        """Register each model's Service pods in its target group(s)."""
        ...

    def bind_endpoints(
        self,
        *,
        cluster: eks.ICluster,
        endpoints: Sequence[Endpoint],
        api_version: str = AUTO_MODE_TGB_API,
        after: Mapping[str, Construct] | None = None,
    ) -> dict[str, eks.KubernetesManifest]:
        """Register each endpoint's Service pods in its target group."""
        ...

    def bind_default(
        self,
        *,
        cluster: eks.ICluster,
        namespace: str,
        service: str,
        api_version: str = AUTO_MODE_TGB_API,
        after: Construct | None = None,
    ) -> eks.KubernetesManifest:
        """Register the pods of `service` (the gateway) in the default route's target group."""
        ...

    def target_group_full_names(self) -> dict[str, str]:
        """Target group full names keyed as the alarms and the dashboard key them."""
        ...

    def private_link(
        self,
        scope: Construct,
        id: str,
        *,
        config: PrivateLinkConfig,
        vpc: ec2.IVpc,
        deletion_protection: bool = False,
    ) -> InferencePrivateLink:
        """A PrivateLink endpoint service offering this load balancer's listeners."""
        ...


class InferenceLoadBalancer(Construct):
    """The code :class:`InferenceAlb` and :class:`InferenceNlb` share; build one of those."""

    kind: LoadBalancerKind
    target_groups: dict[str, elbv2.CfnTargetGroup]
    weighted_target_groups: dict[str, dict[str, elbv2.CfnTargetGroup]]
    default_target_group: elbv2.CfnTargetGroup | None
    default_port: int | None

    target_port: int

    def bind_services(
        self,
        *,
        cluster: eks.ICluster,
        namespace: str,
        services: Mapping[str, str | Mapping[str, str]],
        api_version: str = AUTO_MODE_TGB_API,
        after: Mapping[str, Construct] | None = None,
    ) -> dict[str, eks.KubernetesManifest]:
        """Register each model's Service pods in its target group(s) with TargetGroupBindings.

        `services` maps a model to its Service name or, for a model with weights, to
        `{group: Service}` (one Service per target group: the pods of that GPU pool). `after`
        maps a model to the construct that creates its Service(s), so the bindings are applied
        after it. Returns the bindings by model, and by `<model>/<group>` for weighted ones. Each
        binding names the Service port :attr:`target_port` (the Service must expose it:
        `vllm_service` does, given the same Target Optimizer config), or a router's port.
        `api_version`: Auto Mode's `eks.amazonaws.com/v1` (default) or the AWS Load Balancer
        Controller's `elbv2.k8s.aws/v1beta1`; both bind target groups of type `ip`.
        """
        after = after or {}
        bindings: dict[str, eks.KubernetesManifest] = {}
        for name, service in services.items():
            self._check_bound_model(name)
            groups = self.weighted_target_groups.get(name)
            if groups is None:
                if not isinstance(service, str):
                    raise ValueError(
                        f"bind_services() needs one Service name for model {name!r} (it has no "
                        f"weights), got a mapping of {len(service)}"
                    )
                bindings[name] = self._model_binding(
                    name,
                    service,
                    cluster=cluster,
                    namespace=namespace,
                    api_version=api_version,
                    after=after.get(name),
                )
                continue
            if isinstance(service, str) or set(service) != set(groups):
                given = repr(service) if isinstance(service, str) else ", ".join(sorted(service)) or "none"
                raise ValueError(
                    f"bind_services() needs a Service per target group of weighted model {name!r} "
                    f"(groups: {', '.join(sorted(groups))}), got {given}"
                )
            for group in sorted(groups):
                bindings[f"{name}/{group}"] = self._binding(
                    f"Binding{construct_id(name)}{construct_id(group)}{self._revision}",
                    cluster=cluster,
                    namespace=namespace,
                    name=self.binding_name(service[group]),
                    service=service[group],
                    port=self.target_port,
                    target_group=groups[group],
                    api_version=api_version,
                    after=after.get(name),
                )
        return bindings

    # Abstract (jsii's metaclass leaves no room for ABCMeta): each load balancer knows its own
    # models (ALB routes, NLB listeners), and InferenceAlb and InferenceNlb both override it.
    @abstractmethod
    def _check_bound_model(self, name: str) -> None:
        """Refuse a model this load balancer has no target group for, naming the ones it has."""
        raise NotImplementedError(f"{type(self).__name__} must implement _check_bound_model()")

    def binding_name(self, service: str) -> str:
        """The TargetGroupBinding name of a Service (its own name, by default)."""
        return service

    @property
    def _revision(self) -> str:
        """Suffix of the IDs of target groups and bindings fixed at creation ('' by default)."""
        return ""

    def _model_binding(
        self,
        name: str,
        service: str,
        *,
        cluster: eks.ICluster,
        namespace: str,
        api_version: str,
        after: Construct | None,
    ) -> eks.KubernetesManifest:
        """The binding of an unweighted model's Service to its target group, on :attr:`target_port`."""
        return self._binding(
            f"Binding{construct_id(name)}{self._revision}",
            cluster=cluster,
            namespace=namespace,
            name=self.binding_name(service),
            service=service,
            port=self.target_port,
            target_group=self.target_groups[name],
            api_version=api_version,
            after=after,
        )

    def bind_endpoints(
        self,
        *,
        cluster: eks.ICluster,
        endpoints: Sequence[Endpoint],
        api_version: str = AUTO_MODE_TGB_API,
        after: Mapping[str, Construct] | None = None,
    ) -> dict[str, eks.KubernetesManifest]:
        """Register each endpoint's Service pods in its target group, as :meth:`bind_services` does.

        `endpoints` (from `gpufarm.core.endpoints`) name each model's Service, or each share's;
        `after` maps a model to the construct that creates its Service(s). Bindings are created in
        the order of `endpoints` and returned keyed `<model>` or `<model>/<share>`.
        """
        bindings: dict[str, eks.KubernetesManifest] = {}
        for namespace in dict.fromkeys(e.namespace for e in endpoints):
            bindings.update(
                self.bind_services(
                    cluster=cluster,
                    namespace=namespace,
                    services=services_of(e for e in endpoints if e.namespace == namespace),
                    api_version=api_version,
                    after=after,
                )
            )
        return bindings

    def bind_default(
        self,
        *,
        cluster: eks.ICluster,
        namespace: str,
        service: str,
        api_version: str = AUTO_MODE_TGB_API,
        after: Construct | None = None,
    ) -> eks.KubernetesManifest:
        """Register the pods of `service` (the gateway) in the default route's target group."""
        if self.default_target_group is None or self.default_port is None:
            raise ValueError(
                "bind_default() needs route_default_to() first: there is no default target group"
            )
        return self._binding(
            "Binding-Default-Route",
            cluster=cluster,
            namespace=namespace,
            name=service,
            service=service,
            port=self.default_port,
            target_group=self.default_target_group,
            api_version=api_version,
            after=after,
        )

    def target_group_full_names(self) -> dict[str, str]:
        """Target group full names: by model, by `<model>/<share>` for a weighted model's groups,
        and the gateway's under :data:`GATEWAY_TARGET_GROUP` (its latency includes any fallback).

        The keys the alarms and the dashboard name their alarms and widgets by.
        """
        names = {model: tg.attr_target_group_full_name for model, tg in self.target_groups.items()}
        for model, groups in self.weighted_target_groups.items():
            for group, tg in groups.items():
                names[f"{model}/{group}"] = tg.attr_target_group_full_name
        if self.default_target_group is not None:
            names[GATEWAY_TARGET_GROUP] = self.default_target_group.attr_target_group_full_name
        return names

    def _binding(
        self,
        id: str,
        *,
        cluster: eks.ICluster,
        namespace: str,
        name: str,
        service: str,
        port: int,
        target_group: elbv2.CfnTargetGroup,
        api_version: str,
        after: Construct | None,
    ) -> eks.KubernetesManifest:
        """A TargetGroupBinding `name` registering `service`'s pods on `port` in `target_group`."""
        manifest = eks.KubernetesManifest(
            self,
            id,
            cluster=cluster,
            overwrite=True,
            manifest=[
                target_group_binding(
                    name=name,
                    namespace=namespace,
                    service_name=service,
                    service_port=port,
                    target_group_arn=target_group.ref,
                    api_version=api_version,
                )
            ],
        )
        if after is not None:
            manifest.node.add_dependency(after)
        return manifest


def routes_of(
    endpoints: Sequence[Endpoint],
) -> tuple[list[str], dict[str, int], dict[str, int | None], dict[str, dict[str, int]]]:
    """(models, rule priority by model, listener port by model, `{share: weight}` by model).

    The per-model dicts the load balancers' older keywords take, read from `endpoints`.
    """
    first: dict[str, Endpoint] = {}
    for e in endpoints:
        first.setdefault(e.model, e)
    return (
        list(first),
        {m: e.rule_priority for m, e in first.items()},
        {m: e.listener_port for m, e in first.items()},
        weights_of(endpoints),
    )


def no_dicts_with_endpoints(**given: object) -> None:
    """Refuse a per-model keyword given together with `endpoints`, which gives it."""
    for field, value in given.items():
        if value:
            raise ValueError(f"'{field}' must be empty when 'endpoints' is given (read from it), got both")
