// kernels/onednn: each level's engine runs the oneDNN kernels a CPU of that
// level runs, whatever this machine has. This suite runs in every level's
// test program, so v2/ and v3/ prove their GEMMs are oneDNN's SSE4.1 and
// AVX2 ones even on an AVX-512 machine; without the limit, both say the
// machine's best (on the Xeon with AMX where this was written:
// avx512_core_amx for every level).
#include <gtest/gtest.h>

#include <string>

#include "kernels/gemm.h"
#include "kernels/gemm_bf16.h"
#include "kernels/onednn.h"
#include "util/cpu_level.h"

using namespace ggtrain;

TEST(OneDnn, RunsTheInstructionSetOfTheBuildLevel) {
  // A float GEMM first: the limit must hold for oneDNN as the engine meets it.
  float a[4] = {1, 2, 3, 4}, c[4] = {};
  kernels::gemm(false, false, 2, 2, 2, 1.f, a, 2, a, 2, 0.f, c, 2);
  EXPECT_EQ(c[0], 7.f);
  const std::string level = built_cpu_level(), isa = kernels::onednn_isa();
  RecordProperty("onednn_isa", isa);
  std::printf("CPU level %s: oneDNN runs %s\n", level.c_str(), isa.c_str());
  if (level == "v2") EXPECT_EQ(isa, "sse41");
  else if (level == "v3") EXPECT_EQ(isa, "avx2");
  else if (level == "v4") EXPECT_EQ(isa.rfind("avx512_core", 0), 0u) << isa;
  else EXPECT_NE(isa, "") << "level " << level;
}

// A bf16 run asks whether oneDNN has native bf16 GEMMs before its first GEMM
// (the warning about emulated ones): asking must not fix oneDNN's set at the
// CPU's own. It did once, and a v2 or v3 build with train.precision = "bf16"
// then refused to start ("cannot limit it to SSE41 ...: it was used before").
TEST(OneDnn, AskingForNativeBf16FirstKeepsTheLimit) {
  const bool native = kernels::bf16_gemm_is_native();
  const std::string level = built_cpu_level(), isa = kernels::onednn_isa();
  if (level == "v2") {
    EXPECT_EQ(isa, "sse41");
  }
  if (level == "v3") {
    EXPECT_EQ(isa, "avx2");
  }
  if (level == "v2" || level == "v3") {
    EXPECT_FALSE(native) << "no AVX-512 at " << level;
  }
}
