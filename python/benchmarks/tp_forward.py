"""Time of a tensor-parallel emulated forward on one GPU: Echo (the emulation kernel) against the
exact sum, on a SmolLM2-135M-shaped Llama with random weights (its config, no weight file).

    python python/benchmarks/tp_forward.py [--ranks 4] [--bits 4] [--batch 8] [--tokens 512] [--rounds 7]

Both forwards split every row-parallel site over P ranks (echotk.tensor_parallel) and differ only
in the all-reduce. They alternate in --rounds rounds (exact, then Echo), each the median over
--iters timed forwards (CUDA events) after --warmup untimed ones, so drift of the GPU reaches both
alike; prints each round's times and ratio, then the medians over the rounds and the ratio's
range (the goal is Echo <= 1.3x the exact sum).
"""
import argparse
import statistics

import torch
import transformers

import echotk
from echotk.tensor_parallel import undo_tensor_parallel

# SmolLM2-135M's architecture (its config.json), weights random.
SMOLLM2_135M = dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                    num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
                    rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True, hidden_act="silu")


def median_ms(model, ids, warmup, iters):
    with torch.no_grad():
        for _ in range(warmup):
            model(input_ids=ids, use_cache=False)
        times = []
        for _ in range(iters):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            model(input_ids=ids, use_cache=False)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--bits", type=int, default=4)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--tokens", type=int, default=512)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--norms", action="store_true", help="keep x' for the report's norms (extra traffic)")
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("tp_forward: needs a CUDA device")

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(**SMOLLM2_135M)
    model = transformers.LlamaForCausalLM(cfg).to("cuda", torch.bfloat16).eval()
    ids = torch.randint(0, cfg.vocab_size, (args.batch, args.tokens), device="cuda")
    spec = echotk.Spec(bits=args.bits, dtype="bf16")
    allreduces = (("exact", echotk.ExactAllReduce(args.ranks, dtype="bf16", device="cuda")),
                  ("echo", echotk.AllReduce(args.ranks, spec, device="cuda", norms=args.norms)))
    print(f"TP forward, SmolLM2-135M shape, random bf16 weights, P = {args.ranks}, "
          f"{args.batch} x {args.tokens} tokens, {args.rounds} rounds of the median of {args.iters} "
          f"({torch.cuda.get_device_name()})")
    times = {"exact": [], "echo": []}
    ratios = []
    for round_index in range(args.rounds):
        for name, ar in allreduces:
            echotk.tensor_parallel(model, ranks=args.ranks, allreduce=ar)
            times[name].append(median_ms(model, ids, args.warmup, args.iters))
            undo_tensor_parallel(model)
        ratios.append(times["echo"][-1] / times["exact"][-1])
        print(f"  round {round_index + 1}: exact {times['exact'][-1]:8.2f} ms, Echo {times['echo'][-1]:8.2f} ms, "
              f"ratio {ratios[-1]:.3f}")
    exact, echo = statistics.median(times["exact"]), statistics.median(times["echo"])
    print(f"  exact sum : {exact:8.2f} ms (median of the rounds)")
    print(f"  Echo {args.bits}-bit: {echo:8.2f} ms" + ("  (with norms)" if args.norms else ""))
    print(f"  ratio     : {echo / exact:8.3f}x, rounds {min(ratios):.3f} .. {max(ratios):.3f}  (goal <= 1.3x)")

if __name__ == "__main__":
    main()
