#!/usr/bin/env python3
"""Exports torchvision models nobody here wrote to ONNX, random weights (no download on the GPU machine):
EfficientNet-B4 at 380x380 (a conv net of the size issue 31 measured), DeepLab-v3 (ResNet-50) with a
dynamic height and width and a 21-channel output as large as its input (issue 34's segmenter).
Usage: export_models.py OUT_DIR [effb4] [deeplab]"""
import sys
import time

import torch
import torchvision


def export(model, example, path, dynamic_axes=None, output_names=("output",)):
    model.eval()
    start = time.time()
    with torch.no_grad():
        try:
            torch.onnx.export(model, example, path, opset_version=17, input_names=["input"], output_names=list(output_names),
                              dynamic_axes=dynamic_axes, dynamo=False)
        except Exception as e:  # the legacy exporter may be gone: the dynamo one then
            print(f"legacy export failed ({e}); trying dynamo", flush=True)
            torch.onnx.export(model, example, path, opset_version=18, input_names=["input"], output_names=list(output_names),
                              dynamic_axes=dynamic_axes, dynamo=True, external_data=False)
    print(f"wrote {path} in {time.time() - start:.1f} s", flush=True)


class OutOnly(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        return self.m(x)["out"]


def main(out, which):
    torch.manual_seed(0)
    if "effb4" in which:
        export(torchvision.models.efficientnet_b4(weights=None), torch.randn(1, 3, 380, 380), f"{out}/effb4.onnx")
    if "deeplab" in which:
        m = OutOnly(torchvision.models.segmentation.deeplabv3_resnet50(weights=None, weights_backbone=None, num_classes=21, aux_loss=False))
        export(m, torch.randn(1, 3, 512, 512), f"{out}/deeplab.onnx", dynamic_axes={"input": {2: "height", 3: "width"}, "output": {2: "height", 3: "width"}})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] or ["effb4", "deeplab"])
