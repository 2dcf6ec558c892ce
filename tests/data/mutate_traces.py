#!/usr/bin/env python3
"""Randomly mutated traces through echotk: every run must end by itself with exit 0 or 2.

    python3 tests/data/mutate_traces.py --echotk build/bin/echotk --count 5000 --seed 1 \\
        --jobs 2 --keep build/mutants-failed tests/data/good_*.h5

Each mutant is a copy of one seed trace (chosen at random) with 1-8 random byte changes: a random
byte, a flipped bit, 0x00 or 0xFF at a random offset. It is run through `echotk replay`, or with
--commands through `compare` and `prove --trace` in turn. A run that is killed by a signal, exits
with another code, or takes longer than --timeout seconds is a failure; its file is kept under
--keep. Only the Python standard library is used, so the script runs without a virtual environment.
"""
import argparse
import concurrent.futures
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time


def mutate(data, rng):
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        at = rng.randrange(len(out))
        kind = rng.randrange(4)
        if kind == 0:
            out[at] = rng.randrange(256)
        elif kind == 1:
            out[at] ^= 1 << rng.randrange(8)
        else:
            out[at] = 0x00 if kind == 2 else 0xFF
    return bytes(out)


def command_line(echotk, command, path, work):
    if command == "replay":
        return [echotk, "replay", path, "--out", os.path.join(work, "result.h5"), "--quiet"]
    if command == "compare":
        return [echotk, "compare", path, "--quantizers", "zero-aware", "--gains", "0.75"]
    return [echotk, "prove", "--trace", path]


def run_one(args, index, seed_path, data):
    work = tempfile.mkdtemp(prefix=f"mutant-{index}-", dir=args.work)
    path = os.path.join(work, "trace.h5")
    with open(path, "wb") as f:
        f.write(data)
    command = args.commands[index % len(args.commands)]
    start = time.monotonic()
    try:
        proc = subprocess.run(command_line(args.echotk, command, path, work), capture_output=True,
                              timeout=args.timeout)
        code, stderr = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as e:
        code, stderr = None, e.stderr or b""
    seconds = time.monotonic() - start
    failed = code not in (0, 1, 2) or (code == 1 and command != "prove") or not stderr.isascii()
    contained = b"HDF5 crashed" in stderr or b"did not finish within" in stderr
    if contained and args.save_contained:
        os.makedirs(args.save_contained, exist_ok=True)
        shutil.copyfile(path, os.path.join(args.save_contained, f"mutant-{index}.h5"))
    # `prove` exits 1 when a theorem check fails on the (valid but altered) data, not a reader fault.
    if failed and args.keep:
        os.makedirs(args.keep, exist_ok=True)
        kept = os.path.join(args.keep, f"mutant-{index}.h5")
        shutil.copyfile(path, kept)
        with open(kept + ".txt", "w") as f:
            f.write(f"seed {seed_path}\ncommand {command}\nexit {code}\nseconds {seconds:.2f}\n")
            f.write(stderr.decode("utf-8", "backslashreplace"))
    shutil.rmtree(work, ignore_errors=True)
    return index, command, code, seconds, failed, stderr


def describe(code):
    if code is None:
        return "timeout"
    if code < 0:
        return "signal " + signal.Signals(-code).name
    return f"exit {code}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("seeds", nargs="+", help="valid traces to mutate")
    parser.add_argument("--echotk", required=True)
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=20.0)
    parser.add_argument("--commands", default="replay", help="comma-separated: replay,compare,prove")
    parser.add_argument("--keep", help="directory for the failing mutants and their messages")
    parser.add_argument("--work", default=None, help="directory for the temporary files")
    parser.add_argument("--save-contained", help="directory for the mutants on which HDF5 crashed or "
                        "hung in the child-process check (regression inputs)")
    args = parser.parse_args()
    args.commands = args.commands.split(",")
    args.echotk = os.path.abspath(args.echotk)
    seeds = [(p, open(p, "rb").read()) for p in args.seeds]
    rng = random.Random(args.seed)
    mutants = []
    for i in range(args.count):
        seed_path, data = seeds[rng.randrange(len(seeds))]
        mutants.append((i, seed_path, mutate(data, rng)))

    counts, failures, slowest = {}, 0, 0.0
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_one, args, *m) for m in mutants]
        for done, future in enumerate(concurrent.futures.as_completed(futures), 1):
            index, command, code, seconds, failed, stderr = future.result()
            key = f"{command} {describe(code)}"
            counts[key] = counts.get(key, 0) + 1
            # Refusals that the child-process check made of a crash or a hang inside HDF5.
            for words, label in ((b"HDF5 crashed", "HDF5 crashed in the check"),
                                 (b"did not finish within", "HDF5 timed out in the check")):
                if words in stderr:
                    counts[f"{command} exit 2: {label}"] = counts.get(f"{command} exit 2: {label}", 0) + 1
            slowest = max(slowest, seconds)
            if failed:
                failures += 1
                print(f"FAILED mutant {index} ({command}): {describe(code)} after {seconds:.1f} s",
                      file=sys.stderr)
            if done % 500 == 0:
                print(f"{done}/{args.count} run, {failures} failed", file=sys.stderr, flush=True)
    total = time.monotonic() - start
    print(f"mutants {args.count} (seed {args.seed}, {len(seeds)} seed traces), "
          f"{total:.0f} s with {args.jobs} jobs, slowest run {slowest:.2f} s")
    for key in sorted(counts):
        print(f"  {key:24} {counts[key]}")
    print(f"{args.count - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
