"""pstrain.caffe on the GPU: set_mode_gpu runs the net on the GPU engine (each
layer reports a GPU implementation), results match the CPU engine, blob views
synchronise as Caffe's SyncedMemory, and DLPack hands device memory over
without a copy. Skips without a CUDA build or a GPU; bench/gpu_check.sh runs it."""
import numpy as np
import pytest

caffe = pytest.importorskip("pstrain.caffe")
core = caffe._core

pytestmark = pytest.mark.skipif(not core.has_cuda() or core.cuda_device_count() == 0,
                                reason="no GPU (needs a CUDA build and a CUDA device)")

NET = """
name: "g"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 4 dim: 1 dim: 12 dim: 12 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 3 kernel_size: 3 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
layer { name: "ip" type: "InnerProduct" bottom: "conv" top: "ip"
        inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "prob" type: "Softmax" bottom: "ip" top: "prob" }
"""


@pytest.fixture
def nets(tmp_path):
    path = tmp_path / "net.prototxt"
    path.write_text(NET)
    caffe.set_random_seed(3)
    caffe.set_mode_cpu()
    cpu = caffe.Net(str(path), caffe.TEST)
    weights = tmp_path / "w.caffemodel"
    cpu.save(str(weights))
    caffe.set_mode_gpu()
    caffe.set_device(0)
    try:
        gpu = caffe.Net(str(path), caffe.TEST, weights=str(weights))
    finally:
        caffe.set_mode_cpu()
    return cpu, gpu


def test_gpu_net_runs_on_the_gpu_and_matches_the_cpu(nets):
    cpu, gpu = nets
    for layer in gpu.layers[1:]:
        assert layer.implementation.startswith(("gpu", "cudnn")), (layer.type, layer.implementation)
    x = np.random.default_rng(0).random((4, 1, 12, 12), dtype=np.float32)
    expected = cpu.forward(data=x)["prob"].copy()
    got = gpu.forward(data=x)["prob"]
    assert np.abs(got - expected).max() < 1e-5
    # A write through the host view reaches the device at the next forward.
    gpu.blobs["data"].data[...] = 0
    cpu.blobs["data"].data[...] = 0
    assert np.abs(gpu.forward()["prob"] - cpu.forward()["prob"]).max() < 1e-5


def test_dlpack_hands_device_memory_over_without_a_copy(nets):
    _, gpu = nets
    gpu.forward(data=np.ones((4, 1, 12, 12), np.float32))
    view = gpu.blobs["prob"].gpu_data
    assert view.__dlpack_device__() == (2, 0)  # kDLCUDA, device 0
    try:
        import torch
    except ImportError:  # no PyTorch on this machine: the protocol itself is checked above
        return
    t = torch.from_dlpack(view)
    assert t.is_cuda and tuple(t.shape) == (4, 5)
    assert np.allclose(t.cpu().numpy(), gpu.blobs["prob"].data)
    t.mul_(0)  # the same memory: the blob sees it
    assert float(np.abs(gpu.blobs["prob"].data).max()) == 0.0
