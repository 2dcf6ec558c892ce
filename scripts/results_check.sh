#!/usr/bin/env bash
# The docs against their data: `tools/results.py --check` (check), or the pipeline's own tests,
# tests/tools (test). Exit 77 (CTest: skipped) when $PYTHON lacks scipy, matplotlib or pytest
# (scripts/test.sh installs them into build/notebook-venv and names it in ECHO_NOTEBOOK_PYTHON).
#
#   scripts/results_check.sh check|test
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-${ECHO_NOTEBOOK_PYTHON:-python3}}
if ! "$python" -c "import scipy, matplotlib, pytest" >/dev/null 2>&1; then
  echo "results_check: $python lacks scipy, matplotlib or pytest:" \
       "$python -m pip install scipy matplotlib pytest" >&2
  exit 77
fi
case ${1:-} in
  check) exec "$python" tools/results.py --check ;;
  test) exec "$python" -m pytest -q -p no:cacheprovider tests/tools ;;
  *) echo "usage: scripts/results_check.sh check|test" >&2; exit 2 ;;
esac
