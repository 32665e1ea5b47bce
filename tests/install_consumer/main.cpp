// Uses an installed PSTrain: a header-only Status, a Blob (compiled into
// libpstrain_common) and a generated proto message, parsed by pstrain_common.
#include <iostream>

#include "common/blob.hpp"
#include "common/proto_io.hpp"
#include "common/status.hpp"
#include "proto/caffe.pb.h"

int main() {
  pstrain::Status missing = pstrain::Status::NotFound("no such key");
  if (!missing.IsNotFound()) return 1;
  pstrain::Blob blob({2, 3, 4});
  caffe::NetParameter net;
  pstrain::Status parsed = pstrain::ParseTextProto("name: \"tiny\"", "consumer", &net);
  if (!parsed.ok() || net.name() != "tiny" || blob.count() != 24) {
    std::cerr << parsed.ToString() << "\n";
    return 1;
  }
  std::cout << "consumer ok: " << missing.ToString() << ", blob of " << blob.count() << "\n";
  return 0;
}
