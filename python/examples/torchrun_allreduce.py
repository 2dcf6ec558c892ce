"""The Echo all-reduce across processes, one per GPU, as torchrun starts them:

    torchrun --nproc-per-node N python/examples/torchrun_allreduce.py [--n 4194304] [--bits 4] [--calls 8]

Every rank contributes a random bf16 vector of n elements per call; echotk.distributed.AllReduce
gives every rank the same [n]. Rank 0 prints, per call, the relative error against the exact sum
(fp32 over torch.distributed) and the report, then the median time of an Echo call and of torch's
bf16 all_reduce of the same message. Every rank checks that it received the same bits as rank 0.
"""
import argparse
import os

import torch
import torch.distributed as dist

import echotk


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1 << 22, help="elements per rank and call")
    parser.add_argument("--bits", type=int, default=4, choices=(4, 8))
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--transport", default="auto", choices=echotk.distributed.TRANSPORTS)
    args = parser.parse_args()

    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    spec = echotk.Spec(bits=args.bits)
    with echotk.distributed.AllReduce(spec=spec, transport=args.transport) as ar:
        if rank == 0:
            print(f"{world} ranks, {ar.transport} transport, n = {args.n}, {spec.bits} bits, "
                  f"{spec.compensator} compensator")
        g = torch.Generator(device="cuda").manual_seed(1000 + rank)
        same = True
        for call in range(args.calls):
            x = torch.randn(args.n, device="cuda", generator=g).bfloat16()
            out = ar(x)
            exact = x.float()
            dist.all_reduce(exact)
            error = float(torch.linalg.vector_norm(out.float() - exact) / torch.linalg.vector_norm(exact))
            first = out.clone()
            dist.broadcast(first, src=0)
            same &= torch.equal(first.view(torch.int16), out.view(torch.int16))
            if rank == 0:
                r = ar.report
                print(f"call {call}: relative error {error:.4e}, exact path {r.exact_path}, "
                      f"poisoned groups (rank 0's segment) {r.poisoned_groups}")
        echo_ms = median_ms(lambda: ar(x))
        torch_ms = median_ms(lambda: dist.all_reduce(x.clone()))
    flags = torch.tensor([int(same)], device="cuda")
    dist.all_reduce(flags, op=dist.ReduceOp.MIN)
    if rank == 0:
        print(f"every rank received rank 0's bits: {bool(flags.item())}")
        print(f"median per call: Echo {echo_ms:.3f} ms, torch bf16 all_reduce {torch_ms:.3f} ms (with a copy)")
    dist.destroy_process_group()
    raise SystemExit(0 if flags.item() else 1)


def median_ms(fn, iterations=20):
    times = []
    for _ in range(iterations):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


if __name__ == "__main__":
    main()
