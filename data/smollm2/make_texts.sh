#!/usr/bin/env bash
# Re-creates the two texts of data/smollm2 from the public-domain corpora in shared/corpora and
# checks them against the committed ones by the sha256 of their uncompressed text (gzip's bytes
# depend on the compressor and its version; SHA256SUMS holds the committed files' own sums).
#   data/smollm2/make_texts.sh [corpora dir (default ../shared/corpora)] [out dir (default
#   build/smollm2-texts; data/smollm2 replaces the committed files, same text, maybe other gzip bytes)]
set -euo pipefail
cd "$(dirname "$0")/../.."
corpora=${1:-../shared/corpora}
out=${2:-build/smollm2-texts}
moby_text_sha=d73063d3e5119fc17d5df9ad9ee15f3c9a35383ed559d872f046c35c4af35e43
sotu_text_sha=c6e2c610c7d3294cadc06c9cef501e1a46adc4098be57d42ad96f73e3833c071
mkdir -p "$out"
python3 - "$corpora" "$out" <<'PY'
import gzip, io, os, shutil, sys
corpora, out = sys.argv[1], sys.argv[2]
def write_gz(path, data):
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=9, mtime=0, filename="") as g:
        g.write(data)
    with open(path + ".part", "wb") as f:
        f.write(buf.getvalue())
    os.replace(path + ".part", path)
moby = os.path.join(out, "moby-dick.txt.gz")
if os.path.abspath(moby) != os.path.abspath(os.path.join(corpora, "moby-dick.txt.gz")):
    shutil.copyfile(os.path.join(corpora, "moby-dick.txt.gz"), moby + ".part")
    os.replace(moby + ".part", moby)
raw = gzip.open(os.path.join(corpora, "state-of-the-union.txt.gz"), "rb").read()
start = raw.index(b"=== 2009_barack_obama_d ===")
write_gz(os.path.join(out, "state-of-the-union-2009-2021.txt.gz"), raw[start:])
PY
check() {
  local got
  got=$(zcat "$1" | sha256sum | cut -d' ' -f1)
  [[ $got == "$2" ]] || { echo "make_texts: $1: uncompressed sha256 $got, expected $2" >&2; exit 1; }
  echo "make_texts: $1 matches (uncompressed sha256 $2)"
}
check "$out/moby-dick.txt.gz" "$moby_text_sha"
check "$out/state-of-the-union-2009-2021.txt.gz" "$sotu_text_sha"
