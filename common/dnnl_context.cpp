#include "common/dnnl_context.hpp"

namespace pstrain {

dnnl::engine& DnnlEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& DnnlStream() {
  static dnnl::stream stream(DnnlEngine());
  return stream;
}

}  // namespace pstrain
