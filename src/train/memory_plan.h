#pragma once
// What a training run will hold in memory, worked out before anything is
// allocated or loaded: the weights (float, and a LoRA base's matrices held
// quantized), their gradients and AdamW moments, and the activations the
// model plans. A run that cannot fit is refused before it starts.
#include <cstdint>
#include <string>

namespace ggtrain::train {

struct MemoryPlan {
  int64_t float_weights = 0;  // bytes: parameters in float (and a bf16 copy in bf16 training)
  int64_t held_weights = 0;  // bytes: a LoRA base's quantized matrices, mapped from its file
  int64_t gradients = 0;  // bytes: one float per trainable parameter
  int64_t moments = 0;  // bytes: AdamW's two moments (this rank's share under ZeRO-1)
  int64_t activations = 0;  // bytes: Transformer::planned_activation_bytes
  int64_t total() const { return float_weights + held_weights + gradients + moments + activations; }
};

// One line: each part and the total, against `available` bytes.
std::string memory_plan_text(const MemoryPlan& p, int64_t available);

// The bytes this process may use: `limit_gib` when positive, else the
// machine's MemAvailable (/proc/meminfo); 0 when neither is known.
int64_t memory_available(double limit_gib);

// Throws Error naming every part and what to change when p.total() exceeds
// `available` (> 0); `limit_gib` says where `available` came from.
void check_memory_plan(const MemoryPlan& p, int64_t available, double limit_gib);

}  // namespace ggtrain::train
