// Test helper for llama_cpp_quantize_check.sh, built there against the
// libllama of node-llama-cpp's prebuilt package and the llama.h of the
// release it was built from (its gitRelease.bundle): llama.cpp's own
// llama_model_quantize with its default parameters (no importance matrix),
// the reference `ggtrain export --type` must equal byte for byte.
//   llama_quantize IN.gguf OUT.gguf FTYPE   (FTYPE: llama_ftype's number)
#include <cstdio>
#include <cstdlib>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: llama_quantize IN.gguf OUT.gguf FTYPE\n");
    return 2;
  }
  llama_backend_init();
  llama_model_quantize_params p = llama_model_quantize_default_params();
  p.ftype = static_cast<llama_ftype>(std::atoi(argv[3]));
  p.nthread = 2;
  const uint32_t rc = llama_model_quantize(argv[1], argv[2], &p);
  llama_backend_free();
  if (rc != 0) std::fprintf(stderr, "llama_model_quantize failed (%u)\n", rc);
  return rc == 0 ? 0 : 1;
}
