"""echotk.AllReduceReport: what one all-reduce call did, by name, from the float64 report array
the C++ reference fills (python/src/allreduce_binding.h ReportSlot) or from a GPU call."""
from __future__ import annotations

import dataclasses
from typing import Optional

import torch

from . import _C

# The report array's slots in the order of ReportSlot; its values, read by these names.
SLOT_NAMES = ("poisoned_groups", "scale_exponent", "exact_path", "nonfinite_inputs",
                "injected_error", "net_error", "correction_norm", "sum_norm")
SLOT = {name: index for index, name in enumerate(SLOT_NAMES)}
if len(SLOT_NAMES) != _C.REPORT_SLOTS:
    raise ImportError(f"echotk._C fills {_C.REPORT_SLOTS} report slots, echotk names {len(SLOT_NAMES)}: "
                      "the extension and the Python package are of different versions")


@dataclasses.dataclass(frozen=True)
class AllReduceReport:
    """What one call did. The norms are those of `echotk replay` (sim/src/replay.cpp), in float64
    over ranks in order, with y the result, x the contributions and x' = x + c (compensated)."""

    direction: str
    poisoned_groups: int    # groups whose output is NaN (non-finite input or overflow)
    scale_exponent: int     # backward calls: the shared power-of-two exponent k
    exact_path: bool        # the small-message exact path ran
    # The rest is None where they are not known: on the GPU when the AllReduce was made with
    # norms=False, and in echotk.distributed (they need every rank's contributions).
    nonfinite_inputs: Optional[int] = None   # NaN/Inf elements among the contributions
    injected_error: Optional[float] = None   # ||delta|| = ||y - sum_i x'_i||
    net_error: Optional[float] = None        # ||rho|| = ||y - sum_i x_i||
    correction_norm: Optional[float] = None  # ||C|| = ||sum_i (x'_i - x_i)||
    sum_norm: Optional[float] = None         # ||sum_i x_i||

    @property
    def relative_error(self) -> Optional[float]:
        """||rho|| / ||sum_i x_i|| (0 when the sum is 0; None without norms)."""
        if self.net_error is None:
            return None
        return self.net_error / self.sum_norm if self.sum_norm > 0 else 0.0

    @staticmethod
    def from_tensor(direction: str, values: torch.Tensor) -> "AllReduceReport":
        """The report of a call that filled the report array `values` (float64, one per SLOT_NAMES entry)."""
        v = dict(zip(SLOT_NAMES, values.detach().cpu().tolist()))
        return AllReduceReport(direction=direction, poisoned_groups=int(v["poisoned_groups"]),
                               scale_exponent=int(v["scale_exponent"]), exact_path=bool(v["exact_path"]),
                               nonfinite_inputs=int(v["nonfinite_inputs"]), injected_error=v["injected_error"],
                               net_error=v["net_error"], correction_norm=v["correction_norm"],
                               sum_norm=v["sum_norm"])

    @staticmethod
    def from_device(direction: str, workspace: torch.Tensor, parts: Optional[torch.Tensor],
                    compensated: Optional[torch.Tensor], out: Optional[torch.Tensor]) -> "AllReduceReport":
        """The report of a GPU call: its workspace (copied to the host here, which waits for the
        stream) and, when the call kept x' (`compensated` neither None nor empty), the norms of from_tensor
        computed on the GPU in float64, rank sums in rank order as the reference forms them (the
        sums over elements are torch's, so the norms may differ from the CPU's in the last bits)."""
        poisoned, exponent, exact = _C.report_from_workspace(workspace.cpu())
        counts = dict(direction=direction, poisoned_groups=poisoned, scale_exponent=exponent, exact_path=exact)
        if compensated is None or compensated.numel() == 0:
            return AllReduceReport(**counts)
        x = parts.double()
        xp = compensated.double()
        sx, sxp = x[0].clone(), xp[0].clone()
        for r in range(1, x.shape[0]):
            sx += x[r]
            sxp += xp[r]
        y = out.double()
        norm = lambda v: float(torch.linalg.vector_norm(v).item())  # noqa: E731
        return AllReduceReport(**counts, nonfinite_inputs=int((~torch.isfinite(parts)).sum().item()),
                               injected_error=norm(y - sxp), net_error=norm(y - sx),
                               correction_norm=norm(sxp - sx), sum_norm=norm(sx))
