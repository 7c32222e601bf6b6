#pragma once
// ggml tensor types as GGUF stores them (ids from ggml.h), with the block
// geometry needed to size any tensor, including types we cannot compute with.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ggtrain::gguf {

enum class TensorType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

struct TypeTraits {
  std::string_view name;
  uint32_t block_size;  // elements per block
  uint32_t type_size;  // bytes per block
};

namespace detail {
struct TypeEntry {
  uint32_t id;
  TypeTraits traits;
};
// Block sizes and bytes per block follow ggml's block_* structs.
inline constexpr std::array<TypeEntry, 32> kTypes{{
    {0, {"F32", 1, 4}},         {1, {"F16", 1, 2}},         {2, {"Q4_0", 32, 18}},      {3, {"Q4_1", 32, 20}},
    {6, {"Q5_0", 32, 22}},      {7, {"Q5_1", 32, 24}},      {8, {"Q8_0", 32, 34}},      {9, {"Q8_1", 32, 36}},
    {10, {"Q2_K", 256, 84}},    {11, {"Q3_K", 256, 110}},   {12, {"Q4_K", 256, 144}},   {13, {"Q5_K", 256, 176}},
    {14, {"Q6_K", 256, 210}},   {15, {"Q8_K", 256, 292}},   {16, {"IQ2_XXS", 256, 66}}, {17, {"IQ2_XS", 256, 74}},
    {18, {"IQ3_XXS", 256, 98}}, {19, {"IQ1_S", 256, 50}},   {20, {"IQ4_NL", 32, 18}},   {21, {"IQ3_S", 256, 110}},
    {22, {"IQ2_S", 256, 82}},   {23, {"IQ4_XS", 256, 136}}, {24, {"I8", 1, 1}},         {25, {"I16", 1, 2}},
    {26, {"I32", 1, 4}},        {27, {"I64", 1, 8}},        {28, {"F64", 1, 8}},        {29, {"IQ1_M", 256, 56}},
    {30, {"BF16", 1, 2}},       {34, {"TQ1_0", 256, 54}},   {35, {"TQ2_0", 256, 66}},   {39, {"MXFP4", 32, 17}},
}};
}  // namespace detail

// nullopt for ids ggml does not (or no longer) define.
constexpr std::optional<TypeTraits> type_traits(uint32_t id) {
  for (const auto& e : detail::kTypes)
    if (e.id == id) return e.traits;
  return std::nullopt;
}
const TypeTraits& traits(TensorType t);
std::string_view type_name(TensorType t);
// Bytes needed to store n elements of type t (n a multiple of its block size).
size_t storage_bytes(TensorType t, size_t n);
std::optional<TensorType> type_from_name(std::string_view name);  // "f16", "Q8_0", ...

}  // namespace ggtrain::gguf
