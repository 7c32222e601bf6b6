"""A ggtrain preset's Llama trained in PyTorch, for side-by-side speed comparison.

Same model as ggtrain's (RMSNorm, adjacent-pair RoPE, GQA, SwiGLU, tied head),
same batch, AdamW; prints one line: tokens/s and peak RSS. bf16 is
torch.autocast on the CPU (bf16 matmuls, float master weights).
Written the way a tuned PyTorch 1.13 CPU run is (no fused attention in 1.13):
q/k/v and gate/up are one Linear each (the same numbers as separate matrices,
fewer and larger GEMMs), RoPE is one complex multiply (adjacent pairs are the
complex view's layout), attention stacks the query heads of a kv head along
rows (GQA without repeat_interleave) and folds scale and causal mask into one
baddbmm, AdamW runs foreach. Run it under compare_pytorch.sh's environment
(OpenMP OpenBLAS, tcmalloc, AVX-512 kernels): in the default one fp32 runs
~4x and bf16 ~2x slower here.
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
G = H // KV  # query heads per kv head


def rope_rotation(t, hd, base=ROPE_BASE):
    """cos + i sin of each (position, pair) angle: [t, hd / 2] complex."""
    inv = base ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    ang = torch.arange(t, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.polar(torch.ones_like(ang), ang).to(torch.complex64)


def rope(x, rot):  # x [B, T, n, HD]; pairs (2i, 2i+1) rotate as one complex number
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], HD // 2, 2))
    return torch.view_as_real(xc * rot[None, :, None, :]).flatten(-2).type_as(x)


def causal_bias(t):
    """Additive mask, tiled for the G query heads stacked along rows: [G * t, t]."""
    mask = torch.ones(t, t, dtype=torch.bool).triu(1)
    return torch.zeros(t, t).masked_fill(mask, float("-inf")).repeat(G, 1)


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
        self.qkv = nn.Linear(D, (H + 2 * KV) * HD, bias=False)  # rows: q, k, v
        self.o = nn.Linear(H * HD, D, bias=False)
        self.gu = nn.Linear(D, 2 * FF, bias=False)  # rows: gate, up
        self.d = nn.Linear(FF, D, bias=False)

    def forward(self, x, rot, bias):
        b, t, _ = x.shape
        qk, v = self.qkv(self.n1(x)).view(b, t, H + 2 * KV, HD).split([H + KV, KV], 2)
        q, k = rope(qk, rot).split([H, KV], 2)
        # head h uses kv head h // G (as repeat_interleave would): its rows go to that kv head's batch
        q = q.transpose(1, 2).reshape(b * KV, G * t, HD)
        k, v = k.transpose(1, 2).reshape(b * KV, t, HD), v.transpose(1, 2).reshape(b * KV, t, HD)
        s = torch.baddbmm(bias, q, k.transpose(1, 2), alpha=1.0 / math.sqrt(HD))
        a = torch.bmm(torch.softmax(s, -1), v).view(b, H, t, HD)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, H * HD))
        g, u = self.gu(self.n2(x)).chunk(2, -1)
        return x + self.d(F.silu(g) * u)


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.norm = RMSNorm(D)
        self.register_buffer("rot", rope_rotation(T, HD))
        self.register_buffer("bias", causal_bias(T))
        for p in self.parameters():  # the same init as ggtrain: N(0, 0.02) matrices
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx, targets):
        x = self.emb(idx)
        for blk in self.blocks:
            x = blk(x, self.rot, self.bias)
        logits = self.norm(x) @ self.emb.weight.t()
        return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))


def loaded(*names):
    """Which of the named libraries this process mapped (the BLAS and allocator in use)."""
    maps = open("/proc/self/maps").read()
    return ",".join(n for n in names if n in maps) or "-"


def main():
    threads = int(sys.argv[1])
    precision = sys.argv[2] if len(sys.argv) > 2 else "fp32"
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = Llama()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1,
                            foreach=True)
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
          f"peak RSS {rss:.0f} MiB  (blas {loaded('openblas-openmp', 'openblas-pthread', 'blas/libblas')}, "
          f"malloc {loaded('tcmalloc', 'jemalloc') if loaded('tcmalloc', 'jemalloc') != '-' else 'glibc'})")


if __name__ == "__main__":
    main()
