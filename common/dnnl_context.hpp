// The process's oneDNN CPU engine and stream, shared by every layer's fast
// path. Layers run on one thread at a time (the net's), so one stream serves.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

namespace pstrain {

dnnl::engine& DnnlEngine();
dnnl::stream& DnnlStream();

}  // namespace pstrain
