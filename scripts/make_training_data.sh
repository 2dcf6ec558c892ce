#!/usr/bin/env bash
# Regenerates data/training (train.npy, val.npy, manifest.json: the corpora's token ids under
# SmolLM2's tokenizer, State of the Union 2009-2021 held out) byte for byte; python/tests/
# test_training.py checks that it does. Needs echotk, tokenizers and gguf in $PYTHON and the GGUF
# (scripts/setup_model.sh).
#   scripts/make_training_data.sh [corpora dir (default ../shared/corpora)] [out dir (default data/training)]
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
exec "$python" -m echotk.train.data --corpora "${1:-../shared/corpora}" --out "${2:-data/training}"
