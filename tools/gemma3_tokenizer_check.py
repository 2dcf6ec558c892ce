"""Checks the Gemma 3 tokenizer echotk uses (transformers' GGUF tokenizer, echotk.models) against
llama.cpp's sentencepiece algorithm written from the GGUF alone: user-defined tokens (type 4:
newline runs, space runs, markup) split out first, longest first; spaces escaped as U+2581 (no
prefix space: tokenizer.ggml.add_space_prefix is false); then the adjacent pair whose
concatenation is a token with the highest score is merged until none is left (ties: leftmost);
characters that are no token become their UTF-8 bytes' <0xNN> tokens. Also checks that decoding
gives the text back. Compares whole texts cut into pieces of --piece characters (the reference is
pure Python).

    python tools/gemma3_tokenizer_check.py --gguf $(scripts/setup_gemma3.sh) TEXT.gz ...
"""
from __future__ import annotations

import argparse
import heapq
import sys

from echotk.eval.ppl import read_text
from echotk.models.gguf_file import load_tokenizer, read_field


class SentencePieceReference:
    def __init__(self, path):
        import gguf

        reader = gguf.GGUFReader(path)
        self.tokens = read_field(reader, "tokenizer.ggml.tokens")
        self.scores = read_field(reader, "tokenizer.ggml.scores")
        types = read_field(reader, "tokenizer.ggml.token_type")
        self.index = {t: i for i, t in enumerate(self.tokens) if types[i] in (1, 4)}
        self.user = sorted((t for t, k in zip(self.tokens, types) if k == 4), key=len, reverse=True)
        self.byte = {int(t[3:5], 16): i for i, t in enumerate(self.tokens) if types[i] == 6}

    def encode(self, text):
        fragments = [(text, False)]
        for special in self.user:  # llama.cpp's tokenizer_st_partition
            out = []
            for frag, is_special in fragments:
                if is_special or special not in frag:
                    out.append((frag, is_special))
                    continue
                parts = frag.split(special)
                for j, p in enumerate(parts):
                    if p:
                        out.append((p, False))
                    if j + 1 < len(parts):
                        out.append((special, True))
            fragments = out
        ids = []
        for frag, is_special in fragments:
            ids.extend([self.index[frag]] if is_special else self._spm(frag.replace(" ", "\u2581")))
        return ids

    def _spm(self, text):
        symbols = list(text)
        prev = list(range(-1, len(symbols) - 1))
        nxt = list(range(1, len(symbols) + 1))
        nxt[-1] = -1
        heap = []

        def push(left):
            right = nxt[left]
            if left < 0 or right < 0:
                return
            joined = symbols[left] + symbols[right]
            if joined in self.index:
                heapq.heappush(heap, (-self.scores[self.index[joined]], left, joined))

        for i in range(len(symbols) - 1):
            push(i)
        while heap:
            _, left, joined = heapq.heappop(heap)
            right = nxt[left]
            if right < 0 or symbols[left] + symbols[right] != joined:
                continue  # stale: one side was merged since
            symbols[left], symbols[right] = joined, ""
            nxt[left] = nxt[right]
            if nxt[right] >= 0:
                prev[nxt[right]] = left
            push(prev[left])
            push(left)
        ids, i = [], 0
        while i >= 0 and i < len(symbols):
            s = symbols[i]
            if s in self.index:
                ids.append(self.index[s])
            else:
                ids.extend(self.byte[b] for b in s.encode("utf-8"))
            i = nxt[i]
        return ids


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--piece", type=int, default=2000, help="characters per compared piece")
    ap.add_argument("--pieces", type=int, default=40, help="pieces per text, spread evenly")
    ap.add_argument("texts", nargs="+")
    args = ap.parse_args(argv)
    tokenizer = load_tokenizer(args.gguf)
    reference = SentencePieceReference(args.gguf)
    failures = 0
    for path in args.texts:
        text = read_text(path)
        ids = tokenizer.encode(text).ids
        round_trip = tokenizer.decode(ids) == text
        step = max(1, (len(text) - args.piece) // max(1, args.pieces - 1))
        same = 0
        for k in range(args.pieces):
            piece = text[k * step : k * step + args.piece]
            a, b = tokenizer.encode(piece).ids, reference.encode(piece)
            same += a == b
            if a != b and failures < 5:
                failures += 1
                where = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                print(f"  differs at id {where}: echotk {tokenizer.decode(a[where:where + 3])!r} "
                      f"{a[where:where + 3]}, reference {b[where:where + 3]}")
        print(f"{path}: {len(ids)} ids, decode gives the text back: {round_trip}; "
              f"{same}/{args.pieces} pieces of {args.piece} characters tokenized the same", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
