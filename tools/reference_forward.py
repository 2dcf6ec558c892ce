#!/usr/bin/env python3
"""Independent float64 numpy forward pass of SmolLM2 from the GGUF (weights dequantized by the
`gguf` package), written in the Hugging Face layout: Q and K rows are un-permuted back from the
GGUF converter's order and RoPE rotates the two halves of each head (rotate_half). Writes the
reference logits that tests/model/test_forward_reference.cpp compares the C++ forward against.

    python3 tools/reference_forward.py --out data/smollm2/reference-logits.h5
"""

import argparse

import gguf
import h5py
import numpy as np

from smollm2_gguf import build_tokenizer, default_model_path, field_value, tensors

PROMPTS = [
    "The capital of France is",
    "Call me Ishmael. Some years ago, never mind how long precisely, having little or no money",
    "In 1851 the whale ship sailed from Nantucket with 32 men aboard.",
]
# Logit columns stored for every position (the last position keeps the whole vocabulary).
SAMPLED_COLUMNS = 512


def unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Inverse of convert_hf_to_gguf.py's LlamaModel.permute on the rows of a Q/K weight."""
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def forward(weights, cfg, ids):
    n = len(ids)
    d = cfg["head_dim"]
    h = weights["token_embd.weight"][ids]
    inv_freq = cfg["rope_base"] ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    angles = np.outer(np.arange(n, dtype=np.float64), inv_freq)
    cos = np.cos(np.concatenate([angles, angles], axis=-1))[:, None, :]
    sin = np.sin(np.concatenate([angles, angles], axis=-1))[:, None, :]
    mask = np.triu(np.full((n, n), -np.inf), k=1)
    group = cfg["heads"] // cfg["kv_heads"]
    for l in range(cfg["layers"]):
        p = f"blk.{l}."
        x = rms_norm(h, weights[p + "attn_norm.weight"], cfg["eps"])
        wq = unpermute(weights[p + "attn_q.weight"], cfg["heads"])
        wk = unpermute(weights[p + "attn_k.weight"], cfg["kv_heads"])
        q = (x @ wq.T).reshape(n, cfg["heads"], d)
        k = (x @ wk.T).reshape(n, cfg["kv_heads"], d)
        v = (x @ weights[p + "attn_v.weight"].T).reshape(n, cfg["kv_heads"], d)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = np.repeat(k, group, axis=1)
        v = np.repeat(v, group, axis=1)
        scores = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(d) + mask
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        scores /= scores.sum(axis=-1, keepdims=True)
        attn = np.einsum("hqk,khd->qhd", scores, v).reshape(n, cfg["heads"] * d)
        h = h + attn @ weights[p + "attn_output.weight"].T
        x = rms_norm(h, weights[p + "ffn_norm.weight"], cfg["eps"])
        gate = x @ weights[p + "ffn_gate.weight"].T
        up = x @ weights[p + "ffn_up.weight"].T
        h = h + (gate / (1.0 + np.exp(-gate)) * up) @ weights[p + "ffn_down.weight"].T
    x = rms_norm(h, weights["output_norm.weight"], cfg["eps"])
    head = weights.get("output.weight", weights["token_embd.weight"])
    return x @ head.T


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=default_model_path())
    parser.add_argument("--out", default="data/smollm2/reference-logits.h5")
    args = parser.parse_args()

    reader = gguf.GGUFReader(args.model)
    cfg = {
        "layers": field_value(reader, "llama.block_count"),
        "heads": field_value(reader, "llama.attention.head_count"),
        "kv_heads": field_value(reader, "llama.attention.head_count_kv"),
        "eps": field_value(reader, "llama.attention.layer_norm_rms_epsilon"),
        "rope_base": field_value(reader, "llama.rope.freq_base"),
    }
    cfg["head_dim"] = field_value(reader, "llama.embedding_length") // cfg["heads"]
    weights = tensors(reader)
    tokenizer = build_tokenizer(reader)
    rng = np.random.default_rng(20240601)
    with h5py.File(args.out, "w") as out:
        out.attrs["generator"] = "tools/reference_forward.py (numpy float64, gguf " + \
            getattr(gguf, "__version__", "?") + ")"
        out.attrs["model"] = args.model.rsplit("/", 1)[-1]
        for i, prompt in enumerate(PROMPTS):
            ids = tokenizer.encode(prompt).ids
            logits = forward(weights, cfg, ids)
            columns = np.sort(rng.choice(logits.shape[1], SAMPLED_COLUMNS, replace=False))
            g = out.create_group(f"prompt{i}")
            g.attrs["text"] = prompt
            g.create_dataset("ids", data=np.asarray(ids, dtype=np.int32))
            g.create_dataset("columns", data=columns.astype(np.int32))
            g.create_dataset("sampled_logits", data=logits[:, columns].astype(np.float32))
            g.create_dataset("last_logits", data=logits[-1].astype(np.float32),
                             compression="gzip", compression_opts=9)
            top = np.argsort(-logits[-1])[:5]
            print(f"prompt {i}: {len(ids)} tokens, top next tokens {top.tolist()} "
                  f"({[tokenizer.decode([t]) for t in top]})")


if __name__ == "__main__":
    main()
