"""diffusers' models under `fullgraph=True`, as diffusers' own docs compile the denoiser: tiny
random-init configs (no downloads), each compiled run compared with an eager run of the same
model. What they needed: `hasattr(module, ...)` through diffusers' ModelMixin.__getattr__ and
nn.Module's, the truth and membership of a frozenset read from a global dict
(tests/test_attrs_and_sets.py has the general cases)."""
import pytest
import torch

import rewrite

from conftest import assert_same, eager_copy

diffusers = pytest.importorskip("diffusers")


def _unet2d():
    model = diffusers.UNet2DModel(sample_size=8, in_channels=3, out_channels=3, layers_per_block=1,
                                  block_out_channels=(8, 16), down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                                  up_block_types=("AttnUpBlock2D", "UpBlock2D"), norm_num_groups=4,
                                  attention_head_dim=4)
    return model, lambda m, size: m(torch.randn(1, 3, size, size, generator=_gen()), torch.tensor([10])).sample


def _vae():
    model = diffusers.AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
                                    up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(8, 16),
                                    latent_channels=4, norm_num_groups=4, sample_size=8, layers_per_block=1)
    return model, lambda m, size: m(torch.randn(1, 3, size, size, generator=_gen())).sample


def _pixart():
    model = diffusers.PixArtTransformer2DModel(num_attention_heads=2, attention_head_dim=4, in_channels=4,
                                               out_channels=8, num_layers=1, cross_attention_dim=8, sample_size=8,
                                               patch_size=2, norm_num_groups=1, caption_channels=8,
                                               interpolation_scale=1, use_additional_conditions=False)
    return model, lambda m, size: m(torch.randn(1, 4, size, size, generator=_gen()),
                                    encoder_hidden_states=torch.randn(1, 3, 8, generator=_gen()),
                                    timestep=torch.tensor([5])).sample


def _conditional_unet():
    model = diffusers.UNet2DConditionModel(sample_size=8, in_channels=4, out_channels=4, layers_per_block=1,
                                           block_out_channels=(8, 16),
                                           down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                           up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=8,
                                           norm_num_groups=4, attention_head_dim=2)
    return model, lambda m, size: m(torch.randn(1, 4, size, size, generator=_gen()), torch.tensor([10]),
                                    encoder_hidden_states=torch.randn(1, 3, 8, generator=_gen())).sample


def _dit():
    model = diffusers.DiTTransformer2DModel(num_attention_heads=2, attention_head_dim=4, in_channels=4,
                                            out_channels=8, num_layers=1, sample_size=8, patch_size=2,
                                            num_embeds_ada_norm=10, norm_num_groups=1)
    return model, lambda m, size: m(torch.randn(1, 4, size, size, generator=_gen()), timestep=torch.tensor([3]),
                                    class_labels=torch.tensor([1])).sample


def _gen():
    return torch.Generator().manual_seed(0)


MODELS = {"unet2d": (_unet2d, (8, 16)), "vae": (_vae, (8,)), "pixart": (_pixart, (8, 12)),
          "conditional_unet": (_conditional_unet, (8,)), "dit": (_dit, (8,))}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_diffusers_model_compiles_under_fullgraph(name):
    make, sizes = MODELS[name]
    torch.manual_seed(0)
    model, call = make()
    model.eval()
    compiled = rewrite.jit(model, fullgraph=True)
    with torch.no_grad():
        for size in sizes:  # (PixArt's second size: its sin-cos position embedding made again)
            assert_same(call(compiled, size), call(model, size))
    assert all(e.graph_break is None and e.reason is None for e in rewrite.dispatcher_of(compiled).entries)


def test_the_euler_scheduler_loop_stays_a_clear_unsupported_under_fullgraph():
    """Its `len()` of `(timesteps == t).nonzero()` is data-dependent: refused by both compilers;
    without fullgraph the loop gives eager's result."""
    scheduler = diffusers.EulerDiscreteScheduler(num_train_timesteps=100)

    def loop(x):
        for t in scheduler.timesteps:
            x = scheduler.scale_model_input(x, t)
            x = scheduler.step(x * 0.1, t, x).prev_sample
        return x

    x = torch.randn(1, 4, 8, 8)
    scheduler.set_timesteps(4)
    with pytest.raises(rewrite.Unsupported, match="len\\(\\) of a tensor whose shape depends on data"):
        rewrite.jit(eager_copy(loop), fullgraph=True)(x.clone())
    scheduler.set_timesteps(4)
    expected = eager_copy(loop)(x.clone())
    scheduler.set_timesteps(4)
    assert_same(rewrite.jit(eager_copy(loop))(x.clone()), expected)
