// kernels/onednn: each level's engine runs the oneDNN kernels a CPU of that
// level runs, whatever this machine has. This suite runs in every level's
// test program, so v2/ and v3/ prove their GEMMs are oneDNN's SSE4.1 and
// AVX2 ones even on an AVX-512 machine; without the limit, both say the
// machine's best (on the Xeon with AMX where this was written:
// avx512_core_amx for every level).
#include <gtest/gtest.h>

#include <string>

#include "kernels/gemm.h"
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
