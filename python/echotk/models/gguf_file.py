"""Loading a GGUF (SmolLM2's, Gemma 3's) through transformers, with a tokenizer that gives the
model's own ids.

transformers' GGUF tokenizer ignores SmolLM2's `tokenizer.ggml.pre` ("smollm": digits split one
by one), so for that file the tokenizer is built here from the file's vocabulary and merges with
SmolLM2's pre-tokenizer, as tools/smollm2_gguf.py does; its ids equal the C++ tokenizer's
(data/smollm2/tokenizer-golden.h5). Gemma 3's sentencepiece vocabulary (`tokenizer.ggml.model`
"llama", pre "default") is what transformers' GGUF tokenizer handles (docs/results-gemma3.md
says how it was checked); building it takes minutes, so its `tokenizer.json` is kept next to the
model file after the first build.
"""
from __future__ import annotations

import os

import torch

from .._util import atomic_path

FILE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_model_path() -> str:
    """$ECHO_MODEL_GGUF, else ${ECHO_CACHE_DIR:-$HOME/.cache/echo}/smollm2/<file> (setup_model.sh)."""
    if os.environ.get("ECHO_MODEL_GGUF"):
        return os.environ["ECHO_MODEL_GGUF"]
    root = os.environ.get("ECHO_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "echo")
    return os.path.join(root, "smollm2", FILE_NAME)


def read_field(reader, key: str):
    import gguf

    field = reader.fields[key]
    if field.types[0] == gguf.GGUFValueType.ARRAY:
        if field.types[-1] == gguf.GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8") for i in field.data]
        return [field.parts[i][0].item() for i in field.data]
    if field.types[0] == gguf.GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    return field.parts[field.data[0]][0].item()


def architecture(path: str) -> str:
    """The GGUF's `general.architecture` ("llama" for SmolLM2, "gemma3")."""
    import gguf

    return read_field(gguf.GGUFReader(path), "general.architecture")


def bos_id(path: str):
    """The id to put before every window, or None: the BOS token when the GGUF says to add one
    (`tokenizer.ggml.add_bos_token`; true for Gemma 3, false for SmolLM2)."""
    import gguf

    reader = gguf.GGUFReader(path)
    if "tokenizer.ggml.add_bos_token" not in reader.fields or not read_field(reader, "tokenizer.ggml.add_bos_token"):
        return None
    return int(read_field(reader, "tokenizer.ggml.bos_token_id"))


def load_tokenizer(path: str):
    """A `tokenizers.Tokenizer` whose `encode(text).ids` are the model's ids for `text`, without
    special tokens (ppl adds BOS itself, bos_id)."""
    import gguf

    reader = gguf.GGUFReader(path)
    arch = read_field(reader, "general.architecture")
    pre = read_field(reader, "tokenizer.ggml.pre") if "tokenizer.ggml.pre" in reader.fields else ""
    if arch == "gemma3":
        return _gemma_tokenizer(path)
    if pre != "smollm":
        raise ValueError(f"{path}: architecture {arch!r} with tokenizer.ggml.pre {pre!r}; echotk builds "
                         "the tokenizers of SmolLM2 ('smollm') and Gemma 3 only")
    return _smollm_tokenizer(reader)


def _gemma_tokenizer(path: str):
    """transformers' GGUF tokenizer for Gemma (sentencepiece BPE with byte fallback), its
    post-processor (which adds <bos>) removed; cached as <model>.tokenizer.json."""
    from tokenizers import Tokenizer

    cached = path + ".tokenizer.json"
    if os.path.isfile(cached) and os.path.getmtime(cached) >= os.path.getmtime(path):
        return Tokenizer.from_file(cached)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(os.path.dirname(os.path.abspath(path)),
                                              gguf_file=os.path.basename(path)).backend_tokenizer
    tokenizer.post_processor = None
    try:
        with atomic_path(cached) as tmp:
            tokenizer.save(tmp)
    except OSError:
        pass  # a read-only model folder: build it again next time
    return tokenizer


def _smollm_tokenizer(reader):
    """Byte-level BPE from the GGUF's vocabulary and merges, pre-tokenized as
    Sequence[Digits(individual_digits), ByteLevel], control tokens (type 3) special."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    tokens = read_field(reader, "tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ")) for m in read_field(reader, "tokenizer.ggml.merges")]
    types = read_field(reader, "tokenizer.ggml.token_type")
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
        raise FileNotFoundError(f"{path}: no such model file (scripts/setup_model.sh fetches SmolLM2, "
                                "scripts/setup_gemma3.sh Gemma 3)")
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(os.path.abspath(path)),
                                                 gguf_file=os.path.basename(path), dtype=dtype)
    return model.to(device).eval()
