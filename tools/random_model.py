"""Writes a randomly initialized Hugging Face causal LM folder (config.json, model.safetensors and a
byte-level tokenizer: one id per byte, no merges) that `python -m echotk advise --model DIR` and
transformers load offline. No download: the shapes are written here.

    python tools/random_model.py --shape qwen3-0.6b --out build/qwen3-random   # Qwen3-0.6B's shape
    python tools/random_model.py --shape tiny --out DIR                        # 2 layers, width 64 (tests)
"""
from __future__ import annotations

import argparse
import sys

import torch

# Qwen3-0.6B's config.json (28 layers, hidden 1024, 16 query and 8 key-value heads of 128,
# MLP 3072, vocabulary 151,936, tied embeddings) and a tiny Qwen3 for the tests.
SHAPES = {
    "qwen3-0.6b": dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
                       rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True),
    "tiny": dict(vocab_size=260, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, max_position_embeddings=1024, tie_word_embeddings=True),
}
END_OF_TEXT = "<|endoftext|>"


def byte_tokenizer():
    """A byte-level BPE without merges: every UTF-8 byte one id (0..255), then END_OF_TEXT (256)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {symbol: i for i, symbol in enumerate(sorted(alphabet, key=lambda s: _byte_of(s)))}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(END_OF_TEXT, special=True)])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token=END_OF_TEXT)


def _byte_of(symbol: str) -> int:
    """The byte a ByteLevel alphabet symbol stands for (GPT-2's printable map)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    code = ord(symbol)
    if code in printable:
        return code
    others = [b for b in range(256) if b not in printable]
    return others[code - 256]


def write_random_model(out: str, shape: str = "tiny", seed: int = 0) -> str:
    """A Qwen3ForCausalLM of `shape` (SHAPES) with transformers' random initialization under `seed`,
    saved to `out` with the byte-level tokenizer; returns `out`."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tokenizer = byte_tokenizer()
    config = Qwen3Config(**SHAPES[shape], eos_token_id=tokenizer.eos_token_id, bos_token_id=None)
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config).float().eval()
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="tiny", choices=sorted(SHAPES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    print(write_random_model(args.out, args.shape, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
