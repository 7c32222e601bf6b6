#pragma once
// oneDNN's instruction set in this process. oneDNN dispatches on the CPU it
// finds, not on the level this engine was compiled for; the level's engine
// limits it to that level's instruction set (util/cpu_level.h), so
// `GGTRAIN_CPU=v3` on an AVX-512 machine runs the AVX2 GEMMs an AVX2 laptop
// runs, and the level test suites test them.
#include <string>

namespace ggtrain::kernels {

// Limits oneDNN to this build's level once, before its first use; every
// oneDNN caller goes through it. A limit the user set (ONEDNN_MAX_CPU_ISA,
// or its older name DNNL_MAX_CPU_ISA) is left as it is.
void limit_onednn_to_build_level();

// The instruction set oneDNN's kernels use here, in oneDNN's spelling in
// lower case ("avx2", "avx512_core_bf16", "avx512_core_amx", "sse41").
std::string onednn_isa();

}  // namespace ggtrain::kernels
