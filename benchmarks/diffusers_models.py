"""diffusers' denoisers under `fullgraph=True`, as diffusers' docs compile them, rewrite beside
torch.compile in one run: the first call (trace + compile + run) and a steady step.

Run: .venv/bin/python benchmarks/diffusers_models.py

Small random-init configs (no downloads): UNet2D, the VAE, PixArt. First calls: rewrite's
python backend beside torch.compile(backend="eager") -- the two front ends alone -- median of 5
fresh compiles each; steady steps: rewrite's python backend and both compilers with Inductor,
best of 5 rounds, beside eager. One thread.
"""
from __future__ import annotations

import copy
import os
import platform
import statistics
import time
import warnings

os.environ.setdefault("REWRITE_PERSISTENT_CACHE", "off")

import torch
import torch._dynamo

import rewrite

warnings.simplefilter("ignore")
torch.set_num_threads(1)


def models():
    import diffusers
    torch.manual_seed(0)
    unet = diffusers.UNet2DModel(sample_size=32, in_channels=3, out_channels=3, layers_per_block=1,
                                 block_out_channels=(32, 64), down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                                 up_block_types=("AttnUpBlock2D", "UpBlock2D"), norm_num_groups=8,
                                 attention_head_dim=8).eval()
    vae = diffusers.AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
                                  up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(32, 64),
                                  latent_channels=4, norm_num_groups=8, sample_size=32, layers_per_block=1).eval()
    pixart = diffusers.PixArtTransformer2DModel(num_attention_heads=4, attention_head_dim=16, in_channels=4,
                                                out_channels=8, num_layers=2, cross_attention_dim=64,
                                                sample_size=16, patch_size=2, norm_num_groups=1, caption_channels=32,
                                                interpolation_scale=1, use_additional_conditions=False).eval()
    return [
        ("UNet2D", unet, lambda m: m(torch.randn(1, 3, 32, 32), torch.tensor([10])).sample),
        ("VAE", vae, lambda m: m(torch.randn(1, 3, 32, 32)).sample),
        ("PixArt", pixart, lambda m: m(torch.randn(1, 4, 16, 16), encoder_hidden_states=torch.randn(1, 8, 32),
                                      timestep=torch.tensor([5])).sample),
    ]


def compiled(model, compiler: str, backend: str | None):
    made = copy.deepcopy(model)
    if compiler == "rewrite":
        rewrite.reset()
        return rewrite.jit(made, fullgraph=True, backend=backend)
    torch._dynamo.reset()
    return torch.compile(made, fullgraph=True, backend=backend or "inductor")


def first_call(model, call, compiler: str, backend: str | None) -> float:
    fn = compiled(model, compiler, backend)
    t = time.perf_counter()
    call(fn)
    return time.perf_counter() - t


def step(fn, call, reps=20) -> float:
    for _ in range(3):
        call(fn)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(reps):
            call(fn)
        best = min(best, (time.perf_counter() - t) / reps)
    return best


def main() -> None:
    print(f"# {time.strftime('%Y-%m-%d')} {platform.machine()} Python {platform.python_version()} "
          f"torch {torch.__version__}, fullgraph=True, one thread\n")
    print(f"{'model':8} {'first: rewrite':>15} {'torch.compile':>14} {'ratio':>6}   "
          f"{'step: eager':>12} {'rewrite':>9} {'rewrite+ind.':>13} {'torch.compile':>14}")
    with torch.no_grad():
        for name, model, call in models():
            first_call(model, call, "rewrite", None), first_call(model, call, "torch", "eager")  # (warm imports)
            r = statistics.median(first_call(model, call, "rewrite", None) for _ in range(5))
            t = statistics.median(first_call(model, call, "torch", "eager") for _ in range(5))
            eager = step(model, call)
            python = step(compiled(model, "rewrite", None), call)
            rewrite_inductor = step(compiled(model, "rewrite", "inductor"), call)
            torch_inductor = step(compiled(model, "torch", None), call)
            print(f"{name:8} {r * 1e3:>12.1f} ms {t * 1e3:>11.1f} ms {t / r:>5.1f}x   {eager * 1e3:>9.2f} ms "
                  f"{python * 1e3:>6.2f} ms {rewrite_inductor * 1e3:>10.2f} ms {torch_inductor * 1e3:>11.2f} ms")


if __name__ == "__main__":
    main()
