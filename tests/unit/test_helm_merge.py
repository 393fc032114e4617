"""The test helper that merges values as Helm does: maps recursively, lists whole, null deletes."""

from __future__ import annotations

from tests.helm import helm_merge


def test_maps_merge_key_by_key() -> None:
    defaults = {"resources": {"limits": {"cpu": 1, "memory": "1000Mi"}, "requests": {"cpu": "100m"}}}
    merged = helm_merge(defaults, {"resources": {"limits": {"memory": "1Gi"}}})
    assert merged == {"resources": {"limits": {"cpu": 1, "memory": "1Gi"}, "requests": {"cpu": "100m"}}}


def test_null_deletes_a_default_key() -> None:
    defaults = {"limits": {"cpu": 1, "memory": "1000Mi"}}
    assert helm_merge(defaults, {"limits": {"cpu": None, "memory": "1Gi"}}) == {"limits": {"memory": "1Gi"}}
    assert helm_merge(defaults, {"limits": None}) == {}


def test_lists_and_scalars_replace_the_default_whole() -> None:
    defaults = {"tolerations": [{"key": "a"}], "image": {"tag": "1"}, "n": {"x": 1}}
    merged = helm_merge(defaults, {"tolerations": [], "image": {"tag": "2"}, "n": 3})
    assert merged == {"tolerations": [], "image": {"tag": "2"}, "n": 3}


def test_a_null_inside_a_new_map_leaves_no_key_and_inputs_stay_unchanged() -> None:
    defaults = {"a": {"b": 1}}
    overrides = {"c": {"d": None, "e": 2}}
    assert helm_merge(defaults, overrides) == {"a": {"b": 1}, "c": {"e": 2}}
    assert defaults == {"a": {"b": 1}} and overrides == {"c": {"d": None, "e": 2}}
