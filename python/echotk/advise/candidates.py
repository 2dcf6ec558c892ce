"""The specs `python -m echotk advise` evaluates, in one place: a candidate is a name and an
echotk.Spec, or None for the 16-bit (exact) all-reduce every candidate is paired against. Adding
a setting to the advice is one line here.

The names are those of the result docs' rows (docs/results-smollm2.md, docs/outliers.md,
docs/results-gemma3.md), so that a row of the advice can be read beside the row measured there.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

from .._spec import Spec

BASELINE = "16bit"
_PLAIN = Spec()

CANDIDATES: List[Tuple[str, Optional[Spec]]] = [
    (BASELINE, None),
    ("echo8", Spec(bits=8)),
    ("nocomp8", Spec(bits=8, compensator="off")),
    ("echo4", Spec()),
    ("nocomp4", Spec(compensator="off")),
    ("rot", Spec(rotation="hadamard")),
    ("nocomp4-rot", Spec(compensator="off", rotation="hadamard")),
    ("rot-local1", Spec(rotation="hadamard", residual="local", eta=1.0)),
    ("rot64-local1", Spec(rotation="hadamard", group=64, residual="local", eta=1.0)),
    ("nocomp4-rot64", Spec(compensator="off", rotation="hadamard", group=64)),
    # Compensator units 'stream' (docs/numerics.md 6.1): for models with post-norms; on a pre-norm
    # model every gain is 1 and each is its site-units row bit for bit, so advise skips them there.
    # The local residual: with the global one each rank's residual x'_i - y / P cancels only in the
    # sum over ranks, which per-rank gains break (docs/results-gemma3.md).
    ("stream-local", Spec(compensator_units="stream", residual="local")),
    # ... with the post-norm's per-feature profile and the clip (numerics 6.1 steps 6 and 7).
    ("stream-local-sqrt-clip1", Spec(compensator_units="stream", residual="local", compensator_profile="sqrt",
                                     compensator_clip=1.0)),
    # ... with the gains of the delivered sum's row RMS (numerics 6.1 step 8): on Gemma 3 the 4-bit
    # setting that closes the most of the gap without the rotation.
    ("stream-local-sqrt-clip1-sum", Spec(compensator_units="stream", residual="local", compensator_profile="sqrt",
                                         compensator_clip=1.0, compensator_gains="sum")),
    # The closed loop on the stream's deficit (numerics 6.2); on a pre-norm model it is a loop of
    # its own (not the site units' rows), so advise runs it there too.
    ("deficit-clip1", Spec(compensator="deficit", compensator_units="stream", residual="local",
                           compensator_gains="sum", compensator_clip=1.0)),
    ("rot64-deficit-clip05", Spec(compensator="deficit", compensator_units="stream", residual="local",
                                  compensator_gains="sum", compensator_clip=0.5, rotation="hadamard", group=64)),
    ("rot-stream-local", Spec(rotation="hadamard", compensator_units="stream", residual="local")),
    ("echo8-stream-local", Spec(bits=8, compensator_units="stream", residual="local")),
]


def describe(spec: Optional[Spec]) -> str:
    """A few words naming what a candidate changes from plain 4-bit (for the tables)."""
    if spec is None:
        return f"the exact all-reduce ({_PLAIN.dtype})"
    words = [f"{spec.bits}-bit"]
    if spec.quantizer != _PLAIN.quantizer:
        words.append(spec.quantizer)
    if spec.group != _PLAIN.group:
        words.append(f"group {spec.group}")
    if spec.rotation != "none":
        words.append(f"{spec.rotation} rotation")
    if spec.outliers:
        words.append(f"{spec.outliers} outlier{'s' if spec.outliers > 1 else ''} exact")
    if spec.compensator == "off":
        words.append("no compensator")
    else:
        words.append(f"{spec.compensator} compensator, {spec.residual} residual, eta {spec.eta:g}")
        if spec.compensator_units != _PLAIN.compensator_units:
            words.append(f"{spec.compensator_units} units")
        if spec.compensator_profile != _PLAIN.compensator_profile:
            words.append(f"profile {spec.compensator_profile}")
        if spec.compensator_clip != _PLAIN.compensator_clip:
            words.append(f"clip {spec.compensator_clip:g}")
        if spec.compensator_gains != _PLAIN.compensator_gains:
            words.append(f"gains {spec.compensator_gains}")
    if spec.state_dtype != _PLAIN.state_dtype:
        words.append(f"{spec.state_dtype} state")
    return ", ".join(words)
