#!/usr/bin/env python3
"""Token ids of texts under the Hugging Face `tokenizers` tokenizer built from the GGUF (see
smollm2_gguf.build_tokenizer), written as golden data for tests/model/test_tokenizer.cpp.

    python3 tools/make_tokenizer_golden.py --out data/smollm2/tokenizer-golden.h5 \
        data/smollm2/moby-dick.txt.gz data/smollm2/state-of-the-union-2009-2021.txt.gz

Each text becomes a group holding its path (relative to the repository) and its ids; the group
"cases" holds short edge-case strings (digits, contractions, whitespace runs, control tokens).
"""

import argparse
import gzip
from pathlib import Path

import gguf
import h5py
import numpy as np
import tokenizers

from smollm2_gguf import REPO_ROOT, build_tokenizer, default_model_path

CASES = [
    "Hello world",
    " leading space and trailing  ",
    "numbers 1234567 and 3.14159, year 1851",
    "I'm sure you'll see they've gone; we'd said it's done",
    "tabs\tand\nnewlines\n\n\n  indented\r\n",
    "Unicode: caf\u00e9 na\u00efve \u2014 \u201cquoted\u201d \u00c6\u00e6 \u03ba\u03b7\u03c4\u03bf\u03c2 \u05d7\u05df",
    "emoji \U0001F40B and CJK \u9be8 mixed",
    "<|im_start|>user\nWhat is a whale?<|im_end|>\n<|im_start|>assistant\n",
    "punctuation!!! ??? ... --- ***",
    "    four spaces then word",
    "\u00bd \u2153 \u0663 superscript\u00b2",
]


def read_text(path: Path) -> str:
    data = gzip.open(path, "rb").read() if path.suffix == ".gz" else path.read_bytes()
    return data.decode("utf-8")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=default_model_path())
    parser.add_argument("--out", default="data/smollm2/tokenizer-golden.h5")
    parser.add_argument("texts", nargs="*", type=Path)
    args = parser.parse_args()

    tokenizer = build_tokenizer(gguf.GGUFReader(args.model))
    with h5py.File(args.out, "w") as out:
        out.attrs["generator"] = f"tools/make_tokenizer_golden.py (tokenizers {tokenizers.__version__})"
        for i, path in enumerate(args.texts):
            ids = np.asarray(tokenizer.encode(read_text(path)).ids, dtype=np.int32)
            g = out.create_group(f"text{i}")
            resolved = path.resolve()
            g.attrs["path"] = str(resolved.relative_to(REPO_ROOT)) if resolved.is_relative_to(REPO_ROOT) \
                else str(path)
            g.create_dataset("ids", data=ids, compression="gzip", compression_opts=9, shuffle=True)
            print(f"{path}: {len(ids)} tokens")
        cases = out.create_group("cases")
        for i, text in enumerate(CASES):
            ids = np.asarray(tokenizer.encode(text).ids, dtype=np.int32)
            g = cases.create_group(f"case{i}")
            g.attrs["text"] = text
            g.create_dataset("ids", data=ids)


if __name__ == "__main__":
    main()
