"""python -m echotk COMMAND: `ppl` (perplexity with tensor-parallel emulation, docs/python.md)."""
import sys

USAGE = "usage: python -m echotk ppl [options]   (python -m echotk ppl --help)"


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(USAGE)
        return 0 if len(sys.argv) >= 2 else 2
    if sys.argv[1] != "ppl":
        print(f"echotk: unknown command {sys.argv[1]!r}\n{USAGE}", file=sys.stderr)
        return 2
    from .ppl import main as ppl_main
    return ppl_main(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
