// Test support for the net, trainer and tool suites: building nets from
// prototxt text, collecting build errors, writing text files, and a
// finite-difference check of a whole net's loss.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "proto/caffe.pb.h"
#include "worker/net.hpp"

namespace pstrain::testing {

caffe::NetParameter ParseNet(const std::string& text);
caffe::SolverParameter ParseSolver(const std::string& text);

// Builds `text` (failing the test and returning nullptr on error).
std::unique_ptr<Net> BuildNet(const std::string& text, NetOptions options = {});
std::unique_ptr<Net> BuildNet(const std::string& text, caffe::Phase phase);
// Builds `text`, expecting failure; returns the error message.
std::string NetError(const std::string& text, NetOptions options = {});

void WriteTextFile(const std::string& path, const std::string& text);
std::string ReadWholeFile(const std::string& path);

// Values of every learnable blob of the net, in learnable_params order.
std::vector<std::vector<float>> ParamValues(const Net& net);

// Compares d(net loss)/d(blob) after ClearParamDiffs + ForwardBackward with
// central differences of Net::Forward (step `step`), element by element:
// |analytic - numeric| <= tolerance * max(1, |analytic|, |numeric|).
// `blob` is a learnable blob or (with force_backward) an input blob.
void CheckNetGradient(Net& net, Blob* blob, const std::string& what, float step = 1e-2f,
                      float tolerance = 2e-3f);

}  // namespace pstrain::testing
