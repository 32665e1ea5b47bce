#include "worker/caffe_log.hpp"

#include <cstdio>

#include "common/glog_line.hpp"

namespace pstrain {
namespace {

std::string Num(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.6g", v);
  return buffer;
}

// Values of a train event that describe the step, not the net's outputs.
bool IsTrainStat(const std::string& key) {
  return key == "lr" || key == "iters_per_second" || key == "images_per_second" ||
         key == "pull_wait_seconds" || key == "bytes_sent" || key == "bytes_received" ||
         key == "staleness";
}

// "    Train net output #k: name = v" (+ Caffe's loss weight for a loss).
std::string Output(const char* kind, int k, const std::string& name, double v) {
  std::string text = std::string("    ") + kind + " net output #" + std::to_string(k) + ": " +
                     name + " = " + Num(v);
  if (name.find("loss") != std::string::npos) text += " (* 1 = " + Num(v) + " loss)";
  return text;
}

}  // namespace

std::vector<std::string> CaffeLog::Start(const std::string& net_name,
                                         const std::string& lr_policy) const {
  return {GlogLine('I', "solver.cpp:279", "Solving " + net_name),
          GlogLine('I', "solver.cpp:280", "Learning Rate Policy: " + lr_policy)};
}

std::vector<std::string> CaffeLog::Lines(const TrainEvent& e) {
  std::vector<std::string> out;
  const std::string iteration = "Iteration " + std::to_string(e.iter);
  if (e.kind == "train") {
    double loss = 0, lr = 0, ips = 0;
    bool has_loss = false, has_lr = false;
    std::vector<std::pair<std::string, double>> outputs;
    for (const auto& [k, v] : e.values) {
      if (k == "loss") has_loss = true, loss = v;
      if (k == "lr") has_lr = true, lr = v;
      if (k == "iters_per_second") ips = v;
      if (!IsTrainStat(k)) outputs.emplace_back(k, v);
    }
    std::string head = iteration;
    if (last_train_iter_ >= 0 && e.iter > last_train_iter_ && ips > 0) {
      const int gap = e.iter - last_train_iter_;
      char buffer[96];
      std::snprintf(buffer, sizeof(buffer), " (%s iter/s, %.3gs/%d iters)", Num(ips).c_str(),
                    gap / ips, gap);
      head += buffer;
    }
    if (has_loss) head += ", loss = " + Num(loss);
    out.push_back(GlogLine('I', "solver.cpp:218", head));
    for (size_t k = 0; k < outputs.size(); ++k) {
      out.push_back(
          GlogLine('I', "solver.cpp:237",
                   Output("Train", static_cast<int>(k), outputs[k].first, outputs[k].second)));
    }
    if (has_lr) out.push_back(GlogLine('I', "sgd_solver.cpp:105", iteration + ", lr = " + Num(lr)));
    last_train_iter_ = e.iter;
    return out;
  }
  if (e.kind == "test") {
    // "test1/accuracy": test net 1; without a slash: test net 0.
    std::string net = "-";
    int k = 0;
    for (const auto& [key, v] : e.values) {
      const size_t slash = key.find('/');
      const std::string this_net = slash == std::string::npos ? "test0" : key.substr(0, slash);
      const std::string name = slash == std::string::npos ? key : key.substr(slash + 1);
      if (this_net != net) {
        net = this_net;
        k = 0;
        const std::string number =
            net.rfind("test", 0) == 0 && net.size() > 4 ? net.substr(4) : std::string("0");
        out.push_back(
            GlogLine('I', "solver.cpp:330", iteration + ", Testing net (#" + number + ")"));
      }
      out.push_back(GlogLine('I', "solver.cpp:397", Output("Test", k++, name, v)));
    }
    return out;
  }
  if (e.kind == "snapshot") {
    // Caffe's Solver::SnapshotToBinaryProto or SnapshotToHDF5, by the name.
    if (e.text.size() >= 3 && e.text.compare(e.text.size() - 3, 3, ".h5") == 0) {
      return {GlogLine('I', "solver.cpp:474", "Snapshotting to HDF5 file " + e.text)};
    }
    return {GlogLine('I', "solver.cpp:464", "Snapshotting to binary proto file " + e.text)};
  }
  if (e.kind == "done") {
    for (const auto& [k, v] : e.values) {
      if (k == "loss")
        out.push_back(GlogLine('I', "solver.cpp:298", iteration + ", loss = " + Num(v)));
    }
    out.push_back(GlogLine('I', "solver.cpp:310", "Optimization Done."));
    return out;
  }
  std::string rest;
  for (const auto& [k, v] : e.values) rest += " " + k + "=" + Num(v);
  return {GlogLine('I', PSTRAIN_GLOG_WHERE,
                   e.kind + " at iteration " + std::to_string(e.iter) + ":" + rest)};
}

}  // namespace pstrain
