"""DDP training with the model's forward compiled, launched the way DDP users launch it:

    torchrun --standalone --nproc-per-node 2 examples/distributed/train_ddp.py   # (gloo, loopback)
    python examples/distributed/train_ddp.py --spawn 2                     # torch.multiprocessing.spawn

Each rank trains a compiled DDP model and an eager DDP twin on the same batches and checks
that their parameters agree after every step; it prints what compiled.
"""
import os
import socket
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import rewrite


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))


def train(rank: int, world: int, steps: int = 4) -> None:
    compiled, eager = DDP(model()), DDP(model())
    rewrite.jit(compiled)  # the wrapped module's forward compiles; DDP's own forward runs as it is
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (compiled, eager)]
    for step in range(steps):
        torch.manual_seed(1000 * rank + step)  # each rank its own batch
        x, y = torch.randn(8, 16), torch.randn(8, 4)
        for m, opt in zip((compiled, eager), opts):
            opt.zero_grad()
            torch.nn.functional.mse_loss(m(x), y).backward()
            opt.step()
        assert all(torch.equal(p, q) for p, q in zip(compiled.parameters(), eager.parameters())), step
    entries = rewrite.dispatcher_of(compiled).entries
    print(f"rank {rank}/{world}: {steps} steps, parameters equal to eager DDP's; "
          f"compiled entries {len(entries)}, ops {[e.ops for e in entries]}", flush=True)


def _spawned(rank: int, world: int, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    main()


def main() -> None:
    dist.init_process_group("gloo")  # (torchrun's or _spawned's environment)
    try:
        train(dist.get_rank(), dist.get_world_size())
        dist.barrier()  # (both ranks done before either tears the group down: gloo can abort otherwise)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--spawn"]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        world = int(sys.argv[2])
        torch.multiprocessing.spawn(_spawned, args=(world, port), nprocs=world)
    else:
        main()
