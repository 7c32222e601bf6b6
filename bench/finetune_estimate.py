#!/usr/bin/env python3
"""What a LoRA step of the qwen3-0.6b shape (rank 16, batch 4 x 512, the
real 151936-row vocabulary) should run at on machines we do not have: an
8-core laptop and a 32-core Xeon with AMX. An estimate on paper, not a
measurement; bench/results.md says which inputs were measured.

The step measured here (bench_train's profile) splits into three parts,
and each moves to the other machine by its own limit:
  - the matrix products oneDNN runs (q/k/v, attn_output, gate/up, down,
    head): cores x per-core GEMM rate, times a parallel efficiency for
    many cores (the step's matrices split into smaller blocks per core);
  - attention (ggtrain's own kernel on the vector units): cores x the
    per-core vector rate;
  - the rest (LoRA's rank-16 products, norms, activations, the loss, the
    optimizer: streaming work): cores, or the memory bandwidth, whichever
    is the slower.
Usage: python3 bench/finetune_estimate.py
"""

# Measured here, 2026-12-07: 2 cores of an AMD EPYC (Zen 4). Milliseconds
# per step by part at 2 threads (bench_train --preset qwen3-0.6b --vocab
# 151936 --lora 16 --batch 4 --seq-len 512; bf16 with --held-base bf16);
# per-core GEMM rates on the step's shapes at 1 thread and the STREAM
# triad at 2 threads (bench_gemm 1, bench_gemm 2).
HERE = dict(
    cores=2,
    tokens=4 * 512,
    triad_gbps=48.6,
    fp32=dict(gemm_ms=25180.4, attention_ms=3327.0, rest_ms=1793.8, core_gemm=108.2),
    bf16=dict(gemm_ms=13116.6, attention_ms=1632.2, rest_ms=1742.4, core_gemm=205.5),
)

# The other machines. A ratio of 1.0 is this machine's core.
MACHINES = [
    dict(name="8-core laptop (Zen 4, DDR5-5600 x 2)", cores=8,
         # the same core; a laptop holds a lower all-core clock under load
         # than this server part: 0.85 (assumption)
         fp32=dict(core_gemm=0.85 * 108.2, attention=0.85),
         bf16=dict(core_gemm=0.85 * 205.5, attention=0.85),
         gemm_efficiency=0.9,
         triad_gbps=63.0),  # 89.6 GB/s peak, STREAM ~70% of it (assumption)
    dict(name="32-core Xeon with AMX (DDR5-4800 x 8)", cores=32,
         # fp32: the Xeon cores of bench/results.md ran sgemm at 143-150
         # GFLOP/s on one core (measured); attention likewise 145/108.
         fp32=dict(core_gemm=145.0, attention=145.0 / 108.2),
         # bf16 GEMMs on AMX: 1024 bf16 FLOP a cycle a core at ~2.0 GHz is
         # 2 TFLOP/s; oneDNN on these mid-sized products assumed at 30% of
         # it (no session had an AMX machine with bf16 measured). Attention
         # stays on AVX512_BF16, whose dot products there run at the fp32
         # FMA rate (measured 81 GFLOP/s a core on a Xeon without AMX).
         bf16=dict(core_gemm=600.0, attention=145.0 / 205.5),
         gemm_efficiency=0.75,
         triad_gbps=230.0),  # 307 GB/s peak, STREAM ~75% (assumption)
]


def parts_ms(m, precision):
    h, p, q = HERE, HERE[precision], m[precision]
    gemm = p["gemm_ms"] * h["cores"] * p["core_gemm"] / (m["cores"] * q["core_gemm"] * m["gemm_efficiency"])
    attention = p["attention_ms"] * h["cores"] / (m["cores"] * q["attention"])
    rest = max(p["rest_ms"] * h["cores"] / m["cores"], p["rest_ms"] * h["triad_gbps"] / m["triad_gbps"])
    return gemm, attention, rest


def main():
    print("| machine | precision | tokens/s | GEMM ms | attention ms | rest ms |")
    print("|---|---|---|---|---|---|")
    for precision in ("fp32", "bf16"):
        p = HERE[precision]
        step = p["gemm_ms"] + p["attention_ms"] + p["rest_ms"]
        print(f"| here (2 Zen 4 cores, measured) | {precision} | {HERE['tokens'] / step * 1e3:.0f} | "
              f"{p['gemm_ms']:.0f} | {p['attention_ms']:.0f} | {p['rest_ms']:.0f} |")
        for m in MACHINES:
            gemm, attention, rest = parts_ms(m, precision)
            print(f"| {m['name']} | {precision} | {HERE['tokens'] / (gemm + attention + rest) * 1e3:.0f} | "
                  f"{gemm:.0f} | {attention:.0f} | {rest:.0f} |")


if __name__ == "__main__":
    main()
