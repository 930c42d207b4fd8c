"""The W1-W4 workloads of cpu_workloads.py rewritten in torch, for peers.py's torch.compile column."""

from __future__ import annotations

import math

import torch
from cpu_workloads import D_MODEL, HEADS, SEQ


def w1(a, b, c, d):
    return (a * b + c) * torch.exp(-d) / (1 + torch.abs(a))


def w1_out(a, b, c, d, out):
    out.copy_((a * b + c) * torch.exp(-d) / (1 + torch.abs(a)))


def mlp(x, w1_, b1, w2, b2, w3, b3):
    h = torch.relu(x @ w1_ + b1)
    h = torch.relu(h @ w2 + b2)
    return torch.softmax(h @ w3 + b3, dim=-1)


def encoder(x, g1, b1, wqkv, bqkv, wo, bo, g2, b2, wf1, bf1, wf2, bf2):
    seq, dm, heads = SEQ, D_MODEL, HEADS
    dh = dm // heads
    h = torch.nn.functional.layer_norm(x, (dm,), g1, b1, 1e-5)
    qkv = h @ wqkv + bqkv
    q = qkv[:, :dm].reshape(seq, heads, dh).permute(1, 0, 2)
    k = qkv[:, dm:2 * dm].reshape(seq, heads, dh).permute(1, 2, 0)
    v = qkv[:, 2 * dm:].reshape(seq, heads, dh).permute(1, 0, 2)
    p = torch.softmax((q @ k) * (1.0 / math.sqrt(dh)), dim=-1)
    x = x + ((p @ v).permute(1, 0, 2).reshape(seq, dm) @ wo + bo)
    u = torch.nn.functional.layer_norm(x, (dm,), g2, b2, 1e-5) @ wf1 + bf1
    u = 0.5 * u * (1 + torch.tanh(0.7978845608028654 * (u + 0.044715 * u * u * u)))
    return x + (u @ wf2 + bf2)


def w4(x, y):
    for _ in range(100):
        x = x * 1.0001 + y
    return x


FUNCTIONS = {"w1": w1, "w1_out": w1_out, "mlp": mlp, "encoder": encoder, "w4": w4}
