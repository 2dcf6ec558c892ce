"""echotk.Spec: the all-reduce configuration, with the defaults of `echotk replay`.

Its fields, their types, defaults, allowed values and help are the spec table of the C++ reference
(reference/src/spec_fields.cpp, exported as `_C.spec_fields()`): the dataclass, the command-line
options of `python -m echotk ppl|train` and the JSON of `to_json`/`from_json` are built from it.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any, Dict, List

from . import _C

FIELDS: List[Dict[str, Any]] = _C.spec_fields()
_TYPES = {"int": int, "float": float, "str": str}


class _SpecMethods:
    """The methods of echotk.Spec (its fields come from the spec table)."""

    def __post_init__(self):
        # Every field checked against the table (ValueError naming it); choices under their
        # canonical names ("bfloat16" -> "bf16"), whichever spelling was given.
        checked = _C.canonical_spec_fields(dataclasses.asdict(self))
        for name, value in checked.items():
            object.__setattr__(self, name, value)

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
        return _C.make_spec(dataclasses.asdict(self), ranks)

    def key(self) -> str:
        """A string that names this spec exactly (the custom op's spec argument)."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_key(cls, key: str) -> "Spec":
        """The spec a key() names. A key without overflow_groups was written before the transport
        options existed, when a group past the fp16 scale was poisoned: it loads with
        overflow_groups="poison" and the other options' defaults."""
        fields = json.loads(key)
        fields.setdefault("overflow_groups", "poison")
        return cls(**fields)

    def to_json(self) -> str:
        """The spec as a JSON object, one key per field (`echotk replay --spec-file` reads it)."""
        return json.dumps(dataclasses.asdict(self), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "Spec":
        """The spec a JSON object names; fields it leaves out take their defaults. ValueError names
        an unknown key or a bad value."""
        try:
            fields = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"spec JSON: {e}") from e
        if not isinstance(fields, dict):
            raise ValueError(f"spec JSON must be an object, got {type(fields).__name__}")
        unknown = [k for k in fields if k not in _FIELD_NAMES]
        if unknown:
            raise ValueError(f"unknown spec field {unknown[0]!r} (fields: {', '.join(_FIELD_NAMES)})")
        return cls(**fields)

    def cli_args(self) -> List[str]:
        """The `echotk replay` options that select this spec (dtype aside: the trace carries it)."""
        args = []
        for f in FIELDS:
            if f["flag"] is not None:
                value = getattr(self, f["name"])
                args += [f["flag"], repr(value) if f["type"] == "float" else str(value)]
        return args


_FIELD_NAMES = [f["name"] for f in FIELDS]

Spec = dataclasses.make_dataclass(
    "Spec",
    [(f["name"], _TYPES[f["type"]], dataclasses.field(default=f["default"])) for f in FIELDS],
    bases=(_SpecMethods,),
    frozen=True,
    namespace={"__module__": __name__},
)
Spec.__doc__ = """One Echo all-reduce configuration: the fields of the spec table, with the defaults of
`echotk replay` (`echotk.Spec()` is `echotk replay` without options):

""" + "\n".join(f"- `{f['name']}` ({f['type']}, default {f['default']!r}; {f['allowed']}): {f['help']}"
                for f in FIELDS) + """

The CPU reference implements every value; the CUDA paths every value but outliers != 0.
"""


def add_spec_arguments(parser: argparse.ArgumentParser) -> None:
    """The spec options of `echotk replay` (one per field of the table but dtype), with its defaults."""
    for f in FIELDS:
        if f["flag"] is None:
            continue
        # Types and names are checked here, ranges when the Spec is built (ValueError naming the field).
        kwargs: Dict[str, Any] = {"default": f["default"], "help": f"{f['help']} (default: {f['default']})"}
        if f["type"] == "str":
            kwargs["choices"] = f["choices"] + list(f["aliases"])
        else:
            kwargs["type"] = _TYPES[f["type"]]
        parser.add_argument(f["flag"], **kwargs)


def spec_from_arguments(args: argparse.Namespace) -> Spec:
    """The Spec of parsed options: every field the namespace holds (dtype too, where a command has it)."""
    return Spec(**{name: getattr(args, name) for name in _FIELD_NAMES if hasattr(args, name)})
