"""Healthy: AdamW with a linear warm-up schedule (LambdaLR), the usual transformer recipe.

The first step compiles without the optimizer's state (AdamW creates exp_avg/exp_avg_sq then);
the schedule changes the Python float lr every step, which torch_xla passes as device data (it
starts above 0: a warm-up from exactly 0.0 would bake the special scalar 0 into the first
graph). One graph for step 1 on, reused.
"""

import torch
import torch_xla

STEPS, WARMUP = 12, 4
dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 32)
).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / WARMUP) * 0.99)
for _step in range(STEPS):
    x = torch.randn(8, 32).to(dev)
    loss = (model(x) - x).pow(2).mean()
    loss.backward()
    opt.step()
    sched.step()
    opt.zero_grad()
    torch_xla.sync()
print(f"final loss {loss.item():.4f}")
