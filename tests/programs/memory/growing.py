"""Activations kept on the device across steps and fed back: each step's graph holds more."""

import torch
import torch_xla

device = torch_xla.device()
torch.manual_seed(0)
w = torch.randn(256, 256, device=device)
history = torch.zeros(0, 256, device=device)
for _ in range(6):
    x = torch.randn(64, 256, device=device)
    h = x @ w
    history = torch.cat((history, h))  # keeps every step's activations
    score = history.mean()
    torch_xla.sync()
