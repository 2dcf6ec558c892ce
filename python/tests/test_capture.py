"""echotk.capture writes echo-trace v1 files that echotk replay, compare and prove read."""
import h5py
import numpy as np
import pytest
import torch

import echotk
from conftest import bits
from test_allreduce import run_op
from test_tensor_parallel import make

IDS = torch.tensor([[5, 17, 3, 88, 42, 9, 61], [1, 2, 3, 4, 5, 6, 7]])


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_capture_round_trips_through_echotk_replay(echotk_cli, tmp_path, arch):
    model = make(arch)
    path = tmp_path / "trace.h5"
    with torch.no_grad():
        plain = model(input_ids=IDS[:1]).logits
    echotk.capture(model, IDS, ranks=4, path=str(path))
    with torch.no_grad():  # the model is given back as it was
        np.testing.assert_array_equal(bits(model(input_ids=IDS[:1]).logits), bits(plain))

    with h5py.File(path, "r") as f:
        assert f.attrs["format"] == "echo-trace" and f.attrs["version"] == 1 and f.attrs["ranks"] == 4
        c = f["contributions"][:]
        hidden = f["hidden_states"][:]
        assert f["contributions"].attrs["dtype"] == "bfloat16"
        assert list(f["site_kind"][:]) == [0, 1, 0, 1]
        assert f.attrs["tokens"] * f.attrs["hidden"] == c.shape[3]
    assert c.shape == (2, 4, 4, 7 * 64) and hidden.shape == (2, 5, 7 * 64)
    assert np.all(c.astype(np.float32) == torch.from_numpy(c).bfloat16().float().numpy())  # bf16 values
    if arch == "llama":
        # The residual stream grows by each site's exact all-reduce: z_{k+1} = z_k + y_k.
        y = torch.from_numpy(c).double().sum(2)
        step = torch.from_numpy(hidden[:, 1:] - hidden[:, :-1]).double()
        assert float((step - y).norm() / y.norm()) < 1e-2  # y is the bf16 rounding of the sum

    replayed = tmp_path / "replay.h5"
    echotk_cli("replay", path, "--out", replayed, "--save-outputs", "--quiet")
    with h5py.File(replayed, "r") as f:
        expected = f["outputs"][:, :, 0]
    got, _ = run_op(c, "bfloat16", echotk.Spec())
    np.testing.assert_array_equal(bits(expected), bits(got))
    echotk_cli("compare", path)
    # prove reads it (exit 2 would mean refused); its theorem verdicts are not the point here.
    assert echotk_cli("prove", "--trace", path, check=False).returncode in (0, 1)


def test_capture_keeps_a_tensor_parallel_models_all_reduce(tmp_path):
    model = make("llama")
    ar = echotk.AllReduce(ranks=2)
    echotk.tensor_parallel(model, ranks=2, allreduce=ar)
    echotk.capture(model, IDS[0], ranks=2, path=str(tmp_path / "t.h5"), hidden_states=False)
    with h5py.File(tmp_path / "t.h5", "r") as f:
        assert f["contributions"].shape == (1, 4, 2, 7 * 64) and "hidden_states" not in f
    with pytest.raises(ValueError, match="not 4"):
        echotk.capture(model, IDS, ranks=4, path=str(tmp_path / "u.h5"))
    assert not (tmp_path / "u.h5").exists()
