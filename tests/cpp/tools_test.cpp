// Tests of the programs ps-net and ps-data, run as subprocesses (the built
// binaries under PSTRAIN_BINARY_DIR/bin): exit statuses, the one-line error
// messages, --json output (every line a JSON object), the files a training
// run writes, and that failures leave no output behind. ps-worker's exit codes
// for bad input and an absent server are here too (common/exit_code.hpp).
#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/json_line.hpp"
#include "common/proto_io.hpp"
#include "tests/cpp/data_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"
#include "tests/cpp/process_test_util.hpp"
#include "tests/cpp/program_path.hpp"

namespace pstrain {
namespace {

const std::string kPsNet = ProgramPath("ps-net");
const std::string kPsData = ProgramPath("ps-data");
const std::string kPsWorker = ProgramPath("ps-worker");

using RunResult = testing::ProgramRun;

// Runs `args` (args[0] the program) in folder `cwd`, capturing both streams;
// kills it after `timeout_s` seconds.
RunResult RunProgram(const std::vector<std::string>& args, const std::string& cwd = "/",
                     int timeout_s = 30) {
  return testing::RunProgramBounded(args, timeout_s, cwd);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A strict little JSON reader: Object() accepts one JSON object and nothing
// else, and keeps its top-level string and number members.
class JsonObject {
 public:
  explicit JsonObject(const std::string& text) : s_(text) {
    Space();
    ok_ = Object(true);
    Space();
    ok_ = ok_ && i_ == s_.size();
  }
  bool ok() const { return ok_; }
  std::map<std::string, std::string> strings;
  std::map<std::string, double> numbers;

 private:
  void Space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool Eat(char c) {
    Space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool String(std::string* out) {
    if (!Eat('"')) return false;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c == '\\') {
        if (i_ >= s_.size()) return false;
        c = s_[i_++];
        if (c == 'u') {
          if (i_ + 4 > s_.size()) return false;
          i_ += 4;
          c = '?';
        } else {
          const std::string from = "\"\\/bfnrt", to = "\"\\/\b\f\n\r\t";
          const size_t k = from.find(c);
          if (k == std::string::npos) return false;
          c = to[k];
        }
      }
      out->push_back(c);
    }
    return Eat('"');
  }
  bool Number(double* out) {
    Space();
    const char* begin = s_.c_str() + i_;
    char* end = nullptr;
    *out = std::strtod(begin, &end);
    if (end == begin || *begin == '+' || *begin == '.') return false;
    const std::string token(begin, static_cast<size_t>(end - begin));
    if (token.find_first_of("xXnNiI") != std::string::npos) return false;
    i_ += static_cast<size_t>(end - begin);
    return true;
  }
  bool Literal(const char* word) {
    Space();
    if (s_.compare(i_, std::strlen(word), word) != 0) return false;
    i_ += std::strlen(word);
    return true;
  }
  bool Value(const std::string* key) {
    Space();
    if (i_ >= s_.size()) return false;
    const char c = s_[i_];
    if (c == '{') return Object(false);
    if (c == '[') {
      ++i_;
      if (Eat(']')) return true;
      do {
        if (!Value(nullptr)) return false;
      } while (Eat(','));
      return Eat(']');
    }
    if (c == '"') {
      std::string v;
      if (!String(&v)) return false;
      if (key != nullptr) strings[*key] = v;
      return true;
    }
    if (c == 't') return Literal("true");
    if (c == 'f') return Literal("false");
    if (c == 'n') return Literal("null");
    double d = 0;
    if (!Number(&d)) return false;
    if (key != nullptr) numbers[*key] = d;
    return true;
  }
  bool Object(bool top) {
    if (!Eat('{')) return false;
    if (Eat('}')) return true;
    do {
      std::string key;
      if (!String(&key) || !Eat(':') || !Value(top ? &key : nullptr)) return false;
    } while (Eat(','));
    return Eat('}');
  }

  std::string s_;
  size_t i_ = 0;
  bool ok_ = false;
};

std::vector<JsonObject> JsonLines(const std::string& out) {
  std::vector<JsonObject> objects;
  for (const auto& line : Lines(out)) {
    objects.emplace_back(line);
    EXPECT_TRUE(objects.back().ok()) << "not one JSON object: " << line;
  }
  return objects;
}

// Names and sizes of everything under `dir`.
std::map<std::string, uintmax_t> Listing(const std::string& dir) {
  std::map<std::string, uintmax_t> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    files[e.path().string()] = e.is_regular_file() ? e.file_size() : 0;
  }
  return files;
}

TEST(JsonLineTest, WritesOneValidObjectInInsertionOrder) {
  const std::string line = JsonLine()
                               .Add("event", "time")
                               .Add("text", std::string("a\"b\\c\nd\x01"))
                               .Add("n", 42)
                               .Add("big", int64_t{1} << 40)
                               .Add("x", 0.1)
                               .Add("nan", std::nan(""))
                               .Add("inf", HUGE_VAL)
                               .Add("yes", true)
                               .AddRaw("obj", "{\"k\":[1,2]}")
                               .str();
  EXPECT_EQ(line,
            "{\"event\":\"time\",\"text\":\"a\\\"b\\\\c\\nd\\u0001\",\"n\":42,"
            "\"big\":1099511627776,\"x\":0.1,\"nan\":null,\"inf\":null,\"yes\":true,"
            "\"obj\":{\"k\":[1,2]}}");
  const JsonObject parsed(line);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed.strings.at("text"), "a\"b\\c\nd?");
  EXPECT_EQ(parsed.numbers.at("big"), 1099511627776.0);
  EXPECT_EQ(JsonLine().str(), "{}");
}

class ToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(FileExists(kPsNet)) << kPsNet << " is not built";
    ASSERT_TRUE(FileExists(kPsData)) << kPsData << " is not built";
  }
  testing::TempDir dir_;
};

constexpr const char* kTinyNet = R"(name: "tiny"
layer { name: "data" type: "DummyData" top: "data" top: "label"
        dummy_data_param { shape { dim: 4 dim: 6 } shape { dim: 4 }
                           data_filler { type: "gaussian" std: 1 }
                           data_filler { type: "constant" value: 1 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "s"
        inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" top: "loss" }
layer { name: "accuracy" type: "Accuracy" bottom: "s" bottom: "label" top: "accuracy"
        include { phase: TEST } }
)";

TEST_F(ToolsTest, PsNetBadArgumentsExitTwo) {
  RunResult r = RunProgram({kPsNet});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err).at(0), "ps-net: missing command");
  r = RunProgram({kPsNet, "frobnicate"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err).at(0), "ps-net: unknown command 'frobnicate'");
  r = RunProgram({kPsNet, "train"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err).at(0), "ps-net: --solver is required");
  EXPECT_EQ(r.out, "");
}

TEST_F(ToolsTest, PsNetTrainWithMissingSolver) {
  const std::string solver = dir_ / "absent_solver.prototxt";
  RunResult r = RunProgram({kPsNet, "train", "--solver", solver});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ps-net: " + solver + ": cannot open (No such file or directory)\n");
  EXPECT_EQ(r.out, "");
}

TEST_F(ToolsTest, PsNetTestWithTruncatedCaffemodelChangesNoFile) {
  const std::string model = dir_ / "tiny.prototxt";
  testing::WriteTextFile(model, kTinyNet);
  auto net = testing::BuildNet(kTinyNet);
  ASSERT_NE(net, nullptr);
  ASSERT_TRUE(net->WriteCaffemodel(dir_ / "full.caffemodel").ok());
  const std::string bytes = testing::ReadWholeFile(dir_ / "full.caffemodel");
  const std::string weights = dir_ / "half.caffemodel";
  testing::WriteFile(weights, bytes.substr(0, bytes.size() / 2), false);
  const auto before = Listing(dir_.path());
  const std::string half_bytes = testing::ReadWholeFile(weights);

  RunResult r = RunProgram(
      {kPsNet, "test", "--model", model, "--weights", weights, "--iterations", "2"}, dir_.path());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ps-net: " + weights +
                       ": not a valid binary caffe.NetParameter (truncated or corrupt)\n");
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(Listing(dir_.path()), before);
  EXPECT_EQ(testing::ReadWholeFile(weights), half_bytes);

  // The whole file works, and reports the test outputs.
  r = RunProgram({kPsNet, "test", "--model", model, "--weights", dir_ / "full.caffemodel",
                  "--iterations", "2", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto objects = JsonLines(r.out);
  ASSERT_EQ(objects.size(), 1u);
  EXPECT_EQ(objects[0].strings.at("event"), "test");
  EXPECT_EQ(objects[0].numbers.at("iterations"), 2);
  EXPECT_GE(objects[0].numbers.at("accuracy"), 0);
  EXPECT_GT(objects[0].numbers.at("loss"), 0);
}

TEST_F(ToolsTest, PsNetTimeJson) {
  const std::string model = dir_ / "tiny.prototxt";
  testing::WriteTextFile(model, kTinyNet);
  RunResult r = RunProgram({kPsNet, "time", "--model", model, "--iterations", "3", "--threads", "1",
                            "--batch", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto objects = JsonLines(r.out);
  ASSERT_EQ(objects.size(), 4u);  // data, ip, loss (TRAIN phase), then the summary
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(objects[i].strings.at("event"), "layer_time");
    EXPECT_GE(objects[i].numbers.at("forward_ms"), 0);
  }
  EXPECT_EQ(objects[1].strings.at("layer"), "ip");
  EXPECT_EQ(objects[1].strings.at("type"), "InnerProduct");
  const JsonObject& t = objects[3];
  EXPECT_EQ(t.strings.at("event"), "time");
  EXPECT_EQ(t.strings.at("model"), model);
  EXPECT_EQ(t.numbers.at("iterations"), 3);
  EXPECT_EQ(t.numbers.at("threads"), 1);
  EXPECT_GT(t.numbers.at("total_ms"), 0);
  EXPECT_GE(t.numbers.at("total_ms"), t.numbers.at("forward_ms"));
}

TEST_F(ToolsTest, PsNetTrainJsonWritesEventsAndSnapshots) {
  // The solver names its net relatively: it is found next to the solver
  // although the program runs in another folder.
  testing::WriteTextFile(dir_ / "tiny.prototxt", kTinyNet);
  const std::string prefix = dir_ / "out/tiny";
  testing::WriteTextFile(dir_ / "solver.prototxt",
                         "net: \"tiny.prototxt\"\n"
                         "base_lr: 0.1 momentum: 0.9 lr_policy: \"fixed\" random_seed: 1\n"
                         "max_iter: 4 display: 1 snapshot: 2 snapshot_prefix: \"" +
                             prefix +
                             "\"\n"
                             "test_iter: 2 test_interval: 2\n");
  RunResult r = RunProgram(
      {kPsNet, "train", "--solver", dir_ / "solver.prototxt", "--json", "--threads", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  std::vector<std::string> events;
  for (const auto& o : JsonLines(r.out)) {
    events.push_back(o.strings.at("event") + "@" +
                     std::to_string(static_cast<int>(o.numbers.at("iter"))));
    if (o.strings.at("event") == "train") {
      EXPECT_GT(o.numbers.at("loss"), 0);
      EXPECT_NEAR(o.numbers.at("lr"), 0.1, 1e-7);
    }
    if (o.strings.at("event") == "test") {
      EXPECT_EQ(o.numbers.count("accuracy"), 1u);
    }
    if (o.strings.at("event") == "snapshot") {
      EXPECT_EQ(o.strings.at("path"), prefix + "_iter_" +
                                          std::to_string(static_cast<int>(o.numbers.at("iter"))) +
                                          ".caffemodel");
    }
  }
  EXPECT_EQ(events,
            (std::vector<std::string>{"test@0", "train@0", "train@1", "snapshot@2", "test@2",
                                      "train@2", "train@3", "snapshot@4", "test@4", "done@4"}));
  for (const char* suffix :
       {"_iter_2.caffemodel", "_iter_2.solverstate", "_iter_4.caffemodel", "_iter_4.solverstate"}) {
    EXPECT_TRUE(FileExists(prefix + suffix)) << suffix;
  }
  EXPECT_EQ(Listing(dir_ / "out").size(), 4u) << "only the snapshots (no temporary files)";
  auto net = testing::BuildNet(kTinyNet);
  ASSERT_NE(net, nullptr);
  EXPECT_TRUE(net->CopyTrainedLayersFromFile(prefix + "_iter_4.caffemodel").ok());
}

// A net whose fourth line holds a layer of a type nobody registered.
constexpr const char* kUnknownTypeNet = R"(name: "unknown"
layer { name: "data" type: "DummyData" top: "data" top: "label"
        dummy_data_param { shape { dim: 4 dim: 6 } shape { dim: 4 } } }
layer { name: "x" type: "Frobnicate" bottom: "data" top: "s" }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" top: "loss" }
)";

std::string SolverFor(const std::string& net, const std::string& extra) {
  return "net: \"" + net + "\"\nlr_policy: \"fixed\" random_seed: 1 max_iter: 50\n" + extra + "\n";
}

bool StartsWith(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

TEST_F(ToolsTest, PsNetExitCodesSayWhatFailed) {
  // Bad input: 1, the message names the user's file and line.
  testing::WriteTextFile(dir_ / "unknown.prototxt", kUnknownTypeNet);
  testing::WriteTextFile(dir_ / "unknown_solver.prototxt",
                         SolverFor(dir_ / "unknown.prototxt", "base_lr: 0.1"));
  RunResult r = RunProgram({kPsNet, "train", "--solver", dir_ / "unknown_solver.prototxt"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(StartsWith(r.err, "ps-net: " + (dir_ / "unknown.prototxt") +
                                    ":4: layer 'x' (Frobnicate): unknown layer type "
                                    "'Frobnicate': not a Caffe layer type either"))
      << r.err;
  EXPECT_NE(r.err.find(" (known types: "), std::string::npos) << r.err;
  EXPECT_EQ(Lines(r.err).size(), 1u);

  // Divergence: 3.
  testing::WriteTextFile(dir_ / "euclid.prototxt", R"(name: "euclid"
layer { name: "data" type: "DummyData" top: "data" top: "target"
        dummy_data_param { shape { dim: 4 dim: 3 } shape { dim: 4 dim: 2 }
                           data_filler { type: "gaussian" std: 1 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "y"
        inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 1 } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "y" bottom: "target" top: "loss" }
)");
  testing::WriteTextFile(dir_ / "diverge_solver.prototxt",
                         SolverFor(dir_ / "euclid.prototxt", "base_lr: 1e20"));
  r = RunProgram({kPsNet, "train", "--solver", dir_ / "diverge_solver.prototxt"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_TRUE(StartsWith(r.err, "ps-net: training diverged: the loss is ")) << r.err;

  // The same solver with a sane rate trains: the 3 was the divergence's.
  testing::WriteTextFile(
      dir_ / "sane_solver.prototxt",
      SolverFor(dir_ / "euclid.prototxt", "base_lr: 0.01") + "snapshot_after_train: false");
  r = RunProgram({kPsNet, "train", "--solver", dir_ / "sane_solver.prototxt"});
  EXPECT_EQ(r.exit_code, 0) << r.err;

  // A bad flag value: 2.
  r = RunProgram({kPsNet, "train", "--solver", dir_ / "sane_solver.prototxt", "--engine", "x"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err).at(0), "ps-net: --engine must be 'auto', 'fast' or 'reference', got 'x'");
}

// Caffe's habits: `caffe train -solver s.prototxt -gpu=0` spellings, device_query.
TEST_F(ToolsTest, PsNetAcceptsCaffeSpellings) {
  testing::WriteTextFile(dir_ / "tiny.prototxt", kTinyNet);
  testing::WriteTextFile(
      dir_ / "solver.prototxt",
      SolverFor(dir_ / "tiny.prototxt", "base_lr: 0.1 display: 10 snapshot_after_train: false"));
  const std::string solver = dir_ / "solver.prototxt";
  // The last two lines without glog's prefix (time, pid, file:line).
  const auto last_line = [](const RunResult& r) {
    const auto lines = Lines(r.out);
    std::string last;
    for (size_t i = lines.size() < 2 ? 0 : lines.size() - 2; i < lines.size(); ++i) {
      last += lines[i].substr(lines[i].find("] ") + 2) + "\n";
    }
    return last;
  };
  const RunResult dashes = RunProgram({kPsNet, "train", "--solver", solver, "--threads", "1"});
  ASSERT_EQ(dashes.exit_code, 0) << dashes.err;
  EXPECT_TRUE(StartsWith(last_line(dashes), "Iteration 50, loss = ")) << dashes.out;
  EXPECT_NE(last_line(dashes).find("\nOptimization Done.\n"), std::string::npos) << dashes.out;
  const RunResult caffe = RunProgram({kPsNet, "train", "-solver", solver, "-threads", "1"});
  EXPECT_EQ(caffe.exit_code, 0) << caffe.err;
  EXPECT_EQ(last_line(caffe), last_line(dashes));
  const RunResult equals = RunProgram({kPsNet, "train", "-solver=" + solver, "-threads=1"});
  EXPECT_EQ(equals.exit_code, 0) << equals.err;
  EXPECT_EQ(last_line(equals), last_line(dashes));

  // A Caffe spelling of an option the command lacks is still refused.
  RunResult r = RunProgram({kPsNet, "time", "-solver", solver});
  EXPECT_EQ(r.exit_code, 2);

  r = RunProgram({kPsNet, "device_query"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, RunProgram({kPsNet, "devices"}).out);
}

TEST_F(ToolsTest, EveryProgramAnswersHelpAndVersion) {
  const std::string server = ProgramPath("ps-server");
  for (const auto& [program, name] :
       std::vector<std::pair<std::string, std::string>>{{kPsNet, "ps-net"},
                                                        {kPsData, "ps-data"},
                                                        {kPsWorker, "ps-worker"},
                                                        {server, "ps-server"}}) {
    RunResult r = RunProgram({program, "--help"});
    EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
    EXPECT_NE(r.out, "") << name;
    EXPECT_EQ(r.err, "") << name;
    r = RunProgram({program, "--version"});
    EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
    EXPECT_EQ(r.out, name + " 0.1.0\n");
  }
  for (const std::string command :
       {"train", "check", "test", "time", "diff", "devices", "device_query"}) {
    RunResult r = RunProgram({kPsNet, command, "--help"});
    EXPECT_EQ(r.exit_code, 0) << command << ": " << r.err;
    EXPECT_NE(r.out, "") << command;
    r = RunProgram({kPsNet, command, "-help"});
    EXPECT_EQ(r.exit_code, 0) << command << ": " << r.err;
  }
  EXPECT_EQ(RunProgram({kPsNet, "train", "--version"}).out, "ps-net 0.1.0\n");
}

// solver_mode: GPU is Caffe's request for a GPU: honoured on CUDA builds,
// refused with a message naming the solver file on others.
TEST_F(ToolsTest, SolverModeGpuIsHonouredOrRefused) {
  testing::WriteTextFile(dir_ / "tiny.prototxt", kTinyNet);
  const std::string solver = dir_ / "gpu_solver.prototxt";
  testing::WriteTextFile(solver, SolverFor(dir_ / "tiny.prototxt",
                                           "base_lr: 0.1 snapshot_after_train: false "
                                           "solver_mode: GPU device_id: 0"));
  const RunResult devices = RunProgram({kPsNet, "devices"});
  if (devices.out.find("CUDA build: no") != std::string::npos) {
    RunResult r = RunProgram({kPsNet, "train", "-solver", solver});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err, "ps-net: " + solver +
                         ":3: solver_mode: GPU, but this build has no CUDA (use solver_mode: CPU "
                         "or drop it)\n");
    EXPECT_EQ(r.out, "");
    r = RunProgram({kPsWorker, "--solver", solver, "--servers", "tcp://127.0.0.1:1"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err, "ps-worker 0: " + solver +
                         ":3: solver_mode: GPU, but this build has no CUDA (use solver_mode: CPU "
                         "or drop it)\n");
  }
  // solver_mode: CPU trains as before.
  testing::WriteTextFile(solver, SolverFor(dir_ / "tiny.prototxt",
                                           "base_lr: 0.1 snapshot_after_train: false "
                                           "solver_mode: CPU"));
  const RunResult r = RunProgram({kPsNet, "train", "-solver", solver});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(ToolsTest, PsWorkerExitCodesSeparateRetryableFailures) {
  ASSERT_TRUE(FileExists(kPsWorker)) << kPsWorker << " is not built";
  // Port 1 on the loopback: nobody listens there (it needs root), so the
  // worker's greeting goes unanswered.
  const std::string absent_server = "tcp://127.0.0.1:1";
  RunResult r = RunProgram({kPsWorker, "--servers", absent_server});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "ps-worker: --solver is required\n");

  const std::string missing = dir_ / "absent_solver.prototxt";
  r = RunProgram({kPsWorker, "--solver", missing, "--servers", absent_server});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ps-worker 0: " + missing + ": cannot open (No such file or directory)\n");

  testing::WriteTextFile(dir_ / "unknown.prototxt", kUnknownTypeNet);
  testing::WriteTextFile(dir_ / "unknown_solver.prototxt",
                         SolverFor(dir_ / "unknown.prototxt", "base_lr: 0.1"));
  r = RunProgram(
      {kPsWorker, "--solver", dir_ / "unknown_solver.prototxt", "--servers", absent_server});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(StartsWith(r.err, "ps-worker 0: " + (dir_ / "unknown.prototxt") +
                                    ":4: layer 'x' (Frobnicate): unknown layer type"))
      << r.err;

  // A good job and no server: retryable (75), after --timeout-s.
  testing::WriteTextFile(dir_ / "tiny.prototxt", kTinyNet);
  testing::WriteTextFile(dir_ / "solver.prototxt",
                         SolverFor(dir_ / "tiny.prototxt", "base_lr: 0.1"));
  const auto start = std::chrono::steady_clock::now();
  r = RunProgram({kPsWorker, "--solver", dir_ / "solver.prototxt", "--servers", absent_server,
                  "--timeout-s", "1"});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 75) << r.err;
  EXPECT_TRUE(StartsWith(r.err, "ps-worker 0: ")) << r.err;
  EXPECT_NE(r.err.find(absent_server), std::string::npos) << r.err;
  EXPECT_GE(seconds, 1.0);
  EXPECT_LT(seconds, 20.0);
}

TEST_F(ToolsTest, PsDataMissingInputExitsOne) {
  const std::string images = dir_ / "absent-images.idx";
  testing::WriteFile(dir_ / "labels.idx", testing::IdxLabels(std::string("\x01\x02", 2)), false);
  RunResult r = RunProgram({kPsData, "mnist", images, dir_ / "labels.idx", dir_ / "out_lmdb"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(StartsWith(r.err, "ps-data: " + images + ": cannot open")) << r.err;
  EXPECT_FALSE(FileExists(dir_ / "out_lmdb"));
}

TEST_F(ToolsTest, PsDataBadMagicLeavesNoOutput) {
  const std::string images = dir_ / "images.idx";
  const std::string labels = dir_ / "labels.idx";
  std::string idx = testing::IdxImages(2, 2, 2, std::string(8, '\x7f'));
  idx[3] = '\x04';  // magic 0x804
  testing::WriteFile(images, idx, false);
  testing::WriteFile(labels, testing::IdxLabels(std::string("\x01\x02", 2)), false);
  const std::string out = dir_ / "out_lmdb";
  RunResult r = RunProgram({kPsData, "mnist", images, labels, out}, dir_.path());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ps-data: " + images +
                       ": not an IDX image file (magic number 0x00000804, expected 0x00000803)\n");
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(FileExists(out));
  EXPECT_EQ(Listing(dir_.path()).size(), 2u) << "something besides the inputs was left";

  // The good file converts (so the failure above was the magic number's).
  idx[3] = '\x03';
  testing::WriteFile(images, idx, false);
  r = RunProgram({kPsData, "mnist", images, labels, out, "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto objects = JsonLines(r.out);
  ASSERT_EQ(objects.size(), 1u);
  EXPECT_EQ(objects[0].numbers.at("records"), 2);
  EXPECT_TRUE(FileExists(out));
}

TEST_F(ToolsTest, PsDataBadArgumentsExitTwo) {
  RunResult r = RunProgram({kPsData});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err).size(), 1u);
  r = RunProgram({kPsData, "mnist", "a", "b"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("ps-data: mnist takes IMAGES LABELS OUT_LMDB, got 2 arguments", 0), 0u)
      << r.err;
}

}  // namespace
}  // namespace pstrain
