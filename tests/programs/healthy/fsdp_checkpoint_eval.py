"""Healthy: FSDP training, a consolidated checkpoint, and the model rebuilt from it evaluated at
the end: the shape of pytorch/xla's test_train_mp_mnist_fsdp_with_ckpt.py. The rebuilt model has
other parameter shapes (full tensors, not FSDP's flat shards), so its evaluation compiles graphs
of its own, once each, reused over the evaluation batches: a new phase, not a recompilation."""

import os
import tempfile

import torch
import torch_xla
import torch_xla.core.xla_model as xm
from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP
from torch_xla.distributed.fsdp import consolidate_sharded_model_checkpoints


def make_model():
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))


dev = torch_xla.device()
torch.manual_seed(0)
model = FSDP(make_model().to(dev))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
loss_fn = torch.nn.CrossEntropyLoss()
val = [(torch.randn(16, 32).to(dev), torch.randint(0, 4, (16,)).to(dev)) for _ in range(3)]


def evaluate(net):
    net.eval()
    correct = torch.zeros((), device=dev)
    with torch.no_grad():
        for x, y in val:
            correct += (net(x).argmax(-1) == y).sum()
            torch_xla.sync()
    return correct


for _step in range(8):
    x, y = torch.randn(16, 32).to(dev), torch.randint(0, 4, (16,)).to(dev)
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    torch_xla.sync()
trained = evaluate(model)
prefix = os.path.join(tempfile.mkdtemp(), "final_ckpt")
xm.save({"model": model.state_dict(), "shard_metadata": model.get_shard_metadata()},
        f"{prefix}_rank-00000000-of-00000001.pth", master_only=False)
consolidate_sharded_model_checkpoints(prefix, ckpt_suffix="_rank-*-of-*.pth")
restored = make_model()
restored.load_state_dict(torch.load(f"{prefix}_consolidated.pth")["model"])
restored = restored.to(dev)
rebuilt = evaluate(restored)
print(f"trained {int(trained.item())} / restored {int(rebuilt.item())} of 48 correct")
