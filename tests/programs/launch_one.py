"""torch_xla.launch: the usual entry point; on XLA:CPU it starts one worker process."""

import torch
import torch_xla
import torch_xla.core.xla_model as xm

STEPS = 5


def _mp_fn(index):
    from counts import report

    dev = torch_xla.device()
    model = torch.nn.Linear(16, 16).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(STEPS):
        x = torch.randn(4, 16).to(dev)
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        xm.mark_step()
    report(STEPS)


if __name__ == "__main__":
    torch_xla.launch(_mp_fn, args=())
