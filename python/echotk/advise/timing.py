"""The modelled time of one all-reduce on the peer-to-peer path of P ranks: the floors of
docs/performance.md ("Ceilings": the link floor; "The HBM floor of the compensator"), the larger
of the two, as that document estimates its P = 4 and 8 rows. An estimate, not a measurement: it
leaves out launch and flag latency (what small messages cost) and the stages' instructions.

The 16-bit all-reduce is NCCL's ring, which moves 2 (P - 1) / P of the message per GPU as well:
at P = 4 and 1 GiB this gives 4.60 ms against NCCL's measured 4.53 ms (docs/performance.md).
"""
from __future__ import annotations

from typing import Optional

from .._spec import Spec

# An SM kernel on every GPU storing 16-byte words into its peers: 348-351 GB/s egress per GPU
# (docs/performance.md, "Ceilings", measured on 4 x H200).
LINK_BYTES_PER_SECOND = 350e9
# The rate the compensated push streams HBM at (docs/performance.md, "The HBM floor of the
# compensator"; the H200 peaks at 4.8 TB/s).
HBM_BYTES_PER_SECOND = 3.3e12
# The message of docs/performance.md's estimates: 1 GiB of bf16.
REFERENCE_ELEMENTS = 1 << 29

_DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


def link_seconds(wire_bits: float, ranks: int, elements: int) -> float:
    """Per GPU, push and gather each send (P - 1) / P of the message at `wire_bits` per element."""
    return 2.0 * (ranks - 1) / ranks * elements * wire_bits / 8.0 / LINK_BYTES_PER_SECOND


def hbm_bytes_per_element(spec: Spec) -> float:
    """Bytes per element through one GPU's HBM in a call (docs/performance.md's table): input and
    output; with the compensator the state read (local: and written back; global: x' stashed and
    the update kernel's reads of x, y and the state and write of the state, since that update does
    not hide behind the next matmul: "Global residual: the update does not hide")."""
    io = _DTYPE_BYTES[spec.dtype]
    if spec.compensator == "off":
        return 2.0 * io
    state = (2 if spec.compensator == "dual" else 1) * _DTYPE_BYTES[spec.state_dtype]
    if spec.residual == "local":
        return 2.0 * io + 2.0 * state
    return 2.0 * io + state + io + (2.0 * io + 2.0 * state)


def allreduce_seconds(spec: Optional[Spec], ranks: int, elements: int = REFERENCE_ELEMENTS) -> float:
    """The modelled time of one all-reduce of `elements` (None: the 16-bit ring of NCCL)."""
    if spec is None:
        return link_seconds(16.0, ranks, elements)
    link = link_seconds(spec.wire_bits_per_element(), ranks, elements)
    return max(link, elements * hbm_bytes_per_element(spec) / HBM_BYTES_PER_SECOND)
