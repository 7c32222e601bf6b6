#pragma once
// The x86-64 levels ggtrain is built for when it is not built for one
// machine (-DGGTRAIN_NATIVE=ON): each level is a complete build of the
// engine (`ggtrain-v2`, `-v3`, `-v4`), and `ggtrain` starts the highest one
// this CPU runs, as ggml loads the best of its CPU backend variants.
//   v2: SSE4.2, POPCNT (x86-64-v2): the scalar paths of the kernels
//   v3: + AVX2, FMA, F16C, BMI2 (x86-64-v3): the AVX2 paths
//   v4: + AVX-512 F/BW/CD/DQ/VL (x86-64-v4), VNNI and BF16: the AVX-512 paths
// Code here is built for the baseline: it runs on any x86-64 CPU.
#include <string>
#include <vector>

namespace ggtrain {

struct CpuLevel {
  const char* name;  // "v3"
  const char* description;  // "x86-64-v3: AVX2, FMA, F16C"
  // The highest instruction set oneDNN may use in this level's engine, as
  // ONEDNN_MAX_CPU_ISA spells it ("AVX2"); "" for no limit. oneDNN picks its
  // kernels at run time, so without it every level would run the machine's
  // best GEMMs, not the ones a CPU of that level runs.
  const char* onednn_max_isa;
};

// Every level, lowest first.
const std::vector<CpuLevel>& cpu_levels();

// The first feature `level` needs that this CPU (and OS) lacks, e.g.
// "avx512_bf16"; "" when it has them all. Unknown levels need nothing
// ("native", "generic" builds).
std::string missing_cpu_feature(const std::string& level);

// The level this build of the engine was compiled for ("v3", or "native" /
// "generic" for one-machine builds) and its description.
const char* built_cpu_level();
std::string built_cpu_description();

}  // namespace ggtrain
