"""The hazards `python -m echotk advise` names from the per-site measurements, each with the sites
where it was found and the numbers that show it.

- massive activations (docs/outliers.md): sites whose contributions peak at MASSIVE_PEAK_TO_RMS
  times their RMS or more;
- overflow (docs/numerics.md 2.4): sites with groups past the fp16 scale limit at 4 bits, which
  travel as wide groups (a bf16 scale, twice the step) under the default, NaN under poison;
- post-norm (docs/results-gemma3.md): sites whose output passes through a norm before it joins the
  residual stream, so that each site's error reaches the stream rescaled by its own norm's gain and
  the error the compensator carries from site to site no longer cancels there.
"""
from __future__ import annotations

import dataclasses
from typing import List, Sequence

import numpy as np

from .measure import SiteMeasures

# One value this many RMS from zero stretches its 4-bit group's range so far that the step
# (range / 15) is several RMS: every ordinary value of the group lands on one of the few levels
# around zero. SmolLM2-135M's outlier sites reach 155-195 on its committed 2 x 16 token trace and
# 250-420 on 2 x 64 tokens (docs/outliers.md); no site of Gemma 3 270M passes 75
# (docs/results-gemma3.md), nor of a random initialization.
MASSIVE_PEAK_TO_RMS = 100.0


@dataclasses.dataclass(frozen=True)
class Hazard:
    name: str               # "massive activations", "overflow", "post-norm"
    sites: List[int]
    detail: str             # the numbers, one sentence


def site_list(sites: Sequence[int]) -> str:
    """Site indices as ranges: [0, 1, 2, 5] -> "0-2, 5"."""
    parts, start = [], None
    for i, k in enumerate(sites):
        if start is None:
            start = k
        if i + 1 == len(sites) or sites[i + 1] != k + 1:
            parts.append(str(start) if start == k else f"{start}-{k}")
            start = None
    return ", ".join(parts)


def find_hazards(m: SiteMeasures) -> List[Hazard]:
    """The hazards present in `m`, in the order of the module's list."""
    hazards = []
    massive = [int(k) for k in np.flatnonzero(m.peak_to_rms >= MASSIVE_PEAK_TO_RMS)]
    if massive:
        peaks = ", ".join(f"{m.peak_to_rms[k]:.0f}" for k in massive)
        hazards.append(Hazard("massive activations", massive,
                              f"contributions peak at {peaks} times their RMS (threshold "
                              f"{MASSIVE_PEAK_TO_RMS:g}; median site {np.median(m.peak_to_rms):.1f}): one value "
                              "sets the 4-bit step of its whole group"))
    wide = [int(k) for k in np.flatnonzero(m.wide_groups > 0)]
    if wide:
        hazards.append(Hazard("overflow", wide,
                              f"{int(m.wide_groups.sum())} groups past the fp16 scale limit at 4 bits: they "
                              "travel as wide groups (bf16 scale, twice the step) under the default "
                              "overflow_groups=\"wide\" and turn into NaN under \"poison\""))
    post = [int(k) for k in np.flatnonzero(m.post_norm)]
    if post:
        gain = m.gain[post]
        hazards.append(Hazard("post-norm", post,
                              f"a norm rescales each site's error before it joins the residual stream, by "
                              f"{np.median(gain):.3g} at the median site ({gain.min():.3g} to {gain.max():.3g}); "
                              f"the error Echo 4-bit carries from site to site cancels to "
                              f"{_mean(m.cancellation['echo4'])} before the norms and "
                              f"{_mean(m.cancellation_after['echo4'])} after them (uncompensated: "
                              f"{_mean(m.cancellation_after['nocomp4'])}): compensation across sites in "
                              "the sites' units does not hold there; the stream-unit candidates "
                              "(compensator_units=\"stream\") carry it through the norms"))
    return hazards


def _mean(per_pass: np.ndarray) -> str:
    return f"{float(np.mean(per_pass)):.2f}"
