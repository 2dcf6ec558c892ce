#!/usr/bin/env bash
# Regenerates the conformance pack data/conformance/ from the reference (docs/conformance.md):
# echo_make_conformance writes every case's trace and outputs and the manifest into a temporary
# folder, cmake fills in the sha256 of each file, and the result replaces the pack only where it
# is new. A file that exists with different bits is never overwritten: the script lists it and
# exits 1 (a changed reference is a broken contract, not a new pack). Files the pack holds but the
# generator no longer writes are reported the same way. To change a case on purpose, delete its
# two files first; manifest.json is rewritten whenever no file was refused.
#   scripts/make_conformance.sh [BUILD_DIR] [PACK_DIR]   (defaults: build, data/conformance)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
pack=${2:-$root/data/conformance}
tool=$build/bin/echo_make_conformance
if [[ ! -x $tool ]]; then
  cmake --build "$build" -j2 --target echo_make_conformance
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$tool" "$work"
cmake -DPACK="$work" -DMODE=fill -P "$root/scripts/conformance_manifest.cmake"
cmake -DPACK="$work" -DMODE=check -P "$root/scripts/conformance_manifest.cmake" >/dev/null

mkdir -p "$pack"
differ=()
for file in "$work"/*.h5; do
  name=$(basename "$file")
  if [[ -e $pack/$name ]] && ! cmp -s "$file" "$pack/$name"; then differ+=("$name"); fi
done
for file in "$pack"/*.h5; do
  [[ -e $file ]] || continue
  [[ -e $work/$(basename "$file") ]] || differ+=("$(basename "$file") (no longer generated)")
done
if (( ${#differ[@]} )); then
  echo "make_conformance: refusing to overwrite $pack: these files would change:" >&2
  printf '  %s\n' "${differ[@]}" >&2
  exit 1
fi
added=0
for file in "$work"/*.h5; do
  name=$(basename "$file")
  if [[ ! -e $pack/$name ]]; then cp "$file" "$pack/$name"; added=$((added + 1)); fi
done
# The manifest follows from the files and the case table: rewritten once no file was refused.
cp "$work/manifest.json" "$pack/manifest.json"
cmake -DPACK="$pack" -DMODE=check -P "$root/scripts/conformance_manifest.cmake" >/dev/null
echo "make_conformance: $pack holds $(ls "$pack"/*.trace.h5 | wc -l) cases ($added files written, the rest identical)"
