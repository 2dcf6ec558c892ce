"""Checks the logits of Gemma 3 270M as transformers loads it from the GGUF against a second path:
the `gguf` package's dequantizer and a float64 numpy forward pass written from llama.cpp's Gemma 3
graph (sandwich RMSNorms whose GGUF weights already hold the +1, QK-norm, NeoX RoPE with base 1e4
on sliding-window layers and 1e6 on every sixth (global) layer, query scale 256^-1/2, GELU-tanh
gated MLP, embeddings times sqrt(640), tied output). Prints the relative L2 distance per prompt.

    python tools/gemma3_reference_logits.py --gguf $(scripts/setup_gemma3.sh)
"""
from __future__ import annotations

import argparse
import math
import sys

import numpy as np

PROMPTS = [
    "Call me Ishmael. Some years ago, never mind how long precisely, having little or no money",
    "The state of our union is strong, and the budget for 2021 includes 1,234 new programs.",
    "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)\n",
]
GLOBAL_EVERY = 6          # layers 5, 11, 17 attend globally (llama.cpp's and transformers' pattern)
LOCAL_ROPE_BASE = 10000.0


class Weights:
    def __init__(self, path):
        import gguf

        self.reader = gguf.GGUFReader(path)
        self.tensors = {t.name: t for t in self.reader.tensors}
        self.gguf = gguf

    def __call__(self, name, dtype=np.float64):
        t = self.tensors[name]
        return self.gguf.quants.dequantize(t.data, t.tensor_type).astype(dtype, copy=False)

    def scalar(self, key):
        f = self.reader.fields[key]
        return f.parts[f.data[0]][0].item()


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, positions, base):
    """NeoX rotation (rotate_half) over the last dimension of x [T, heads, d]."""
    d = x.shape[-1]
    inv = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    angle = positions[:, None] * inv[None, :]                  # [T, d/2]
    cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def forward(w: Weights, ids):
    arch = "gemma3"
    hidden = int(w.scalar(f"{arch}.embedding_length"))
    layers = int(w.scalar(f"{arch}.block_count"))
    heads = int(w.scalar(f"{arch}.attention.head_count"))
    kv_heads = int(w.scalar(f"{arch}.attention.head_count_kv"))
    head_dim = int(w.scalar(f"{arch}.attention.key_length"))
    eps = float(w.scalar(f"{arch}.attention.layer_norm_rms_epsilon"))
    global_base = float(w.scalar(f"{arch}.rope.freq_base"))
    embedding = w("token_embd.weight", np.float32)               # [vocab, hidden]
    T = len(ids)
    pos = np.arange(T, dtype=np.float64)
    x = embedding[ids].astype(np.float64) * math.sqrt(hidden)
    mask = np.triu(np.full((T, T), -np.inf), k=1)
    for l in range(layers):
        p = f"blk.{l}."
        base = global_base if (l + 1) % GLOBAL_EVERY == 0 else LOCAL_ROPE_BASE
        h = rms_norm(x, w(p + "attn_norm.weight"), eps)
        q = (h @ w(p + "attn_q.weight").T).reshape(T, heads, head_dim)
        k = (h @ w(p + "attn_k.weight").T).reshape(T, kv_heads, head_dim)
        v = (h @ w(p + "attn_v.weight").T).reshape(T, kv_heads, head_dim)
        q = rope(rms_norm(q, w(p + "attn_q_norm.weight"), eps), pos, base)
        k = rope(rms_norm(k, w(p + "attn_k_norm.weight"), eps), pos, base)
        group = heads // kv_heads
        out = np.empty((T, heads, head_dim))
        for hd in range(heads):
            s = q[:, hd, :] @ k[:, hd // group, :].T / math.sqrt(head_dim) + mask
            s = np.exp(s - s.max(axis=1, keepdims=True))
            out[:, hd, :] = (s / s.sum(axis=1, keepdims=True)) @ v[:, hd // group, :]
        a = out.reshape(T, heads * head_dim) @ w(p + "attn_output.weight").T
        x = x + rms_norm(a, w(p + "post_attention_norm.weight"), eps)
        h = rms_norm(x, w(p + "ffn_norm.weight"), eps)
        m = gelu_tanh(h @ w(p + "ffn_gate.weight").T) * (h @ w(p + "ffn_up.weight").T)
        x = x + rms_norm(m @ w(p + "ffn_down.weight").T, w(p + "post_ffw_norm.weight"), eps)
    x = rms_norm(x, w("output_norm.weight"), eps)
    return x @ embedding.T.astype(np.float64)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", required=True)
    args = ap.parse_args(argv)
    import torch

    from echotk.models import bos_id, load_model, load_tokenizer

    tokenizer, bos = load_tokenizer(args.gguf), bos_id(args.gguf)
    model = load_model(args.gguf)
    c = model.config
    print(f"transformers config: layer_types {c.layer_types}, rope {getattr(c, 'rope_parameters', None)}, "
          f"query_pre_attn_scalar {c.query_pre_attn_scalar}, final_logit_softcapping {c.final_logit_softcapping}, "
          f"sliding_window {c.sliding_window}")
    w = Weights(args.gguf)
    worst = 0.0
    for i, prompt in enumerate(PROMPTS):
        ids = [bos] + tokenizer.encode(prompt).ids
        with torch.no_grad():
            got = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0].double().numpy()
        ref = forward(w, np.array(ids))
        rel = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
        same_argmax = float(np.mean(got.argmax(-1) == ref.argmax(-1)))
        worst = max(worst, rel)
        print(f"prompt {i}: {len(ids)} tokens, relative L2 {rel:.3g}, argmax agreement {same_argmax:.3f}", flush=True)
    print(f"worst relative L2 {worst:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
