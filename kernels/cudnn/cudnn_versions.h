// The cuDNN and cudnn-frontend versions a run used, for the environment record: the cuDNN the
// binary was compiled against can differ from the one loaded at run time (a GPU host's pip wheel).
#pragma once

#include <string>

namespace attnbench {

std::string cudnn_version_compiled();  // "9.19.0": cudnn_version.h at build time
std::string cudnn_version_loaded();    // "9.19.0": cudnnGetVersion() of the library loaded now
std::string cudnn_frontend_version();  // "1.32.0": the header-only frontend compiled in

}  // namespace attnbench
