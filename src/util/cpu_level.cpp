#include "util/cpu_level.h"

#include <utility>

namespace ggtrain {

namespace {

// The features each level adds to the one below, as __builtin_cpu_supports
// names them (it also checks that the OS saves the AVX and AVX-512 registers).
struct Need {
  int level;  // 2, 3, 4
  const char* feature;
};
constexpr Need kNeeds[] = {
    {2, "sse3"},     {2, "ssse3"},    {2, "sse4.1"},   {2, "sse4.2"},   {2, "popcnt"},     {3, "avx"},
    {3, "avx2"},     {3, "fma"},      {3, "f16c"},     {3, "bmi"},      {3, "bmi2"},       {4, "avx512f"},
    {4, "avx512bw"}, {4, "avx512cd"}, {4, "avx512dq"}, {4, "avx512vl"}, {4, "avx512vnni"}, {4, "avx512bf16"},
};

int level_number(const std::string& level) { return level == "v2" ? 2 : level == "v3" ? 3 : level == "v4" ? 4 : 0; }

bool cpu_supports(const std::string& feature) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  // __builtin_cpu_supports takes string literals only: one case each.
  static const std::pair<const char*, bool> known[] = {
      {"sse3", __builtin_cpu_supports("sse3")},
      {"ssse3", __builtin_cpu_supports("ssse3")},
      {"sse4.1", __builtin_cpu_supports("sse4.1")},
      {"sse4.2", __builtin_cpu_supports("sse4.2")},
      {"popcnt", __builtin_cpu_supports("popcnt")},
      {"avx", __builtin_cpu_supports("avx")},
      {"avx2", __builtin_cpu_supports("avx2")},
      {"fma", __builtin_cpu_supports("fma")},
      {"bmi", __builtin_cpu_supports("bmi")},
      {"bmi2", __builtin_cpu_supports("bmi2")},
      {"f16c", __builtin_cpu_supports("f16c")},
      {"avx512f", __builtin_cpu_supports("avx512f")},
      {"avx512bw", __builtin_cpu_supports("avx512bw")},
      {"avx512cd", __builtin_cpu_supports("avx512cd")},
      {"avx512dq", __builtin_cpu_supports("avx512dq")},
      {"avx512vl", __builtin_cpu_supports("avx512vl")},
      {"avx512vnni", __builtin_cpu_supports("avx512vnni")},
      {"avx512bf16", __builtin_cpu_supports("avx512bf16")},
  };
  for (const auto& [name, has] : known)
    if (feature == name) return has;
#else
  (void)feature;  // the levels are x86-64's; other CPUs have one build
#endif
  return false;
}

}  // namespace

const std::vector<CpuLevel>& cpu_levels() {
  static const std::vector<CpuLevel> levels = {
      {"v2", "x86-64-v2: SSE4.2, POPCNT; scalar kernels", "SSE41"},
      {"v3", "x86-64-v3: AVX2, FMA, F16C", "AVX2"},
      {"v4", "x86-64-v4: AVX-512, VNNI, BF16", ""},
  };
  return levels;
}

std::string missing_cpu_feature(const std::string& level) {
  for (const Need& n : kNeeds)
    if (n.level <= level_number(level) && !cpu_supports(n.feature)) return n.feature;
  return "";
}

#ifndef GGTRAIN_CPU_LEVEL
#define GGTRAIN_CPU_LEVEL "native"
#endif

const char* built_cpu_level() { return GGTRAIN_CPU_LEVEL; }

std::string built_cpu_description() {
  for (const auto& l : cpu_levels())
    if (built_cpu_level() == std::string(l.name)) return l.description;
  if (built_cpu_level() == std::string("native")) return "built for the CPU it was compiled on (-march=native)";
#if defined(__aarch64__)
  // The hand-written kernels are x86's; on arm64 their scalar paths run,
  // with what the compiler vectorizes for NEON (always present on Armv8-A).
  return "built for arm64 (Armv8-A, NEON by the compiler); scalar kernels";
#else
  return "built for the compiler's default target; scalar kernels";
#endif
}

}  // namespace ggtrain
