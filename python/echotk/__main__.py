"""python -m echotk COMMAND: `ppl` (perplexity with tensor-parallel emulation, echotk.eval.ppl),
`train` (tensor-parallel training of a small Llama, echotk.train) and `advise` (the cheapest
all-reduce setting within a perplexity budget, echotk.advise); docs/python.md,
docs/python-training.md, docs/advise.md."""
import sys

USAGE = ("usage: python -m echotk ppl [options]     (python -m echotk ppl --help)\n"
         "       python -m echotk train [options]   (python -m echotk train --help)\n"
         "       python -m echotk advise [options]  (python -m echotk advise --help)")
COMMANDS = ("ppl", "train", "advise")


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(USAGE)
        return 0 if len(sys.argv) >= 2 else 2
    if sys.argv[1] not in COMMANDS:
        print(f"echotk: unknown command {sys.argv[1]!r}\n{USAGE}", file=sys.stderr)
        return 2
    if sys.argv[1] == "ppl":
        from .eval.ppl import main as command
    elif sys.argv[1] == "advise":
        from .advise.command import main as command
    else:
        from .train.command import main as command
    return command(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
