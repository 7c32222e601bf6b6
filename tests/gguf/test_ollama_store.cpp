// ollama's store as ollama lays it out, made here (manifests by name and
// tag, blobs by digest): names with and without tag, namespace and host
// resolve to their model blob, as init.from and -m take them; a missing
// name lists what the store holds; a blob that is not GGUF, a digest that
// is not sha256 hex (a path out of the store) and a name with ".." are
// refused.
#include "gguf/ollama_store.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "support/files.h"
#include "support/temp_dir.h"
#include "train/run_config.h"
#include "util/error.h"

namespace ggtrain::gguf {
namespace {

namespace fs = std::filesystem;
using test_support::error_of;
using test_support::TempDir;

const std::string kDigestA(64, 'a'), kDigestB(64, 'b');

class OllamaStore : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(store_ + "/blobs");
    fs::copy_file(GGTRAIN_FIXTURES_DIR "/tiny-spm.gguf", blob(kDigestA));
    std::ofstream(blob(kDigestB)) << "not a gguf";
    manifest("registry.ollama.ai/library/tiny/latest", kDigestA);
    manifest("registry.ollama.ai/library/tiny/q8", kDigestA);
    manifest("registry.ollama.ai/me/tiny/v1", kDigestA);
    manifest("hf.co/org/model/Q4_K_M", kDigestA);
    manifest("registry.ollama.ai/library/text/latest", kDigestB);
    manifest("registry.ollama.ai/library/escape/latest", "../../../../etc/passwd");
  }
  std::string blob(const std::string& hex) const { return store_ + "/blobs/sha256-" + hex; }
  // A manifest as ollama writes it: a config layer, the model layer, a template.
  void manifest(const std::string& path, const std::string& hex) const {
    fs::create_directories(fs::path(store_ + "/manifests/" + path).parent_path());
    std::ofstream(store_ + "/manifests/" + path)
        << R"({"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",)"
        << R"("config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":"sha256:)"
        << std::string(64, 'c') << R"(","size":10},"layers":[{"mediaType":"application/vnd.ollama.image.model",)"
        << R"("digest":"sha256:)" << hex << R"(","size":1000},{"mediaType":"application/vnd.ollama.image.template",)"
        << R"("digest":"sha256:)" << std::string(64, 'd') << R"(","size":10}]})";
  }
  TempDir tmp_;
  std::string store_ = tmp_ / "models";
};

TEST_F(OllamaStore, NamesResolveToTheModelBlob) {
  for (const char* name : {"tiny", "tiny:latest", "tiny:q8", "me/tiny:v1", "hf.co/org/model:Q4_K_M"})
    EXPECT_EQ(ollama_model_blob(name, store_), blob(kDigestA)) << name;
}

TEST_F(OllamaStore, MissingNameListsTheStore) {
  const std::string e = error_of([&] { ollama_model_blob("llama3.2", store_); });
  EXPECT_NE(e.find("ollama:llama3.2: no such model in ollama's store " + store_), std::string::npos) << e;
  EXPECT_NE(e.find("it holds escape:latest, hf.co/org/model:Q4_K_M, me/tiny:v1, text:latest, tiny:latest, tiny:q8"),
            std::string::npos)
      << e;
  EXPECT_NE(error_of([&] { ollama_model_blob("tiny", tmp_ / "empty"); }).find("it holds none"), std::string::npos);
}

TEST_F(OllamaStore, HostileStoreOrNameIsRefused) {
  std::string e = error_of([&] { ollama_model_blob("text", store_); });
  EXPECT_NE(e.find("is not a GGUF file"), std::string::npos) << e;
  e = error_of([&] { ollama_model_blob("escape", store_); });
  EXPECT_NE(e.find("is not sha256:<64 hex digits>"), std::string::npos) << e;
  e = error_of([&] { ollama_model_blob("../../etc/tiny", store_); });
  EXPECT_NE(e.find("not a model name"), std::string::npos) << e;
  fs::remove(blob(kDigestA));
  e = error_of([&] { ollama_model_blob("tiny", store_); });
  EXPECT_NE(e.find("is missing or empty"), std::string::npos) << e;
}

// init.from = "ollama:NAME" is the blob from the moment the config is read
// (OLLAMA_MODELS chooses the store); a path stays a path.
TEST_F(OllamaStore, InitFromTakesAnOllamaName) {
  ASSERT_EQ(setenv("OLLAMA_MODELS", store_.c_str(), 1), 0);
  train::RunConfig c;
  train::apply_override(c, "init.from=ollama:me/tiny:v1");
  EXPECT_EQ(c.init.from, blob(kDigestA));
  train::apply_override(c, "init.from=models/my.gguf");
  EXPECT_EQ(c.init.from, "models/my.gguf");
  const std::string e = error_of([&] { train::apply_override(c, "init.from=ollama:nope"); });
  EXPECT_NE(e.find("init.from"), std::string::npos) << e;
  EXPECT_NE(e.find("no such model"), std::string::npos) << e;
  unsetenv("OLLAMA_MODELS");
  EXPECT_EQ(resolve_model_path("/x/y.gguf"), "/x/y.gguf");
}

}  // namespace
}  // namespace ggtrain::gguf
