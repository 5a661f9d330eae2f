"""Pitfall: ``torch.stft`` has no XLA lowering: its FFT (``aten::_fft_r2c``) runs on the CPU.

Every step torch_xla copies the signal to the host, runs the FFT there and copies the spectrum
back, cutting the graph around it. Fix: compute the spectrogram in the input pipeline (on the
CPU, before ``.to(dev)``), or express the transform as a matmul with a fixed DFT matrix.
"""

import torch
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
window = torch.hann_window(16).to(dev)
model = torch.nn.Linear(9, 4).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _step in range(6):
    audio = torch.randn(2, 256).to(dev)
    spec = torch.stft(audio, n_fft=16, window=window, return_complex=True)  # lazyscope-expect: fallback
    power = torch.view_as_real(spec).pow(2).sum(-1)
    loss = model(power.transpose(1, 2)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("done")
