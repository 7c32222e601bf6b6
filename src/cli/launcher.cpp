// `ggtrain` in a build for several CPU levels: starts `ggtrain-vN` from the
// same folder for the highest level this CPU runs (util/cpu_level.h), or
// the one GGTRAIN_CPU names (tests and bug reports), with the same
// arguments. Built for the baseline, so it runs anywhere to say which level
// fits. Nothing here may use an instruction a level adds.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "util/cpu_level.h"

namespace {

std::vector<std::string> built_levels() {
  std::vector<std::string> levels;
  std::istringstream in(GGTRAIN_BUILT_LEVELS);
  for (std::string l; std::getline(in, l, ',');) levels.push_back(l);
  return levels;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "ggtrain: error: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int, char** argv) {
  const std::vector<std::string> levels = built_levels();
  std::string runs;  // the levels this CPU runs, for messages
  std::string level;
  for (const auto& l : levels)
    if (ggtrain::missing_cpu_feature(l).empty()) {
      runs += (runs.empty() ? "" : ", ") + l;
      level = l;
    }
  if (const char* forced = std::getenv("GGTRAIN_CPU"); forced && *forced) {
    level = forced;
    bool built = false;
    for (const auto& l : levels) built = built || l == level;
    if (!built) return fail("GGTRAIN_CPU=" + level + " is not a level of this build (" + GGTRAIN_BUILT_LEVELS + ")");
    if (const std::string f = ggtrain::missing_cpu_feature(level); !f.empty())
      return fail("GGTRAIN_CPU=" + level + ": this CPU lacks " + f + " (it runs: " + (runs.empty() ? "none" : runs) +
                  ")");
  }
  if (level.empty())
    return fail("this CPU lacks " + ggtrain::missing_cpu_feature(levels.front()) + ", which the lowest build (" +
                levels.front() + ") needs; build with -DGGTRAIN_NATIVE=ON for this machine");
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::string program =
      ((ec ? std::filesystem::path(argv[0]) : self).parent_path() / ("ggtrain-" + level)).string();
  ::execv(program.c_str(), argv);
  return fail("cannot start " + program + ": " + std::strerror(errno) +
              " (the ggtrain-vN programs of a build stay in the folder of ggtrain)");
}
