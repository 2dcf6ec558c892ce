#!/usr/bin/env bash
# Registers per thread, spill bytes and stack frame of every CUDA kernel of the library, as ptxas
# reports them at compile time (no GPU needed): the first thing to look at after changing a kernel,
# since registers decide how many blocks fit per multiprocessor (launch bounds, launch.h).
#   scripts/kernel_resources.sh [BUILD_DIR] [FILTER]   (default build-resources; FILTER: a regex on
#                                                       the kernel name, e.g. 'owner.*true')
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(realpath -m "${1:-$root/build-resources}")
filter=${2:-.}
command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]] || { echo "kernel_resources: nvcc not found" >&2; exit 1; }
mkdir -p "$dir"
cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DECHO_BUILD_TESTS=OFF \
      -DECHO_BUILD_MODEL=OFF -DECHO_CUDA_RESOURCE_USAGE=ON >"$dir/configure.log" 2>&1 ||
  { tail -20 "$dir/configure.log"; exit 1; }
# Recompile the CUDA sources so that ptxas speaks again.
find "$dir/cuda" -name '*.cu.o' -delete 2>/dev/null || true
cmake --build "$dir" -j "$(nproc)" --target echo_cuda >"$dir/resources.log" 2>&1 ||
  { grep -E "error" "$dir/resources.log" | head -20; exit 1; }
python3 - "$dir/resources.log" "$filter" <<'PY'
import re, subprocess, sys
log, pattern = sys.argv[1], re.compile(sys.argv[2])
entries, entry, props = [], None, None
for line in open(log):
    m = re.search(r"Compiling entry function '(\S+)'", line)
    if m:
        entry = {"name": m.group(1)}
        entries.append(entry)
        continue
    m = re.search(r"Function properties for (\S+)", line)
    if m:
        props = m.group(1)
        continue
    m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
    if m and entry is not None and props == entry["name"]:
        entry["stack"], entry["spill_st"], entry["spill_ld"] = m.groups()
        continue
    m = re.search(r"Used (\d+) registers", line)
    if m and entry is not None and "regs" not in entry:
        entry["regs"] = m.group(1)
names = [e["name"] for e in entries]
try:
    demangled = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                               check=True).stdout.splitlines()
except (OSError, subprocess.CalledProcessError):
    demangled = names
def short(n):
    n = re.sub(r"echo::cuda::(owner_detail::|\(anonymous namespace\)::)?", "", n)
    n = re.sub(r"\(echo::DType\)(\d)", lambda m: ("f32", "bf16", "f16")[int(m.group(1))], n)
    n = n.replace("(int)", "").replace("(bool)", "")
    return re.sub(r"\(echo::cuda::CallArgs(, bool)?\)", "", n)
rows = sorted({(short(d), e.get("regs", "?"), e.get("spill_st", "?"), e.get("spill_ld", "?"), e.get("stack", "?"))
               for d, e in zip(demangled, entries) if pattern.search(short(d))})
print(f"{'kernel':70s} {'regs':>5s} {'spill st':>9s} {'spill ld':>9s} {'stack':>6s}")
for r in rows:
    print(f"{r[0]:70s} {r[1]:>5s} {r[2]:>9s} {r[3]:>9s} {r[4]:>6s}")
PY
