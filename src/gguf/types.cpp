#include "gguf/types.h"

#include <array>
#include <cctype>
#include <string>

#include "util/error.h"

namespace ggtrain::gguf {

namespace {

struct Entry {
  uint32_t id;
  TypeTraits traits;
};

// Block sizes and bytes per block follow ggml's block_* structs.
constexpr std::array<Entry, 32> kTypes{{
    {0, {"F32", 1, 4}},        {1, {"F16", 1, 2}},        {2, {"Q4_0", 32, 18}},
    {3, {"Q4_1", 32, 20}},     {6, {"Q5_0", 32, 22}},     {7, {"Q5_1", 32, 24}},
    {8, {"Q8_0", 32, 34}},     {9, {"Q8_1", 32, 36}},     {10, {"Q2_K", 256, 84}},
    {11, {"Q3_K", 256, 110}},  {12, {"Q4_K", 256, 144}},  {13, {"Q5_K", 256, 176}},
    {14, {"Q6_K", 256, 210}},  {15, {"Q8_K", 256, 292}},  {16, {"IQ2_XXS", 256, 66}},
    {17, {"IQ2_XS", 256, 74}}, {18, {"IQ3_XXS", 256, 98}}, {19, {"IQ1_S", 256, 50}},
    {20, {"IQ4_NL", 32, 18}},  {21, {"IQ3_S", 256, 110}}, {22, {"IQ2_S", 256, 82}},
    {23, {"IQ4_XS", 256, 136}}, {24, {"I8", 1, 1}},       {25, {"I16", 1, 2}},
    {26, {"I32", 1, 4}},       {27, {"I64", 1, 8}},       {28, {"F64", 1, 8}},
    {29, {"IQ1_M", 256, 56}},  {30, {"BF16", 1, 2}},      {34, {"TQ1_0", 256, 54}},
    {35, {"TQ2_0", 256, 66}},  {39, {"MXFP4", 32, 17}},
}};

}  // namespace

std::optional<TypeTraits> type_traits(uint32_t id) {
  for (const auto& e : kTypes)
    if (e.id == id) return e.traits;
  return std::nullopt;
}

const TypeTraits& traits(TensorType t) {
  for (const auto& e : kTypes)
    if (e.id == static_cast<uint32_t>(t)) return e.traits;
  fail("unknown ggml tensor type id {}", static_cast<uint32_t>(t));
}

std::string_view type_name(TensorType t) { return traits(t).name; }

std::optional<TensorType> type_from_name(std::string_view name) {
  std::string upper(name);
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const auto& e : kTypes)
    if (e.traits.name == upper) return static_cast<TensorType>(e.id);
  return std::nullopt;
}

}  // namespace ggtrain::gguf
