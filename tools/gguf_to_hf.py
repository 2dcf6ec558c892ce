"""Writes a Hugging Face model folder from a GGUF file: the weights transformers dequantizes
(fp32, `save_pretrained`: config.json and model.safetensors) and the tokenizer echotk.models
builds for the file (SmolLM2's digits split singly, Gemma 3's sentencepiece), with BOS added where
the GGUF asks for it. `python -m echotk advise --model DIR` then sees the model the GGUF path sees.

    python tools/gguf_to_hf.py --gguf $(scripts/setup_model.sh) --out ~/.cache/echo/smollm2/hf
"""
from __future__ import annotations

import argparse
import sys


def write_folder(gguf_path: str, out: str) -> str:
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    from echotk.models import bos_id, load_model, load_tokenizer

    tokenizer = load_tokenizer(gguf_path)
    bos = bos_id(gguf_path)
    special = {}
    if bos is not None:
        token = tokenizer.id_to_token(bos)
        tokenizer.post_processor = processors.TemplateProcessing(single=f"{token} $A", special_tokens=[(token, bos)])
        special["bos_token"] = token
    # transformers keeps a GGUF-loaded model marked as quantized and refuses to save it: the same
    # weights go into a model built from the same config.
    from transformers import AutoModelForCausalLM
    loaded = load_model(gguf_path)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=loaded.dtype)
    model.load_state_dict(loaded.state_dict())
    model.save_pretrained(out)
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, **special).save_pretrained(out)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    print(write_folder(args.gguf, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
