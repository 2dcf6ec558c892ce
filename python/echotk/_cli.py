"""What the `python -m echotk` commands share: the spec options of cli/spec_options.cpp (the same
flags, defaults and choices as `echotk ppl`), read into an echotk.Spec."""
from __future__ import annotations

import argparse

from ._spec import Spec, add_spec_arguments, spec_from_arguments

EXIT_BAD_INPUT = 2


def add_spec_options(parser: argparse.ArgumentParser):
    """The options of cli/spec_options.cpp, with its defaults (those of echotk.Spec): one per row
    of the spec table."""
    add_spec_arguments(parser)


def spec_from_args(args) -> Spec:
    """The Spec the parsed spec options (and the command's --dtype) select."""
    return spec_from_arguments(args)
