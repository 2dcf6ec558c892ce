"""Candidate compensators for post-norm models (docs/results-gemma3.md), in Python around the
reference's uncompensated all-reduce: the study of which compensator helps a model whose block
outputs pass through an RMSNorm before they join the residual stream.

Every candidate is the paper's dual error feedback (docs/numerics.md 6, global residual) with two
changes it may make:
- `states`: "shared" (one state carried across every site of a pass, the paper's), or "per-kind"
  (attention-output sites and MLP-output sites carry separate states).
- `units`: in which units the state is kept.
  - "site": the site's own units (the paper's).
  - "static": residual-stream units through one scalar gain per site, G_k (from a calibration
    pass): the update stores G_k * u, the apply at site k injects c / G_k.
  - "dynamic": per-token gains G_k(t) = gbar_k / r_k(t), with r_k(t) the RMS of token t's delivered
    output y_k (every rank holds it after the call) and gbar_k the RMS of the post-norm's weights;
    the apply, made before y_k exists, estimates r_k(t) by the last same-kind site's r (and
    falls back to the last site's).
  - "oracle": as dynamic but the apply uses r of the exact sum of site k (what no rank knows
    before the call; the bound on what a per-token estimate can reach).
  - "partial": as dynamic, but the apply estimates r_k(t) on each rank from its own partial sum:
    kappa_k * rms(x_k,i(t)), kappa_k from the calibration pass.
  - "dynpartial": as partial, with no calibration: rank i estimates r_k(t) as rho_k,i(t) times
    the ratio r / rho_i of token t at the last same-kind site (the last site's before one of its
    kind; with `last_site` always the last site's), both of which it holds after that call.
  - "dynself": the update as "self" (the rank's own RMS), the apply as "self" times
    kappa_kind / kappa_last per rank and token, kappa = r / rho_i of the last same-kind site and of
    the last site: dynpartial's estimate with the update left in the rank's own units (the state then
    holds the stream error times the last site's kappa, which the apply divides out).
  - "self": per-token gains gbar_k / rho_k,i(t) from each rank's own partial sum, rho its RMS
    over the token's row, at the apply and the update alike (no calibration: a constant factor
    common to all sites cancels between the update and the apply). With `profile` p > 0 the gain
    of feature j is also times (|w_j| / gbar_k) ** p (|w_j| floored at `floor` times gbar_k): p = 1
    is the post-norm's diagonal per feature, p = 0 the scalar gain ("dynamic", "oracle" and
    "partial" take the profile too).
  - "closed": a closed loop on the stream's deficit. Each rank's state A_i is its share of what the
    residual stream lacks (no averages): at a post-norm site the update adds J_k (x_i - v_i), the
    rank's partial sum less what the transport delivered for it (the local residual u less the
    correction it applied), through the norm's first-order Jacobian diag(w_k) / r_k of the
    delivered row (times (I - yhat yhat^T), the norm's radial term, with `radial`); the apply
    injects eta * A_i through the inverse of the same Jacobian's diagonal, r estimated as
    "dynpartial" does and each feature's |w_j| floored at `floor` times rms(w) with the `profile`
    power (1: the full diagonal). What an apply cannot deliver (a floored feature, a clamped
    correction, a gain estimated wrong) stays in A_i for the next sites, where open-loop units drop
    it. A site without a post-norm uses J = I.
  - "jacobian": per feature and token, diag(w_k) / r_k(t) (the post-norm's Jacobian without its
    radial term), with the apply's r estimated as in "dynamic" and |w| floored at `floor` times
    its RMS for the inverse.

With `clip` C > 0 (any units, sites with a post-norm) each rank's correction, in the site's
units, is clamped per element to +-C * rho_k,i(t), rho the RMS of the rank's own partial sum over
the token's row, so that it cannot widen the message's range beyond a few of its own RMS; with
`keep` the clamped-off part is added to the rank's residual u (it returns through the averages),
otherwise it is dropped.

Calls of a site pass the site's post-norm weights w_k (None for a pre-norm model: every gain is
1 and every candidate with shared states is the paper's compensator).

The all-reduce is the reference's (echotk.AllReduce with compensator "off" in fp32, so x' is
quantized as fp32 and the output rounded to bf16 here, as the reference's compensated call does);
`check_against_reference` shows that units "site" with shared states gives the reference's dual
compensator bit for bit.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Dict, List, Optional, Sequence

import torch

from echotk import AllReduce, Spec

UNITS = ("site", "static", "dynamic", "oracle", "jacobian", "partial", "dynpartial", "dynself", "self", "closed")
STATES = ("shared", "per-kind")
# the per-token gains a per-feature profile multiplies
PROFILE_UNITS = ("self", "dynself", "dynamic", "oracle", "partial", "dynpartial", "closed")


@dataclasses.dataclass
class Candidate:
    states: str = "shared"
    units: str = "site"
    eta: float = 0.75
    a: float = 0.35
    beta1: float = 0.7
    beta2: float = 0.3
    floor: float = 0.1          # jacobian, closed, profiles: |w| floored at floor * rms(w) for the inverse
    residual: str = "global"    # "global" (u = x' - y / P) or "local" (docs/numerics.md 6)
    prescale: float = 0.0       # > 0: each feature j travels times 2^round(prescale * log2(|w_j| / rms(w)))
    profile: float = 0.0        # PROFILE_UNITS: gains times (max(|w_j|, floor * rms(w)) / rms(w)) ** profile per feature
    clip: float = 0.0           # > 0: each rank's correction (site units) clamped per element to clip * rho
    keep: bool = False          # clip: the part clamped off joins the rank's next residual (else it is dropped)
    last_site: bool = False     # dynpartial: the ratio of the last site, whatever its kind
    radial: bool = False        # the residual's component along the delivered row y (which the norm removes) not carried

    def __post_init__(self):
        if self.states not in STATES:
            raise ValueError(f"states must be one of {STATES}, got {self.states!r}")
        if self.units not in UNITS:
            raise ValueError(f"units must be one of {UNITS}, got {self.units!r}")
        if self.clip < 0.0 or not math.isfinite(self.clip):
            raise ValueError(f"clip must be a finite number >= 0, got {self.clip!r}")
        if self.profile != 0.0 and self.units not in PROFILE_UNITS:
            raise ValueError(f"profile is read by units {PROFILE_UNITS} only, got units {self.units!r}")
        if self.last_site and self.units != "dynpartial":
            raise ValueError(f"last_site is read by units 'dynpartial' only, got units {self.units!r}")
        if self.keep and self.clip == 0.0:
            raise ValueError("keep needs a clip > 0 (it keeps the clamped-off part)")
        if self.units == "closed":
            if self.residual != "local":
                raise ValueError("units 'closed' take the local residual (each rank's own rounding errors)")
            if self.states != "shared" or self.keep or self.prescale != 0.0:
                raise ValueError("units 'closed' carry one state, keep what a clip removes by themselves and "
                                 "send the message unscaled: states 'per-kind', keep and prescale are refused")


def _own_rms(x: torch.Tensor, shape) -> torch.Tensor:
    """Each rank's per-token RMS of its partial sums [P, n] viewed as `shape` [P, T, hidden]: [P, T]."""
    return x.reshape(shape).double().pow(2).mean(dim=2).sqrt().float().clamp_min(1e-30)


def _clamp_rows(full: torch.Tensor, own: torch.Tensor, clip: float) -> torch.Tensor:
    """A correction [P, T, hidden] clamped per element to +-clip times each rank's per-token RMS own [P, T]."""
    bound = (clip * own).unsqueeze(2)
    return torch.minimum(torch.maximum(full, -bound), bound)


def _without_radial(v: torch.Tensor, yf: torch.Tensor, hidden: int) -> torch.Tensor:
    """v [P, T, hidden] in float64 less its component along each delivered row of yf (flat [n]): the part
    the norm's Jacobian diag(w) / r (I - yhat yhat^T) lets through."""
    yr = yf.reshape(1, -1, hidden).double()
    coef = (v * yr).sum(dim=2, keepdim=True) / yr.pow(2).sum(dim=2, keepdim=True).clamp_min(1e-300)
    return v - coef * yr


def _rms_rows(v: torch.Tensor, hidden: int) -> torch.Tensor:
    """Per-token RMS of a flat [n] (or [P, n]) tensor of rows of `hidden` values: [T]."""
    rows = v.reshape(-1, hidden).double()
    return rows.pow(2).mean(dim=1).sqrt().float()


def _constants(c: Candidate) -> Dict[str, torch.Tensor]:
    """The fp32 constants of docs/numerics.md 6 (one_minus in fp32 arithmetic)."""
    f = lambda v: torch.tensor(v, dtype=torch.float32)  # noqa: E731
    one = f(1.0)
    return {"eta": f(c.eta), "a": f(c.a), "oa": one - f(c.a), "beta1": f(c.beta1), "ob1": one - f(c.beta1),
            "beta2": f(c.beta2), "ob2": one - f(c.beta2)}


class _State:
    def __init__(self):
        self.m1: Optional[torch.Tensor] = None
        self.m2: Optional[torch.Tensor] = None


class StudyAllReduce:
    """An all-reduce of P emulated ranks with a candidate compensator; the interface of
    echotk.AllReduce that echotk.tensor_parallel uses (ranks, dtype, reset(), __call__), plus
    `post_norms`: per site, the post-norm's weight vector (None: no post-norm) and `hidden`."""

    def __init__(self, ranks: int, spec: Spec, candidate: Candidate, hidden: int,
                 post_norms: Sequence[Optional[torch.Tensor]], gains: Optional[Sequence[float]] = None,
                 kappas: Optional[Sequence[float]] = None):
        if spec.compensator != "off" or spec.dtype != "bf16":
            raise ValueError("the study's spec is the transport (compensator off, dtype bf16)")
        self.ranks, self.dtype, self.spec, self.candidate = ranks, "bf16", spec, candidate
        self.hidden = hidden
        self.post_norms = [None if w is None else w.detach().float().cpu() for w in post_norms]
        if candidate.units == "static" and gains is None:
            raise ValueError("units 'static' needs per-site gains (calibrate_gains)")
        self.gains = gains
        if candidate.units == "partial" and kappas is None:
            raise ValueError("units 'partial' needs per-site kappas (calibrate_gains)")
        self.kappas = kappas
        if candidate.residual == "local":
            # compensator single with beta 0 stores u itself: m1 = fp32(0 * m1 + 1 * u), and a fresh
            # call applies c = 0, so each call is the transport of x' plus its local residual.
            inner = dataclasses.replace(spec, dtype="fp32", compensator="single", beta=0.0, residual="local")
        else:
            inner = dataclasses.replace(spec, dtype="fp32")
        self._inner = AllReduce(ranks=ranks, spec=inner)
        self.reset()

    def reset(self, direction: Optional[str] = None):
        self.site = 0
        self._states: Dict[int, _State] = {}
        self._rms: Dict[int, torch.Tensor] = {}   # last delivered output's per-token RMS, by kind
        self._last_rms: Optional[torch.Tensor] = None
        self._kappa: Dict[int, torch.Tensor] = {}  # dynpartial, dynself: last r / rho_i [P, T], by kind
        self._last_kappa: Optional[torch.Tensor] = None

    # The gain of site k on a [P, n] tensor: a scalar, a [T, 1] column or a [T, hidden] block.
    def _gbar(self, site: int) -> float:
        w = self.post_norms[site]
        return 1.0 if w is None else float(w.double().pow(2).mean().sqrt())

    def _gain(self, site: int, r: Optional[torch.Tensor], inverse: bool) -> torch.Tensor:
        units = self.candidate.units
        w = self.post_norms[site]
        if units == "site" or (w is None and units != "static"):
            return torch.tensor(1.0)
        if units == "static":
            g = torch.tensor(float(self.gains[site]))
            return 1.0 / g if inverse else g
        if units in ("partial", "dynpartial") and inverse:
            g = (self._gbar(site) / r).reshape(r.shape[0], -1, 1)   # r: [P, T] -> [P, T, 1]
            if self.candidate.profile != 0.0:
                g = g * self._profile(site).reshape(1, 1, -1)       # [P, T, H]
            return 1.0 / g
        if units in ("dynamic", "oracle", "partial", "dynpartial"):
            g = (self._gbar(site) / r).reshape(-1, 1)           # [T, 1]
            if self.candidate.profile != 0.0:
                g = g * self._profile(site).reshape(1, -1)      # [T, H]
            return 1.0 / g if inverse else g
        # jacobian
        floor = self.candidate.floor * self._gbar(site)
        wf = w.clone()
        if inverse:
            small = wf.abs() < floor
            wf[small] = torch.where(wf[small] < 0, -floor, floor)
            return r.reshape(-1, 1) / wf.reshape(1, -1)
        return wf.reshape(1, -1) / r.reshape(-1, 1)

    def _prescale(self, site: int) -> Optional[torch.Tensor]:
        w = self.post_norms[site]
        if self.candidate.prescale <= 0 or w is None:
            return None
        e = torch.round(self.candidate.prescale * torch.log2(w.abs().clamp_min(1e-30) / self._gbar(site)))
        return torch.exp2(e.clamp(-20, 20))

    def _profile(self, site: int) -> torch.Tensor:
        """Per feature (max(|w_j|, floor * rms(w)) / rms(w)) ** profile: the post-norm's per-feature
        gain relative to its RMS, floored (its inverse is applied), to the power `profile`."""
        w = self.post_norms[site].abs()
        gbar = self._gbar(site)
        return (w.clamp_min(self.candidate.floor * gbar) / gbar).pow(self.candidate.profile)

    def _apply_rms(self, site: int, kind: int, exact: torch.Tensor, x: torch.Tensor,
                   own: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
        if self.candidate.units == "partial":
            P = x.shape[0]
            return self.kappas[site] * x.reshape(P, -1, self.hidden).double().pow(2).mean(dim=2).sqrt().float()
        if self.candidate.units == "oracle":
            return _rms_rows(exact, self.hidden)
        if self.candidate.units in ("dynpartial", "closed"):
            kappa = self._last_kappa if self.candidate.last_site else self._kappa.get(kind, self._last_kappa)
            return None if kappa is None or own is None else kappa * own
        return self._rms.get(kind, self._last_rms)

    def _local_residual(self, n: int, y32: torch.Tensor, yf: torch.Tensor) -> torch.Tensor:
        """Each rank's local residual [P, n] of the inner call (docs/numerics.md 6), its own segment's
        acc - y taken against y as delivered (bf16)."""
        u = self._inner.state()[0]
        P, g = u.shape[0], self.spec.group
        per = -(-(-(-n // g)) // P) * g          # elements per segment: ceil(ceil(n / g) / P) * g
        for i in range(P):
            lo, hi = min(i * per, n), min((i + 1) * per, n)
            u[i, lo:hi] += y32[lo:hi] - yf[lo:hi]
        return u

    def _keep_kappa(self, kind: int, r_out: torch.Tensor, own: torch.Tensor) -> None:
        """The ratios r / rho_i [P, T] of this call, for the next apply's estimate of the sum's RMS."""
        kappa = torch.where(own > 1e-30, r_out.reshape(1, -1) / own, torch.zeros_like(own))
        self._kappa[kind] = kappa
        self._last_kappa = kappa

    def _closed(self, parts: torch.Tensor, site: int, kind: int) -> torch.Tensor:
        """Units "closed": one call of the closed loop on the stream's deficit (module docstring)."""
        P, n = parts.shape
        c = self.candidate
        w = self.post_norms[site]
        shape = (P, n // self.hidden, self.hidden)
        x = parts.float()
        state = self._states.setdefault(0, _State())
        own = _own_rms(x, shape) if w is not None else None
        corr = torch.zeros_like(x)
        if state.m1 is not None:
            if w is None:
                corr = c.eta * state.m1
            else:
                r_hat = self._apply_rms(site, kind, None, x, own)                         # [P, T] or None
                if r_hat is not None:
                    # the inverse of the norm's diagonal: |w_j| floored, to the profile's power, sign kept
                    sign = torch.where(w < 0, -1.0, 1.0)
                    inv = sign * self._profile(site) * self._gbar(site)                     # [H]
                    corr = c.eta * state.m1.reshape(shape) * r_hat.unsqueeze(2) / inv.reshape(1, 1, -1)
                    corr = corr.reshape(P, n)
            if c.clip > 0.0 and w is not None:
                corr = _clamp_rows(corr.reshape(shape), own, c.clip).reshape(P, n)
        xp = x + corr
        self._inner.reset()
        y32 = self._inner(xp.contiguous())
        y = y32.bfloat16()
        yf = y.float()
        d = self._local_residual(n, y32, yf) - corr    # x_i - v_i: what the stream lacks of rank i's part
        if w is not None:
            r_out = _rms_rows(yf, self.hidden)                                             # [T]
            dr = d.reshape(shape).double()
            if c.radial:
                dr = _without_radial(dr, yf, self.hidden)
            gain = w.double().reshape(1, 1, -1) / r_out.double().clamp_min(1e-30).reshape(1, -1, 1)
            d = (dr * gain).float().reshape(P, n)
            self._keep_kappa(kind, r_out, own)
        state.m1 = d if state.m1 is None else state.m1 + d
        return y

    def __call__(self, parts: torch.Tensor, direction: str = "forward") -> torch.Tensor:
        P, n = parts.shape
        c = self.candidate
        site, kind = self.site, self.site % 2
        self.site += 1
        if c.units == "closed":
            return self._closed(parts, site, kind)
        key = kind if c.states == "per-kind" else 0
        state = self._states.setdefault(key, _State())
        x = parts.float()
        shape = (P, n // self.hidden, self.hidden)
        # each rank's per-token RMS of its own partial sums [P, T], formed once where a post-norm site's
        # gains, dynpartial's estimate or the clip read it
        own = None
        if self.post_norms[site] is not None and (c.units in ("self", "dynself", "dynpartial") or c.clip > 0.0):
            own = _own_rms(x, shape)
        rho = None
        if c.units in ("self", "dynself") and own is not None:
            rho = own
            self_gain = (self._gbar(site) / rho).unsqueeze(2)                                    # [P, T, 1]
            if c.profile != 0.0:
                self_gain = self_gain * self._profile(site).reshape(1, 1, -1)                    # [P, T, H]
        k = _constants(c)
        clipped_off = None
        if state.m1 is not None:
            corr = k["eta"] * (k["a"] * state.m1 + k["oa"] * state.m2)   # fp32, in the state's units
            per_token = c.units in ("dynamic", "oracle", "jacobian", "partial", "dynpartial")
            r = self._apply_rms(site, kind, x.sum(dim=0), x, own) if per_token else None
            if rho is not None:
                corr = (corr.reshape(shape) / self_gain).reshape(P, n)
                if c.units == "dynself" and self._last_kappa is not None:
                    kind_kappa = self._kappa.get(kind, self._last_kappa)
                    ratio = torch.where(self._last_kappa > 0, kind_kappa / self._last_kappa.clamp_min(1e-30),
                                        torch.zeros_like(kind_kappa))
                    corr = (corr.reshape(shape) * ratio.unsqueeze(2)).reshape(P, n)
            elif c.units in ("self", "dynself"):
                pass
            elif r is None and per_token and self.post_norms[site] is not None:
                corr = torch.zeros_like(corr)   # no estimate yet: no correction
            else:
                corr = (corr.reshape(shape) * self._gain(site, r, inverse=True)).reshape(P, n)
            if c.clip > 0.0 and self.post_norms[site] is not None:
                full = corr.reshape(shape)
                kept = _clamp_rows(full, own, c.clip)
                clipped_off = (full - kept).reshape(P, n) if c.keep else None
                corr = kept.reshape(P, n)
            xp = x + corr
        else:
            xp = x
        self._inner.reset()
        d = self._prescale(site)
        if d is None:
            y32 = self._inner(xp.contiguous())
        else:   # powers of two: exact both ways (no value here is near fp32's limits)
            y32 = (self._inner((xp.reshape(shape) * d).reshape(P, n).contiguous()).reshape(-1, self.hidden)
                   / d).reshape(n)
        y = y32.bfloat16()
        yf = y.float()
        if c.residual == "local":
            u = self._local_residual(n, y32, yf)
        else:
            u = xp - yf / float(P)
        if clipped_off is not None:
            u = u + clipped_off
        r_out = _rms_rows(yf, self.hidden)
        if c.radial and self.post_norms[site] is not None:
            # the norm's Jacobian is diag(w) / r (I - yhat yhat^T): the part of u along the row y never
            # reaches the stream, so it is not carried
            u = _without_radial(u.reshape(shape).double(), yf, self.hidden).float().reshape(P, n)
        if c.units in ("dynpartial", "dynself") and self.post_norms[site] is not None:
            self._keep_kappa(kind, r_out, own)
        if rho is not None:
            u = (u.reshape(shape) * self_gain).reshape(P, n)
        elif c.units not in ("self", "dynself"):
            u = (u.reshape(shape) * self._gain(site, r_out, inverse=False)).reshape(P, n)
        if state.m1 is None:
            state.m1 = torch.zeros_like(u)
            state.m2 = torch.zeros_like(u)
        state.m1 = k["beta1"] * state.m1 + k["ob1"] * u
        state.m2 = k["beta2"] * state.m2 + k["ob2"] * u
        self._rms[kind] = r_out
        self._last_rms = r_out
        return y


def post_norm_weights(model) -> List[Optional[torch.Tensor]]:
    """Per site (2l: attention output, 2l + 1: MLP output) the effective weight of the RMSNorm
    applied to the site's output before the residual add, or None where the model has none
    (Llama, Mistral, Qwen). Read off the norm module itself as norm(ones) * sqrt(1 + eps), so
    Gemma's 1 + weight is included."""
    name = type(model).__name__
    layers = model.model.layers
    out: List[Optional[torch.Tensor]] = []
    for layer in layers:
        if name.startswith("Gemma3") or name.startswith("Gemma2"):
            norms = (layer.post_attention_layernorm, layer.post_feedforward_layernorm)
        else:
            norms = (None, None)
        for norm in norms:
            if norm is None:
                out.append(None)
                continue
            hidden = norm.weight.shape[0]
            eps = float(getattr(norm, "eps", getattr(norm, "variance_epsilon", 1e-6)))
            with torch.no_grad():
                ones = torch.ones(1, hidden, dtype=torch.float32)
                w = norm(ones).float()[0] * (1.0 + eps) ** 0.5
            out.append(w)
    return out


@torch.no_grad()
def calibrate_gains(model, input_ids: torch.Tensor, ranks: int):
    """Per site the scalar gain of its post-norm on a calibration pass: the median over tokens of
    rms(w_k) / r_k(t), r_k(t) the RMS of token t's exact site output (1 for sites without a
    post-norm); and kappa_k, the median over tokens of r_k(t) / rms over ranks of the partial
    sums' per-token RMS. Returns (gains, kappas)."""
    from echotk import ExactAllReduce
    from echotk.tensor_parallel import tensor_parallel, undo_tensor_parallel

    norms = post_norm_weights(model)
    hidden = model.config.hidden_size
    gains: List[float] = []
    kappas: List[float] = []

    class Recorder(ExactAllReduce):
        def __call__(self, parts, direction="forward"):
            out = super().__call__(parts, direction)
            site = len(gains)
            w = norms[site]
            P = parts.shape[0]
            rho = parts.float().reshape(P, -1, hidden).double().pow(2).mean(dim=2).mean(dim=0).sqrt()
            kappas.append(float((_rms_rows(out.float(), hidden).double() / rho).median()))
            if w is None:
                gains.append(1.0)
            else:
                r = _rms_rows(out.float(), hidden)
                gbar = float(w.double().pow(2).mean().sqrt())
                gains.append(float((gbar / r.double()).median()))
            return out

    tensor_parallel(model, ranks=ranks, allreduce=Recorder(ranks=ranks, dtype="bf16"))
    try:
        model(input_ids=input_ids.unsqueeze(0), use_cache=False)
    finally:
        undo_tensor_parallel(model)
    return gains, kappas


def check_against_reference(ranks: int = 4, n: int = 4 * 640, sites: int = 6, seed: int = 0) -> None:
    """Units "site", shared state: the reference's dual compensator bit for bit, over a pass."""
    g = torch.Generator().manual_seed(seed)
    study = StudyAllReduce(ranks, Spec(compensator="off"), Candidate(), 640, [None] * sites)
    ref = AllReduce(ranks=ranks, spec=Spec())
    for k in range(sites):
        parts = (torch.randn(ranks, n, generator=g) * (10.0 ** (k % 3 - 1))).bfloat16()
        a, b = study(parts), ref(parts)
        if not torch.equal(a.view(torch.int16), b.view(torch.int16)):
            raise AssertionError(f"site {k}: the study's dual compensator differs from the reference")


if __name__ == "__main__":
    check_against_reference()
    print("check_against_reference: the study's dual compensator equals the reference bit for bit")
