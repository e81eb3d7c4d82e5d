"""GPU paths from Python (skipped where there is no GPU): every GPU from Python, torch tensors in place."""
import numpy as np
import pytest

import ortfleet

pytestmark = pytest.mark.gpu


def test_every_gpu_starts_from_python(models):
    with ortfleet.Fleet(models["resnet18"]) as fleet:  # all GPUs, the fleet strategy
        fleet.start()
        assert fleet.wait(), fleet.status()
        x = {"input": np.random.default_rng(0).uniform(-1, 1, (1, 3, 64, 64)).astype(np.float32)}
        outs = [next(iter(fleet.run(d, x).values())) for d in fleet.devices]
        for o in outs[1:]:
            np.testing.assert_allclose(o, outs[0], rtol=1e-3, atol=1e-3)


def test_torch_gpu_tensors_are_read_in_place_and_outputs_stay_on_the_gpu(models):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    with ortfleet.Fleet(models["mlp"], devices=[0], strategy="threads", config={"cuda": {"tf32": False}}) as fleet:
        fleet.start().wait()
        x = torch.rand((1, 64), device="cuda:0") * 2 - 1
        host = fleet.run(0, {"input": x.cpu().numpy()})
        on_gpu = fleet.run(0, {"input": x}, outputs_on_device=True)
        (name, dev), = on_gpu.items()
        t = torch.from_dlpack(dev)
        assert t.is_cuda
        np.testing.assert_allclose(t.cpu().numpy(), host[name], rtol=1e-5, atol=1e-6)
