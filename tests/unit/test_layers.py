"""The layers of gpufarm only point down: no module imports one of a higher layer.

The order enforced here, lowest first (read from the code, not wished for):

1. **leaves** - `images`, `image_cache` (which reads `images`), `debug`, `eks_support`,
   `assembly`, `client`, `node`, `cdk_context`: import no other part of gpufarm (`client`, the
   applications' fallback transport, must also import without the CDK; `node`, which picks
   jsii's Node, runs before the CDK is imported).
2. **config model** - every `gpufarm.config` module but those below: the pydantic model (its
   sections in `config.sections`, gathered by `config.model`) and the small tables and parsers it
   uses (catalog, bedrock, names, errors, image pins, ...).
   `deploy_rules` (the synth-time checks of AWS API rules) stands at this level: it reads the
   config model's name rules (`config.names`) and nothing above.
3. **core** - `gpufarm.core`: pure answers about a tier (placement, names, registries). It reads
   the config model, never the validator: the validator imports it.
4. **config validation** - `gpufarm.config` itself (its `__init__`), `config.validate`, the
   checks it runs (`config.checks` and its modules), `config.loader` and `config.reference`: they
   run or describe the checks, and the checks ask the core.
5. **k8s** - pure manifests.
6. **hosts** - pure user data, systemd units and agent configs of `cluster.provisioning: ec2`
   instances (they reuse the engine and gateway arguments the manifests use).
7. **constructs**, then 8. **stacks**, then 9. **app**.

Beside that line stand the **reports**: `pricing`, then `estimate` and `aws`, then `sizing` (a
planned pod asks no more than the estimate's node allocation leaves it) and `review`. A report
may import the leaves, the config, the core, `k8s` (pure manifest functions, no CDK) and an
earlier report; no construct, stack or app, and nothing of the line above imports a report.
`cli` sits on top and may import anything.

Imports under `if TYPE_CHECKING:` count too: mypy follows them like any other.
"""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import gpufarm.core

PACKAGE = Path(__file__).resolve().parents[2] / "gpufarm"

LEAVES = ("images", "image_cache", "debug", "eks_support", "assembly", "client", "node", "cdk_context")
CONFIG_VALIDATION = (
    "gpufarm.config",
    "gpufarm.config.validate",
    "gpufarm.config.loader",
    "gpufarm.config.reference",
)
CONFIG_VALIDATION_PACKAGES = ("gpufarm.config.checks",)
"""Packages whose every module is config validation."""
LINE = ("leaves", "config model", "core", "config validation", "k8s", "hosts", "constructs", "stacks", "app")
REPORTS = ("pricing", "estimate", "aws", "sizing", "review")
REPORT_RANK = {"pricing": 0, "estimate": 1, "aws": 1, "sizing": 2, "review": 2}
HIGHEST_FOR_REPORTS = LINE.index("k8s")


def layer_of(module: str) -> str:
    """The layer of a dotted module name under gpufarm."""
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else ""
    if top in LEAVES or module == "gpufarm":
        return "leaves"
    if top == "config":
        validation = module in CONFIG_VALIDATION or any(
            module == package or module.startswith(f"{package}.") for package in CONFIG_VALIDATION_PACKAGES
        )
        return "config validation" if validation else "config model"
    if top == "deploy_rules":
        return "config model"
    if top in ("core", "k8s", "hosts", "constructs", "stacks", "app", "cli") or top in REPORTS:
        return top
    raise AssertionError(f"{module} belongs to no layer: give it one in tests/unit/test_layers.py")


def may_import(importer: str, imported: str) -> bool:
    """Whether layer `importer` may import layer `imported`."""
    if importer == imported or importer == "cli":
        return True
    if imported == "cli":
        return False
    if importer in REPORTS:
        if imported in REPORTS:
            return REPORT_RANK[imported] < REPORT_RANK[importer]
        return LINE.index(imported) <= HIGHEST_FOR_REPORTS
    if imported in REPORTS:
        return False
    return LINE.index(imported) < LINE.index(importer)


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) of every gpufarm module `path` imports, at any depth of the file."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}:{node.lineno}: relative import; gpufarm imports absolutely"
            if node.module == "gpufarm":
                for alias in node.names:
                    yield node.lineno, f"gpufarm.{alias.name}"
            elif node.module is not None:
                yield node.lineno, node.module


def upward_imports(root: Path = PACKAGE) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        importer = module_name(path, root)
        for line, imported in imports_of(path):
            if imported.split(".")[0] != "gpufarm":
                continue
            low, high = layer_of(importer), layer_of(imported)
            if not may_import(low, high):
                found.append(
                    f"{path.relative_to(root.parent)}:{line} imports {imported}: layer {low!r} may not "
                    f"import layer {high!r} (see tests/unit/test_layers.py for the order)"
                )
    return found


def test_no_module_imports_a_higher_layer() -> None:
    assert upward_imports() == []


def test_every_module_has_a_layer() -> None:
    for path in PACKAGE.rglob("*.py"):
        layer_of(module_name(path))


@pytest.mark.parametrize(
    ("importer", "source", "message"),
    [
        (
            "config/validate.py",
            "from gpufarm.k8s.labels import workload_name\n",
            "gpufarm/config/validate.py:1 imports gpufarm.k8s.labels: layer 'config validation' may not "
            "import layer 'k8s' (see tests/unit/test_layers.py for the order)",
        ),
        (
            "k8s/lws.py",
            "import math\n\n\ndef f() -> None:\n    from gpufarm.constructs import lws\n",
            "gpufarm/k8s/lws.py:5 imports gpufarm.constructs: layer 'k8s' may not import layer "
            "'constructs' (see tests/unit/test_layers.py for the order)",
        ),
        (
            "config/checks/serving.py",
            "from gpufarm.k8s.autoscaling import model_autoscaling_issues\n",
            "gpufarm/config/checks/serving.py:1 imports gpufarm.k8s.autoscaling: layer 'config validation' "
            "may not import layer 'k8s' (see tests/unit/test_layers.py for the order)",
        ),
        (
            "config/sections/serving.py",
            "from gpufarm.config.checks.serving import RESERVED_VLLM_FLAGS\n",
            "gpufarm/config/sections/serving.py:1 imports gpufarm.config.checks.serving: layer "
            "'config model' may not import layer 'config validation' (see tests/unit/test_layers.py for "
            "the order)",
        ),
        (
            "core/placement.py",
            "from gpufarm.config import TierConfig\n",
            "gpufarm/core/placement.py:1 imports gpufarm.config: layer 'core' may not import layer "
            "'config validation' (see tests/unit/test_layers.py for the order)",
        ),
        (
            "config/model.py",
            "from gpufarm import core\n",
            "gpufarm/config/model.py:1 imports gpufarm.core: layer 'config model' may not import layer "
            "'core' (see tests/unit/test_layers.py for the order)",
        ),
        (
            "estimate.py",
            "from gpufarm.review import load_assembly\n",
            "gpufarm/estimate.py:1 imports gpufarm.review: layer 'estimate' may not import layer "
            "'review' (see tests/unit/test_layers.py for the order)",
        ),
        (
            "stacks/tier.py",
            "from gpufarm.estimate import monthly_cost\n",
            "gpufarm/stacks/tier.py:1 imports gpufarm.estimate: layer 'stacks' may not import layer "
            "'estimate' (see tests/unit/test_layers.py for the order)",
        ),
        (
            "sizing/plan.py",
            "from gpufarm.constructs import GpuNodePool\n",
            "gpufarm/sizing/plan.py:1 imports gpufarm.constructs: layer 'sizing' may not import layer "
            "'constructs' (see tests/unit/test_layers.py for the order)",
        ),
        (
            "app.py",
            "from gpufarm.cli.main import main\n",
            "gpufarm/app.py:1 imports gpufarm.cli.main: layer 'app' may not import layer 'cli' "
            "(see tests/unit/test_layers.py for the order)",
        ),
    ],
)
def test_an_upward_import_is_named(tmp_path: Path, importer: str, source: str, message: str) -> None:
    module = tmp_path / "gpufarm" / importer
    module.parent.mkdir(parents=True, exist_ok=True)
    module.write_text(source, encoding="utf-8")
    assert upward_imports(tmp_path / "gpufarm") == [message]


@pytest.mark.parametrize(
    ("module", "layer"),
    [
        ("gpufarm.config.model", "config model"),
        ("gpufarm.config.sections.serving", "config model"),
        ("gpufarm.config.validate", "config validation"),
        ("gpufarm.config.checks", "config validation"),
        ("gpufarm.config.checks.serving", "config validation"),
        ("gpufarm.config.checksum", "config model"),
    ],
)
def test_the_config_packages_have_their_layer(module: str, layer: str) -> None:
    assert layer_of(module) == layer


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("config validation", "core"),
        ("core", "config model"),
        ("k8s", "config validation"),
        ("sizing", "k8s"),
        ("review", "estimate"),
        ("cli", "review"),
        ("constructs", "leaves"),
    ],
)
def test_a_downward_import_is_allowed(importer: str, imported: str) -> None:
    assert may_import(importer, imported)


@pytest.mark.parametrize(
    "module", [m.name for m in pkgutil.iter_modules(gpufarm.core.__path__, "gpufarm.core.")]
)
def test_a_core_module_imports_first_without_a_cycle(module: str) -> None:
    """The validator imports the core: a core module that loaded the config at import time would
    start `gpufarm.config`, whose validator then finds the core module half-initialised."""
    done = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
