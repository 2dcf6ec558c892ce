#!/usr/bin/env bash
# The Python package's tests (python/tests) with $ECHO_PYTHON (scripts/test.sh installs echotk and
# what the tests need into build/py-venv and names it). Exit 77 (CTest: skipped) when that
# interpreter cannot import echotk, torch and pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${ECHO_PYTHON:-python3}
if ! "$python" -c "import echotk, torch, pytest, h5py" >/dev/null 2>&1; then
  echo "python_tests: $python cannot import echotk, torch, pytest and h5py (scripts/test.sh installs them)" >&2
  exit 77
fi
# Run from python/tests so `import echotk` finds the installed package, not the source folder.
cd python/tests
exec "$python" -m pytest -q -p no:cacheprovider "$@" .
