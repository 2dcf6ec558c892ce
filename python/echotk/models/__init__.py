"""echotk.models: the models echotk's applications load (SmolLM2's and Gemma 3's GGUF files
through transformers, with tokenizers that give the models' own ids)."""
from .gguf_file import architecture, bos_id, default_model_path, load_model, load_tokenizer

__all__ = ["architecture", "bos_id", "default_model_path", "load_model", "load_tokenizer"]
