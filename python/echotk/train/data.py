"""The token ids that `python -m echotk train` learns from (data/training/, docs/results-training.md).

Documents: Moby-Dick (one document) and every State of the Union address, in order, each without
its `=== YEAR_NAME_PARTY ===` header and followed by SmolLM2's end-of-text token. The addresses
from VAL_FIRST_YEAR on are the validation split; everything else trains. Ids are SmolLM2's
tokenizer (echotk.models.load_tokenizer), stored as uint16 .npy files (the vocabulary has
49,152 entries) with manifest.json naming each file's sha256 and counts.

    python -m echotk.train.data --corpora ../shared/corpora --out data/training   # regenerate
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import re
import sys
from typing import Dict, List, Tuple

import numpy as np

from .._util import write_atomic

VAL_FIRST_YEAR = 2009
EOS_TOKEN = "<|endoftext|>"
MANIFEST = "manifest.json"
SPLITS = ("train", "val")
_HEADER = re.compile(r"^=== (\d{4})_[^\n]* ===$", re.MULTILINE)


def _read_gz(path: str) -> str:
    with open(path, "rb") as f:
        return gzip.decompress(f.read()).decode("utf-8")


def split_addresses(text: str) -> List[Tuple[int, str]]:
    """(year, text) of each address in file order; the text without its header line."""
    heads = list(_HEADER.finditer(text))
    if not heads:
        raise ValueError("state-of-the-union text has no '=== YEAR_NAME_PARTY ===' headers")
    out = []
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        out.append((int(m.group(1)), text[m.end():end].strip()))
    return out


def documents(corpora: str) -> Dict[str, List[str]]:
    """The documents of each split, in the order they are stored."""
    moby = _read_gz(os.path.join(corpora, "moby-dick.txt.gz")).strip()
    addresses = split_addresses(_read_gz(os.path.join(corpora, "state-of-the-union.txt.gz")))
    return {"train": [moby] + [t for year, t in addresses if year < VAL_FIRST_YEAR],
            "val": [t for year, t in addresses if year >= VAL_FIRST_YEAR]}


def _npy_bytes(ids: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, ids, allow_pickle=False)
    return buf.getvalue()


def make(corpora: str, gguf_path: str, out: str) -> dict:
    """Tokenizes the corpora and writes train.npy, val.npy and manifest.json into out."""
    from ..models import load_tokenizer

    tokenizer = load_tokenizer(gguf_path)
    eos = tokenizer.token_to_id(EOS_TOKEN)
    if eos is None:
        raise ValueError(f"{gguf_path}: the tokenizer has no {EOS_TOKEN} token")
    os.makedirs(out, exist_ok=True)
    manifest = {"tokenizer": os.path.basename(gguf_path), "vocab_size": tokenizer.get_vocab_size(),
                "eos_id": eos, "val_first_year": VAL_FIRST_YEAR, "dtype": "uint16", "splits": {}}
    for split, docs in documents(corpora).items():
        ids: List[int] = []
        for enc in tokenizer.encode_batch(docs, add_special_tokens=False):
            ids.extend(enc.ids)
            ids.append(eos)
        array = np.asarray(ids, dtype=np.uint16)
        if int(max(ids)) >= 1 << 16:
            raise ValueError(f"token id {max(ids)} does not fit uint16")
        data = _npy_bytes(array)
        write_atomic(os.path.join(out, f"{split}.npy"), data)
        manifest["splits"][split] = {"file": f"{split}.npy", "documents": len(docs), "tokens": len(ids),
                                     "sha256": hashlib.sha256(data).hexdigest()}
    write_atomic(os.path.join(out, MANIFEST), (json.dumps(manifest, indent=2) + "\n").encode())
    return manifest


def load(folder: str) -> Tuple[dict, Dict[str, np.ndarray]]:
    """The manifest and the ids of each split, each file checked against the manifest's sha256."""
    path = os.path.join(folder, MANIFEST)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file (python -m echotk.train.data makes it)")
    with open(path) as f:
        manifest = json.load(f)
    splits = {}
    for split in SPLITS:
        entry = manifest.get("splits", {}).get(split)
        if entry is None:
            raise ValueError(f"{path}: no '{split}' split")
        file = os.path.join(folder, entry["file"])
        with open(file, "rb") as f:
            data = f.read()
        digest = hashlib.sha256(data).hexdigest()
        if digest != entry["sha256"]:
            raise ValueError(f"{file}: sha256 {digest} differs from the manifest's {entry['sha256']}")
        ids = np.load(io.BytesIO(data), allow_pickle=False)
        if ids.dtype != np.uint16 or ids.ndim != 1 or len(ids) != entry["tokens"]:
            raise ValueError(f"{file}: expected {entry['tokens']} uint16 ids, got {ids.dtype} {ids.shape}")
        splits[split] = ids
    return manifest, splits


def main(argv=None) -> int:
    from ..models import default_model_path

    p = argparse.ArgumentParser(prog="python -m echotk.train.data", description=__doc__.splitlines()[0])
    p.add_argument("--corpora", default="../shared/corpora", help="folder with moby-dick.txt.gz and "
                   "state-of-the-union.txt.gz")
    p.add_argument("--gguf", default=default_model_path(), help="SmolLM2's GGUF (its tokenizer)")
    p.add_argument("--out", default="data/training", help="output folder")
    args = p.parse_args(argv)
    try:
        manifest = make(args.corpora, args.gguf, args.out)
    except (OSError, ValueError) as e:
        print(f"echotk.train.data: {e}", file=sys.stderr)
        return 2
    for split, entry in manifest["splits"].items():
        print(f"{split}: {entry['documents']} documents, {entry['tokens']} tokens, sha256 {entry['sha256']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
