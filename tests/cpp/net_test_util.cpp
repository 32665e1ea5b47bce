#include "tests/cpp/net_test_util.hpp"

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

namespace pstrain::testing {

caffe::NetParameter ParseNet(const std::string& text) {
  caffe::NetParameter net;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &net)) << text;
  return net;
}

caffe::SolverParameter ParseSolver(const std::string& text) {
  caffe::SolverParameter solver;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &solver)) << text;
  return solver;
}

std::unique_ptr<Net> BuildNet(const std::string& text, NetOptions options) {
  auto net = Net::Create(ParseNet(text), options);
  EXPECT_TRUE(net.ok()) << net.status().message();
  if (!net.ok()) return nullptr;
  return std::move(net).value();
}

std::unique_ptr<Net> BuildNet(const std::string& text, caffe::Phase phase) {
  NetOptions options;
  options.state.set_phase(phase);
  return BuildNet(text, options);
}

std::string NetError(const std::string& text, NetOptions options) {
  auto net = Net::Create(ParseNet(text), options);
  EXPECT_FALSE(net.ok()) << "the net built";
  return net.ok() ? "" : net.status().message();
}

void WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::vector<std::vector<float>> ParamValues(const Net& net) {
  std::vector<std::vector<float>> values;
  for (const auto& p : net.learnable_params()) {
    values.emplace_back(p.blob->cpu_data(), p.blob->cpu_data() + p.blob->count());
  }
  return values;
}

void CheckNetGradient(Net& net, Blob* blob, const std::string& what, float step, float tolerance) {
  net.ClearParamDiffs();
  net.ForwardBackward();
  const std::vector<float> analytic(blob->cpu_diff(), blob->cpu_diff() + blob->count());
  for (int64_t i = 0; i < blob->count(); ++i) {
    const float x = blob->cpu_data()[i];
    blob->mutable_cpu_data()[i] = x + step;
    const double plus = net.Forward();
    blob->mutable_cpu_data()[i] = x - step;
    const double minus = net.Forward();
    blob->mutable_cpu_data()[i] = x;
    const double numeric = (plus - minus) / (2.0 * step);
    const double scale = std::max({1.0, std::fabs(numeric), std::fabs(double{analytic[i]})});
    ASSERT_LE(std::fabs(analytic[i] - numeric), tolerance * scale)
        << what << "[" << i << "]: analytic " << analytic[i] << ", numeric " << numeric;
  }
}

}  // namespace pstrain::testing
