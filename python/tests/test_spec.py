"""echotk.Spec is the spec table of the C++ reference: its fields and defaults, JSON both ways, and
`echotk replay --spec-file` reading the same JSON."""
import dataclasses
import json

import h5py
import numpy as np
import pytest

import echotk
from echotk import _C

from conftest import REPO


def test_fields_and_defaults_are_the_tables():
    table = _C.spec_fields()
    fields = dataclasses.fields(echotk.Spec)
    assert [f.name for f in fields] == [row["name"] for row in table]
    assert [f.default for f in fields] == [row["default"] for row in table]
    spec = echotk.Spec()
    assert (spec.bits, spec.group, spec.quantizer, spec.compensator, spec.eta, spec.a, spec.beta1, spec.beta2,
            spec.beta, spec.residual, spec.dtype, spec.state_dtype, spec.algorithm, spec.exact_max_count,
            spec.outliers, spec.overflow_groups, spec.rotation) == \
        (4, 128, "zero-aware", "dual", 0.75, 0.35, 0.7, 0.3, 0.4, "global", "bf16", "fp32", "owner", 0, 0,
         "wide", "none")


def test_json_round_trips_and_leaves_out_nothing():
    spec = echotk.Spec(bits=8, residual="local", eta=0.5, state_dtype="bfloat16", rotation="hadamard")
    assert spec.state_dtype == "bf16"
    text = spec.to_json()
    assert set(json.loads(text)) == {f.name for f in dataclasses.fields(echotk.Spec)}
    assert echotk.Spec.from_json(text) == spec
    assert echotk.Spec.from_json('{"bits": 8}') == echotk.Spec(bits=8)


@pytest.mark.parametrize("text,words", [
    ('{"bitz": 4}', "unknown spec field 'bitz'"), ('{"bits": 9}', "bits must be in"),
    ('{"bits": "4"}', "bits must be an integer"), ('{"overflow_groups": "saturate"}', "overflow_groups"),
    ("[4]", "must be an object"), ('{"bits": ', "spec JSON"),
])
def test_bad_json_raises_value_error_naming_the_key(text, words):
    with pytest.raises(ValueError, match=words):
        echotk.Spec.from_json(text)


def test_replay_reads_the_same_json(echotk_cli, tmp_path):
    trace = REPO / "data" / "examples" / "synthetic_p4.h5"
    spec = echotk.Spec(bits=8, compensator="single", beta=0.5, residual="local")
    (tmp_path / "spec.json").write_text(spec.to_json())
    outputs = {}
    # The file's dtype stands for --dtype, as cli_args() leaves dtype to the trace.
    for name, args in (("file", ["--spec-file", tmp_path / "spec.json"]),
                       ("flags", [*spec.cli_args(), "--dtype", spec.dtype])):
        out = tmp_path / f"{name}.h5"
        echotk_cli("replay", trace, "--out", out, "--quiet", "--save-outputs", *args)
        with h5py.File(out, "r") as f:
            outputs[name] = f["outputs"][:]
    np.testing.assert_array_equal(outputs["file"].view(np.uint32), outputs["flags"].view(np.uint32))
    (tmp_path / "bad.json").write_text('{"bits": 4, "gain": 1}')
    bad = echotk_cli("replay", trace, "--out", tmp_path / "bad.h5", "--spec-file", tmp_path / "bad.json", check=False)
    assert bad.returncode == 2 and "unknown key 'gain'" in bad.stderr


def test_the_extension_takes_fields_by_name():
    assert _C.make_spec({"bits": 8, "rotation": "hadamard"}, 2).wire_bits_per_element == 8.25
    with pytest.raises(ValueError, match="unknown spec field 'bitz'"):
        _C.make_spec({"bitz": 8}, 2)
    with pytest.raises(ValueError, match="ring"):
        _C.make_spec({"algorithm": "ring", "residual": "local"}, 2)
