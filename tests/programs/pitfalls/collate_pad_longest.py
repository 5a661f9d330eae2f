"""Pitfall: a collate function that pads each batch to its own longest sequence.

``pad_sequence`` in ``collate`` makes the padded length depend on the batch, so the tensor moved
to the device has a new shape almost every step: XLA compiles again and again. The device sees
the shape at the ``.to(dev)`` line; the choice is made in ``collate``, so the finding names its
``def`` line (the DataLoader's collate function). Fix: pad to a fixed length (or a few bucket
lengths) in ``collate``.
"""

import torch
import torch_xla
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader

LENGTHS = [5, 9, 14, 7, 20, 11, 26, 3, 17, 30, 8, 23]


def collate(seqs):  # lazyscope-expect: recompile
    return pad_sequence(seqs, batch_first=True)  # pads to the longest in this batch


dev = torch_xla.device()
torch.manual_seed(0)
data = [torch.randn(n, 16) for n in LENGTHS]
loader = DataLoader(data, batch_size=2, collate_fn=collate)
model = torch.nn.Linear(16, 16).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for batch in loader:
    x = batch.to(dev)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
