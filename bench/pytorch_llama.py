"""A ggtrain preset's model trained in PyTorch, for side-by-side speed comparison.

Same model as ggtrain's preset, same batch, AdamW; prints one line: tokens/s
and peak RSS. bf16 is torch.autocast on the CPU (bf16 matmuls, float master
weights). The families, as src/model/architecture.cpp runs them:
  llama (s15, smol135, llama3.2-1b): RMSNorm, adjacent-pair RoPE, GQA,
    SwiGLU, tied head. llama3.2-1b is ggtrain's from-scratch preset: RoPE
    base 500000 and no "llama3" RoPE scaling (ggtrain applies it only with
    init.from's rope_freqs.weight).
  qwen3 (qwen3-0.6b): llama's block with head_dim 128 != d_model / heads, an
    RMSNorm over each query and key head before RoPE (qk-norm), NeoX
    (half-split) RoPE.
  gemma3 (gemma3-270m): head_dim 256, qk-norm, NeoX RoPE, norms as HF writes
    them (x * (1 + w), w starting at 0: ggtrain stores 1 + w, the same
    numbers), pre- and post-norms around attention and the feed-forward (4
    a block), GeGLU with tanh GELU, embedding times sqrt(d_model) on the way
    in (not out: tied head), layer l local unless l % 6 == 5: local layers
    attend to the last 512 positions (themselves included) and rotate with
    base 10000, global ones with 1e6. No logit soft-capping: ggtrain has none
    (it refuses a GGUF that asks for it), nor has Gemma 3.
Every shape number is ggtrain's (src/train/run_config.cpp, preset()): the
released models' shapes at ggtrain's 32000-word vocabulary, or --vocab V
(the released vocabulary: 151936 for Qwen3, 262144 for Gemma 3).
Written the way a tuned PyTorch 1.13 CPU run is (Debian's python3-torch is
1.13: no F.scaled_dot_product_attention, so attention is explicit):
q/k/v and gate/up are one Linear each (the same numbers as separate matrices,
fewer and larger GEMMs), adjacent-pair RoPE is one complex multiply (adjacent
pairs are the complex view's layout), NeoX RoPE is x cos + roll(x) sin with
the sign folded into the sin table, q and k are normed and rotated together,
attention stacks the query heads of a kv head along rows (GQA without
repeat_interleave) and folds scale and causal (or sliding-window) mask into
one baddbmm, AdamW runs foreach. Run it under compare_pytorch.sh's environment
(OpenMP OpenBLAS with AVX-512 kernels, tcmalloc, AVX-512 ATen kernels): in the
default one fp32 runs ~4x and bf16 ~2x slower here (s15, Zen 5), and on a VM
whose CPU OpenBLAS does not recognise its sgemm falls back to SSE3 (Prescott,
~5x slower: the summary line names the kernels in use).

LoRA (--lora R), as PEFT does it: every base weight (block matrices, norms,
embedding = tied head) frozen (requires_grad False: no weight gradients),
rank-R adapters on the seven block matrices q, k, v, o, gate, up, down, each
its own A [R, in] and B [out, R] (A kaiming-uniform(a=sqrt(5)) as PEFT's;
B N(0, 1e-3) instead of PEFT's zeros: the same work either way, but with
B = 0 A's gradient is exactly zero), y = W x + (alpha / R) B (A x) with
alpha = R (bench_train's: scaling 1), dropout 0; AdamW over the adapters
only. The frozen q/k/v and gate/up bases stay fused (one GEMM each; the
adapters are separate all the same); --unfused gives each matrix its own
Linear, as the HF model PEFT wraps has them.

Usage: python3 pytorch_llama.py THREADS [fp32|bf16] [STEPS]
           [s15|smol135|qwen3-0.6b|gemma3-270m|llama3.2-1b]
           [--lora R] [--batch B] [--seq-len T] [--vocab V] [--layers L]
           [--unfused] [--warmup N]
  --batch, --seq-len: the preset's (ggtrain's) by default; --layers: fewer
  blocks than the preset's, for cheap checks only (all else the same).
"""
import argparse
import ctypes
import math
import resource
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# arch, vocab, d_model, layers, heads, kv heads, head dim, d_ff, seq_len, batch, RoPE base, rms eps
# (ggtrain's presets; vocab 32000 is their data.vocab_size)
PRESETS = {
    "s15": ("llama", 4096, 288, 6, 6, 6, 48, 768, 256, 8, 10000.0, 1e-5),
    "smol135": ("llama", 49152, 576, 30, 9, 3, 64, 1536, 512, 4, 100000.0, 1e-5),
    "qwen3-0.6b": ("qwen3", 32000, 1024, 28, 16, 8, 128, 3072, 512, 4, 1e6, 1e-6),
    "gemma3-270m": ("gemma3", 32000, 640, 18, 4, 1, 256, 2048, 512, 4, 1e6, 1e-6),
    "llama3.2-1b": ("llama", 32000, 2048, 16, 32, 8, 64, 8192, 512, 4, 500000.0, 1e-5),
}
# gemma3-270m's local layers: window, every SWA_PATTERN-th layer global, their RoPE base
SWA_WINDOW, SWA_PATTERN, ROPE_BASE_SWA = 512, 6, 10000.0


class Cfg:
    def __init__(self, preset, batch=None, seq_len=None, layers=None, lora=0, unfused=False, vocab=None):
        (self.arch, self.V, self.D, self.L, self.H, self.KV, self.HD, self.FF, self.T, self.B,
         self.base, self.eps) = PRESETS[preset]
        self.B, self.T, self.L = batch or self.B, seq_len or self.T, layers or self.L
        self.V = vocab or self.V
        self.G = self.H // self.KV  # query heads per kv head
        self.qk_norm = self.arch in ("qwen3", "gemma3")
        self.halves = self.arch in ("qwen3", "gemma3")  # NeoX RoPE
        self.gemma = self.arch == "gemma3"
        self.lora, self.unfused = lora, unfused

    def local(self, l):  # ggtrain's Config::is_local_layer
        return self.gemma and l % SWA_PATTERN < SWA_PATTERN - 1


def rope_angles(t, hd, base):
    inv = base ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    return torch.arange(t, dtype=torch.float64)[:, None] * inv[None, :]  # [t, hd / 2]


def rope_rotation(t, hd, base):
    """Adjacent pairs: cos + i sin of each (position, pair) angle, [1, t, 1, hd / 2] complex."""
    ang = rope_angles(t, hd, base)
    return torch.polar(torch.ones_like(ang), ang).to(torch.complex64)[None, :, None, :]


def rope_halves_tables(t, hd, base):
    """NeoX: cos and sign-folded sin, [1, t, 1, hd], for x cos + roll(x, hd / 2) sin."""
    ang = rope_angles(t, hd, base)
    cos, sin = ang.cos(), ang.sin()
    return (torch.cat([cos, cos], -1).float()[None, :, None, :],
            torch.cat([-sin, sin], -1).float()[None, :, None, :])


def rope(x, tab):  # x [B, T, n, HD]; pairs (2i, 2i+1) rotate as one complex number
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], x.shape[-1] // 2, 2))
    return torch.view_as_real(xc * tab).flatten(-2).type_as(x)


def rope_halves(x, tab):  # x [B, T, n, HD]; pairs (i, i + HD/2)
    cos, sin = tab
    x = x.float()
    return x * cos + x.roll(x.shape[-1] // 2, -1) * sin


def attn_bias(t, g, window=0):
    """Additive causal mask (and sliding window: keys > t - window), tiled for the G query
    heads stacked along rows: [G * t, t]."""
    i, j = torch.arange(t)[:, None], torch.arange(t)[None, :]
    hidden = (j > i) | (j <= i - window) if window else j > i
    return torch.zeros(t, t).masked_fill(hidden, float("-inf")).repeat(g, 1)


class RMSNorm(nn.Module):
    """x * rsqrt(mean x^2 + eps) * w, in float; gemma: * (1 + w), w starting at 0."""

    def __init__(self, d, eps, gemma=False):
        super().__init__()
        self.w, self.eps, self.gemma = nn.Parameter(torch.zeros(d) if gemma else torch.ones(d)), eps, gemma

    def forward(self, x):
        x = x.float()  # a no-op on the float residual; bf16 projections under autocast
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1 + self.w if self.gemma else self.w)


def linear(d_in, d_out):  # no init here: Model() initialises every matrix once
    return nn.utils.skip_init(nn.Linear, d_in, d_out, bias=False)


class Proj(nn.Module):
    """The block matrices of one input, out = concat of W_i x (+ B_i A_i x with LoRA): one
    fused Linear (or one each with --unfused), and each matrix its own adapter."""

    def __init__(self, c, d_in, outs):
        super().__init__()
        self.w = nn.ModuleList([linear(d_in, o) for o in outs] if c.unfused else [linear(d_in, sum(outs))])
        self.r = c.lora
        if self.r:
            self.a = nn.ParameterList(nn.Parameter(torch.empty(self.r, d_in)) for _ in outs)
            self.b = nn.ParameterList(nn.Parameter(torch.empty(o, self.r)) for o in outs)
            self.scale = 1.0  # alpha / r, alpha = r as bench_train sets it

    def forward(self, x):
        if self.r and torch.is_autocast_cpu_enabled():
            x = x.to(torch.get_autocast_cpu_dtype())  # cast once, not once per GEMM of x
        ys = [w(x) for w in self.w]
        if self.r:
            d = [F.linear(F.linear(x, a), b) for a, b in zip(self.a, self.b)]
            if len(ys) == 1 and len(d) > 1:  # fused base: the adapters' outputs side by side
                d = [torch.cat(d, -1)]
            ys = [torch.add(y, dy, alpha=self.scale) for y, dy in zip(ys, d)]
        return ys[0] if len(ys) == 1 else torch.cat(ys, -1)


class Block(nn.Module):
    def __init__(self, c, l):
        super().__init__()
        self.c, self.local = c, c.local(l)
        D, H, KV, HD, FF = c.D, c.H, c.KV, c.HD, c.FF
        self.n1, self.n2 = RMSNorm(D, c.eps, c.gemma), RMSNorm(D, c.eps, c.gemma)
        if c.gemma:  # post-norms of the attention and feed-forward outputs
            self.pn1, self.pn2 = RMSNorm(D, c.eps, True), RMSNorm(D, c.eps, True)
        if c.qk_norm:
            self.qn, self.kn = RMSNorm(HD, c.eps, c.gemma), RMSNorm(HD, c.eps, c.gemma)
        self.qkv = Proj(c, D, [H * HD, KV * HD, KV * HD])  # rows: q, k, v
        self.o = Proj(c, H * HD, [D])
        self.gu = Proj(c, D, [FF, FF])  # rows: gate, up
        self.d = Proj(c, FF, [D])

    def qk_normed(self, qk):  # [B, T, H + KV, HD]: each head's row normed, q and k weights apart
        c = self.c
        w = torch.cat([self.qn.w.expand(c.H, c.HD), self.kn.w.expand(c.KV, c.HD)])
        qk = qk.float()
        return qk * torch.rsqrt(qk.pow(2).mean(-1, keepdim=True) + c.eps) * (1 + w if c.gemma else w)

    def forward(self, x, tabs, biases):
        c = self.c
        b, t, _ = x.shape
        H, KV, HD, G = c.H, c.KV, c.HD, c.G
        qk, v = self.qkv(self.n1(x)).view(b, t, H + 2 * KV, HD).split([H + KV, KV], 2)
        if c.qk_norm:
            qk = self.qk_normed(qk)
        tab = tabs[1] if self.local else tabs[0]
        q, k = (rope_halves(qk, tab) if c.halves else rope(qk, tab)).split([H, KV], 2)
        # head h uses kv head h // G (as repeat_interleave would): its rows go to that kv head's batch
        q = q.transpose(1, 2).reshape(b * KV, G * t, HD)
        k, v = k.transpose(1, 2).reshape(b * KV, t, HD), v.transpose(1, 2).reshape(b * KV, t, HD)
        s = torch.baddbmm(biases[1] if self.local else biases[0], q, k.transpose(1, 2), alpha=1.0 / math.sqrt(HD))
        a = torch.bmm(torch.softmax(s, -1), v).view(b, H, t, HD)
        a = self.o(a.transpose(1, 2).reshape(b, t, H * HD))
        x = x + (self.pn1(a) if c.gemma else a)
        g, u = self.gu(self.n2(x)).chunk(2, -1)
        f = self.d((F.gelu(g, approximate="tanh") if c.gemma else F.silu(g)) * u)
        return x + (self.pn2(f) if c.gemma else f)


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.emb = nn.Embedding(c.V, c.D)
        self.blocks = nn.ModuleList(Block(c, l) for l in range(c.L))
        self.norm = RMSNorm(c.D, c.eps, c.gemma)
        if c.halves:
            self.tabs = [rope_halves_tables(c.T, c.HD, c.base), rope_halves_tables(c.T, c.HD, ROPE_BASE_SWA)]
        else:
            self.tabs = [rope_rotation(c.T, c.HD, c.base)] * 2
        self.biases = [attn_bias(c.T, c.G), attn_bias(c.T, c.G, SWA_WINDOW) if c.gemma else None]
        for name, p in self.named_parameters():
            if name.endswith(".w") and p.dim() == 1:  # norms: set by RMSNorm
                continue
            if ".a." in name:  # LoRA A: PEFT's kaiming_uniform_(a=sqrt(5)), i.e. U(+-1/sqrt(in))
                nn.init.kaiming_uniform_(p, a=math.sqrt(5))
            elif ".b." in name:  # LoRA B: small, not zero (see the module docstring)
                nn.init.normal_(p, std=1e-3)
            else:  # the same init as ggtrain: N(0, 0.02) matrices
                nn.init.normal_(p, std=0.02)
        if c.lora:  # the whole base frozen, as bench_train --lora has it
            for name, p in self.named_parameters():
                p.requires_grad_(".a." in name or ".b." in name)

    def forward(self, idx, targets):
        x = self.emb(idx)
        if self.c.gemma:
            x = x * math.sqrt(self.c.D)
        for blk in self.blocks:
            x = blk(x, self.tabs, self.biases)
        logits = self.norm(x) @ self.emb.weight.t()
        return F.cross_entropy(logits.reshape(-1, self.c.V), targets.reshape(-1))

    def matmul_params(self):
        """ggtrain's Config::matmul_params: the block matrices and the head (tied: counted as a GEMM)."""
        return sum(p.numel() for n, p in self.named_parameters()
                   if n.startswith("blocks.") and ".w." in n and p.dim() == 2) + self.c.V * self.c.D


def loaded(*names):
    """Which of the named libraries this process mapped (the BLAS and allocator in use)."""
    maps = open("/proc/self/maps").read()
    return ",".join(n for n in names if n in maps) or "-"


def blas_core():
    """The kernels OpenBLAS chose (its CPU detection can fall back to Prescott, SSE3, in a VM)."""
    try:
        f = ctypes.CDLL("libblas.so.3").openblas_get_corename  # the library torch mapped
        f.restype = ctypes.c_char_p
        return " " + f().decode()
    except (OSError, AttributeError):
        return ""


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("threads", type=int)
    p.add_argument("precision", nargs="?", default="fp32", choices=["fp32", "bf16"])
    p.add_argument("steps", nargs="?", type=int, default=None, help="timed steps (8 for s15, else 3)")
    p.add_argument("preset", nargs="?", default="s15", choices=list(PRESETS))
    p.add_argument("--lora", type=int, default=0, metavar="R", help="LoRA rank (0: full finetuning)")
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--seq-len", type=int, default=None)
    p.add_argument("--vocab", type=int, default=None, help="the released model's (bench_train --vocab)")
    p.add_argument("--layers", type=int, default=None, help="fewer blocks, for checks")
    p.add_argument("--unfused", action="store_true", help="one Linear per block matrix (PEFT's HF layout)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first (bench_train: 2)")
    a = p.parse_intermixed_args()
    if a.steps is None:
        a.steps = 8 if a.preset == "s15" else 3
    return a


def main():
    a = parse()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    c = Cfg(a.preset, a.batch, a.seq_len, a.layers, a.lora, a.unfused, a.vocab)
    model = Model(c)
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, foreach=True)
    B, T, V = c.B, c.T, c.V
    first = None
    for s in range(a.warmup + a.steps):
        if s == a.warmup:
            t0 = time.perf_counter()
        data = torch.randint(0, V, (B, T + 1))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = model(data[:, :-1], data[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        if first is None:
            first = loss.item()
    dt = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    n_params = sum(p.numel() for p in model.parameters())
    mode = f"LoRA r{c.lora} alpha {c.lora}" if c.lora else "full"
    print(f"pytorch {torch.__version__} {a.preset} {a.precision} threads {a.threads}: "
          f"{B * T * a.steps / dt:8.0f} tokens/s  {dt / a.steps:.3f} s/step  loss {loss.item():.3f}  "
          f"peak RSS {rss:.0f} MiB  (blas {loaded('openblas-openmp', 'openblas-pthread', 'blas/libblas')}{blas_core()}, "
          f"malloc {loaded('tcmalloc', 'jemalloc') if loaded('tcmalloc', 'jemalloc') != '-' else 'glibc'})  "
          f"{mode}{', unfused' if c.unfused else ''}, batch {B} x {T}, {c.L} layers, first loss {first:.3f} "
          f"(ln V {math.log(V):.3f}), {model.matmul_params()} matmul params, {n_params} params, "
          f"trainable {sum(p.numel() for p in trainable)}")


if __name__ == "__main__":
    main()
