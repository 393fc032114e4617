#!/bin/sh
# The whole "runs the same anywhere" check, as a new user meets gpufarm: a new virtualenv, only
# `pip install <checkout>` (every dependency from the package index, Node 24 included), then
# `gpufarm synth --tier poc` from an empty folder with no Node on PATH and the venv not
# activated. The template must equal, byte for byte, the one `gpufarm synth --tier poc` writes
# from the repository root with the development venv (.venv, `make setup`).
#
#   scripts/fresh_venv_check.sh            # PYTHON=python3.12 scripts/fresh_venv_check.sh
#
# Needs the package index (a few minutes: aws-cdk-lib and Node are large). The test suite runs
# a faster form: tests/cli/test_anywhere.py::test_a_fresh_venv_with_only_gpufarm_installed_*.
set -eu

REPO=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

mkdir "$WORK/checkout" "$WORK/empty" "$WORK/no-node"
# A copy of the checkout, so that the build leaves nothing in the repository.
cp -R "$REPO/pyproject.toml" "$REPO/README.md" "$REPO/gpufarm" "$WORK/checkout/"
find "$WORK/checkout" -name __pycache__ -prune -exec rm -rf {} +

echo "creating a virtualenv with $PYTHON and installing the checkout (pip install <checkout>)"
"$PYTHON" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$WORK/checkout"

echo "gpufarm synth --tier poc from an empty folder, PATH without node, venv not activated"
(cd "$WORK/empty" && env -i HOME="$HOME" PATH="$WORK/no-node" \
  "$WORK/venv/bin/gpufarm" synth --tier poc --out "$WORK/fresh.out")

echo "gpufarm synth --tier poc from the repository root with .venv"
(cd "$REPO" && "$REPO/.venv/bin/gpufarm" synth --tier poc --out "$WORK/repo.out" >/dev/null)

if cmp "$WORK/fresh.out/gpufarm-poc.template.json" "$WORK/repo.out/gpufarm-poc.template.json"; then
  echo "ok: the fresh install's template is byte-identical to the repository's"
else
  echo "FAILED: the templates differ" >&2
  exit 1
fi
