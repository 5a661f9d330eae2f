"""L-BFGS, whose step calls the closure (forward and backward) several times and reads values
on the host between them.

Each read cuts the step into graphs; in the first two steps L-BFGS makes graphs of several
structures (its history fills up), each compiled once, most run once. From then on they are all
reused: warm-up, however many graphs the first steps cut, never a recompilation in steady state.
The reads themselves are torch's L-BFGS (its line search decides on the host): sync findings
inside torch, with what avoids them.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)).to(dev)
opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4, history_size=3)
x, y = torch.randn(32, 8).to(dev), torch.randn(32, 1).to(dev)


def closure():
    opt.zero_grad()
    loss = (model(x) - y).pow(2).mean()
    loss.backward()
    return loss


for _step in range(12):
    opt.step(closure)
    torch_xla.sync()
print(f"loss {closure().item():.4f}")
