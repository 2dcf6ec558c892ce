"""What every echotk module shares: the error type of bad input, the argument checks, and writing
a file so that it is never seen half written."""
from __future__ import annotations

import contextlib
import os
from typing import Iterator, Optional, Union

import torch

from ._spec import Spec

DIRECTIONS = ("forward", "backward")
TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
MAX_RANKS = 8  # echo::kMaxRanks


class BadInput(ValueError):
    """Input echotk refuses (an argument, a file, a setting); the message names what is wrong.
    The commands exit with code 2 on it; being a ValueError, it is caught where ValueError is."""


def check_direction(direction, allow_none: bool = False) -> Optional[str]:
    """`direction` when it is "forward" or "backward" (or None, when allowed); ValueError otherwise."""
    if direction in DIRECTIONS or (allow_none and direction is None):
        return direction
    names = "'forward', 'backward' or None" if allow_none else "'forward' or 'backward'"
    raise ValueError(f"direction must be {names}, got {direction!r}")


def check_ranks(ranks) -> int:
    """`ranks` when it is an integer in [1, MAX_RANKS]; ValueError otherwise."""
    if isinstance(ranks, bool) or not isinstance(ranks, int) or not 1 <= ranks <= MAX_RANKS:
        raise ValueError(f"ranks must lie in [1, {MAX_RANKS}], got {ranks!r}")
    return ranks


def spec_or_default(spec) -> Spec:
    """`spec`, or the default Spec() for None; TypeError for anything else."""
    if spec is None:
        return Spec()
    if not isinstance(spec, Spec):
        raise TypeError(f"spec must be an echotk.Spec, got {type(spec).__name__}")
    return spec


def check_allreduce_ranks(allreduce, ranks: int):
    """ValueError unless `allreduce` (an echotk.AllReduce or ExactAllReduce) has `ranks` ranks."""
    if getattr(allreduce, "ranks", None) != ranks:
        raise ValueError(f"allreduce has ranks={getattr(allreduce, 'ranks', None)} but ranks={ranks}")


def as_dtype(x: torch.Tensor, dtype: str, name: str) -> torch.Tensor:
    """`x` as the spec's `dtype` ("fp32", "bf16", "fp16"): uint16 raw bits are viewed as the 16-bit
    type; any other dtype than the spec's is a ValueError naming `name`."""
    want = TORCH_DTYPES[dtype]
    if x.dtype == torch.uint16 and dtype != "fp32":
        x = x.view(want)
    if x.dtype != want:
        raise ValueError(f"{name} has dtype {x.dtype} but the spec's dtype is {dtype} ({want})")
    return x


def check_contiguous(x: torch.Tensor, name: str):
    if not x.is_contiguous():
        raise ValueError(f"{name} (shape {list(x.shape)}) is not contiguous; pass {name}.contiguous()")


@contextlib.contextmanager
def atomic_path(path: str) -> Iterator[str]:
    """A temporary name beside `path` to write: renamed to `path` when the block ends, removed when
    it raises, so that `path` holds the old file or the whole new one, never a part."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_atomic(path: str, data: Union[str, bytes]):
    """Writes `data` (text or bytes) to `path` through atomic_path."""
    with atomic_path(path) as tmp, open(tmp, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
