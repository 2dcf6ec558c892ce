"""echotk: the Echo all-reduce (error-compensated low-bit tensor-parallel all-reduce) in PyTorch.

    spec = echotk.Spec(bits=4)                      # defaults as `echotk replay`
    ar = echotk.AllReduce(ranks=4, spec=spec)       # device="cpu": the bit-exact C++ reference
    out = ar(parts)                                 # parts [P, n] of the spec's dtype -> [n]
    model = echotk.tensor_parallel(model, ranks=4, allreduce=ar)
    ar = echotk.distributed.AllReduce(group=None, spec=spec)   # one process per GPU (torchrun)

docs/python.md describes the API. The applications build on these names, as subpackages:
echotk.eval (python -m echotk ppl), echotk.train (python -m echotk train), echotk.models (GGUF).
"""
# torch before the extension: with the communicator, _C needs libnccl.so.2, and the copy torch loads
# must come first (its own, which torch's symbols need; _C takes whichever is loaded).
import torch  # noqa: F401

from ._spec import Spec
from ._allreduce import AllReduce, ExactAllReduce
from ._report import AllReduceReport
from .tensor_parallel import tensor_parallel
from .capture import capture
from . import distributed

__version__ = "0.1.0"
__all__ = ["Spec", "AllReduce", "AllReduceReport", "ExactAllReduce", "tensor_parallel", "capture", "distributed"]
