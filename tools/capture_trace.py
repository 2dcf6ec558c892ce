"""Records an echo-trace v1 file of a GGUF model through echotk.capture: `passes` windows of `length`
tokens spread evenly over the text (as `echotk capture` and `echotk ppl` place them; BOS first
for a model that wants it, as `python -m echotk ppl`), every rank's bf16 contribution of the
16-bit (exact) run at every site, and the residual stream.

    python tools/capture_trace.py --gguf $(scripts/setup_gemma3.sh) --passes 2 --length 16 --ranks 4 \
        --out data/gemma3/trace-p4-moby-2x16.h5
"""
from __future__ import annotations

import argparse
import sys

import torch

import echotk
from echotk.models import bos_id, load_model, load_tokenizer
from echotk.eval.ppl import plan_windows, read_text, window_ids


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--text", default="data/smollm2/moby-dick.txt.gz")
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--length", type=int, default=16)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    ids = torch.tensor(load_tokenizer(args.gguf).encode(read_text(args.text)).ids, dtype=torch.long)
    bos = bos_id(args.gguf)
    starts = plan_windows(len(ids), args.passes, args.length)
    batch = torch.stack([window_ids(ids, s, args.length, bos) for s in starts])
    model = load_model(args.gguf)
    source = (f"tools/capture_trace.py --text {args.text} --passes {args.passes} --length {args.length} "
              f"--ranks {args.ranks}; starts {starts}; bos {bos}")
    echotk.capture(model, batch, ranks=args.ranks, path=args.out, source=source,
                   model_name=f"{type(model).__name__} from {args.gguf.split('/')[-1]}")
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
