"""A small Llama-style decoder built from echotk.nn's tensor-parallel layers (python -m echotk train).

Pre-norm RMSNorm blocks, rotary attention (causal, scaled_dot_product_attention), SwiGLU MLP, tied
input and output embeddings; optional dropout (config.dropout) on the embedding output and on the
attention and MLP outputs before each residual add, drawn from torch's generator of the device. Per layer l: column-parallel QKV and gate+up (backward sites 2l and
2l + 1), row-parallel attention output and down projection (forward sites 2l and 2l + 1).
"""
from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import nn

from ..nn import ATTENTION, MLP, ColumnParallelLinear, RowParallelLinear, TensorParallelGroup


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 49152  # SmolLM2's tokenizer
    dim: int = 384
    layers: int = 6
    heads: int = 8
    ffn: int = 1024
    seq: int = 512
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    dropout: float = 0.0  # 0: no dropout module at all (no random draws, the same bits as without)

    def check(self, ranks: int):
        if self.dim % self.heads or (self.dim // self.heads) % 2:
            raise ValueError(f"dim {self.dim} must be a multiple of heads {self.heads} with an even head size")
        if self.heads % ranks:
            raise ValueError(f"heads {self.heads} must be a multiple of ranks {ranks} (whole heads per rank)")
        if self.ffn % ranks or self.dim % ranks:
            raise ValueError(f"dim {self.dim} and ffn {self.ffn} must be multiples of ranks {ranks}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {self.dropout}")
        for name in ("vocab_size", "dim", "layers", "heads", "ffn", "seq"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding on [B, H, T, hd] (halves rotated, as Llama's rotate_half)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Attention(nn.Module):
    def __init__(self, group: TensorParallelGroup, config: ModelConfig, layer: int, out_std: float):
        super().__init__()
        d = config.dim
        self.heads, self.head_dim = config.heads, d // config.heads
        self.qkv = ColumnParallelLinear(group, d, (d, d, d), site=2 * layer + ATTENTION, kind=ATTENTION)
        self.out = RowParallelLinear(group, d, d, site=2 * layer + ATTENTION, kind=ATTENTION, init_std=out_std)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        q, k, v = (t.view(B, T, self.heads, self.head_dim).transpose(1, 2) for t in self.qkv(x))
        q, k = rotate(q, cos.to(q.dtype), sin.to(q.dtype)), rotate(k, cos.to(k.dtype), sin.to(k.dtype))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(B, T, -1))


class SwiGLU(nn.Module):
    def __init__(self, group: TensorParallelGroup, config: ModelConfig, layer: int, out_std: float):
        super().__init__()
        self.gate_up = ColumnParallelLinear(group, config.dim, (config.ffn, config.ffn),
                                            site=2 * layer + MLP, kind=MLP)
        self.down = RowParallelLinear(group, config.ffn, config.dim, site=2 * layer + MLP, kind=MLP,
                                      init_std=out_std)

    def forward(self, x):
        gate, up = self.gate_up(x)
        return self.down(F.silu(gate) * up)


def dropout_module(p: float) -> nn.Module:
    """nn.Dropout(p), or the identity at p = 0 so that a run without dropout draws no random numbers."""
    return nn.Dropout(p) if p > 0 else nn.Identity()


class Block(nn.Module):
    def __init__(self, group, config: ModelConfig, layer: int):
        super().__init__()
        out_std = 0.02 / math.sqrt(2 * config.layers)  # GPT-2's scaled init of the residual projections
        self.attn_norm = nn.RMSNorm(config.dim, eps=config.norm_eps)
        self.attn = Attention(group, config, layer, out_std)
        self.mlp_norm = nn.RMSNorm(config.dim, eps=config.norm_eps)
        self.mlp = SwiGLU(group, config, layer, out_std)
        self.attn_drop = dropout_module(config.dropout)
        self.mlp_drop = dropout_module(config.dropout)

    def forward(self, x, cos, sin):
        x = x + self.attn_drop(self.attn(self.attn_norm(x), cos, sin))
        return x + self.mlp_drop(self.mlp(self.mlp_norm(x)))


class TPLlama(nn.Module):
    """forward(ids [B, T]) -> logits [B, T, vocab]. Each forward begins the forward pass of the
    group's all-reduce (its state from zero); with autograd on, the logits carry the node that
    begins the backward pass. reset_allreduce_state() resets both directions by hand."""

    def __init__(self, config: ModelConfig, group: TensorParallelGroup):
        super().__init__()
        config.check(group.ranks)
        self.config, self.group = config, group
        self.embed = nn.Embedding(config.vocab_size, config.dim)
        nn.init.normal_(self.embed.weight, std=0.02)
        self.embed_drop = dropout_module(config.dropout)
        self.blocks = nn.ModuleList(Block(group, config, layer) for layer in range(config.layers))
        self.norm = nn.RMSNorm(config.dim, eps=config.norm_eps)
        hd = config.dim // config.heads
        inv = 1.0 / (config.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        angles = torch.outer(torch.arange(config.seq, dtype=torch.float64), inv)
        self.register_buffer("cos", angles.cos().float(), persistent=False)  # [seq, hd / 2]
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    def reset_allreduce_state(self):
        self.group.reset()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        B, T = ids.shape
        if T > self.config.seq:
            raise ValueError(f"sequence of {T} tokens is longer than the model's {self.config.seq}")
        self.group.begin_pass("forward")
        cos, sin = self.cos[:T], self.sin[:T]
        x = self.embed_drop(self.embed(ids))
        for block in self.blocks:
            x = block(x, cos, sin)
        logits = F.linear(self.norm(x), self.embed.weight)
        return self.group.backward_start(logits)

    def loss(self, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross-entropy (in fp32) of targets [B, T] given ids [B, T]."""
        logits = self(ids)
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
