#pragma once
// The dashboard page's files (dashboard/assets/), compiled in by CMake
// (cmake/embed_assets.cmake): the binary serves and writes them offline.
#include <string_view>

namespace ggtrain::dashboard {

extern const std::string_view kDashboardHtml;
extern const std::string_view kDashboardCss;
extern const std::string_view kDashboardJs;

}  // namespace ggtrain::dashboard
