"""Reading tier files: bounded size, depth and alias expansion; encodings; duplicate keys; YAML's
implicit conversions shown as written; errors through `extends`; an empty tier-file selection."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpufarm.app import select, select_tiers
from gpufarm.config import ConfigError, load_tier_file
from gpufarm.config.yaml_reader import MAX_DEPTH, MAX_FILE_BYTES, MAX_VALUES
from tests.conftest import REPO


def write_bytes(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def rendered(file: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load_tier_file(file)
    return caught.value.render()


def load_in_subprocess(file: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Load `file` in a child process, so a hang or a memory blow-up fails the test, not the run."""
    code = textwrap.dedent(
        """
        import sys
        from gpufarm.config import ConfigError, load_tier_file
        try:
            load_tier_file(sys.argv[1])
        except ConfigError as exc:
            print(exc.render())
            sys.exit(2)
        """
    )
    return subprocess.run(
        [sys.executable, "-c", code, str(file)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# --------------------------------------------------------------------------- bytes and encodings


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(
            "name: café\n".encode("latin-1"),
            "is not UTF-8 text: byte 0xe9 at line 1, column 10 is not valid UTF-8 (saved as Latin-1 or "
            "Windows-1252?); save it as UTF-8",
            id="latin-1",
        ),
        pytest.param(
            "name: poc\n".encode("utf-16"),
            "is UTF-16 text (it starts with a UTF-16 byte-order mark); save it as UTF-8",
            id="utf-16-bom",
        ),
        pytest.param(
            b"\xfe\xff" + "name: poc\n".encode("utf-16-be"),
            "is UTF-16 text (it starts with a UTF-16 byte-order mark); save it as UTF-8",
            id="utf-16-be-bom",
        ),
        pytest.param(
            "name: poc\n".encode("utf-16-le"),
            "looks like UTF-16 text (every other byte is NUL); save it as UTF-8",
            id="utf-16-no-bom",
        ),
        pytest.param(
            "name: poc\n".encode("utf-32"),
            "is UTF-32 text (it starts with a UTF-32 byte-order mark); save it as UTF-8",
            id="utf-32-bom",
        ),
        pytest.param(
            b"extends: poc\nname: dev\n\x00\x00",
            "contains a NUL byte at line 3, column 1: it is binary, not YAML text",
            id="nul-bytes",
        ),
        pytest.param(
            b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
            "contains a NUL byte at line 3, column 1: it is binary, not YAML text",
            id="png-image",
        ),
        pytest.param(
            b"\x7fELF\x02\x01\x01",
            "contains the control character U+007F at line 1, column 1: a tier file is YAML text",
            id="elf-header",
        ),
        pytest.param(
            b"name: \x1b[31mpoc\x1b[0m\n",
            "contains the control character U+001B at line 1, column 7: a tier file is YAML text",
            id="terminal-escape",
        ),
    ],
)
def test_files_that_are_not_utf8_text_are_refused(tmp_path: Path, data: bytes, message: str) -> None:
    file = write_bytes(tmp_path / "tier.yaml", data)
    assert rendered(file) == f"invalid {file}:\n  - {message}"


def test_a_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    # Windows editors save "UTF-8 with BOM"; YAML allows the mark at the start of a stream.
    file = write_bytes(tmp_path / "tier.yaml", b"\xef\xbb\xbfextends: poc\r\nname: dev\r\n")
    assert load_tier_file(file).name == "dev"


def test_a_file_over_the_size_limit_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    file = write_bytes(tmp_path / "tier.yaml", b"# " + b"x" * MAX_FILE_BYTES + b"\n")
    assert rendered(file) == f"invalid {file}:\n  - is larger than 1024 KiB; a tier file is a few KiB of YAML"


def test_a_file_at_the_size_limit_is_read(tmp_path: Path) -> None:
    head = b"extends: poc\nname: dev\n# "
    file = write_bytes(tmp_path / "tier.yaml", head + b"x" * (MAX_FILE_BYTES - len(head) - 1) + b"\n")
    assert file.stat().st_size == MAX_FILE_BYTES
    assert load_tier_file(file).name == "dev"


# --------------------------------------------------------------------------- size, depth, aliases


def _alias_bomb() -> bytes:
    """A few hundred bytes whose aliases expand to 9**10 (about 3.5e9) strings."""
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, 10):
        prev, name = chr(ord("a") + level - 1), chr(ord("a") + level)
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    return ("extends: poc\n" + "\n".join(lines) + "\n").encode()


def test_an_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    # Before, yaml.safe_load shared the lists but json.dumps expanded all 3.5e9 of them.
    file = write_bytes(tmp_path / "tier.yaml", _alias_bomb())
    result = load_in_subprocess(file, timeout=60)
    assert (result.returncode, result.stderr) == (2, "")
    assert result.stdout == (
        f"invalid {file}:\n  - holds more than {MAX_VALUES:,} values (YAML aliases expanded); "
        "a tier file holds a few hundred\n"
    )


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"name: " + b"[" * 100_000 + b"]" * 100_000 + b"\n", id="flow-lists"),
        pytest.param(b"name: " + b"{a: " * 100_000 + b"1" + b"}" * 100_000 + b"\n", id="flow-mappings"),
        pytest.param(b"name:\n" + b"".join(b"  " * i + b"- \n" for i in range(1, 200)), id="block-lists"),
    ],
)
def test_deep_nesting_is_refused_before_python_recursion(tmp_path: Path, data: bytes) -> None:
    # Before, PyYAML's recursive composer raised RecursionError (a traceback) on these.
    file = write_bytes(tmp_path / "tier.yaml", data)
    result = load_in_subprocess(file)
    assert (result.returncode, result.stderr) == (2, "")
    # Block style: level n (the document's mapping is level 1) starts on line n.
    line = 1 if data.startswith(b"name: ") else MAX_DEPTH + 1
    assert result.stdout == f"invalid {file}:\n  - nests deeper than {MAX_DEPTH} levels at line {line}\n"


def test_nesting_is_counted_with_aliases_expanded(tmp_path: Path) -> None:
    # Each anchor nests 40 levels, within the limit; the alias puts one inside the other.
    deep = "[" * 40 + "1" + "]" * 40
    inner = "[" * 40 + "*a" + "]" * 40
    file = write_bytes(tmp_path / "tier.yaml", f"x: &a {deep}\ny: {inner}\n".encode())
    assert rendered(file) == (
        f"invalid {file}:\n  - nests deeper than {MAX_DEPTH} levels (YAML aliases expanded)"
    )


def test_an_alias_to_an_enclosing_value_is_refused(tmp_path: Path) -> None:
    # PyYAML builds a list that contains itself; json.dumps then failed with a traceback.
    file = write_bytes(tmp_path / "tier.yaml", b"extends: poc\nname: &a [1, *a]\n")
    assert rendered(file) == (
        f"invalid {file}:\n  - has a YAML alias to an enclosing value at line 2 (a cycle)"
    )


def test_too_many_values_are_refused_while_parsing(tmp_path: Path) -> None:
    file = write_bytes(tmp_path / "tier.yaml", b"name: [" + b"0, " * MAX_VALUES + b"0]\n")
    assert rendered(file) == (
        f"invalid {file}:\n  - holds more than {MAX_VALUES:,} values (YAML aliases expanded); "
        "a tier file holds a few hundred"
    )


def test_anchors_and_merge_keys_share_settings(tmp_path: Path) -> None:
    file = write_bytes(
        tmp_path / "tier.yaml",
        b"extends: poc\n"
        b"x-pool: &pool {instance_families: [g6e], capacity_types: [on-demand], gpu_limit: 8}\n"
        b"node_pools:\n"
        b"  - <<: *pool\n"
        b"    name: l40s\n"
        b"    gpu_limit: 4\n",
    )
    # The merge key fills in the pool; its own gpu_limit wins (https://yaml.org/type/merge.html).
    # The unknown top-level key shows the anchor block was read as a setting like any other.
    assert rendered(file) == (
        f"invalid {file}:\n  - x-pool: is not a known setting (allowed: name, description, removal_policy, "
        "termination_protection, compliance_packs, environment, network, cluster, karpenter, node_pools, "
        "node_groups, serving, models, model_store, ingress, fallback, autoscaling, observability, images, "
        "ec2, sagemaker, hybrid_nodes, regions)"
    )
    shared = write_bytes(
        tmp_path / "shared.yaml",
        b"extends: poc\n"
        b"node_pools:\n"
        b"  - &pool {name: l40s, instance_families: [g6e], capacity_types: [on-demand], gpu_limit: 8}\n"
        b"  - <<: *pool\n"
        b"    name: l40s-big\n"
        b"    gpu_limit: 16\n",
    )
    pools = load_tier_file(shared).node_pools
    assert [(p.name, p.gpu_limit, p.instance_families) for p in pools] == [
        ("l40s", 8, ["g6e"]),
        ("l40s-big", 16, ["g6e"]),
    ]


# --------------------------------------------------------------------------- YAML content


@pytest.mark.parametrize(
    ("text", "messages"),
    [
        pytest.param(
            "extends: poc\n"
            "ingress:\n"
            "  scheme: internal\n"
            "  waf: {enabled: true}\n"
            "name: dev\n"
            "ingress:\n"
            "  idle_timeout_seconds: 60\n",
            [
                "ingress: is given twice, at lines 2 and 6; YAML would keep only the second: "
                "merge them into one"
            ],
            id="second-ingress-block",
        ),
        pytest.param(
            "extends: poc\nnetwork:\n  nat_gateways: 1\n  cidr: 10.1.0.0/16\n  nat_gateways: 2\n",
            [
                "network.nat_gateways: is given twice, at lines 3 and 5; YAML would keep only the second: "
                "merge them into one"
            ],
            id="nested",
        ),
        pytest.param(
            "extends: poc\nmodels:\n  - name: a\n    gpus: 1\n    'gpus': 2\n",
            [
                "models[0].gpus: is given twice, at lines 4 and 5; YAML would keep only the second: "
                "merge them into one"
            ],
            id="in-a-list-quoted",
        ),
        pytest.param(
            "name: a\nname: b\nname: c\n",
            [
                "name: is given twice, at lines 1 and 2; YAML would keep only the second: merge them "
                "into one",
                "name: is given twice, at lines 1 and 3; YAML would keep only the second: merge them "
                "into one",
            ],
            id="three-times",
        ),
    ],
)
def test_duplicate_keys_name_the_key_and_both_lines(tmp_path: Path, text: str, messages: list[str]) -> None:
    file = write_bytes(tmp_path / "tier.yaml", text.encode())
    assert rendered(file) == "\n".join([f"invalid {file}:", *(f"  - {m}" for m in messages)])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "name: !!binary ZGV2\n",
            "name: has the YAML tag tag:yaml.org,2002:binary at line 1; a tier file holds strings, "
            "numbers, true/false, null, lists and mappings",
            id="binary",
        ),
        pytest.param(
            "name: !!python/object/apply:os.system [echo]\n",
            "name: has the YAML tag tag:yaml.org,2002:python/object/apply:os.system at line 1; a tier "
            "file holds strings, numbers, true/false, null, lists and mappings",
            id="python-object",
        ),
        pytest.param(
            "models: !!set {a, b}\n",
            "models: has the YAML tag tag:yaml.org,2002:set at line 1; a tier file holds strings, "
            "numbers, true/false, null, lists and mappings",
            id="set",
        ),
        pytest.param(
            "network:\n  nat_gateways: !!int two\n",
            "network.nat_gateways: has 'two' tagged tag:yaml.org,2002:int at line 2, which it is not",
            id="bad-int",
        ),
        pytest.param(
            "cluster:\n  secrets_encryption: !!bool maybe\n",
            "cluster.secrets_encryption: has 'maybe' tagged tag:yaml.org,2002:bool at line 2, "
            "which it is not",
            id="bad-bool",
        ),
        pytest.param(
            "name: dev\n? [a, b]\n: c\n",
            "has a list as a key at line 2",
            id="list-key",
        ),
        pytest.param(
            "name: dev\n---\nname: prod\n",
            "is not valid YAML at line 2, column 1: but found another document",
            id="two-documents",
        ),
        pytest.param(
            "name: *nowhere\n",
            "is not valid YAML at line 1, column 7: found undefined alias 'nowhere'",
            id="undefined-alias",
        ),
    ],
)
def test_yaml_that_is_not_plain_settings(tmp_path: Path, text: str, message: str) -> None:
    file = write_bytes(tmp_path / "tier.yaml", text.encode())
    assert rendered(file) == f"invalid {file}:\n  - {message}"


def test_a_duplicate_key_reached_through_several_aliases_is_reported_once(tmp_path: Path) -> None:
    file = write_bytes(tmp_path / "tier.yaml", b"x: &a {k: 1, k: 2}\ny: [*a, *a]\n")
    assert rendered(file) == (
        f"invalid {file}:\n  - x.k: is given twice, at lines 1 and 1; YAML would keep only the second: "
        "merge them into one"
    )


def test_keys_stay_the_text_written(tmp_path: Path) -> None:
    # YAML 1.1 reads a plain `on` as true; a tier file's keys are setting names.
    file = write_bytes(tmp_path / "tier.yaml", b"extends: poc\nnetwork:\n  on: 1\n")
    assert rendered(file).startswith(f"invalid {file}:\n  - network.on: is not a known setting (allowed: ")


def test_a_date_stays_the_text_written(tmp_path: Path) -> None:
    # YAML 1.1 would make it a datetime.date; the model's strings take it as written.
    file = write_bytes(tmp_path / "tier.yaml", b"extends: poc\ndescription: 2026-12-01\n")
    assert load_tier_file(file).description == "2026-12-01"


# --------------------------------------------------------------------------- values YAML converts


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "environment:\n  account: 012345670123\n",
            "environment.account: must be a string (quote it: '012345670123'), got 012345670123 "
            "(which YAML reads as 1402433619)",
            id="octal-account",
        ),
        pytest.param(
            "environment:\n  account: 0123_4567_0123\n",
            "environment.account: must be a string (quote it: '0123_4567_0123'), got 0123_4567_0123 "
            "(which YAML reads as 1402433619)",
            id="octal-account-with-underscores",
        ),
        pytest.param(
            "environment:\n  account: 123456789012\n",
            "environment.account: must be a string (quote it: '123456789012'), got 123456789012",
            id="decimal-account-unchanged",
        ),
        pytest.param(
            "cluster:\n  kubernetes_version: 1.10\n",
            "cluster.kubernetes_version: must be a string (quote it: '1.10'), got 1.10 "
            "(which YAML reads as 1.1)",
            id="version-1.10",
        ),
        pytest.param(
            "name: no\n",
            "name: must be a string (quote it: 'no'), got no (which YAML reads as false)",
            id="no-as-name",
        ),
        pytest.param(
            "serving:\n  namespace: on\n",
            "serving.namespace: must be a string (quote it: 'on'), got on (which YAML reads as true)",
            id="on-as-namespace",
        ),
        pytest.param(
            "name: false\n",
            "name: must be a string (quote it: 'false'), got false",
            id="false-as-name",
        ),
        pytest.param(
            "name:\n",
            "name: must be a string, got an empty value (null)",
            id="empty-value",
        ),
        pytest.param(
            "name: ~\n",
            "name: must be a string, got ~ (which YAML reads as null)",
            id="tilde",
        ),
        pytest.param(
            "network:\n  nat_gateways: 010\n",
            "network.nat_gateways: must be <= 6, got 010 (which YAML reads as 8)",
            id="octal-count",
        ),
        pytest.param(
            "network:\n  nat_gateways: 1:30\n",
            "network.nat_gateways: must be <= 6, got 1:30 (which YAML reads as 90)",
            id="sexagesimal",
        ),
        pytest.param(
            # A check of validate.py, after the model: the note is added to its message.
            "network:\n  nat_gateways: 03\n",
            "network.nat_gateways: must be at most the number of availability zones (2), got 3 "
            "(written 03, which YAML reads as 3)",
            id="octal-count-in-a-cross-check",
        ),
    ],
)
def test_values_yaml_converted_are_shown_as_written(tmp_path: Path, text: str, message: str) -> None:
    file = write_bytes(tmp_path / "tier.yaml", f"extends: poc\n{text}".encode())
    assert rendered(file) == f"invalid {file}:\n  - {message}"


# --------------------------------------------------------------------------- extends chains


def test_an_error_in_a_file_reached_through_extends_names_the_chain(tmp_path: Path) -> None:
    write_bytes(tmp_path / "team.yaml", b"extends: poc\nname: a\nname: b\n")
    mine = write_bytes(tmp_path / "my.yaml", b"extends: team.yaml\n")
    assert rendered(mine) == (
        f"invalid {tmp_path / 'team.yaml'} (reached through {mine} extends team.yaml):\n"
        "  - name: is given twice, at lines 2 and 3; YAML would keep only the second: merge them into one"
    )


def test_an_unknown_preset_further_up_the_chain_names_the_chain(tmp_path: Path) -> None:
    write_bytes(tmp_path / "team.yaml", b"extends: prod\n")
    mine = write_bytes(tmp_path / "my.yaml", b"extends: team.yaml\n")
    assert rendered(mine) == (
        f"invalid {tmp_path / 'team.yaml'} (reached through {mine} extends team.yaml):\n"
        "  - extends: must be one of 'ec2-poc', 'enterprise', 'poc', 'production', "
        "'sagemaker-poc', got 'prod'"
    )


def test_a_bad_value_set_further_up_the_chain_says_where(tmp_path: Path) -> None:
    write_bytes(tmp_path / "base" / "team.yaml", b"extends: poc\nnetwork:\n  nat_gateways: -1\n")
    mine = write_bytes(tmp_path / "my.yaml", b"extends: base/team.yaml\nname: mine\n")
    assert rendered(mine) == (
        f"invalid {mine}:\n  - network.nat_gateways: must be >= 0, got -1 "
        f"(set in {tmp_path / 'base' / 'team.yaml'}, line 3; {mine} extends base/team.yaml)"
    )


def test_a_value_from_a_preset_is_not_annotated(tmp_path: Path) -> None:
    write_bytes(
        tmp_path / "team.yaml",
        b"extends: production\nenvironment:\n  region: eu-west-1\n"
        b"  availability_zones: [eu-west-1a, eu-west-1b, eu-west-1c]\n",
    )
    mine = write_bytes(tmp_path / "my.yaml", b"extends: team.yaml\nname: mine\n")
    lines = rendered(mine).splitlines()
    assert lines[:2] == [
        f"invalid {mine}:",
        "  - ingress.certificate_arn: must be in the stack's region 'eu-west-1', got a certificate in "
        "'us-east-1'",
    ]
    # The other issue (the preset's 'us.' Bedrock profile) is worded by validate.py; none is annotated.
    assert [line for line in lines if "(set in " in line] == []


def test_a_chain_of_team_files_names_every_link(tmp_path: Path) -> None:
    write_bytes(tmp_path / "org.yaml", b"extends: production\nnetwork:\n  nat_gateways: 9\n")
    write_bytes(tmp_path / "team.yaml", b"extends: org.yaml\nname: team\n")
    mine = write_bytes(tmp_path / "my.yaml", b"extends: team.yaml\n")
    assert rendered(mine) == (
        f"invalid {mine}:\n  - network.nat_gateways: must be <= 6, got 9 "
        f"(set in {tmp_path / 'org.yaml'}, line 3; {mine} extends team.yaml extends org.yaml)"
    )


def test_a_value_the_child_replaces_is_not_blamed_on_the_parent(tmp_path: Path) -> None:
    write_bytes(tmp_path / "team.yaml", b"extends: poc\nnetwork:\n  nat_gateways: 1\n")
    mine = write_bytes(tmp_path / "my.yaml", b"extends: team.yaml\nnetwork:\n  nat_gateways: -1\n")
    assert rendered(mine) == f"invalid {mine}:\n  - network.nat_gateways: must be >= 0, got -1"


# --------------------------------------------------------------------------- choosing the tier file


@pytest.mark.parametrize("value", ["", " ", "\t\n"])
def test_an_empty_tier_file_in_the_context_is_refused(value: str) -> None:
    # Before, an empty value counted as "not given" and every preset was synthesized.
    with pytest.raises(ConfigError) as caught:
        select_tiers({"tier_file": value})
    assert caught.value.render() == (
        f"invalid context:\n  - -c tier_file must be the path of a tier YAML file, got {value!r}"
    )


def test_an_empty_tier_file_flag_is_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        select([], "", options=("--tier", "--tier-file"), source="command line")
    assert caught.value.render() == (
        "invalid command line:\n  - --tier-file must be the path of a tier YAML file, got ''"
    )


def test_an_empty_tier_in_the_context_is_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        select_tiers({"tier": ""})
    assert caught.value.render() == (
        "invalid tier selection:\n  - tier: must be one of 'ec2-poc', 'enterprise', 'poc', 'production', "
        "'sagemaker-poc', got ''"
    )


@pytest.mark.parametrize("value", ["", "  "])
def test_load_tier_file_refuses_a_blank_path(value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_tier_file(value)
    assert caught.value.render() == (
        f"invalid tier selection:\n  - tier_file: must be the path of a tier YAML file, got {value!r}"
    )


def test_an_empty_path_object_is_the_current_folder_and_refused(tmp_path: Path) -> None:
    # typer turns `--tier-file ''` into Path(''), which is Path('.'): a folder, never a tier file.
    with pytest.raises(ConfigError) as caught:
        load_tier_file(Path(""))
    assert (
        caught.value.render()
        == "invalid .:\n  - is a folder, not a tier file (give the path of a .yaml file)"
    )


def test_the_cdk_app_refuses_an_empty_tier_file_context(tmp_path: Path) -> None:
    # `cdk synth -c tier_file=` hands the app the empty string (aws-cdk@2.1148.1
    # lib/cli/user-configuration.js, parseStringContextListToObject); main() used to drop it.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))} | {
        "CDK_OUTDIR": str(tmp_path / "out"),
        "CDK_CONTEXT_JSON": '{"tier_file": ""}',
        "HOME": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.endswith(
        "invalid context:\n  - -c tier_file must be the path of a tier YAML file, got ''\n"
    )
    assert not list((tmp_path / "out").glob("*.template.json"))  # before: every preset synthesized


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "extends: poc\nenvironment: {Name: 1}\n",
            "environment.Name: is not a known setting (allowed: region, account, availability_zones)",
        ),
        ("extends: poc\nName: x\n", "Name: is not a known setting (allowed: name, description, "),
    ],
)
def test_a_capitalised_unknown_key_is_named_where_it_was_written(
    tmp_path: Path, text: str, expected: str
) -> None:
    # pydantic tags union members with their class names; a user's `Name:` is not one of them.
    file = tmp_path / "tier.yaml"
    file.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_tier_file(file)
    (issue,) = caught.value.issues
    assert f"{issue.path}: {issue.message}".startswith(expected)


def test_a_tier_name_with_a_line_break_keeps_the_message_on_one_line() -> None:
    with pytest.raises(ConfigError) as caught:
        select(["a\nb"], "my.yaml")
    (issue,) = caught.value.issues
    assert issue.message == (
        "give either -c tier or -c tier_file, not both (got -c tier='a\\nb' and -c tier_file=my.yaml); "
        "a tier file can start with `extends: 'a\\nb'`"
    )


@pytest.mark.parametrize("key", ["tier_file", "tier-file"])
def test_the_context_takes_the_tier_file_in_either_spelling(tmp_path: Path, key: str) -> None:
    """`-c tier-file=` is spelt as the command's `--tier-file`; `-c tier_file=` as before."""
    file = tmp_path / "team.yaml"
    file.write_text("extends: poc\nname: team-a\n", encoding="utf-8")
    (tier,) = select_tiers({key: str(file)})
    assert tier.stack_name == "gpufarm-team-a"


def test_an_empty_tier_file_is_named_as_the_user_spelt_it() -> None:
    with pytest.raises(ConfigError) as caught:
        select_tiers({"tier-file": ""})
    assert caught.value.render() == (
        "invalid context:\n  - -c tier-file must be the path of a tier YAML file, got ''"
    )


def test_both_spellings_of_the_tier_file_are_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        select_tiers({"tier_file": "a.yaml", "tier-file": "b.yaml"})
    assert caught.value.render() == (
        "invalid context:\n  - give -c tier_file or -c tier-file, not both (got -c tier_file=a.yaml and "
        "-c tier-file=b.yaml); they are two spellings of one setting"
    )


def test_a_tier_with_a_tier_file_names_both_as_given_in_the_context() -> None:
    with pytest.raises(ConfigError) as caught:
        select_tiers({"tier": "production", "tier-file": "my.yaml"})
    assert caught.value.render() == (
        "invalid context:\n  - give either -c tier or -c tier-file, not both (got -c tier=production and "
        "-c tier-file=my.yaml); a tier file can start with `extends: production`"
    )


def test_the_cdk_app_reads_the_tier_file_spelt_with_a_dash(tmp_path: Path) -> None:
    # `cdk synth -c tier-file=bad.yaml`: the app reads the file (and reports its problem).
    bad = tmp_path / "bad.yaml"
    bad.write_text("extends: poc\nnetwork:\n  nat_gateways: -1\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))} | {
        "CDK_OUTDIR": str(tmp_path / "out"),
        "CDK_CONTEXT_JSON": json.dumps({"tier-file": str(bad)}),
        "HOME": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.endswith(f"invalid {bad}:\n  - network.nat_gateways: must be >= 0, got -1\n")
