"""GPU paths from Python (skipped where there is no GPU): every GPU from Python, torch tensors in place."""
import numpy as np
import pytest

import ortfleet

pytestmark = pytest.mark.gpu

# TF32 off where GPU outputs are compared with the CPU's: these tests check the data path, and
# TF32's rounding through a ResNet is larger than the tolerance.
EXACT = {"cuda": {"tf32": False}}


def test_every_gpu_starts_from_python(models):
    with ortfleet.Fleet(models["resnet18"]) as fleet:  # all GPUs, the fleet strategy
        fleet.start()
        assert fleet.wait(), fleet.status()
        x = {"input": np.random.default_rng(0).uniform(-1, 1, (1, 3, 64, 64)).astype(np.float32)}
        outs = [next(iter(fleet.run(d, x).values())) for d in fleet.devices]
        for o in outs[1:]:
            np.testing.assert_allclose(o, outs[0], rtol=1e-3, atol=1e-3)


def torch_with_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    return torch


def test_torch_gpu_tensors_are_read_in_place_and_outputs_stay_on_the_gpu(models):
    torch = torch_with_cuda()
    with ortfleet.Fleet(models["mlp"], devices=[0], strategy="threads", config=EXACT) as fleet:
        fleet.start().wait()
        x = torch.rand((1, 64), device="cuda:0") * 2 - 1
        host = fleet.run(0, {"input": x.cpu().numpy()})
        on_gpu = fleet.run(0, {"input": x}, outputs_on_device=True)
        (name, dev), = on_gpu.items()
        t = torch.from_dlpack(dev)
        assert t.is_cuda
        np.testing.assert_allclose(t.cpu().numpy(), host[name], rtol=1e-5, atol=1e-6)


# --- a PyTorch job: every GPU in use, device 0 current, tensors handed over where they live -------

@pytest.fixture(scope="module")
def dynamic_resnet(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpu") / "resnet18-dynamic.onnx"
    return ortfleet.synth_resnet(str(path), depth=18, image_size=32, dynamic_batch=True)


@pytest.fixture(scope="module")
def batch():
    return np.random.default_rng(11).uniform(-1, 1, (2, 3, 32, 32)).astype(np.float32)


@pytest.fixture(scope="module")
def on_cpu(dynamic_resnet, batch):
    """What the CPU execution provider gives for `batch`."""
    with ortfleet.Fleet(dynamic_resnet, devices="cpu", strategy="threads") as fleet:
        assert fleet.start().wait(), fleet.status()
        return {k: v.copy() for k, v in fleet.run("cpu", {"input": batch}).items()}  # copies outlive the fleet


def like_a_pytorch_job(torch):
    """Every GPU initialised and touched (a context on each, as a training job has), device 0 current."""
    torch.cuda.init()
    n = torch.cuda.device_count()
    for i in range(n):
        torch.zeros(1, device=f"cuda:{i}").add_(1)
    torch.cuda.synchronize()
    torch.cuda.set_device(0)
    return n


def assert_outputs_match(got, expected):
    assert got.keys() == expected.keys()
    for k in expected:
        np.testing.assert_allclose(np.asarray(got[k]), expected[k], rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("strategy", ["auto", "threads"])  # auto: one worker per GPU when there are several
def test_a_pytorch_job_feeds_each_gpu_its_own_tensors(dynamic_resnet, batch, on_cpu, strategy):
    torch = torch_with_cuda()
    n = like_a_pytorch_job(torch)
    with ortfleet.Fleet(dynamic_resnet, devices=list(range(n)), strategy=strategy, config=EXACT) as fleet:
        assert fleet.start().wait(), fleet.status()
        for i in range(n):
            x = torch.from_numpy(batch).to(f"cuda:{i}")
            assert_outputs_match(fleet.run(i, {"input": x}), on_cpu)
            assert torch.cuda.current_device() == 0  # the export made device i current only while it ran


@pytest.mark.parametrize("strategy", ["threads", "processes"])  # processes: a worker per GPU, tensors by CUDA IPC
def test_outputs_left_on_each_gpu_are_torch_tensors_there(dynamic_resnet, batch, on_cpu, strategy):
    torch = torch_with_cuda()
    n = like_a_pytorch_job(torch)
    with ortfleet.Fleet(dynamic_resnet, devices=list(range(n)), strategy=strategy, config=EXACT) as fleet:
        assert fleet.start().wait(), fleet.status()
        for i in range(n):
            x = torch.from_numpy(batch).to(f"cuda:{i}")
            host = fleet.run(i, {"input": x})
            on_gpu = fleet.run(i, {"input": x}, outputs_on_device=True)
            assert on_gpu.keys() == host.keys()
            for k in list(on_gpu):
                out = on_gpu.pop(k)
                assert isinstance(out, ortfleet.DeviceTensor)
                assert out.__dlpack_device__() == (2, i)
                t = torch.from_dlpack(out)
                assert t.device == torch.device(f"cuda:{i}")
                assert tuple(t.shape) == tuple(out.shape)
                np.testing.assert_allclose(t.cpu().numpy(), host[k], rtol=1e-5, atol=1e-5)
                # The tensor keeps the output alive after the DeviceTensor is gone.
                del out
                np.testing.assert_allclose(t.cpu().numpy(), host[k], rtol=1e-5, atol=1e-5)
            assert_outputs_match(host, on_cpu)
        counters = fleet.transfer_counters()
        if strategy == "processes":
            # The torch tensors on each worker's GPU never touched host memory, either way.
            x_bytes = batch.nbytes
            assert counters["inputs_ipc_bytes"] == 2 * n * x_bytes, counters
            assert counters["inputs_staged_bytes"] == 0 and counters["inputs_host_bytes"] == 0, counters
            assert counters["outputs_ipc_bytes"] > 0 and counters["outputs_staged_bytes"] == 0, counters
        else:
            assert not any(counters.values()), counters


@pytest.mark.parametrize("strategy", ["auto", "threads"])
def test_cupy_arrays_on_each_gpu(dynamic_resnet, batch, on_cpu, strategy):
    cupy = pytest.importorskip("cupy")
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError:
        pytest.skip("CuPy finds no GPU")
    cupy.cuda.Device(0).use()
    with ortfleet.Fleet(dynamic_resnet, devices=list(range(n)), strategy=strategy, config=EXACT) as fleet:
        assert fleet.start().wait(), fleet.status()
        for i in range(n):
            with cupy.cuda.Device(i):
                x = cupy.asarray(batch)
            assert_outputs_match(fleet.run(i, {"input": x}), on_cpu)
            assert cupy.cuda.Device().id == 0
            # Sessions in this process and workers alike leave outputs on the GPU.
            for k, out in fleet.run(i, {"input": x}, outputs_on_device=True).items():
                y = cupy.from_dlpack(out)
                assert y.device.id == i
                np.testing.assert_allclose(cupy.asnumpy(y), on_cpu[k], rtol=1e-3, atol=1e-3)
