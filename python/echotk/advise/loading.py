"""The model `python -m echotk advise` advises on: a Hugging Face folder (`--model DIR`: config.json
and safetensors weights, loaded offline by transformers, with the folder's tokenizer) or a GGUF
file (`--gguf FILE`, through echotk.models). Every check that needs no weights runs first
(`check_source`), so that bad input is refused before minutes of loading."""
from __future__ import annotations

import dataclasses
import glob
import json
import os
from typing import Callable, List, Optional

import torch

from .._util import BadInput
from ..tensor_parallel import SUPPORTED

# GGUF `general.architecture` -> the transformers class it loads as (those echotk.tensor_parallel
# supports; transformers reads more GGUF architectures than these).
GGUF_ARCHITECTURES = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
                      "qwen3": "Qwen3ForCausalLM", "gemma3": "Gemma3ForCausalLM"}


@dataclasses.dataclass(frozen=True)
class Source:
    """A checked model: `kind` "hf" (a folder) or "gguf" (a file), and its transformers class."""

    kind: str
    path: str
    architecture: str

    def describe(self) -> str:
        return f"{self.architecture} from {'the folder' if self.kind == 'hf' else 'the GGUF'} {self.path}"


def _supported(name: str, where: str) -> str:
    if name not in SUPPORTED:
        raise BadInput(f"{where}: architecture {name!r} is not one echotk.tensor_parallel supports "
                       f"({', '.join(SUPPORTED)})")
    return name


def check_source(model_dir: Optional[str], gguf_file: Optional[str]) -> Source:
    """The model the options name, checked without loading weights: the files exist and the
    architecture is one echotk.tensor_parallel supports (BadInput naming what is wrong)."""
    if gguf_file is not None:
        if not os.path.isfile(gguf_file):
            raise BadInput(f"--gguf {gguf_file}: no such file")
        from ..models import architecture
        try:
            arch = architecture(gguf_file)
        except Exception as e:  # gguf raises several types on a damaged file
            raise BadInput(f"--gguf {gguf_file}: not a readable GGUF file ({e})") from e
        if arch not in GGUF_ARCHITECTURES:
            raise BadInput(f"--gguf {gguf_file}: architecture {arch!r} is not one echotk.tensor_parallel "
                           f"supports (GGUF architectures {', '.join(GGUF_ARCHITECTURES)})")
        return Source("gguf", gguf_file, GGUF_ARCHITECTURES[arch])
    if not os.path.isdir(model_dir):
        raise BadInput(f"--model {model_dir}: no such folder")
    config = os.path.join(model_dir, "config.json")
    if not os.path.isfile(config):
        raise BadInput(f"--model {model_dir}: no config.json (a Hugging Face model folder holds one)")
    try:
        with open(config) as f:
            architectures = json.load(f).get("architectures") or []
    except (ValueError, AttributeError) as e:
        raise BadInput(f"{config}: not a JSON object ({e})") from e
    if len(architectures) != 1:
        raise BadInput(f"{config}: 'architectures' must name one model class, got {architectures!r}")
    arch = _supported(architectures[0], config)
    if not glob.glob(os.path.join(model_dir, "*.safetensors")):
        raise BadInput(f"--model {model_dir}: no *.safetensors weights")
    return Source("hf", model_dir, arch)


@dataclasses.dataclass
class Tokenizer:
    """The text-to-ids function of a model, without special tokens, and the BOS id to put before
    every window (None when the model's tokenizer adds none)."""

    encode: Callable[[str], List[int]]
    bos: Optional[int]


def load_tokenizer(source: Source) -> Tokenizer:
    if source.kind == "gguf":
        from ..models import bos_id, load_tokenizer as gguf_tokenizer
        try:
            tokenizer = gguf_tokenizer(source.path)
        except ValueError as e:
            raise BadInput(f"--gguf {e}; --model takes a Hugging Face folder with its tokenizer") from e
        return Tokenizer(lambda text: tokenizer.encode(text).ids, bos_id(source.path))
    from transformers import AutoTokenizer
    try:
        tokenizer = AutoTokenizer.from_pretrained(source.path, local_files_only=True)
    except (OSError, ValueError) as e:
        raise BadInput(f"--model {source.path}: no tokenizer transformers can load ({e})") from e
    probe = tokenizer("a", add_special_tokens=True)["input_ids"]
    bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None and probe[:1] == [tokenizer.bos_token_id] else None
    if getattr(tokenizer, "is_fast", False):
        backend = tokenizer.backend_tokenizer
        return Tokenizer(lambda text: backend.encode(text, add_special_tokens=False).ids, bos)
    return Tokenizer(lambda text: tokenizer.encode(text, add_special_tokens=False), bos)


def load_model(source: Source, device) -> torch.nn.Module:
    """The model in fp32 (as the GGUF path and the C++ forward compute), in eval mode, on `device`."""
    if source.kind == "gguf":
        from ..models import load_model as gguf_model
        return gguf_model(source.path, device=device)
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(source.path, local_files_only=True, dtype=torch.float32)
    if type(model).__name__ != source.architecture:
        raise BadInput(f"--model {source.path}: loaded as {type(model).__name__}, not {source.architecture}")
    return model.to(device).eval()
