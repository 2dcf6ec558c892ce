"""Shared helpers of the SmolLM2 reference tools: locate the GGUF, read it with the `gguf` package,
and build a Hugging Face `tokenizers` tokenizer from its vocabulary and merges."""

import os
from pathlib import Path

import gguf
import numpy as np

FILE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
REPO_ROOT = Path(__file__).resolve().parent.parent


def default_model_path() -> str:
    """The path scripts/setup_model.sh writes, or $ECHO_MODEL_GGUF."""
    if os.environ.get("ECHO_MODEL_GGUF"):
        return os.environ["ECHO_MODEL_GGUF"]
    root = os.environ.get("ECHO_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "echo")
    return os.path.join(root, "smollm2", FILE_NAME)


def field_value(reader: gguf.GGUFReader, key: str):
    field = reader.fields[key]
    if field.types[0] == gguf.GGUFValueType.ARRAY:
        if field.types[-1] == gguf.GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8") for i in field.data]
        return [field.parts[i][0].item() for i in field.data]
    if field.types[0] == gguf.GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    return field.parts[field.data[0]][0].item()


def tensors(reader: gguf.GGUFReader) -> dict:
    """Every tensor dequantized by gguf-py, as float64 arrays of shape (ne1, ne0) / (ne0,)."""
    out = {}
    for t in reader.tensors:
        values = gguf.quants.dequantize(t.data, t.tensor_type)
        shape = tuple(int(d) for d in reversed(t.shape.tolist()))
        out[t.name] = np.asarray(values, dtype=np.float64).reshape(shape)
    return out


def build_tokenizer(reader: gguf.GGUFReader):
    """The model's tokenizer.json equivalent: byte-level BPE with SmolLM2's pre-tokenizer,
    Sequence[Digits(individual_digits), ByteLevel(add_prefix_space=False)], control tokens special."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    tokens = field_value(reader, "tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ")) for m in field_value(reader, "tokenizer.ggml.merges")]
    types = field_value(reader, "tokenizer.ggml.token_type")
    vocab = {tok: i for i, tok in enumerate(tokens)}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    control = [tok for tok, kind in zip(tokens, types) if kind == 3]
    tokenizer.add_special_tokens([AddedToken(tok, special=True, normalized=False) for tok in control])
    return tokenizer
