// A layering-check fixture: a layer's reference path includes oneDNN.
#include "common/dnnl_context.hpp"
