"""GPU checks (skipped without a CUDA device): the exact all-reduce on the GPU equals the CPU
reference bit for bit, and a tensor-parallel forward on the GPU gives the same bits eager,
under torch.compile and replayed from a CUDA graph. The Echo kernel's own checks join these when
the extension has its CUDA entry point."""
import numpy as np
import pytest
import torch

import echotk
from echotk import _C
from conftest import bits

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("ranks", [1, 3, 8])
def test_exact_allreduce_on_the_gpu_equals_the_reference(dtype, ranks):
    torch.manual_seed(ranks)
    x = (torch.randn(ranks, 4099) * torch.logspace(-3, 3, 4099)).to(echotk._allreduce.TORCH_DTYPES[dtype])
    cpu = echotk.ExactAllReduce(ranks, dtype=dtype)(x)
    gpu = echotk.ExactAllReduce(ranks, dtype=dtype, device="cuda")(x.cuda())
    np.testing.assert_array_equal(bits(cpu), bits(gpu))


def test_a_tensor_on_another_device_is_refused():
    ar = echotk.ExactAllReduce(2, device="cuda")
    with pytest.raises(ValueError, match="cpu"):
        ar(torch.zeros(2, 8, dtype=torch.bfloat16))


def test_echo_on_cuda_needs_the_cuda_build():
    if _C.HAS_CUDA:
        pytest.skip("this build has the CUDA emulation kernel")
    with pytest.raises(RuntimeError, match="built without CUDA"):
        echotk.AllReduce(ranks=4, device="cuda")


def test_tp_forward_compiled_and_graph_replayed_give_eager_bits():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2)
    model = transformers.LlamaForCausalLM(cfg).cuda().eval()
    ar = echotk.ExactAllReduce(4, device="cuda")
    echotk.tensor_parallel(model, ranks=4, allreduce=ar)
    ids = torch.randint(0, 97, (1, 12), device="cuda")
    with torch.no_grad():
        eager = model(input_ids=ids, use_cache=False).logits.clone()
        compiled = torch.compile(model)(input_ids=ids, use_cache=False).logits
        np.testing.assert_array_equal(bits(eager), bits(compiled))
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            model(input_ids=ids, use_cache=False)  # warm-up outside the graph
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = model(input_ids=ids, use_cache=False).logits
        graph.replay()
        torch.cuda.synchronize()
        np.testing.assert_array_equal(bits(eager), bits(out))
