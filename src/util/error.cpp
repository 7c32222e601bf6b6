#include "util/error.h"

#include <cstring>

namespace ggtrain {

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace ggtrain
