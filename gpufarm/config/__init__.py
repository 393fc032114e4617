"""Tier configuration: the pydantic model, the shipped presets and the loader."""

from gpufarm.config.errors import ConfigError, ConfigIssue
from gpufarm.config.loader import build_tier, load_preset, load_tier_file, merge, preset_names
from gpufarm.config.model import (
    AccessLogsConfig,
    AutoModeBuiltinPool,
    CapacityType,
    ClusterConfig,
    ControlPlaneLog,
    EndpointAccess,
    EnvironmentConfig,
    FlowLogsConfig,
    IngressConfig,
    InterfaceEndpoint,
    LoadBalancerScheme,
    ModelConfig,
    NetworkConfig,
    NodePoolConfig,
    Provisioning,
    RemovalPolicy,
    ServingConfig,
    TierConfig,
)
from gpufarm.config.validate import validate_tier

__all__ = [
    "AccessLogsConfig",
    "AutoModeBuiltinPool",
    "CapacityType",
    "ClusterConfig",
    "ConfigError",
    "ConfigIssue",
    "ControlPlaneLog",
    "EndpointAccess",
    "EnvironmentConfig",
    "FlowLogsConfig",
    "IngressConfig",
    "InterfaceEndpoint",
    "LoadBalancerScheme",
    "ModelConfig",
    "NetworkConfig",
    "NodePoolConfig",
    "Provisioning",
    "RemovalPolicy",
    "ServingConfig",
    "TierConfig",
    "build_tier",
    "load_preset",
    "load_tier_file",
    "merge",
    "preset_names",
    "validate_tier",
]
