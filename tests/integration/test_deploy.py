"""integ/run.py's deploy mode with a stand-in `cdk`: what it runs, in what order, and its verdict."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from integ import cleanup, run

STAND_IN = """#!{python}
import json, sys
from pathlib import Path
args = sys.argv[1:]
with open({log!r}, "a") as log:
    log.write(json.dumps(args) + "\\n")
if "deploy" in args:
    if {deploy_fails}:
        sys.exit(3)
    out = Path(args[args.index("--outputs-file") + 1])
    out.write_text(json.dumps({outputs}))
sys.exit({destroy_status} if "destroy" in args else 0)
"""
STACK = "gpufarm-integ-production"


def _stand_in(
    tmp_path: Path,
    *,
    status: str = "success",
    deploy_fails: bool = False,
    destroy_status: int = 0,
) -> Path:
    outputs = {f"{STACK}-assert": {"AssertionResultsLambdaInvoke1": json.dumps({"status": status})}}
    script = tmp_path / "cdk"
    script.write_text(
        STAND_IN.format(
            python=sys.executable,
            log=str(tmp_path / "calls.log"),
            deploy_fails=deploy_fails,
            outputs=outputs,
            destroy_status=destroy_status,
        )
    )
    script.chmod(0o755)
    return script


def _calls(tmp_path: Path) -> list[list[str]]:
    return [json.loads(line) for line in (tmp_path / "calls.log").read_text().splitlines()]


@pytest.fixture
def cleaned(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    calls: list[list[str]] = []

    def fake(stacks: list[str]) -> int:
        calls.append(stacks)
        return 0

    monkeypatch.setattr(cleanup, "main", fake)
    return calls


def test_deploys_all_stacks_then_destroys_and_cleans_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cleaned: list[list[str]]
) -> None:
    monkeypatch.setattr(run, "CDK", _stand_in(tmp_path))

    assert run.deploy("production", full=False) == run.EXIT_OK
    deploy, destroy = _calls(tmp_path)
    assert deploy[:2] == ["--app", f"{sys.executable} {run.case_file('production')}"]
    assert deploy[4:8] == ["deploy", "--all", "--require-approval", "never"]
    assert destroy[4:] == ["destroy", "--all", "--force"]
    assert cleaned == [[STACK, f"{STACK}-probe", f"{STACK}-assert"]]


def test_a_failed_assertion_fails_the_run_and_still_destroys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cleaned: list[list[str]]
) -> None:
    monkeypatch.setattr(run, "CDK", _stand_in(tmp_path, status="fail"))

    assert run.deploy("production", full=False) == run.EXIT_FAILED
    assert [call[4] for call in _calls(tmp_path)] == ["deploy", "destroy"]
    assert len(cleaned) == 1


def test_a_failed_deploy_still_destroys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cleaned: list[list[str]]
) -> None:
    monkeypatch.setattr(run, "CDK", _stand_in(tmp_path, deploy_fails=True))

    assert run.deploy("production", full=False) == run.EXIT_FAILED
    assert [call[4] for call in _calls(tmp_path)] == ["deploy", "destroy"]


def test_a_failed_destroy_fails_the_run_and_skips_the_cleanup(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cleaned: list[list[str]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(run, "CDK", _stand_in(tmp_path, destroy_status=1))

    assert run.deploy("production", full=False) == run.EXIT_FAILED
    assert cleaned == []
    assert f"{STACK}: destroy failed; delete the stacks by hand" in capsys.readouterr().err


def test_full_runs_the_full_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cleaned: list[list[str]]
) -> None:
    stand_in = _stand_in(tmp_path)
    full_stack = f"{STACK}-full"
    stand_in.write_text(stand_in.read_text().replace(f"{STACK}-assert", f"{full_stack}-assert"))
    monkeypatch.setattr(run, "CDK", stand_in)

    assert run.deploy("production", full=True) == run.EXIT_OK
    assert _calls(tmp_path)[0][1] == f"{sys.executable} {run.case_file('production', full=True)}"
    assert cleaned == [[full_stack, f"{full_stack}-probe", f"{full_stack}-assert"]]
