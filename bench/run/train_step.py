# SPDX-License-Identifier: Apache-2.0
# Benchmark program of bench_run.sh: a PyTorch training step of a moderately sized MLP
# (4096x4096 Linear layers, batch 256, MSE loss, SGD): 5 warm-up steps, then 50 timed steps.
# Prints "step_ms=<ms per step> total_ms=<ms>"; exits 77 when torch cannot be imported or has
# no GPU.
import sys
import time

t_start = time.perf_counter()
try:
    import torch
except Exception as e:  # noqa: BLE001
    print("skip: import torch failed: %s" % e)
    sys.exit(77)
if not torch.cuda.is_available():
    print("skip: torch.cuda.is_available() is False")
    sys.exit(77)

torch.manual_seed(0)
dev = torch.device("cuda")
width, batch, layers = 4096, 256, 4
mods = []
for _ in range(layers - 1):
    mods += [torch.nn.Linear(width, width), torch.nn.ReLU()]
mods.append(torch.nn.Linear(width, width))
model = torch.nn.Sequential(*mods).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(batch, width, device=dev)
y = torch.randn(batch, width, device=dev)


def step():
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss


for _ in range(5):
    step()
torch.cuda.synchronize()
steps = 50
t0 = time.perf_counter()
for _ in range(steps):
    loss = step()
torch.cuda.synchronize()
step_ms = (time.perf_counter() - t0) * 1000.0 / steps
if not torch.isfinite(loss).item():
    print("loss is not finite")
    sys.exit(1)
print("step_ms=%.3f total_ms=%.3f" % (step_ms, (time.perf_counter() - t_start) * 1000.0))
