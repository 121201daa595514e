"""A small PyTorch model under gpumosaic's leases (a 3-layer MLP on synthetic data).

    gpumosaic submit --command "python examples/pytorch_train.py" --steps 3000 \
        --gpu-milli 500 --name mlp

The GPU it sees is the one the placement chose (``CUDA_VISIBLE_DEVICES``); with a
fraction of a GPU it caps its memory to that fraction (Ray does not isolate GPU memory).
The checkpoint holds the step and the model and optimizer tensors as lists (JSON).
Needs ``torch`` (not a gpumosaic dependency).
"""

import os
import sys

try:
    import torch
    from torch import nn
except ImportError:
    sys.exit("examples/pytorch_train.py needs PyTorch: pip install torch")

from gpumosaic.lease import Lease

lease = Lease.from_env()
device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
if device.type == "cuda" and lease.gpu_milli < 1000:
    torch.cuda.set_per_process_memory_fraction(lease.gpu_milli / 1000, 0)
torch.manual_seed(0)
model = nn.Sequential(
    nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
state = lease.load() or {"step": 0}
if "model" in state:
    model.load_state_dict({k: torch.tensor(v) for k, v in state["model"].items()})
    for group, saved in zip(optimizer.param_groups, state["lr"], strict=True):
        group["lr"] = saved
batch = int(os.environ.get("BATCH", "256"))
loss = torch.tensor(0.0)


def snapshot() -> dict:
    """The state to checkpoint (the lease saves it every minute and at each extension)."""
    return {
        **state,
        "model": {k: v.detach().cpu().tolist() for k, v in model.state_dict().items()},
        "lr": [g["lr"] for g in optimizer.param_groups],
    }


for step in lease.steps(start=state["step"], save=snapshot):
    x = torch.randn(batch, 256, device=device)
    y = (x[:, :10].argmax(dim=1)).to(device)
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    state["step"] = step + 1
lease.save(snapshot())
print(f"lease over at step {state['step']}, loss {loss.item():.4f}", flush=True)
