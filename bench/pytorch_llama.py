"""A ggtrain preset's Llama trained in PyTorch, for side-by-side speed comparison.

Same model as ggtrain's (RMSNorm, adjacent-pair RoPE, GQA, SwiGLU, tied head),
same batch, AdamW; prints one line: tokens/s and peak RSS. bf16 is
torch.autocast on the CPU (bf16 matmuls, float master weights).
Usage: python3 pytorch_llama.py THREADS [fp32|bf16] [STEPS] [s15|smol135]
"""
import math
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# vocab, d_model, layers, heads, kv heads, d_ff, seq_len, batch, RoPE base (ggtrain's presets)
PRESETS = {
    "s15": (4096, 288, 6, 6, 6, 768, 256, 8, 10000.0),
    "smol135": (49152, 576, 30, 9, 3, 1536, 512, 4, 100000.0),
}
PRESET = sys.argv[4] if len(sys.argv) > 4 else "s15"
V, D, L, H, KV, FF, T, B, ROPE_BASE = PRESETS[PRESET]
HD = D // H


def rope_tables(t, hd, base=ROPE_BASE):
    inv = base ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    ang = torch.arange(t, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.cos(ang).float(), torch.sin(ang).float()


def rope(x, cos, sin):  # x [B, T, H, HD], adjacent pairs
    x0, x1 = x[..., 0::2], x[..., 1::2]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)


MASKS = {}


def causal_mask(t):
    if t not in MASKS:
        MASKS[t] = torch.ones(t, t, dtype=torch.bool).triu(1)
    return MASKS[t]


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.w, self.eps = nn.Parameter(torch.ones(d)), eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.w


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.n1, self.n2 = RMSNorm(D), RMSNorm(D)
        self.q, self.k = nn.Linear(D, H * HD, bias=False), nn.Linear(D, KV * HD, bias=False)
        self.v, self.o = nn.Linear(D, KV * HD, bias=False), nn.Linear(H * HD, D, bias=False)
        self.g, self.u = nn.Linear(D, FF, bias=False), nn.Linear(D, FF, bias=False)
        self.d = nn.Linear(FF, D, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        h = self.n1(x)
        q = rope(self.q(h).view(b, t, H, HD), cos, sin).transpose(1, 2)
        k = rope(self.k(h).view(b, t, KV, HD), cos, sin).transpose(1, 2)
        v = self.v(h).view(b, t, KV, HD).transpose(1, 2)
        if KV != H:
            k, v = k.repeat_interleave(H // KV, 1), v.repeat_interleave(H // KV, 1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True) if hasattr(
            F, "scaled_dot_product_attention") else self.attn(q, k, v, t)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, H * HD))
        h = self.n2(x)
        return x + self.d(F.silu(self.g(h)) * self.u(h))

    @staticmethod
    def attn(q, k, v, t):
        # the scale folded into q (not a pass over the T x T scores), one cached mask
        s = (q * (1.0 / math.sqrt(HD))) @ k.transpose(-1, -2)
        return torch.softmax(s.masked_fill(causal_mask(t), float("-inf")), -1) @ v


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.norm = RMSNorm(D)
        cos, sin = rope_tables(T, HD)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)
        for p in self.parameters():  # the same init as ggtrain: N(0, 0.02) matrices
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx, targets):
        x = self.emb(idx)
        for blk in self.blocks:
            x = blk(x, self.cos, self.sin)
        logits = self.norm(x) @ self.emb.weight.t()
        return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))


def main():
    threads = int(sys.argv[1])
    precision = sys.argv[2] if len(sys.argv) > 2 else "fp32"
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = Llama()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
    warmup, steps = 2, int(sys.argv[3]) if len(sys.argv) > 3 else 8
    for s in range(warmup + steps):
        if s == warmup:
            t0 = time.perf_counter()
        data = torch.randint(0, V, (B, T + 1))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = model(data[:, :-1], data[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    dt = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"pytorch {torch.__version__} {PRESET} {precision} threads {threads}: "
          f"{B * T * steps / dt:8.0f} tokens/s  {dt / steps:.3f} s/step  loss {loss.item():.3f}  "
          f"peak RSS {rss:.0f} MiB")


if __name__ == "__main__":
    main()
