"""Time of a tensor-parallel emulated forward on one GPU: Echo (the emulation kernel) against the
exact sum, on a SmolLM2-135M-shaped Llama with random weights (its config, no weight file).

    python python/benchmarks/tp_forward.py [--ranks 4] [--bits 4] [--batch 8] [--tokens 512] [--rounds 7]
                                           [--mode both|eager|graph]

Both forwards split every row-parallel site over P ranks (echotk.tensor_parallel) and differ only
in the all-reduce. They alternate in --rounds rounds (exact, then Echo), each the median over
--iters timed forwards (CUDA events) after --warmup untimed ones, so drift of the GPU reaches both
alike. Two ways to run a forward: eager (Python and the launches on the host's clock: what a
user's forward costs, and noisy where the host is the bottleneck) and graph (the forward captured
once in a CUDA graph and replayed: the GPU's time alone). The graph's logits are compared bit for
bit with the eager forward's (printed). Prints each round's times and ratios, then per mode the medians
over the rounds and the ratio's range (the goal is Echo <= 1.3x the exact sum).
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


def capture(model, ids, warmup):
    """The forward captured in a CUDA graph (warm-up on a side stream first, as torch asks), and
    the static logits tensor each replay overwrites."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(side):
        for _ in range(warmup):
            model(input_ids=ids, use_cache=False)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        logits = model(input_ids=ids, use_cache=False).logits
    return graph, logits


def replay_median_ms(graph, warmup, iters):
    for _ in range(warmup):
        graph.replay()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.equal(a.contiguous().view(torch.int16), b.contiguous().view(torch.int16))


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
    p.add_argument("--mode", choices=("both", "eager", "graph"), default="both",
                   help="eager forwards, CUDA-graph replays of the forward, or both (default)")
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
    modes = ("eager", "graph") if args.mode == "both" else (args.mode,)
    times = {(mode, name): [] for mode in modes for name, _ in allreduces}
    ratios = {mode: [] for mode in modes}
    graph_bits = {}  # all-reduce -> whether its graph replay gave the eager forward's logits
    for round_index in range(args.rounds):
        for name, ar in allreduces:
            echotk.tensor_parallel(model, ranks=args.ranks, allreduce=ar)
            if "eager" in modes:
                times[("eager", name)].append(median_ms(model, ids, args.warmup, args.iters))
            if "graph" in modes:
                graph, logits = capture(model, ids, args.warmup)
                if round_index == 0:
                    graph.replay()
                    with torch.no_grad():
                        eager = model(input_ids=ids, use_cache=False).logits
                    graph_bits[name] = same_bits(logits, eager)
                times[("graph", name)].append(replay_median_ms(graph, args.warmup, args.iters))
                del graph, logits
            undo_tensor_parallel(model)
        line = []
        for mode in modes:
            exact, echo = times[(mode, "exact")][-1], times[(mode, "echo")][-1]
            ratios[mode].append(echo / exact)
            line.append(f"{mode}: exact {exact:8.2f} ms, Echo {echo:8.2f} ms, ratio {echo / exact:.3f}")
        print(f"  round {round_index + 1}: " + "; ".join(line))
    for name, same in graph_bits.items():
        print(f"  {name}: the graph replay's logits are " + ("the eager forward's, bit for bit" if same else
              "NOT the eager forward's (compare the two forwards before trusting the graph's times)"))
    for mode in modes:
        exact, echo = statistics.median(times[(mode, "exact")]), statistics.median(times[(mode, "echo")])
        print(f"  {mode:5s} exact sum : {exact:8.2f} ms (median of the rounds)")
        print(f"  {mode:5s} Echo {args.bits}-bit: {echo:8.2f} ms" + ("  (with norms)" if args.norms else ""))
        print(f"  {mode:5s} ratio     : {echo / exact:8.3f}x, rounds {min(ratios[mode]):.3f} .. "
              f"{max(ratios[mode]):.3f}  (goal <= 1.3x)")

if __name__ == "__main__":
    main()
