#!/usr/bin/env python3
"""Whether a refactor kept the machine code: compares each kernel's SASS (instructions and their
encodings, from cuobjdump -sass) of one object or cubin against the union of others, e.g. an old
translation unit against the units it was split into. Exit status 0 when both hold the same kernels
with identical code, 1 otherwise. cuobjdump (and the nvdisasm it runs) come from the CUDA toolkit
or the nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm wheels; CUOBJDUMP names another binary.
A kernel in an anonymous namespace is named by its file's path as well (a hash and the file name),
which a moved file changes: such names are compared without that part.
  scripts/sass_compare.py OLD.o NEW1.o [NEW2.o ...]"""
import os
import re
import subprocess
import sys

INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/")  # an instruction's address comment
ENCODING = re.compile(r"/\* 0x[0-9a-f]{16} \*/")  # an encoding word (the second one has its own line)
# The anonymous namespace of a translation unit, as nvcc mangles it: _GLOBAL__N__<hash>_<n>_<file>_cu_<8 hex>.
ANONYMOUS = re.compile(r"\d+_GLOBAL__N__[0-9a-f]+_\d+_\w+?_cu_[0-9a-f]{8}")


def kernels(path):
    """Maps each kernel's mangled name to its SASS lines (instructions and encodings)."""
    out = subprocess.run([os.environ.get("CUOBJDUMP", "cuobjdump"), "-sass", path], check=True,
                         capture_output=True, text=True).stdout
    funcs, name = {}, None
    for line in out.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            name = ANONYMOUS.sub("(anonymous namespace)", m.group(1))
            funcs[name] = []
        elif name and (INSTRUCTION.search(line) or ENCODING.search(line)):
            funcs[name].append(line.strip())
    return funcs


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    old, new = kernels(argv[1]), {}
    for path in argv[2:]:
        k = kernels(path)
        twice = sorted(set(k) & set(new))
        if twice:
            print(f"sass_compare: {path}: kernel already in an earlier object: {twice[0]}", file=sys.stderr)
            return 1
        new.update(k)
    differ = 0
    for n in sorted(set(old) & set(new)):
        count = sum(1 for line in old[n] if INSTRUCTION.search(line))
        same = old[n] == new[n]
        differ += not same
        print(f"{'identical' if same else 'DIFFERENT'} {count:6d} instructions  {n}")
    only_old, only_new = sorted(set(old) - set(new)), sorted(set(new) - set(old))
    for n in only_old:
        print(f"only in {argv[1]}: {n}")
    for n in only_new:
        print(f"only in the new objects: {n}")
    print(f"{len(set(old) & set(new))} kernels compared: {differ} differ; {len(only_old)} only in the old "
          f"object, {len(only_new)} only in the new ones")
    return 0 if differ == 0 and not only_old and not only_new else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
