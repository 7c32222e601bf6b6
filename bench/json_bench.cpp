// JSONL parsing for corpus input: the "text" member of every
// line with nlohmann-json against simdjson (DOM, as corpus/input reads JSONL:
// it validates the whole line), in MB/s of JSONL on one thread.
//
//   bench_json FILE.jsonl
#include <simdjson.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "bench_util.h"

using namespace ggtrain;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s FILE.jsonl\n", argv[0]);
    return 2;
  }
  auto run = [&](const char* name, auto parse_text) {
    std::ifstream in(argv[1], std::ios::binary);
    size_t bytes = 0, text = 0, lines = 0;
    const double t0 = bench::now_s();
    for (std::string line; std::getline(in, line);) {
      bytes += line.size() + 1;
      text += parse_text(line);
      ++lines;
    }
    const double dt = bench::now_s() - t0;
    std::printf("%-14s %zu lines, %.1f MB in %.2f s: %.1f MB/s (text %.1f MB)\n", name, lines, double(bytes) / 1e6, dt,
                double(bytes) / 1e6 / dt, double(text) / 1e6);
  };
  // Reading the lines alone, for the floor (twice: the first pass also
  // brings the file into the page cache).
  run("read (cold)", [](const std::string& l) { return l.size(); });
  run("read only", [](const std::string& l) { return l.size(); });
  run("nlohmann-json", [](const std::string& l) {
    const auto j = nlohmann::json::parse(l);
    return j.at("text").get_ref<const std::string&>().size();
  });
  simdjson::dom::parser parser;
  std::string padded;
  run("simdjson DOM", [&](const std::string& l) {
    padded.reserve(l.size() + simdjson::SIMDJSON_PADDING);
    padded.assign(l);
    simdjson::dom::element doc;
    if (parser.parse(padded.data(), padded.size(), false).get(doc)) return size_t(0);
    std::string_view t;
    if (doc["text"].get(t)) return size_t(0);
    return t.size();
  });
  return 0;
}
