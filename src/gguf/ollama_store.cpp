#include "gguf/ollama_store.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "util/error.h"

namespace ggtrain::gguf {

namespace fs = std::filesystem;

namespace {

constexpr const char* kDefaultHost = "registry.ollama.ai";
constexpr const char* kDefaultNamespace = "library";
constexpr const char* kModelLayer = "application/vnd.ollama.image.model";

// ollama's name parts: [HOST/][NAMESPACE/]MODEL[:TAG].
struct ModelName {
  std::string host = kDefaultHost, ns = kDefaultNamespace, model, tag = "latest";
  std::string text() const { return fmt::format("{}/{}/{}:{}", host, ns, model, tag); }
};

bool plain_part(const std::string& p) {
  if (p.empty() || p == "." || p == "..") return false;
  return std::all_of(p.begin(), p.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
  });
}

ModelName parse_name(const std::string& name) {
  ModelName n;
  std::string rest = name;
  if (const size_t colon = rest.rfind(':'); colon != std::string::npos && rest.find('/', colon) == std::string::npos) {
    n.tag = rest.substr(colon + 1);
    rest.resize(colon);
  }
  std::vector<std::string> parts;
  for (size_t at = 0;;) {
    const size_t slash = rest.find('/', at);
    parts.push_back(rest.substr(at, slash == std::string::npos ? std::string::npos : slash - at));
    if (slash == std::string::npos) break;
    at = slash + 1;
  }
  const bool ok = parts.size() <= 3 && std::all_of(parts.begin(), parts.end(), plain_part) && plain_part(n.tag);
  if (!ok)
    fail("ollama:{}: not a model name ollama uses ([HOST/][NAMESPACE/]MODEL[:TAG], each of letters, digits, '.', '-', "
         "'_')",
         name);
  n.model = parts.back();
  if (parts.size() >= 2) n.ns = parts[parts.size() - 2];
  if (parts.size() == 3) n.host = parts[0];
  return n;
}

std::string short_name(const ModelName& n) {
  std::string s = n.model + ":" + n.tag;
  if (n.host != kDefaultHost) return n.host + "/" + n.ns + "/" + s;
  return n.ns == kDefaultNamespace ? s : n.ns + "/" + s;
}

bool is_sha256_hex(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(c) && !std::isupper(c); });
}

}  // namespace

std::string ollama_store() {
  if (const char* env = std::getenv("OLLAMA_MODELS"); env && *env) return env;
  std::vector<std::string> candidates;
  if (const char* home = std::getenv("HOME"); home && *home)
    candidates.push_back(std::string(home) + "/.ollama/models");
  candidates.push_back("/usr/share/ollama/.ollama/models");
  for (const auto& c : candidates)
    if (fs::is_directory(c)) return c;
  return candidates.front();
}

std::vector<std::string> ollama_model_names(const std::string& store) {
  std::vector<std::string> names;
  std::error_code ec;
  const fs::path root = fs::path(store) / "manifests";
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it.depth() != 3 || !it->is_regular_file(ec)) continue;
    const fs::path rel = fs::relative(it->path(), root, ec);
    std::vector<std::string> p;
    for (const auto& part : rel) p.push_back(part.string());
    if (p.size() == 4) names.push_back(short_name({p[0], p[1], p[2], p[3]}));
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string ollama_model_blob(const std::string& name, const std::string& store) {
  const ModelName n = parse_name(name);
  const fs::path manifest = fs::path(store) / "manifests" / n.host / n.ns / n.model / n.tag;
  std::ifstream in(manifest);
  if (!in) {
    const auto names = ollama_model_names(store);
    fail("ollama:{}: no such model in ollama's store {} (set OLLAMA_MODELS to another); {}", name, store,
         names.empty() ? std::string("it holds none") : fmt::format("it holds {}", fmt::join(names, ", ")));
  }
  const nlohmann::json m = nlohmann::json::parse(in, nullptr, false);
  const std::string where = fmt::format("ollama:{} (manifest {})", name, manifest.string());
  if (!m.is_object() || !m.contains("layers") || !m["layers"].is_array())
    fail("{}: not an ollama manifest (no \"layers\" list)", where);
  for (const auto& layer : m["layers"]) {
    if (!layer.is_object() || layer.value("mediaType", "") != kModelLayer) continue;
    const std::string digest = layer.value("digest", "");
    if (!digest.starts_with("sha256:") || !is_sha256_hex(digest.substr(7)))
      fail("{}: the model layer's digest '{}' is not sha256:<64 hex digits>", where, digest.substr(0, 80));
    const fs::path blob = fs::path(store) / "blobs" / ("sha256-" + digest.substr(7));
    std::ifstream b(blob, std::ios::binary);
    char magic[4] = {};
    if (!b.read(magic, 4))
      fail("{}: its model blob {} is missing or empty (pull the model again)", where, blob.string());
    if (std::memcmp(magic, "GGUF", 4) != 0)
      fail("{}: its model blob {} is not a GGUF file (ggtrain reads GGUF models only)", where, blob.string());
    return blob.string();
  }
  fail("{}: no layer of media type {} (not a model, or one ollama stores otherwise)", where, kModelLayer);
}

std::string resolve_model_path(const std::string& spec) {
  if (!spec.starts_with(kOllamaPrefix)) return spec;
  return ollama_model_blob(spec.substr(std::strlen(kOllamaPrefix)), ollama_store());
}

}  // namespace ggtrain::gguf
