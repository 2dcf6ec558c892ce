"""The golden vectors of the reference's tests (tests/reference/golden/) are what their independent
numpy generators write: each generator run into a temporary file, compared byte for byte."""
import subprocess
import sys

import pytest

from conftest import REPO

GOLDEN = REPO / "tests" / "reference" / "golden"


@pytest.mark.parametrize("generator, committed", [
    ("make_golden.py", "quantizer_golden.txt"),
    ("make_options_golden.py", "transport_options_golden.txt"),
])
def test_golden_file_is_what_its_generator_writes(tmp_path, generator, committed):
    out = tmp_path / committed
    subprocess.run([sys.executable, str(GOLDEN / generator), str(out)], check=True, cwd=tmp_path)
    assert out.read_bytes() == (GOLDEN / committed).read_bytes(), (
        f"{committed} differs from what {generator} writes: regenerate it with "
        f"python3 tests/reference/golden/{generator} tests/reference/golden/{committed}")
