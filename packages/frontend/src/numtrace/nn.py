"""A small set of layers written with plain NumPy ops, so that they trace like user code.

Weights are float32 by default and drawn from a seeded generator (``seed=``), so
models are reproducible. Nodes recorded inside these layers point at this file's
lines, just as a user's own module would.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from collections.abc import Sequence as SequenceType
from typing import Any

import numpy as np

from .module import Module, Parameter


def _rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _check_positive(name: str, value: Any) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


class Linear(Module):
    """``y = x @ weight.T + bias`` with ``weight`` of shape (out_features, in_features)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, dtype: Any = np.float32,
                 seed: int | np.random.Generator | None = None):
        super().__init__()
        self.in_features = _check_positive("in_features", in_features)
        self.out_features = _check_positive("out_features", out_features)
        rng = _rng(seed)
        bound = 1.0 / math.sqrt(in_features)
        self.weight = Parameter(rng.uniform(-bound, bound, (out_features, in_features)), dtype=dtype)
        self.bias = Parameter(rng.uniform(-bound, bound, out_features), dtype=dtype) if bias else None

    def forward(self, x: Any) -> Any:
        y = x @ self.weight.T
        return y + self.bias if self.bias is not None else y

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Conv2d(Module):
    """2-D convolution of NCHW input by im2col: strided slices stacked, then one matmul.

    Supports ``stride`` and zero ``padding`` (ints or pairs); no dilation or groups.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int, int],
                 stride: int | tuple[int, int] = 1, padding: int | tuple[int, int] = 0, bias: bool = True, *,
                 dtype: Any = np.float32, seed: int | np.random.Generator | None = None):
        super().__init__()
        self.in_channels = _check_positive("in_channels", in_channels)
        self.out_channels = _check_positive("out_channels", out_channels)
        self.kernel_size = _pair("kernel_size", kernel_size, 1)
        self.stride = _pair("stride", stride, 1)
        self.padding = _pair("padding", padding, 0)
        rng = _rng(seed)
        kh, kw = self.kernel_size
        bound = 1.0 / math.sqrt(in_channels * kh * kw)
        self.weight = Parameter(rng.uniform(-bound, bound, (out_channels, in_channels, kh, kw)), dtype=dtype)
        self.bias = Parameter(rng.uniform(-bound, bound, out_channels), dtype=dtype) if bias else None

    def forward(self, x: Any) -> Any:
        if x.ndim != 4:
            raise ValueError(f"Conv2d expects NCHW input (4 dimensions), got {x.ndim}")
        ph, pw = self.padding
        if ph or pw:
            x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
        kh, kw = self.kernel_size
        sh, sw = self.stride
        _, channels, height, width = x.shape
        out_h = (height - kh) // sh + 1
        out_w = (width - kw) // sw + 1
        if out_h <= 0 or out_w <= 0:
            raise ValueError(f"Conv2d: input {height}x{width} (padded) is smaller than the kernel {kh}x{kw}")
        patches = [x[:, :, i:i + sh * (out_h - 1) + 1:sh, j:j + sw * (out_w - 1) + 1:sw]
                   for i in range(kh) for j in range(kw)]
        cols = np.stack(patches, axis=2)  # N, C, kh*kw, out_h, out_w
        cols = cols.reshape(-1, self.in_channels * kh * kw, out_h * out_w)
        weight = self.weight.reshape(self.out_channels, self.in_channels * kh * kw)
        y = (weight @ cols).reshape(-1, self.out_channels, out_h, out_w)
        if self.bias is not None:
            y = y + self.bias.reshape(self.out_channels, 1, 1)
        return y

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, "
                f"padding={self.padding}")


def _pair(name: str, value: Any, minimum: int) -> tuple[int, int]:
    pair = (value, value) if isinstance(value, (int, np.integer)) else tuple(value)
    if len(pair) != 2 or not all(isinstance(v, (int, np.integer)) and v >= minimum for v in pair):
        raise ValueError(f"{name} must be an int >= {minimum} or a pair of them, got {value!r}")
    return int(pair[0]), int(pair[1])


class LayerNorm(Module):
    """Normalizes over the trailing ``normalized_shape`` dims, then scales and shifts."""

    def __init__(self, normalized_shape: int | SequenceType[int], eps: float = 1e-5,
                 elementwise_affine: bool = True, *, dtype: Any = np.float32):
        super().__init__()
        shape = ((normalized_shape,) if isinstance(normalized_shape, (int, np.integer))
                 else tuple(normalized_shape))
        self.normalized_shape = tuple(_check_positive("normalized_shape", d) for d in shape)
        self.eps = float(eps)
        self.weight = Parameter(np.ones(self.normalized_shape), dtype=dtype) if elementwise_affine else None
        self.bias = Parameter(np.zeros(self.normalized_shape), dtype=dtype) if elementwise_affine else None

    def forward(self, x: Any) -> Any:
        axes = tuple(range(-len(self.normalized_shape), 0))
        mean = x.mean(axis=axes, keepdims=True)
        centered = x - mean
        var = (centered * centered).mean(axis=axes, keepdims=True)
        y = centered / np.sqrt(var + self.eps)
        if self.weight is not None:
            y = y * self.weight + self.bias
        return y

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}"


class Dropout(Module):
    """Zeroes each element with probability ``p`` in training mode (scaling the rest); identity in eval."""

    def __init__(self, p: float = 0.5):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"Dropout probability must be in [0, 1), got {p}")
        self.p = float(p)

    def forward(self, x: Any) -> Any:
        if not self.training or self.p == 0.0:
            return x
        keep = np.random.random(x.shape) >= self.p  # recorded as a nondeterministic node when traced
        return np.where(keep, x / (1.0 - self.p), 0.0).astype(x.dtype)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class Embedding(Module):
    """Rows of ``weight`` (num_embeddings, embedding_dim) picked by integer indices."""

    def __init__(self, num_embeddings: int, embedding_dim: int, *, dtype: Any = np.float32,
                 seed: int | np.random.Generator | None = None):
        super().__init__()
        self.num_embeddings = _check_positive("num_embeddings", num_embeddings)
        self.embedding_dim = _check_positive("embedding_dim", embedding_dim)
        self.weight = Parameter(_rng(seed).standard_normal((num_embeddings, embedding_dim)), dtype=dtype)

    def forward(self, indices: Any) -> Any:
        if indices.dtype.kind not in "iu":
            raise TypeError(f"Embedding expects integer indices, got {indices.dtype}")
        return np.take(self.weight, indices, axis=0)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"


class ReLU(Module):
    """``max(x, 0)`` elementwise."""

    def forward(self, x: Any) -> Any:
        return np.maximum(x, 0)


class GELU(Module):
    """GELU with the tanh approximation (NumPy has no erf)."""

    def forward(self, x: Any) -> Any:
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * (x * x * x))
        return 0.5 * x * (1.0 + np.tanh(inner))


class ModuleList(Module):
    """Submodules held in a list (named "0", "1", ...), so their state is registered and traced.

    A plain Python list of modules is invisible to ``Module``: its parameters would be frozen
    into a trace as constants.
    """

    def __init__(self, modules: Any = ()):
        super().__init__()
        for module in modules:
            self.append(module)

    def append(self, module: Module) -> ModuleList:
        if not isinstance(module, Module):
            raise TypeError(f"{type(self).__name__} item {len(self)} is a {type(module).__name__}, "
                            "not a numtrace.Module")
        setattr(self, str(len(self)), module)
        return self

    def __len__(self) -> int:
        return len(self._modules)

    def __getitem__(self, i: int) -> Module:
        return list(self._modules.values())[i]

    def __iter__(self) -> Iterator[Module]:
        return iter(list(self._modules.values()))


class Sequential(ModuleList):
    """Runs its submodules in order; they are named "0", "1", ..."""

    def __init__(self, *modules: Module):
        super().__init__(modules)

    def forward(self, x: Any) -> Any:
        for module in self._modules.values():
            x = module(x)
        return x
