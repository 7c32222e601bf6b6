// RUN/loss.svg as a user sees it: rendered to PNG by librsvg (rsvg-convert,
// Debian's librsvg2-bin), its validation points must show as red pixels in
// the plot area, also when a run evaluated only once; its axis labels are
// round numbers and it has a title.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstdlib>
#include <regex>
#include <stdexcept>

#include "support/files.h"
#include "support/temp_dir.h"
#include "train/metrics.h"

using namespace ggtrain;
using namespace ggtrain::test_support;

namespace {

// An 8-bit RGB or RGBA PNG (what rsvg-convert writes) decoded to RGB.
struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;
  const uint8_t* at(int x, int y) const { return &rgb[3 * (size_t(y) * size_t(width) + size_t(x))]; }
};

uint32_t be32(const std::string& s, size_t at) {
  return uint32_t(uint8_t(s[at])) << 24 | uint32_t(uint8_t(s[at + 1])) << 16 | uint32_t(uint8_t(s[at + 2])) << 8 |
         uint32_t(uint8_t(s[at + 3]));
}

int paeth(int a, int b, int c) {
  const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

Image read_png(const std::string& path) {
  const std::string f = slurp(path);
  if (f.size() < 8 || f.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) throw std::runtime_error(path + ": not a PNG");
  Image img;
  int channels = 0;
  std::string idat;
  for (size_t at = 8; at + 8 <= f.size();) {
    const uint32_t len = be32(f, at);
    const std::string type = f.substr(at + 4, 4);
    if (type == "IHDR") {
      img.width = int(be32(f, at + 8));
      img.height = int(be32(f, at + 12));
      if (f[at + 16] != 8 || f[at + 20] != 0) throw std::runtime_error(path + ": not 8-bit non-interlaced");
      channels = f[at + 17] == 6 ? 4 : f[at + 17] == 2 ? 3 : 0;
      if (!channels) throw std::runtime_error(path + ": not RGB or RGBA");
    } else if (type == "IDAT") {
      idat += f.substr(at + 8, len);
    }
    at += 12 + len;
  }
  const size_t stride = size_t(img.width) * size_t(channels);
  std::vector<uint8_t> raw((stride + 1) * size_t(img.height));
  uLongf raw_len = raw.size();
  if (uncompress(raw.data(), &raw_len, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) != Z_OK ||
      raw_len != raw.size())
    throw std::runtime_error(path + ": bad image data");
  std::vector<uint8_t> prev(stride, 0), row(stride);
  img.rgb.resize(size_t(img.width) * size_t(img.height) * 3);
  for (int y = 0; y < img.height; ++y) {
    const uint8_t filter = raw[size_t(y) * (stride + 1)];
    const uint8_t* in = &raw[size_t(y) * (stride + 1) + 1];
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= size_t(channels) ? row[i - channels] : 0, b = prev[i],
                c = i >= size_t(channels) ? prev[i - channels] : 0;
      const int p = filter == 0 ? 0 : filter == 1 ? a : filter == 2 ? b : filter == 3 ? (a + b) / 2 : paeth(a, b, c);
      row[i] = uint8_t(in[i] + p);
    }
    for (int x = 0; x < img.width; ++x) {
      // Composited over white, as a viewer shows a transparent pixel.
      const uint8_t* px = &row[size_t(x) * size_t(channels)];
      const int alpha = channels == 4 ? px[3] : 255;
      for (int k = 0; k < 3; ++k)
        img.rgb[3 * (size_t(y) * size_t(img.width) + size_t(x)) + k] =
            uint8_t((px[k] * alpha + 255 * (255 - alpha)) / 255);
    }
    prev = row;
  }
  return img;
}

// Pixels of the validation colour (#d62728) below the legend, over the
// plot area and its margins (a last evaluation sits on the right edge).
int validation_pixels(const Image& img) {
  int n = 0;
  for (int y = 42; y < 380 && y < img.height; ++y)
    for (int x = 55; x < img.width; ++x) {
      const uint8_t* p = img.at(x, y);
      if (std::abs(p[0] - 0xd6) < 40 && std::abs(p[1] - 0x27) < 40 && std::abs(p[2] - 0x28) < 40) ++n;
    }
  return n;
}

Image render(const std::string& svg, const TempDir& tmp, const std::string& name) {
  spit(tmp / (name + ".svg"), svg);
  const std::string cmd = "rsvg-convert '" + tmp / (name + ".svg") + "' -o '" + tmp / (name + ".png") + "'";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd + " (is librsvg2-bin installed?)");
  return read_png(tmp / (name + ".png"));
}

std::vector<std::pair<double, double>> falling_loss(int steps) {
  std::vector<std::pair<double, double>> s;
  for (int i = 1; i <= steps; ++i) s.emplace_back(i, 5.9 * std::exp(-i / 20.0) + 2.1);
  return s;
}

}  // namespace

TEST(LossPlot, OneValidationPointIsVisible) {
  TempDir tmp;
  const std::string svg = train::loss_svg(falling_loss(40), {{40, 2.7}}, "runs/mine: training and validation loss");
  const Image img = render(svg, tmp, "one");
  ASSERT_EQ(img.width, 720);
  EXPECT_GE(validation_pixels(img), 30) << "the single validation loss does not show";
  // Negative control: without its dot, a lone point draws nothing, and the
  // count above sees no red in the plot.
  const std::string no_dots = std::regex_replace(svg, std::regex("<circle[^>]*/>"), "");
  ASSERT_NE(no_dots, svg);
  EXPECT_LT(validation_pixels(render(no_dots, tmp, "no_dots")), 5);
}

TEST(LossPlot, ManyValidationPointsAndATitle) {
  TempDir tmp;
  const std::string svg =
      train::loss_svg(falling_loss(60), {{20, 3.4}, {40, 2.7}, {60, 2.4}}, "runs/mine: training and validation loss");
  EXPECT_GE(validation_pixels(render(svg, tmp, "three")), 3 * 30);
  EXPECT_NE(svg.find(">runs/mine: training and validation loss</text>"), std::string::npos);
}

// Tick labels are round: equal steps of 1, 2 or 5 times a power of ten, so
// "2.5 3 3.5", never "2.41 3.07 3.73".
TEST(LossPlot, AxisLabelsAreRoundNumbers) {
  for (const auto& [lo, hi] :
       std::vector<std::pair<double, double>>{{2.41, 5.96}, {0.013, 0.0171}, {3.0, 3.0}, {120, 980}}) {
    SCOPED_TRACE(std::to_string(lo) + ".." + std::to_string(hi));
    const std::string svg = train::loss_svg({{1, lo}, {2, hi}}, {}, "t");
    std::vector<double> y;
    const std::regex label(R"svg(<text x="55" y="[0-9.]+" text-anchor="end">([^<]+)</text>)svg");
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), label); it != std::sregex_iterator(); ++it)
      y.push_back(std::stod((*it)[1]));
    ASSERT_GE(y.size(), 3u) << svg;
    const double step = y[1] - y[0];
    const double mantissa = step / std::pow(10.0, std::floor(std::log10(step)));
    EXPECT_TRUE(std::abs(mantissa - 1) < 1e-6 || std::abs(mantissa - 2) < 1e-6 || std::abs(mantissa - 5) < 1e-6)
        << "step " << step;
    for (size_t i = 1; i < y.size(); ++i) EXPECT_NEAR(y[i] - y[i - 1], step, step * 1e-6);
    for (double v : y) EXPECT_NEAR(v / step, std::round(v / step), 1e-6) << v;
    // The ticks enclose the data (a flat line: +-0.5 around it), by less
    // than a step on each side.
    const double a = lo < hi ? lo : lo - 0.5, b = lo < hi ? hi : hi + 0.5;
    EXPECT_LE(y.front(), a + 1e-12);
    EXPECT_GT(y.front() + step, a);
    EXPECT_GE(y.back(), b - 1e-12);
    EXPECT_LT(y.back() - step, b);
  }
}
