"""echotk.distributed.AllReduce: the Echo all-reduce across processes, one per GPU (torchrun).

    torch.distributed.init_process_group("nccl")           # torchrun set RANK, WORLD_SIZE, ...
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    ar = echotk.distributed.AllReduce(group=None, spec=echotk.Spec())
    out = ar(x)                                             # x: this rank's [n] -> the all-reduced [n]

Every rank of the process group calls the constructor (a collective): rank 0 makes an NCCL unique
id, torch.distributed broadcasts it, and every rank builds an Echo communicator
(echo::cuda::create_from_nccl) on its current CUDA device. Ranks on one host that see each other's
GPUs with peer access take the P2P transport (NVLink stores); otherwise all take the NCCL transport,
which shares no memory. docs/python.md describes the API.

Each call is the custom op `echotk::comm_allreduce(x, calls, comm, spec, direction, fresh) -> out`:
one rank's call over the communicator registered here under the integer `comm`, on the current
stream; x is this rank's [n] contribution, `calls` ([1] int64 on x's device) counts the
direction's calls since the pass began (mutated: it orders the calls, whose compensator state
lives in the communicator).
"""
from __future__ import annotations

import atexit
import itertools
import socket
from typing import Optional

import torch

from . import _C, ops
from ._report import AllReduceReport
from ._spec import Spec
from ._util import DIRECTIONS, as_dtype, check_contiguous, check_direction, spec_or_default

TRANSPORTS = ("auto", "p2p", "nccl")
_ids = itertools.count(1)
# The open communicators (_C.RankCommunicator) by the integer echotk::comm_allreduce takes.
_COMMUNICATORS = {}


@torch.library.custom_op("echotk::comm_allreduce", mutates_args=("calls",))
def comm_allreduce(x: torch.Tensor, calls: torch.Tensor, comm: int, spec: str, direction: str,
                   fresh: bool) -> torch.Tensor:
    communicator = _COMMUNICATORS.get(comm)
    if communicator is None:
        raise RuntimeError(f"echotk::comm_allreduce: communicator {comm} is closed or was never made")
    if x.device.type != "cuda":
        raise ValueError(f"x is on {x.device}; echotk::comm_allreduce takes CUDA tensors")
    out = torch.empty_like(x)
    with torch.cuda.device(x.device):
        communicator.allreduce(ops.spec_handle(spec, communicator.world), direction, x, out, fresh,
                               torch.cuda.current_stream(x.device).cuda_stream)
    if fresh:
        calls.fill_(1)
    else:
        calls.add_(1)
    return out


@comm_allreduce.register_fake
def _(x, calls, comm, spec, direction, fresh):
    return torch.empty_like(x)


def _require_communicator():
    ops.require_cuda_build()
    if not getattr(_C, "HAS_COMMUNICATOR", False):
        raise RuntimeError("echotk was built without the communicator: echotk.distributed needs the extension "
                           "built with `-C cmake.define.ECHO_PYTHON_CUDA=ON` and ECHO_PYTHON_DISTRIBUTED=ON "
                           "(the default) where NCCL is found")


def _all_gather(value, group):
    values = [None] * torch.distributed.get_world_size(group)
    torch.distributed.all_gather_object(values, value, group=group)
    return values


def _raise_everywhere(error: Optional[str], group):
    """Every rank raises when any rank found a problem, so that no rank goes on to wait in NCCL for
    one that has stopped."""
    errors = _all_gather(error, group)
    bad = [(r, e) for r, e in enumerate(errors) if e is not None]
    if bad:
        raise ValueError("; ".join(f"rank {r}: {e}" for r, e in bad))


def _gpu_identity(device: int) -> str:
    return str(torch.cuda.get_device_properties(device).uuid)


def _reaches_peers(device: int, peers) -> bool:
    """Whether this process can map the memory of every other rank's GPU: same host, the GPU
    visible here and peer access between the two."""
    host = socket.gethostname()
    visible = {_gpu_identity(d): d for d in range(torch.cuda.device_count())}
    for peer_host, peer_gpu in peers:
        if peer_host != host or peer_gpu not in visible:
            return False
        other = visible[peer_gpu]
        if other != device and not torch.cuda.can_device_access_peer(device, other):
            return False
    return True


class AllReduce:
    """The Echo all-reduce of this process's rank: ar(x [n]) -> [n], the same on every rank.

    group: a torch.distributed process group (None: the default group) of 1..8 ranks, one GPU each.
    spec: an echotk.Spec the communicator implements (4 or 8 bits, the owner algorithm).
    transport: "auto" (P2P when every rank reaches every other's memory, else NCCL), "p2p" or "nccl".

    Each direction ("forward", "backward") keeps this rank's compensator state across calls until
    reset() (call it at the start of every pass, on every rank). Calls run on torch's current
    stream with no host synchronization. Construction and every call are collectives: all ranks
    make them, in the same order, with the same n. close() (or a with block) frees the
    communicator; it is also freed when the object dies or the interpreter exits."""

    def __init__(self, group=None, spec: Optional[Spec] = None, transport: str = "auto"):
        self._comm = None  # close() and __del__ need it however far construction gets
        self._id = None
        _require_communicator()
        dist = torch.distributed
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("torch.distributed is not initialized: call torch.distributed.init_process_group "
                               "first (torchrun sets its environment)")
        if not torch.cuda.is_available():
            raise RuntimeError("echotk.distributed.AllReduce needs a CUDA device; none is available")
        self.spec = spec_or_default(spec)
        if transport not in TRANSPORTS:
            raise ValueError(f"transport must be one of {', '.join(TRANSPORTS)}, got {transport!r}")
        self.group = group
        self.world = dist.get_world_size(group)
        self.rank = dist.get_rank(group)
        if self.rank < 0:
            raise ValueError("this process is not a member of the given process group")
        if not 1 <= self.world <= 8:
            raise ValueError(f"the process group has {self.world} ranks; the Echo communicator takes 1 to 8")
        handle = self.spec.handle(self.world)  # ValueError for a spec out of range
        try:
            _C.comm_can_implement(handle)
        except (ValueError, RuntimeError) as e:
            raise ValueError(f"the communicator does not implement this spec at {self.world} ranks: {e}") from None
        self.device = torch.device("cuda", torch.cuda.current_device())
        self.dtype = self.spec.dtype
        self._key = self.spec.key()

        # Which transport: every rank must reach every other rank's memory for P2P.
        me = (socket.gethostname(), _gpu_identity(self.device.index))
        everyone = _all_gather(me, self.group)
        shared = [r for r, who in enumerate(everyone) if who == me and r != self.rank]
        _raise_everywhere(f"shares its GPU ({me[1]} on {me[0]}) with rank {shared[0]}; one GPU per rank"
                          if shared else None, self.group)
        reaches = _reaches_peers(self.device.index, [who for r, who in enumerate(everyone) if r != self.rank])
        all_reach = all(_all_gather(reaches, self.group))
        if transport == "auto":
            transport = "p2p" if all_reach else "nccl"
        _raise_everywhere("cannot reach every other rank's GPU memory (other host, GPU not visible or no "
                          "peer access): use transport='nccl' or 'auto'"
                          if transport == "p2p" and not reaches else None, self.group)
        self.transport = transport
        # Per direction: calls since the pass began (the op mutates it), elements, pass begun.
        self._calls = {d: torch.zeros(1, dtype=torch.int64, device=self.device) for d in DIRECTIONS}
        self._n = {d: 0 for d in DIRECTIONS}
        self._live = {d: False for d in DIRECTIONS}
        self._last_direction = None

        # The NCCL unique id: made by the group's rank 0, broadcast to the others.
        box = [_C.nccl_unique_id() if self.rank == 0 else None]
        src = 0 if group is None else dist.get_global_rank(group, 0)
        dist.broadcast_object_list(box, src=src, group=group)
        self._comm = _C.RankCommunicator(box[0], self.world, self.rank, self.device.index, transport)
        self._id = next(_ids)
        _COMMUNICATORS[self._id] = self._comm

    @property
    def closed(self) -> bool:
        # Python state only, so that torch.compile traces calls without a graph break.
        return self._comm is None

    def reset(self):
        """Starts a pass: both directions' compensator states begin again from zero."""
        for d in DIRECTIONS:
            self._live[d] = False

    def __call__(self, x, direction: str = "forward") -> torch.Tensor:
        if self.closed:
            raise RuntimeError("this echotk.distributed.AllReduce is closed")
        check_direction(direction)
        x, raw_bits = self._check(x)
        n = x.shape[0]
        if self._live[direction] and self._n[direction] != n:
            raise ValueError(f"the {direction} state holds {self._n[direction]} elements but x has {n}; "
                             "call reset() between passes of different size")
        out = torch.ops.echotk.comm_allreduce(x, self._calls[direction], self._id, self._key, direction,
                                              not self._live[direction])
        self._live[direction] = True
        self._n[direction] = n
        self._last_direction = direction
        return out.view(torch.uint16) if raw_bits else out

    def _check(self, x):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() != 1:
            raise ValueError(f"x must have shape [n] (this rank's contribution), got {list(x.shape)}")
        if x.shape[0] < 1:
            raise ValueError("x has no elements; n must be >= 1")
        raw_bits = x.dtype == torch.uint16
        x = as_dtype(x, self.dtype, "x")
        if x.device != self.device:
            raise ValueError(f"x is on {x.device} but this rank's communicator is on {self.device} "
                             "(the current device when it was made)")
        check_contiguous(x, "x")
        return x, raw_bits

    @property
    def report(self) -> Optional[AllReduceReport]:
        """The last call's report (None before the first call); waits for this GPU. Local to this
        rank: poisoned_groups counts the groups of this rank's segment (their sum over the ranks is
        the message's count), scale_exponent and exact_path are the same on every rank, and the
        norms, which need every rank's contributions, are None."""
        if self._last_direction is None or self.closed:
            return None
        poisoned, exponent, exact = self._comm.report()
        return AllReduceReport(direction=self._last_direction, poisoned_groups=poisoned, scale_exponent=exponent,
                               exact_path=exact)

    def close(self):
        """Frees the communicator (waits for this GPU). Idempotent; later calls raise."""
        comm, self._comm = self._comm, None
        if comm is None:
            return
        _COMMUNICATORS.pop(self._id, None)
        comm.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - a destructor must not raise (interpreter exit, dead CUDA context)
            pass

    def __repr__(self):
        state = "closed" if self.closed else f"rank {self.rank} of {self.world} on {self.device}, {self.transport}"
        return f"echotk.distributed.AllReduce(spec={self.spec}, {state})"


@atexit.register
def _close_all():
    # Before the CUDA runtime and NCCL go away at exit: communicators still open are freed here.
    for key in list(_COMMUNICATORS):
        comm = _COMMUNICATORS.pop(key, None)
        try:
            comm.close()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


__all__ = ["AllReduce", "TRANSPORTS"]
