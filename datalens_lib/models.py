"""The conditional DCGAN of the official DataLens code (paper Sec. 5.1, "Models").

Same architecture for every dataset: gf_dim 64, df_dim 32, gfc_dim 1024, dfc_dim 256, the
one-hot label concatenated at every layer. TensorFlow details the official code inherits are
kept: ``SAME`` padding of a 5x5 stride-2 convolution pads 1 before and 2 after (PyTorch's
``padding=2`` is symmetric), BatchNorm always uses batch statistics (eps 1e-5), conv weights are
truncated-normal(0.02), linear/deconv weights normal(0.02), biases 0; the generator ends in a
sigmoid, images are in [0, 1], z ~ U(-1, 1).

``Discriminator`` is the per-teacher reference module; ``datalens_lib.ensemble`` computes the
same function for thousands of teachers at once and is tested against it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

GF_DIM, DF_DIM, GFC_DIM, DFC_DIM = 64, 32, 1024, 256
BN_EPS = 1e-5
KERNEL = 5


def same_pad(x: torch.Tensor) -> torch.Tensor:
    """TF ``SAME`` padding for a 5x5 stride-2 conv on an even-sized input: 1 before, 2 after."""
    return F.pad(x, (1, 2, 1, 2))


def conv_same(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None,
              groups: int = 1) -> torch.Tensor:
    """5x5 stride-2 conv with TF SAME padding (H -> H/2)."""
    return F.conv2d(same_pad(x), w, b, stride=2, groups=groups)


def deconv_same(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
    """Adjoint of :func:`conv_same` (TF ``conv2d_transpose`` with SAME, H -> 2H)."""
    h, wd = x.shape[-2:]
    out = F.conv_transpose2d(x, w, b, stride=2, padding=1)
    return out[..., : 2 * h, : 2 * wd]


def normalise(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor,
              dims: tuple[int, ...] | list[int], stats: torch.Tensor | None = None
              ) -> torch.Tensor:
    """Training-mode BatchNorm with statistics over ``dims`` (biased batch variance, eps 1e-5);
    ``gamma`` and ``beta`` broadcast against ``x``. The one home of the BatchNorm arithmetic
    (generator, discriminator modules and the vectorised teachers of ``ensemble``). With
    ``stats`` the statistics are those of ``stats`` (a reference batch), applied to ``x``.

    The variance is the mean of the centred squares (the two-pass algorithm): the same function
    as ``var(unbiased=False)`` (tested in float64, gradients included), but faster, because
    ATen's ``var`` over strided dimensions runs far below the speed of ``mean`` on the
    project's CPU: ~6% of a teacher step and ~9% of sampling (``benchmarks/README.md``)."""
    if stats is None:
        centred = x - x.mean(dim=dims, keepdim=True)
        var = centred.square().mean(dim=dims, keepdim=True)
    else:
        mean = stats.mean(dim=dims, keepdim=True)
        var = (stats - mean).square().mean(dim=dims, keepdim=True)
        centred = x - mean
    return centred * (torch.rsqrt(var + BN_EPS) * gamma) + beta


def batch_norm(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor,
               groups: int = 1, reference: int = 0) -> torch.Tensor:
    """Training-mode BatchNorm (``normalise``) over each of ``groups`` consecutive equal slices
    of the batch: every slice is normalised with its own statistics. ``reference`` > 0 (with
    one group): every row is normalised with the statistics of the first ``reference`` rows
    only, so the other rows do not affect one another (``Generator.forward``)."""
    if reference:
        if not 0 < reference <= x.shape[0]:
            raise ValueError(f"reference must be in [1, {x.shape[0]}] rows, got {reference}")
        if groups != 1:
            raise ValueError("a reference batch normalises one group only")
        dims = [0] + list(range(2, x.dim()))
        view = [1, -1] + [1] * (x.dim() - 2)
        return normalise(x, gamma.view(view), beta.view(view), dims, stats=x[:reference])
    shape = x.shape
    xg = x.reshape(groups, shape[0] // groups, *shape[1:])
    dims = [1] + list(range(3, xg.dim()))
    view = [1, 1, -1] + [1] * (x.dim() - 2)
    return normalise(xg, gamma.view(view), beta.view(view), dims).reshape(shape)


def cond_concat(x: torch.Tensor, y_onehot: torch.Tensor) -> torch.Tensor:
    """Concatenate the one-hot label as constant feature maps (``conv_cond_concat``)."""
    yb = y_onehot[:, :, None, None].expand(-1, -1, *x.shape[-2:])
    return torch.cat([x, yb], dim=1)


def _trunc_normal_(t: torch.Tensor, std: float = 0.02) -> torch.Tensor:
    return nn.init.trunc_normal_(t, std=std, a=-2 * std, b=2 * std)


class Generator(nn.Module):
    """Student generator G(z, y) (paper Alg. 1's Psi): z ~ U(-1, 1)^z_dim, output in [0, 1]."""

    def __init__(self, z_dim: int, y_dim: int, shape: tuple[int, int, int]):
        super().__init__()
        c, h, w = shape
        if h % 4 or w % 4:
            raise ValueError(f"image height and width must be multiples of 4, got {shape}")
        self.z_dim, self.y_dim, self.shape = z_dim, y_dim, shape
        self.h4, self.w4 = h // 4, w // 4
        self.lin0 = nn.Linear(z_dim + y_dim, GFC_DIM)
        self.bn0 = nn.ParameterDict({"gamma": nn.Parameter(torch.ones(GFC_DIM)),
                                     "beta": nn.Parameter(torch.zeros(GFC_DIM))})
        n1 = GF_DIM * 2 * self.h4 * self.w4
        self.lin1 = nn.Linear(GFC_DIM + y_dim, n1)
        self.bn1 = nn.ParameterDict({"gamma": nn.Parameter(torch.ones(n1)),
                                     "beta": nn.Parameter(torch.zeros(n1))})
        # conv_transpose2d weight layout: [in, out, k, k]
        self.w2 = nn.Parameter(torch.empty(GF_DIM * 2 + y_dim, GF_DIM * 2, KERNEL, KERNEL))
        self.b2 = nn.Parameter(torch.zeros(GF_DIM * 2))
        self.bn2 = nn.ParameterDict({"gamma": nn.Parameter(torch.ones(GF_DIM * 2)),
                                     "beta": nn.Parameter(torch.zeros(GF_DIM * 2))})
        self.w3 = nn.Parameter(torch.empty(GF_DIM * 2 + y_dim, c, KERNEL, KERNEL))
        self.b3 = nn.Parameter(torch.zeros(c))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (self.lin0, self.lin1):
            nn.init.normal_(lin.weight, std=0.02)
            nn.init.zeros_(lin.bias)
        nn.init.normal_(self.w2, std=0.02)
        nn.init.normal_(self.w3, std=0.02)

    def forward(self, z: torch.Tensor, y_onehot: torch.Tensor, groups: int = 1,
                reference: int = 0) -> torch.Tensor:
        """G(z, y). With ``groups`` > 1 the batch is ``groups`` independent batches (one per
        teacher) whose BatchNorm statistics are computed separately, as if G were called once
        per teacher. With ``reference`` = R > 0 every BatchNorm uses the statistics of the
        first R rows (a reference batch) for all rows: given those R rows, each later row is a
        function of its own (z, y) alone, so later rows are i.i.d. whatever their number
        (DP-GAN's private pairs, ``methods.dpgan``)."""
        if reference and not 0 < reference <= len(z):
            raise ValueError(f"reference must be in [1, {len(z)}] rows, got {reference}")
        h = torch.cat([z, y_onehot], 1)
        h = F.relu(batch_norm(self.lin0(h), self.bn0["gamma"], self.bn0["beta"], groups,
                              reference))
        h = torch.cat([h, y_onehot], 1)
        h = F.relu(batch_norm(self.lin1(h), self.bn1["gamma"], self.bn1["beta"], groups,
                              reference))
        h = h.view(-1, GF_DIM * 2, self.h4, self.w4)
        h = deconv_same(cond_concat(h, y_onehot), self.w2, self.b2)
        h = F.relu(batch_norm(h, self.bn2["gamma"], self.bn2["beta"], groups, reference))
        h = deconv_same(cond_concat(h, y_onehot), self.w3, self.b3)
        return torch.sigmoid(h)


def discriminator_shapes(y_dim: int, shape: tuple[int, int, int], df_dim: int = DF_DIM,
                         dfc_dim: int = DFC_DIM) -> dict[str, tuple[int, ...]]:
    """Parameter shapes of one teacher discriminator (``df_dim``, ``dfc_dim``: the official
    DataLens widths by default; carpedm20's DCGAN defaults are 64 and 1024)."""
    c, h, w = shape
    c1 = c + y_dim
    c2 = df_dim + y_dim
    flat = c2 * (h // 4) * (w // 4)
    return {
        "w0": (c1, c + y_dim, KERNEL, KERNEL), "b0": (c1,),
        "w1": (c2, c1 + y_dim, KERNEL, KERNEL), "b1": (c2,),
        "g1": (c2,), "be1": (c2,),
        "w2": (dfc_dim, flat + y_dim), "b2": (dfc_dim,),
        "g2": (dfc_dim,), "be2": (dfc_dim,),
        "w3": (1, dfc_dim + y_dim), "b3": (1,),
    }


def init_discriminator_(params: dict[str, torch.Tensor]) -> None:
    """Official initialisation, in place (works on stacked [N, ...] tensors too)."""
    with torch.no_grad():
        for name, p in params.items():
            if name in ("w0", "w1"):
                _trunc_normal_(p)
            elif name in ("w2", "w3"):
                p.normal_(0.0, 0.02)
            elif name in ("g1", "g2"):
                p.fill_(1.0)
            else:
                p.zero_()


class Discriminator(nn.Module):
    """One teacher discriminator D(x, y) -> logit, the reference for the vectorised ensemble.

    y as constant channels -> conv 5x5/2 to (c + y_dim), LReLU 0.2 -> concat y -> conv 5x5/2 to
    (df_dim + y_dim), BN, LReLU -> flatten, concat y -> linear 256, BN, LReLU -> concat y ->
    linear 1. TF flattens NHWC; this code flattens NCHW, a fixed permutation of the weights.
    """

    def __init__(self, y_dim: int, shape: tuple[int, int, int], df_dim: int = DF_DIM,
                 dfc_dim: int = DFC_DIM):
        super().__init__()
        self.y_dim, self.shape = y_dim, shape
        self.params = nn.ParameterDict({k: nn.Parameter(torch.empty(s)) for k, s in
                                        discriminator_shapes(y_dim, shape, df_dim,
                                                             dfc_dim).items()})
        init_discriminator_(dict(self.params))

    def forward(self, x: torch.Tensor, y_onehot: torch.Tensor) -> torch.Tensor:
        p = self.params
        h = F.leaky_relu(conv_same(cond_concat(x, y_onehot), p["w0"], p["b0"]), 0.2)
        h = conv_same(cond_concat(h, y_onehot), p["w1"], p["b1"])
        h = F.leaky_relu(batch_norm(h, p["g1"], p["be1"]), 0.2)
        h = torch.cat([h.flatten(1), y_onehot], 1)
        h = F.leaky_relu(batch_norm(F.linear(h, p["w2"], p["b2"]), p["g2"], p["be2"]), 0.2)
        h = torch.cat([h, y_onehot], 1)
        return F.linear(h, p["w3"], p["b3"]).squeeze(1)
