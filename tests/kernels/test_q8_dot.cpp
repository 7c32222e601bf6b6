// The Q8_0 dot product of inference (kernels/q8_dot.h): the hardware fp16
// conversion gives the software one's value for every finite half, and the
// vectorised dot equals the per-block scalar one up to the float sum's order.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/number_formats.h"
#include "kernels/q8_dot.h"

using namespace ggtrain;

TEST(Q8Dot, ScaleConversionMatchesSoftware) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint8_t blk[2] = {uint8_t(h & 0xff), uint8_t(h >> 8)};
    const float sw = kernels::fp16_to_fp32(uint16_t(h));
    if (std::isnan(sw)) {
      EXPECT_TRUE(std::isnan(kernels::q8_block_scale(blk))) << h;
      continue;
    }
    ASSERT_EQ(kernels::q8_block_scale(blk), sw) << "half " << h;
  }
}

TEST(Q8Dot, VectorDotEqualsScalarDot) {
  const int64_t n = 32 * 9;
  std::vector<float> w(n), x(n);
  uint64_t s = 12345;
  auto next = [&] {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return float(int64_t(s >> 40) % 2001 - 1000) / 250.f;
  };
  for (int64_t i = 0; i < n; ++i) w[size_t(i)] = next(), x[size_t(i)] = next();
  std::vector<uint8_t> wq(size_t(kernels::q8_0_row_bytes(n))), xq(wq.size());
  kernels::quantize_q8_0(w.data(), wq.data(), size_t(n));
  kernels::quantize_q8_0(x.data(), xq.data(), size_t(n));
  const float v = kernels::dot_q8_0(wq.data(), xq.data(), n), ref = kernels::dot_q8_0_scalar(wq.data(), xq.data(), n);
  ASSERT_TRUE(std::isfinite(v));
  EXPECT_NEAR(v, ref, 1e-5 * std::fabs(ref) + 1e-6);
  double exact = 0;  // and both are the quantized vectors' dot product
  std::vector<float> wd(static_cast<size_t>(n)), xd(static_cast<size_t>(n));
  kernels::dequantize_q8_0(wq.data(), wd.data(), size_t(n));
  kernels::dequantize_q8_0(xq.data(), xd.data(), size_t(n));
  for (int64_t i = 0; i < n; ++i) exact += double(wd[size_t(i)]) * xd[size_t(i)];
  EXPECT_NEAR(ref, exact, 1e-5 * std::fabs(exact) + 1e-5);
}
