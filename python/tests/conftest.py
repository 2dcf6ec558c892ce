"""Shared test helpers: paths of the repository, the built echotk binary, tools/ scripts as modules, bit
views, contributions."""
import importlib.util
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from echotk._util import TORCH_DTYPES

REPO = Path(__file__).resolve().parents[2]


def load_tool(name: str):
    """tools/NAME.py as a module (the tools are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def echotk_binary():
    """build/bin/echotk (or $ECHO_BINARY_DIR/bin/echotk, as CTest passes it)."""
    build = Path(os.environ.get("ECHO_BINARY_DIR", REPO / "build"))
    path = build / "bin" / "echotk"
    return path if path.is_file() else None


@pytest.fixture
def echotk_cli():
    path = echotk_binary()
    if path is None:
        pytest.skip("build/bin/echotk is not built")

    def run(*args, check=True):
        result = subprocess.run([str(path), *map(str, args)], capture_output=True, text=True)
        if check and result.returncode != 0:
            raise AssertionError(f"echotk {' '.join(map(str, args))} exited {result.returncode}:\n"
                                 f"{result.stdout}\n{result.stderr}")
        return result
    return run


def bits(t) -> np.ndarray:
    """Raw bits of a tensor or array as unsigned integers, to compare exactly (NaNs included)."""
    if isinstance(t, torch.Tensor):
        t = t.detach().cpu()
        if t.dtype in (torch.bfloat16, torch.float16):
            return t.view(torch.int16).numpy().view(np.uint16)
        return t.contiguous().numpy().view(np.uint32 if t.element_size() == 4 else np.uint16)
    t = np.ascontiguousarray(t)
    return t.view(np.uint32 if t.itemsize == 4 else np.uint16)


def contributions(ranks, n, dtype, seed, nonfinite=False):
    """[P, n] of dtype: normal values over six decades (small and large groups), optionally with
    NaN, +Inf and -Inf planted in some ranks."""
    g = torch.Generator().manual_seed(seed)
    scale = torch.logspace(-3, 3, n)[torch.randperm(n, generator=g)]
    x = (torch.randn(ranks, n, generator=g) * scale).to(TORCH_DTYPES[dtype])
    if nonfinite:
        x[0, n // 3] = float("nan")
        x[ranks - 1, n // 2] = float("inf")
        x[ranks // 2, n - 1] = float("-inf")
    return x


def tiny_gemma3(common: dict, seed: int = 0):
    """A small random Gemma 3 (transformers) with post-norm weights far from 0, in fp32 eval mode:
    `common` the config's sizes, head_dim 16, sliding window 8."""
    import transformers
    torch.manual_seed(seed)
    model = transformers.Gemma3ForCausalLM(transformers.Gemma3TextConfig(**common, head_dim=16, sliding_window=8))
    model = model.float().eval()
    with torch.no_grad():
        for layer in model.model.layers:
            layer.post_attention_layernorm.weight.normal_(0.0, 0.5)
            layer.post_feedforward_layernorm.weight.normal_(0.0, 0.5)
    return model
