"""Pitfall: an evaluation loop that gathers predictions, labels and scores on the device with
``torch.cat``.

Three tensors grow by a batch at every step, so every step's graph has three inputs of a new
length: XLA compiles at every step. All three grow (none takes "a few bucket sizes"); the line
to change is where they grow. Fix: preallocate buffers of the dataset's size and write each batch
at its offset, or keep running counts (correct, total) instead of the predictions.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Linear(16, 4).to(dev)
preds = torch.zeros(0, dtype=torch.long, device=dev)
labels = torch.zeros(0, dtype=torch.long, device=dev)
scores = torch.zeros(0, device=dev)
with torch.no_grad():
    for _step in range(8):
        x, y = torch.randn(8, 16).to(dev), torch.randint(0, 4, (8,)).to(dev)
        out = model(x)
        preds = torch.cat([preds, out.argmax(-1)])  # lazyscope-expect: recompile
        labels = torch.cat([labels, y])
        scores = torch.cat([scores, out.max(-1).values])
        torch_xla.sync()
print(f"accuracy {(preds == labels).float().mean().item():.3f}, mean score {scores.mean().item():.3f}")
