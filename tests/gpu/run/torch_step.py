# SPDX-License-Identifier: Apache-2.0
# Working case `torch_step`: a small PyTorch training step on the GPU (Linear+ReLU+Linear, MSE
# loss, SGD, 20 steps). Every kernel PyTorch launches has an image for this GPU, so
# `archguard run` must report no architecture failure. Exits 77 when torch cannot be imported,
# 1 (printing code=<n> when CUDA gave one) when a step fails or the loss does not fall.
import sys

try:
    import torch
except Exception as e:  # noqa: BLE001 - any import problem means the case cannot run here
    print("skip: import torch failed: %s" % e)
    sys.exit(77)

if not torch.cuda.is_available():
    print("torch.cuda.is_available() is False")
    sys.exit(1)
try:
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(256, 64, device=dev)
    y = torch.randn(256, 8, device=dev)
    losses = []
    for _ in range(20):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    torch.cuda.synchronize()
except RuntimeError as e:
    print("training step failed: %s" % e)
    sys.exit(1)
if not losses[-1] < losses[0]:
    print("loss did not fall: %s -> %s" % (losses[0], losses[-1]))
    sys.exit(1)
print("torch_step: ok, loss %.4f -> %.4f on %s" % (losses[0], losses[-1], torch.cuda.get_device_name(0)))
