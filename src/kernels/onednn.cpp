#include "kernels/onednn.h"

#include <dnnl.h>

#include <cctype>
#include <cstdlib>
#include <string>

#include "util/cpu_level.h"
#include "util/error.h"

namespace ggtrain::kernels {

namespace {

struct IsaName {
  dnnl_cpu_isa_t isa;
  const char* name;  // ONEDNN_MAX_CPU_ISA's spelling
};
// oneDNN 2.6's instruction sets, lowest first.
constexpr IsaName kIsas[] = {
    {dnnl_cpu_isa_sse41, "SSE41"},
    {dnnl_cpu_isa_avx, "AVX"},
    {dnnl_cpu_isa_avx2, "AVX2"},
    {dnnl_cpu_isa_avx2_vnni, "AVX2_VNNI"},
    {dnnl_cpu_isa_avx512_mic, "AVX512_MIC"},
    {dnnl_cpu_isa_avx512_mic_4ops, "AVX512_MIC_4OPS"},
    {dnnl_cpu_isa_avx512_core, "AVX512_CORE"},
    {dnnl_cpu_isa_avx512_core_vnni, "AVX512_CORE_VNNI"},
    {dnnl_cpu_isa_avx512_core_bf16, "AVX512_CORE_BF16"},
    {dnnl_cpu_isa_avx512_core_amx, "AVX512_CORE_AMX"},
};

bool user_set_a_limit() {
  for (const char* var : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"})
    if (const char* v = std::getenv(var); v && *v) return true;
  return false;
}

void limit_once() {
  if (user_set_a_limit()) return;
  for (const CpuLevel& level : cpu_levels()) {
    if (built_cpu_level() != std::string(level.name) || !*level.onednn_max_isa) continue;
    for (const IsaName& i : kIsas)
      if (std::string(i.name) == level.onednn_max_isa) {
        // Fails only once oneDNN has dispatched, which every caller's going
        // through here first rules out.
        if (dnnl_set_max_cpu_isa(i.isa) != dnnl_success)
          fail("oneDNN: cannot limit it to {} for CPU level {}: it was used before", i.name, level.name);
        return;
      }
    fail("oneDNN: CPU level {} names an instruction set oneDNN 2.6 does not have: {}", level.name,
         level.onednn_max_isa);
  }
}

}  // namespace

void limit_onednn_to_build_level() {
  static const bool done = (limit_once(), true);
  (void)done;
}

std::string onednn_isa() {
  limit_onednn_to_build_level();
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  std::string name = "all";  // oneDNN's answer where it found none of its sets
  for (const IsaName& i : kIsas)
    if (i.isa == isa) name = i.name;
  for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

}  // namespace ggtrain::kernels
