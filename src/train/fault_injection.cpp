#include "train/fault_injection.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>

#include "kernels/number_formats.h"
#include "util/error.h"

namespace ggtrain::train {

namespace {

std::set<int64_t> nan_steps() {
  const char* env = std::getenv("GGTRAIN_INJECT_NAN_AT_STEP");
  std::set<int64_t> steps;
  if (!env || !*env) return steps;
  const std::string s(env);
  auto bad = [&]() { fail("GGTRAIN_INJECT_NAN_AT_STEP='{}': expected step numbers such as 5 or 3,4,7-9", s); };
  auto number = [&](std::string_view t) {
    int64_t v = 0;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc() || p != t.data() + t.size() || v < 1) bad();
    return v;
  };
  for (size_t pos = 0; pos <= s.size();) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    std::string_view item(s.data() + pos, end - pos);
    const size_t dash = item.find('-');
    const int64_t a = number(item.substr(0, dash));
    const int64_t b = dash == std::string_view::npos ? a : number(item.substr(dash + 1));
    if (b < a || b - a > 1000000) bad();
    for (int64_t x = a; x <= b; ++x) steps.insert(x);
    pos = end + 1;
  }
  return steps;
}

bool nan_into_grad() {
  const char* env = std::getenv("GGTRAIN_INJECT_NAN_INTO");
  if (!env || !*env || std::string(env) == "loss") return false;
  if (std::string(env) == "grad") return true;
  fail("GGTRAIN_INJECT_NAN_INTO='{}': expected loss or grad", env);
}

void rank_failure(int64_t& rank, int64_t& step) {
  const char* env = std::getenv("GGTRAIN_INJECT_RANK_FAILURE");
  if (!env || !*env) return;
  long long r = -1, s = -1;
  char tail = 0;
  if (std::sscanf(env, "%lld:%lld%c", &r, &s, &tail) != 2 || r < 0 || s < 1)
    fail("GGTRAIN_INJECT_RANK_FAILURE='{}': expected RANK:STEP such as 1:5", env);
  rank = r;
  step = s;
}

std::string broken_resume() {
  const char* env = std::getenv("GGTRAIN_INJECT_BROKEN_RESUME");
  if (!env || !*env) return "";
  const std::string piece = env;
  for (const char* known : {"data", "adam_m", "adam_v", "adam_step", "schedule", "lora", "master_bf16"})
    if (piece == known) return piece;
  fail("GGTRAIN_INJECT_BROKEN_RESUME='{}': expected data, adam_m, adam_v, adam_step, schedule, lora or master_bf16",
       piece);
  return piece;
}

}  // namespace

InjectedFaults injected_faults() {
  InjectedFaults f;
  f.nan_steps = nan_steps();
  f.nan_into_grad = nan_into_grad();
  rank_failure(f.failing_rank, f.failing_step);
  f.broken_resume = broken_resume();
  return f;
}

void break_resume(const InjectedFaults& faults, const ResumedState& s) {
  const std::string& piece = faults.broken_resume;
  if (piece.empty()) return;
  std::fprintf(stderr, "injected: this resume loses its %s (GGTRAIN_INJECT_BROKEN_RESUME)\n", piece.c_str());
  if (piece == "data") {
    s.loader.drawn = 0;
    for (auto& source : s.loader.sources) source = {};
  }
  auto& moments = s.optimizer.moments();
  if (piece == "adam_m") std::fill(moments.m.begin(), moments.m.end(), 0.f);
  if (piece == "adam_v") std::fill(moments.v.begin(), moments.v.end(), 0.f);
  if (piece == "adam_step") s.optimizer.set_steps_taken(0);
  if (piece == "schedule") s.schedule_origin = s.step;  // as a schedule that restarts with the process would
  if (piece == "lora") {  // the adapter as a fresh run starts it: the base alone
    bool any = false;
    for (const auto& t : s.layout.tensors())
      if (t.name.ends_with(".lora_b")) {
        std::fill_n(s.params + t.offset, t.size, 0.f);
        any = true;
      }
    if (!any) fail("GGTRAIN_INJECT_BROKEN_RESUME=lora: this run trains no LoRA adapter");
  }
  if (piece == "master_bf16")
    for (int64_t i = 0; i < s.layout.total(); ++i)  // as a copy kept only in bf16 would be
      s.params[i] = kernels::bf16_to_fp32(kernels::fp32_to_bf16(s.params[i]));
}

parallel::DataParallel::Reduced reduce_step(parallel::DataParallel& dp, const InjectedFaults& faults, int64_t step,
                                            double local_loss) {
  if (faults.rank_fails_at(dp.rank(), step))
    fail("step {}: injected failure on rank {} (GGTRAIN_INJECT_RANK_FAILURE)", step, dp.rank());
  std::function<void()> poison;
  if (faults.nan_grad_at(step)) poison = [&dp]() { dp.inject_nonfinite_gradient(); };
  parallel::DataParallel::Reduced r = dp.reduce(local_loss, poison);
  if (faults.nan_loss_at(step)) r.loss = NAN;
  return r;
}

}  // namespace ggtrain::train
