"""A progress bar that shows the loss: ``bar.set_postfix(loss=loss)`` hands the device tensor to
tqdm, which formats it (``str(tensor)``): a host read every step, inside tqdm's code but made by
the user's line that passes the tensor. The fix belongs at that line: pass ``loss.item()``
every N steps, or a float kept on the host."""

import torch
import torch_xla
from tqdm import tqdm

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(32, 32).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
bar = tqdm(range(8), mininterval=0)
for _step in bar:
    x = torch.randn(8, 32).to(dev)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    bar.set_postfix(loss=loss)  # lazyscope-expect: sync
    torch_xla.sync()
