"""Per-site measurements of a recorded trace and of its replay, as docs/outliers.md and
docs/results-gemma3.md take them (numpy only; tools/rank_sites.py and tools/postnorm_replay.py
call these too).

Shapes: contributions [passes, sites, ranks, n]; a site's output y, its net error e = y - sum_i x_i
(the error the compensator and the theorems see) and the error f that reaches the residual stream
after a post-norm, all [passes, sites, n].
"""
from __future__ import annotations

from typing import Callable

import numpy as np


def peak_to_rms(contributions) -> np.ndarray:
    """Per site, max|x| / sqrt(mean x^2) over every pass, rank and element (0 for an all-zero
    site). Reads one pass of one site at a time, so an h5py dataset works without loading it
    whole. ValueError names the pass and site of a non-finite contribution."""
    if contributions.ndim != 4:
        raise ValueError(f"contributions must be [passes, sites, ranks, n], got {contributions.shape}")
    passes, sites = contributions.shape[0], contributions.shape[1]
    ratios = np.zeros(sites)
    for k in range(sites):
        peak, square_sum, count = 0.0, 0.0, 0
        for p in range(passes):
            x = np.asarray(contributions[p, k], dtype=np.float64)
            if not np.all(np.isfinite(x)):
                raise ValueError(f"pass {p} site {k} holds a non-finite contribution")
            peak = max(peak, float(np.max(np.abs(x))))
            square_sum += float(np.sum(x * x))
            count += x.size
        rms = (square_sum / count) ** 0.5
        ratios[k] = peak / rms if rms > 0 else 0.0
    return ratios


def rms_norm(v: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """RMSNorm over the last axis: v / sqrt(mean(v^2) + eps) * weight (weight as the GGUF stores
    it: Gemma's +1 included)."""
    return v / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + eps) * weight


def post_norm_errors(y: np.ndarray, e: np.ndarray, hidden: int, norm: Callable[[int, np.ndarray], np.ndarray]):
    """(f, post): per pass and site, the error after site k's post-norm, f_k = norm_k(y_k) -
    norm_k(y_k - e_k), and the normalized exact output norm_k(y_k - e_k). `norm(k, v)` applies
    site k's norm to v [..., tokens, hidden]."""
    passes, sites = e.shape[0], e.shape[1]
    f, post = np.empty_like(e), np.empty_like(e)
    for k in range(sites):
        yk = y[:, k].reshape(passes, -1, hidden)
        exact = np.asarray(norm(k, yk - e[:, k].reshape(passes, -1, hidden)), dtype=np.float64)
        f[:, k] = (np.asarray(norm(k, yk), dtype=np.float64) - exact).reshape(passes, -1)
        post[:, k] = exact.reshape(passes, -1)
    return f, post


def site_norms(v: np.ndarray) -> np.ndarray:
    """||v_k|| per pass and site: [passes, sites]."""
    return np.linalg.norm(v, axis=2)


def norm_gain(f: np.ndarray, e: np.ndarray) -> np.ndarray:
    """||f_k|| / ||e_k|| per pass and site: how a post-norm scales the error of its site (nan
    where a site has no error)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return site_norms(f) / site_norms(e)


def cancellation(v: np.ndarray) -> np.ndarray:
    """Per pass, ||sum_k v_k|| / sqrt(sum_k ||v_k||^2): 1 when the sites' errors are uncorrelated,
    below 1 when the carried error cancels along the pass, above when the errors line up."""
    total = np.linalg.norm(v.sum(axis=1), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return total / np.sqrt((site_norms(v) ** 2).sum(axis=1))


def partial_sum_peak(v: np.ndarray) -> float:
    """max_t ||S_t|| / max_k ||v_k||, S_t = sum_{k <= t} v_k (max ||S_t|| / q for v = e)."""
    return float(np.linalg.norm(np.cumsum(v, axis=1), axis=2).max() / site_norms(v).max())
