// A layering-check fixture: a layer's fast path includes oneDNN, as it may.
#include <oneapi/dnnl/dnnl.hpp>

#include "common/dnnl_context.hpp"
