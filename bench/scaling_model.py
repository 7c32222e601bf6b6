#!/usr/bin/env python3
"""The data-parallel scaling model of docs/scaling.md: bytes exchanged per
step and expected scaling efficiency, for s15, SmolLM2-135M and a 1B model
(Llama-3.2-1B's shape) at 8, 64 and 512 ranks on 25 and 400 Gb/s links.

It is a model, not a measurement. Its inputs (edit them here):
  - per-rank compute speed and per-rank batch (weak scaling: each rank keeps
    its micro-batch, the global batch grows with N);
  - the all-reduce cost: a bandwidth-optimal all-reduce (ring or
    Rabenseifner: each rank sends and receives 2(N-1)/N x S bytes for S
    bytes of gradients) plus 2 log2(N) message latencies per bucket;
  - the effective per-rank bandwidth: the link rate, capped by the software
    path's ceiling measured here with bench_dp (TCP all-reduce bus bandwidth).
Usage: python3 bench/scaling_model.py [TCP_CEILING_GBps] [ALPHA_us] [RANK_GFLOPs]
"""
import math
import sys

# Calibration (docs/scaling.md says where each number comes from).
TCP_CEILING = float(sys.argv[1]) * 1e9 if len(sys.argv) > 1 else 3.5e9  # B/s, bench_dp over TCP, 1 MB
ALPHA = float(sys.argv[2]) * 1e-6 if len(sys.argv) > 2 else 30e-6       # s per message step, bench_dp TCP 4 KB
# model FLOP/s of one rank: a 2-core rank like the one measured, ~70% MFU of
# 344 GFLOP/s sgemm (bench/results.md)
RANK_FLOPS = float(sys.argv[3]) * 1e9 if len(sys.argv) > 3 else 240e9
BUCKET = 1 << 22    # floats per bucket at most (parallel/zero.h)
TOKENS_PER_RANK = 2048  # per step (s15: 8 x 256; smol135: 4 x 512; 1B: 1 x 2048)


def model(name, vocab, d, layers, heads, kv_heads, ff, seq, tied=True):
    dh = d // heads
    per_layer = 2 * d + d * heads * dh * 2 + 2 * d * kv_heads * dh + 3 * d * ff
    embed = vocab * d
    params = embed + layers * per_layer + d + (0 if tied else embed)
    matmul = layers * (d * heads * dh * 2 + 2 * d * kv_heads * dh + 3 * d * ff) + embed  # head counted
    flops_per_token = 6 * matmul + 12 * layers * d * seq
    block_buckets = layers * math.ceil(per_layer / BUCKET)
    other_buckets = math.ceil(embed / BUCKET) + 1 + (0 if tied else math.ceil(embed / BUCKET))
    return dict(name=name, params=params, flops=flops_per_token, seq=seq, buckets=block_buckets + other_buckets,
                last=(embed + d) * 4)  # bytes reduced only after backward (embeddings, output norm)


MODELS = [
    model("s15", 4096, 288, 6, 6, 6, 768, 256),
    model("SmolLM2-135M", 49152, 576, 30, 9, 3, 1536, 512),
    model("1B (Llama-3.2-1B shape)", 128256, 2048, 16, 32, 8, 8192, 2048),
]
LINKS = [("25 Gb/s", 25e9 / 8), ("400 Gb/s", 400e9 / 8)]


def allreduce_seconds(bytes_, n, bw, buckets):
    return 2 * (n - 1) / n * bytes_ / bw + buckets * 2 * math.log2(n) * ALPHA


def main():
    print(f"calibration: TCP ceiling {TCP_CEILING / 1e9:.2f} GB/s, alpha {ALPHA * 1e6:.0f} us, "
          f"rank {RANK_FLOPS / 1e9:.0f} GFLOP/s, {TOKENS_PER_RANK} tokens per rank per step\n")
    print("| model | parameters | gradient bytes S | sent+received per rank per step (N=8 / 64 / 512) | buckets |")
    print("|---|---|---|---|---|")
    for m in MODELS:
        s = 4 * m["params"]
        per = " / ".join(f"{2 * (n - 1) / n * s / 1e6:,.1f} MB" for n in (8, 64, 512))
        print(f"| {m['name']} | {m['params'] / 1e6:,.1f} M | {s / 1e6:,.1f} MB | {per} each way | {m['buckets']} |")
    print()
    print("Efficiency = compute / (compute + exposed all-reduce); each cell: no overlap / with overlap "
          "(all-reduce time per step)\n")
    print("| model | compute per step | link | N = 8 | N = 64 | N = 512 |")
    print("|---|---|---|---|---|---|")
    for m in MODELS:
        comp = TOKENS_PER_RANK * m["flops"] / RANK_FLOPS
        bwd = comp * 2 / 3  # backward is ~2/3 of the step's FLOPs
        for link_name, link in LINKS:
            caps = [("", link)] if link <= TCP_CEILING else [(", TCP as measured", TCP_CEILING), (", line rate", link)]
            for cap_name, bw in caps:
                cells = []
                for n in (8, 64, 512):
                    t = allreduce_seconds(4 * m["params"], n, bw, m["buckets"])
                    last = allreduce_seconds(m["last"], n, bw, 1)  # reduced after backward: never hidden
                    exposed = max(t - bwd, last)
                    cells.append(f"{comp / (comp + t):.1%} / {comp / (comp + exposed):.1%} ({t:.3g} s)")
                print(f"| {m['name']} | {comp:.3g} s | {link_name}{cap_name} | " + " | ".join(cells) + " |")

if __name__ == "__main__":
    main()
