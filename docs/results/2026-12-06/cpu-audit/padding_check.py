import ortfleet, numpy as np
rng = np.random.default_rng(0)
def compare(model, buckets, x):
    outs = []
    for b in (None, buckets):
        kw = {"buckets": b} if b else {}
        with ortfleet.Fleet(model, devices="cpu", strategy="threads", pool=False, **kw) as f:
            f.start(); assert f.wait(), f.status()
            outs.append(list(f.run(0, {"x": x}).values())[0])
    return np.abs(outs[0] - outs[1]).max(), np.abs(outs[0]).max()
img = rng.uniform(10, 255, (1, 3, 40, 50)).astype(np.float32)     # an image: every pixel positive
print("minmax, image in [10,255], 40x50 padded to 64x64: max|diff| %.3g of %.3g" % compare("./minmax.onnx", {"x.2": [32, 64], "x.3": [32, 64]}, img))
img2 = rng.uniform(-1, 1, (1, 3, 40, 50)).astype(np.float32)
print("minmax, inputs in [-1,1] (what the check feeds): max|diff| %.3g of %.3g" % compare("./minmax.onnx", {"x.2": [32, 64], "x.3": [32, 64]}, img2))
lp = np.log(rng.dirichlet(np.ones(8), size=(1, 20))).astype(np.float32)  # log-probabilities: all negative
print("submax, log-probabilities, seq 20 padded to 32: max|diff| %.3g of %.3g" % compare("./submax.onnx", {"x.1": [16, 32, 64]}, lp))
