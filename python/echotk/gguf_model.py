"""Loading a Llama-family GGUF (SmolLM2's) through transformers, with the tokenizer the C++ code uses.

transformers' GGUF tokenizer ignores SmolLM2's `tokenizer.ggml.pre` ("smollm": digits split one
by one), so the tokenizer is built here from the file's vocabulary and merges with SmolLM2's
pre-tokenizer, as tools/smollm2_gguf.py does; its ids equal the C++ tokenizer's
(data/smollm2/tokenizer-golden.h5).
"""
from __future__ import annotations

import os

import torch

FILE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_model_path() -> str:
    """$ECHO_MODEL_GGUF, else ${ECHO_CACHE_DIR:-$HOME/.cache/echo}/smollm2/<file> (setup_model.sh)."""
    if os.environ.get("ECHO_MODEL_GGUF"):
        return os.environ["ECHO_MODEL_GGUF"]
    root = os.environ.get("ECHO_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "echo")
    return os.path.join(root, "smollm2", FILE_NAME)


def _field(reader, key: str):
    import gguf

    field = reader.fields[key]
    if field.types[0] == gguf.GGUFValueType.ARRAY:
        if field.types[-1] == gguf.GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8") for i in field.data]
        return [field.parts[i][0].item() for i in field.data]
    if field.types[0] == gguf.GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    return field.parts[field.data[0]][0].item()


def load_tokenizer(path: str):
    """A `tokenizers.Tokenizer`: byte-level BPE from the GGUF's vocabulary and merges, pre-tokenized
    as Sequence[Digits(individual_digits), ByteLevel], control tokens (type 3) special."""
    import gguf
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    reader = gguf.GGUFReader(path)
    pre = _field(reader, "tokenizer.ggml.pre") if "tokenizer.ggml.pre" in reader.fields else ""
    if pre != "smollm":
        raise ValueError(f"{path}: tokenizer.ggml.pre is {pre!r}; echotk builds the 'smollm' tokenizer only")
    tokens = _field(reader, "tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ")) for m in _field(reader, "tokenizer.ggml.merges")]
    types = _field(reader, "tokenizer.ggml.token_type")
    tokenizer = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    control = [t for t, kind in zip(tokens, types) if kind == 3]
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
    return tokenizer


def load_model(path: str, device="cpu", dtype=torch.float32):
    """The GGUF's weights dequantized by transformers (needs the `gguf` and `accelerate`
    packages), in `dtype` (fp32 by default, as the C++ forward pass computes), in eval mode."""
    from transformers import AutoModelForCausalLM

    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such model file (scripts/setup_model.sh fetches SmolLM2)")
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(os.path.abspath(path)),
                                                 gguf_file=os.path.basename(path), dtype=dtype)
    return model.to(device).eval()
