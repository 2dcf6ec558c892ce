#!/usr/bin/env bash
# Puts nvml.h (from NVIDIA's nvidia-nvml-dev package on PyPI, matching nvcc's CUDA release) into
# .deps/nvml/include when nvcc is present and its toolkit lacks the header. `echotk bench` uses NVML
# (loaded from the driver at run time) to start every timed row from the same power state; built
# without the header it runs without that. A failed download is reported, not fatal.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.deps/nvml/include
[ -f "$dest/nvml.h" ] && exit 0
nvcc_bin=$(command -v nvcc || true)
[ -z "$nvcc_bin" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc_bin=/usr/local/cuda/bin/nvcc
[ -z "$nvcc_bin" ] && exit 0
toolkit_include=$(dirname "$(dirname "$(readlink -f "$nvcc_bin")")")/include
[ -f "$toolkit_include/nvml.h" ] && exit 0
release=$("$nvcc_bin" --version | sed -n 's/.*release \([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p')
if [ -z "$release" ]; then
  echo "fetch_nvml_header: cannot read the CUDA release from $nvcc_bin --version" >&2
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! python3 -m pip download --no-deps --quiet --disable-pip-version-check -d "$tmp" \
       "nvidia-nvml-dev==${release}.*" >"$tmp/pip.log" 2>&1; then
  echo "fetch_nvml_header: nvidia-nvml-dev ${release}.* not downloaded ($(tail -1 "$tmp/pip.log"));" \
       "echotk bench will run without its power monitor" >&2
  exit 0
fi
mkdir -p "$dest"
python3 - "$tmp" "$dest" <<'PY' || { echo "fetch_nvml_header: nvml.h not extracted; echotk bench will run without its power monitor" >&2; exit 0; }
import glob, os, sys, zipfile
wheel = glob.glob(os.path.join(sys.argv[1], "*.whl"))[0]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.endswith("/include/nvml.h")]
    if not names:
        sys.exit("fetch_nvml_header: no include/nvml.h in " + os.path.basename(wheel))
    part = os.path.join(sys.argv[2], "nvml.h.part")
    with open(part, "wb") as f:
        f.write(z.read(names[0]))
    os.replace(part, os.path.join(sys.argv[2], "nvml.h"))
PY
[ -f "$dest/nvml.h" ] && echo "fetch_nvml_header: $dest/nvml.h from $(basename "$tmp"/*.whl)" >&2
exit 0
