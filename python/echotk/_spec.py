"""echotk.Spec: the all-reduce configuration, with the defaults of `echotk replay`."""
from __future__ import annotations

import dataclasses
import json
from typing import List

from . import _C

_DTYPE_NAMES = {"fp32": "fp32", "float32": "fp32", "bf16": "bf16", "bfloat16": "bf16",
                "fp16": "fp16", "float16": "fp16"}
_OVERFLOW_GROUPS = ("wide", "poison")
_ROTATIONS = ("none", "hadamard")


@dataclasses.dataclass(frozen=True)
class Spec:
    """One Echo all-reduce configuration (cli/spec_options.cpp holds the same defaults).

    `algorithm` ("owner" | "ring") and `exact_max_count` (messages of at most this many elements
    take the exact path) are the CLI's `--algorithm` and `--exact-max-count`.

    The transport options of docs/numerics.md 2.4-2.6 (docs/outliers.md): the CPU reference
    implements all three, the CUDA paths every value but outliers != 0. `outliers` (0, 1, 2:
    values per group sent exactly as bf16 with their index), `overflow_groups` ("wide", the
    default: a finite group whose fp16 scale overflows gets a flagged bf16 scale and stays finite;
    "poison": it decodes to NaN) and `rotation` ("none" | "hadamard": randomized Hadamard
    transform of every full group), the CLI's `--outliers`, `--overflow-groups` and `--rotation`.
    """

    bits: int = 4
    group: int = 128
    quantizer: str = "zero-aware"
    compensator: str = "dual"
    eta: float = 0.75
    a: float = 0.35
    beta1: float = 0.7
    beta2: float = 0.3
    beta: float = 0.4
    residual: str = "global"
    dtype: str = "bf16"
    state_dtype: str = "fp32"
    algorithm: str = "owner"
    exact_max_count: int = 0
    outliers: int = 0
    overflow_groups: str = "wide"
    rotation: str = "none"

    def __post_init__(self):
        # Short dtype names throughout ("bf16"), whichever spelling was given.
        for field in ("dtype", "state_dtype"):
            value = getattr(self, field)
            if not isinstance(value, str) or value not in _DTYPE_NAMES:
                raise ValueError(f"{field} must be one of fp32, bf16, fp16, got {value!r}")
            object.__setattr__(self, field, _DTYPE_NAMES[value])
        for field in ("bits", "group", "exact_max_count", "outliers"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{field} must be an integer, got {value!r}")
        if self.exact_max_count < 0:
            raise ValueError(f"exact_max_count must be >= 0, got {self.exact_max_count}")
        if not 0 <= self.outliers <= 2:
            raise ValueError(f"outliers must be 0, 1 or 2, got {self.outliers}")
        for field, choices in (("overflow_groups", _OVERFLOW_GROUPS), ("rotation", _ROTATIONS)):
            value = getattr(self, field)
            if value not in choices:
                raise ValueError(f"{field} must be one of {', '.join(choices)}, got {value!r}")

    @property
    def is_plain(self) -> bool:
        """Whether every group travels as codes and parameters alone, untransformed: no outliers and
        no rotation (QuantSpec::is_plain; wide groups, the default, change a group only where
        poison would give NaN)."""
        return self.outliers == 0 and self.rotation == "none"

    def wire_bits_per_element(self) -> float:
        """Bits on the wire per element of a full group: codes, parameters and outlier entries
        (QuantSpec::wire_bits_per_element; 4.25, 4.5, 4.75 at 4 bits, group 128, outliers 0, 1, 2)."""
        return self.handle(1).wire_bits_per_element

    def handle(self, ranks: int):
        """The validated C++ spec for `ranks` ranks (ValueError names what is out of range)."""
        if isinstance(ranks, bool) or not isinstance(ranks, int):
            raise ValueError(f"ranks must be an integer, got {ranks!r}")
        return _C.make_spec(self.bits, self.group, self.quantizer, self.compensator, self.residual,
                            self.algorithm, float(self.eta), float(self.a), float(self.beta1),
                            float(self.beta2), float(self.beta), self.dtype, self.state_dtype,
                            self.exact_max_count, self.outliers, self.overflow_groups, self.rotation,
                            ranks)

    def key(self) -> str:
        """A string that names this spec exactly (the custom op's spec argument)."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @staticmethod
    def from_key(key: str) -> "Spec":
        """The spec a key() names. A key without overflow_groups was written before the transport
        options existed, when a group past the fp16 scale was poisoned: it loads with
        overflow_groups="poison" and the other options' defaults."""
        fields = json.loads(key)
        fields.setdefault("overflow_groups", "poison")
        return Spec(**fields)

    def cli_args(self) -> List[str]:
        """The `echotk replay` options that select this spec (dtype aside: the trace carries it)."""
        return ["--bits", str(self.bits), "--group", str(self.group), "--quantizer", self.quantizer,
                "--compensator", self.compensator, "--residual", self.residual,
                "--algorithm", self.algorithm, "--eta", repr(self.eta), "--a", repr(self.a),
                "--beta1", repr(self.beta1), "--beta2", repr(self.beta2), "--beta", repr(self.beta),
                "--state-dtype", self.state_dtype, "--exact-max-count", str(self.exact_max_count),
                "--outliers", str(self.outliers), "--overflow-groups", self.overflow_groups,
                "--rotation", self.rotation]
