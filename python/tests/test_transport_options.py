"""The transport options of echotk.Spec (outliers, overflow_groups, rotation; docs/outliers.md):
bit for bit the C++ reference (`echotk replay` with the same options), bad values raise
ValueError naming the field, wire bits per element, keys of older specs, the CUDA paths refuse outliers."""
import json

import numpy as np
import pytest
import torch

import echotk
from echotk import _C
from echotk.capture import write_trace
from echotk.eval.ppl import build_parser, spec_from_args
from conftest import REPO, bits
from test_allreduce import assert_same_as_replay, run_op

OPTION_SPECS = [
    echotk.Spec(outliers=1),
    echotk.Spec(outliers=2, compensator="off"),
    echotk.Spec(rotation="hadamard"),
    echotk.Spec(rotation="hadamard", group=64, residual="local", eta=1.0),
    echotk.Spec(rotation="hadamard", outliers=1, bits=3, quantizer="symmetric"),
    echotk.Spec(overflow_groups="wide", compensator="single"),
    echotk.Spec(outliers=2, rotation="hadamard", overflow_groups="wide", algorithm="ring", bits=8),
]


def spec_id(s):
    return f"out{s.outliers}-{s.rotation}-{s.overflow_groups}-b{s.bits}-g{s.group}-{s.compensator}-{s.algorithm}"


@pytest.mark.parametrize("spec", OPTION_SPECS, ids=spec_id)
def test_bundled_synthetic_trace_equals_replay(echotk_cli, tmp_path, spec):
    assert_same_as_replay(echotk_cli, REPO / "data/examples/synthetic_p4.h5", spec, tmp_path)


@pytest.mark.parametrize("spec", OPTION_SPECS[:4], ids=spec_id)
def test_bundled_gemma3_trace_equals_replay(echotk_cli, tmp_path, spec):
    assert_same_as_replay(echotk_cli, REPO / "data/gemma3/trace-gemma3-p4-moby-2x16.h5", spec, tmp_path)


@pytest.mark.parametrize("direction", ["forward", "backward"])
@pytest.mark.parametrize("spec", OPTION_SPECS, ids=spec_id)
def test_random_traces_equal_replay(echotk_cli, tmp_path, spec, direction):
    # Heavy-tailed values with a ragged last group (n = 1000), so outliers and rotation both act.
    rng = np.random.default_rng(25)
    x = (rng.standard_t(2, size=(2, 3, 4, 1000)) * np.exp(rng.normal(0, 2, size=(2, 3, 4, 1)))).astype(np.float32)
    trace = tmp_path / "random.h5"
    write_trace(str(trace), x, "bf16", 4, direction=direction)
    assert_same_as_replay(echotk_cli, trace, spec, tmp_path)


def test_each_option_reaches_the_reference():
    """Outputs differ from the plain spec's: the fields are not dropped on the way to C++."""
    rng = np.random.default_rng(3)
    x = (rng.standard_t(2, size=(1, 2, 4, 512)) * 10).astype(np.float32)
    plain, _ = run_op(x, "bfloat16", echotk.Spec())
    for spec in (echotk.Spec(outliers=1), echotk.Spec(outliers=2), echotk.Spec(rotation="hadamard")):
        got, _ = run_op(x, "bfloat16", spec)
        assert np.any(bits(got) != bits(plain)), spec


def test_wide_groups_carry_what_poison_turns_into_nan(echotk_cli, tmp_path):
    """A finite group whose fp16 scale overflows (range > 65504 x 15) is NaN under poison and
    finite under wide, as echotk replay has it."""
    x = np.zeros((1, 2, 4, 256), np.float32)
    x[..., :128] = np.linspace(-1.0, 1.0, 128, dtype=np.float32)
    x[0, 1, 2, 7] = 3.0e6
    trace = tmp_path / "overflow.h5"
    write_trace(str(trace), x, "fp32", 4)
    poison = assert_same_as_replay(echotk_cli, trace, echotk.Spec(compensator="off", overflow_groups="poison"),
                                   tmp_path)
    wide = assert_same_as_replay(echotk_cli, trace, echotk.Spec(compensator="off"), tmp_path)  # the default
    assert poison[1].poisoned_groups >= 1 and wide[1].poisoned_groups == 0
    out = echotk.AllReduce(4, echotk.Spec(compensator="off", dtype="fp32"))(torch.from_numpy(x[0, 1]))
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("outliers,expected", [(0, 4.25), (1, 4.5), (2, 4.75)])
def test_wire_bits_per_element(outliers, expected):
    assert echotk.Spec(outliers=outliers).wire_bits_per_element() == expected


def test_wire_bits_of_other_widths_and_groups():
    assert echotk.Spec(bits=8).wire_bits_per_element() == 8.25
    assert echotk.Spec(group=64, rotation="hadamard").wire_bits_per_element() == 4.5
    assert echotk.Spec(group=256, overflow_groups="wide").wire_bits_per_element() == 4.125
    assert echotk.Spec(quantizer="symmetric", outliers=1).wire_bits_per_element() == 4.125 + 0.25


@pytest.mark.parametrize("kwargs,words", [
    ({"outliers": 3}, "outliers"), ({"outliers": -1}, "outliers"), ({"outliers": True}, "outliers"),
    ({"outliers": 1.0}, "outliers"), ({"overflow_groups": "saturate"}, "overflow_groups"),
    ({"overflow_groups": None}, "overflow_groups"), ({"rotation": "walsh"}, "rotation"),
    ({"rotation": "Hadamard"}, "rotation"),
])
def test_bad_values_raise_value_error_naming_the_field(kwargs, words):
    with pytest.raises(ValueError, match=words):
        echotk.Spec(**kwargs)


@pytest.mark.parametrize("field,value,words", [
    ("outliers", 3, "outliers"), ("overflow_groups", "saturate", "overflow_groups"), ("rotation", "walsh", "rotation")])
def test_the_extension_validates_too(field, value, words):
    assert _C.make_spec({}, 4).ranks == 4
    with pytest.raises(ValueError, match=words):
        _C.make_spec({field: value}, 4)


def test_keys_round_trip_and_older_keys_load_as_they_were_written():
    spec = echotk.Spec(outliers=2, overflow_groups="wide", rotation="hadamard")
    assert echotk.Spec.from_key(spec.key()) == spec
    old = json.loads(echotk.Spec(bits=8).key())
    for field in ("outliers", "overflow_groups", "rotation"):
        del old[field]
    # Written before the transport options existed, when overflowing groups were poisoned.
    assert echotk.Spec.from_key(json.dumps(old)) == echotk.Spec(bits=8, overflow_groups="poison")
    assert echotk.Spec().overflow_groups == "wide"


def test_cli_args_name_the_options():
    args = echotk.Spec(outliers=1, overflow_groups="wide", rotation="hadamard").cli_args()
    for flag, value in (("--outliers", "1"), ("--overflow-groups", "wide"), ("--rotation", "hadamard")):
        assert args[args.index(flag) + 1] == value


@pytest.mark.parametrize("outliers", [1, 2])
def test_the_one_gpu_emulation_refuses_outliers(outliers):
    # Checked before the device: the same ValueError with or without a CUDA build or GPU.
    spec = echotk.Spec(outliers=outliers, rotation="hadamard", overflow_groups="wide")
    with pytest.raises(ValueError, match=f"CUDA path implements outliers 0 only .* got outliers {outliers}"):
        echotk.AllReduce(4, spec, device="cuda")
    echotk.AllReduce(4, spec, device="cpu")


def test_python_ppl_parses_the_options():
    args = build_parser().parse_args(["--allreduce", "echo", "--outliers", "2", "--rotation", "hadamard",
                                      "--overflow-groups", "wide"])
    spec = spec_from_args(args)
    assert (spec.outliers, spec.rotation, spec.overflow_groups) == (2, "hadamard", "wide")
    assert spec_from_args(build_parser().parse_args([])) == echotk.Spec()
    for bad in (["--outliers", "x"], ["--rotation", "walsh"], ["--overflow-groups", "nan"]):
        with pytest.raises(SystemExit) as e:
            build_parser().parse_args(bad)
        assert e.value.code == 2
    # Ranges are the table's, checked when the Spec is built.
    with pytest.raises(ValueError, match="outliers"):
        spec_from_args(build_parser().parse_args(["--outliers", "3"]))
