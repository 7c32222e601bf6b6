#pragma once
// The GGUF a user already runs in ollama, by the name ollama gives it:
// "ollama:NAME[:TAG]" resolves through ollama's store (OLLAMA_MODELS, else
// ~/.ollama/models, else the Linux service's /usr/share/ollama/.ollama/models)
// as ollama lays it out: manifests/HOST/NAMESPACE/MODEL/TAG, a JSON manifest
// whose layer of media type application/vnd.ollama.image.model names the
// weights' blob by digest, blobs/sha256-HEX. Read only; the store is input
// like any file (a digest that is not sha256 hex, or a blob that is not a
// GGUF, is refused).
#include <string>
#include <vector>

namespace ggtrain::gguf {

constexpr const char* kOllamaPrefix = "ollama:";

// `spec` itself unless it starts with "ollama:"; then the model blob's path,
// or an error naming the store and the names it holds.
std::string resolve_model_path(const std::string& spec);

// The store ollama uses on this machine (the first that exists of the
// three above; OLLAMA_MODELS always when set).
std::string ollama_store();
// NAME[:TAG] in `store`: its model blob's path.
std::string ollama_model_blob(const std::string& name, const std::string& store);
// Every model name the store has a manifest for, as `ollama list` writes
// them (the default registry and namespace left out).
std::vector<std::string> ollama_model_names(const std::string& store);

}  // namespace ggtrain::gguf
