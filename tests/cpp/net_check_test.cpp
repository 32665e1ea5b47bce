// What a Caffe user meets before training starts (issue 31): the layer
// registry's messages for a type it lacks, `ps-net check`'s build of a
// solver's nets without data (CheckSolver: each problem named by file:line,
// each data source read to its first record only), the solver's `weights:`
// fields loaded as `caffe train` loads them, and the job `ps-net train -gpu
// 0,1` generates.
#include "worker/net_check.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/cpp/data_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"
#include "worker/layer_registry.hpp"
#include "worker/multi_gpu_job.hpp"
#include "worker/trainer.hpp"

namespace pstrain {
namespace {

using testing::TempDir;
using testing::WriteTextFile;

std::string UnknownTypeMessage(const std::string& type) {
  caffe::LayerParameter param;
  param.set_name("x");
  param.set_type(type);
  auto layer = LayerRegistry::Global().Create(param);
  EXPECT_FALSE(layer.ok()) << type;
  return layer.ok() ? "" : layer.status().message();
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(LayerRegistryTest, UnknownTypesSayWhatTheyAre) {
  EXPECT_TRUE(Contains(UnknownTypeMessage("Convoluton"),
                       "unknown layer type 'Convoluton'; did you mean 'Convolution'?"));
  EXPECT_TRUE(Contains(UnknownTypeMessage("relu"), "did you mean 'ReLU'?"));
  EXPECT_TRUE(Contains(UnknownTypeMessage("SoftmaxWithLos"), "did you mean 'SoftmaxWithLoss'?"));
  // SSD's layer: neither ours nor Caffe's, and not close to a known one.
  const std::string prior_box = UnknownTypeMessage("PriorBox");
  EXPECT_TRUE(Contains(prior_box, "unknown layer type 'PriorBox': not a Caffe layer type"))
      << prior_box;
  EXPECT_FALSE(Contains(prior_box, "did you mean")) << prior_box;
  // Every Caffe type is registered now, so a Caffe type a registry lacks is
  // shown with a registry of a few types: it says so, and is no misspelling of
  // a near type; a data layer's also says how to read the data with Data.
  LayerRegistry few;
  for (const char* type : {"ReLU", "Convolution", "Data"}) {
    few.Add(type, [](const caffe::LayerParameter& p) {
      return std::move(LayerRegistry::Global().Create(p)).value();
    });
  }
  auto few_message = [&](const std::string& type) {
    caffe::LayerParameter param;
    param.set_type(type);
    auto layer = few.Create(param);
    EXPECT_FALSE(layer.ok()) << type;
    return layer.ok() ? "" : layer.status().message();
  };
  const std::string window_data = few_message("WindowData");
  EXPECT_TRUE(Contains(window_data,
                       "layer type 'WindowData' is a Caffe layer type that PSTrain does not have "
                       "yet; convert the data into an LMDB with ps-data"))
      << window_data;
  EXPECT_FALSE(Contains(window_data, "did you mean")) << window_data;
  const std::string tanh = few_message("TanH");
  EXPECT_EQ(tanh,
            "layer type 'TanH' is a Caffe layer type that PSTrain does not have (known types: "
            "Convolution, Data, ReLU)");
  // The global registry has every Caffe type, WindowData the last one added.
  caffe::LayerParameter window_param;
  window_param.set_type("WindowData");
  EXPECT_TRUE(LayerRegistry::Global().Create(window_param).ok());
  for (const std::string& message : {prior_box, window_data}) {
    EXPECT_TRUE(Contains(message, "(known types: ")) << message;
  }
}

constexpr const char* kSolverHead =
    "base_lr: 0.1 lr_policy: \"fixed\" max_iter: 4 random_seed: 3\n";

// A net reading `source` (batch 2) in TRAIN, DummyData in TEST; `extra`
// (one line: line 9) goes before the loss.
std::string DataNet(const std::string& source, const std::string& extra = "") {
  return "name: \"check\"\n"                                                     // 1
         "layer { name: \"data\" type: \"Data\" top: \"data\" top: \"label\"\n"  // 2
         "  include { phase: TRAIN } data_param { source: \"" +                  // 3
         source +
         "\" batch_size: 2 } }\n"
         "layer { name: \"test_data\" type: \"DummyData\" top: \"data\" top: \"label\"\n"  // 4
         "  include { phase: TEST } dummy_data_param { shape { dim: 2 dim: 1 dim: 3 dim: 3 }\n"
         "  shape { dim: 2 } } }\n"                                                    // 6
         "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\"\n"  // 7
         "  inner_product_param { num_output: 2 weight_filler { type: \"xavier\" } } }\n" +
         extra +
         "layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"ip\" bottom: \"label\" "
         "top: \"loss\" }\n";
}

class NetCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::WriteCountingLmdb(dir_ / "lmdb", 6, 3, 3);
    solver_ = dir_ / "solver.prototxt";
  }
  // Writes the net and a solver naming it (plus `solver_extra`); returns CheckSolver's error.
  std::string CheckError(const std::string& net, const std::string& solver_extra = "") {
    WriteTextFile(dir_ / "net.prototxt", net);
    WriteTextFile(solver_, std::string(kSolverHead) + "net: \"" + (dir_ / "net.prototxt") +
                               "\"\ntest_iter: 1 test_interval: 2\n" + solver_extra);
    auto checked = CheckSolver(solver_, {});
    return checked.ok() ? "" : checked.status().message();
  }

  TempDir dir_;
  std::string solver_;
};

TEST_F(NetCheckTest, BuildsBothNetsReadingTheFirstRecordOnly) {
  // Record 3 does not parse: training meets it in its second batch, the check
  // never reads past record 0.
  std::vector<std::pair<std::string, std::string>> records;
  for (int i = 0; i < 4; ++i) {
    char key[16];
    std::snprintf(key, sizeof(key), "%08d", i);
    records.emplace_back(
        key, i == 3 ? std::string("\xff\xff not a datum") : testing::UniformDatum(3, 3, 10, i % 2));
  }
  testing::WriteLmdb(dir_ / "bad_lmdb", records);
  EXPECT_EQ(CheckError(DataNet(dir_ / "bad_lmdb")), "");
  auto checked = CheckSolver(solver_, {});
  ASSERT_TRUE(checked.ok());
  EXPECT_EQ(checked.value().train_net, "check");
  EXPECT_EQ(checked.value().test_nets, 1);
  EXPECT_EQ(checked.value().learnable_values, 9 * 2 + 2);
  EXPECT_EQ(checked.value().outputs, std::vector<std::string>{"loss"});
  // The Data layer stands in as an Input of the shape of its batches.
  EXPECT_EQ(checked.value().inputs, (std::vector<std::string>{"data 2x1x3x3", "label 2"}));

  TrainerOptions options;
  options.write_snapshots = false;
  options.run_tests = false;
  auto trainer = Trainer::FromFile(solver_, options);
  ASSERT_TRUE(trainer.ok()) << trainer.status().message();
  EXPECT_FALSE(trainer.value()->Step(2).ok()) << "training reads record 3";
}

TEST_F(NetCheckTest, EachProblemIsNamedByFileAndLine) {
  const std::string net = dir_ / "net.prototxt";
  const std::string lmdb = dir_ / "lmdb";
  EXPECT_EQ(CheckError(DataNet(lmdb)), "");
  const std::string misspelt = CheckError(DataNet(lmdb,
                                                  "layer { name: \"conv\" type: \"Convoluton\" "
                                                  "bottom: \"data\" top: \"c\" }\n"));
  EXPECT_TRUE(Contains(misspelt, net + ":9: layer 'conv' (Convoluton): unknown layer type "
                                       "'Convoluton'; did you mean 'Convolution'?"))
      << misspelt;
  const std::string no_producer = CheckError(
      DataNet(lmdb, "layer { name: \"r\" type: \"ReLU\" bottom: \"dat\" top: \"r\" }\n"));
  EXPECT_TRUE(Contains(no_producer, net + ":9: layer 'r' (ReLU): unknown bottom blob 'dat'"))
      << no_producer;
  const std::string prior_box = CheckError(
      DataNet(lmdb, "layer { name: \"p\" type: \"PriorBox\" bottom: \"data\" top: \"p\" }\n"));
  EXPECT_TRUE(Contains(prior_box, net + ":9: layer 'p' (PriorBox): unknown layer type "
                                        "'PriorBox': not a Caffe layer type"))
      << prior_box;
  // snapshot_format HDF5 is written as Caffe does, except for a layer whose
  // name has a '/' (an HDF5 path, where Caffe's own snapshot fails).
  EXPECT_EQ(CheckError(DataNet(lmdb), "snapshot_format: HDF5\n"), "");
  EXPECT_EQ(CheckError(DataNet(lmdb, "layer { name: \"ip/relu\" type: \"ReLU\" bottom: "
                                     "\"data\" top: \"r\" }\n"),
                       "snapshot_format: HDF5\n"),
            solver_ + ":4: snapshot_format HDF5 cannot write layer 'ip/relu' (a '/' in its name); "
                      "use BINARYPROTO");
  EXPECT_EQ(CheckError(DataNet(lmdb, "layer { name: \"data\" type: \"ReLU\" bottom: "
                                     "\"data\" top: \"r\" }\n"),
                       "snapshot_format: HDF5\n"),
            solver_ + ":4: snapshot_format HDF5 cannot write layer 'data' (a name an earlier "
                      "layer has); use BINARYPROTO");
  const std::string absent = CheckError(DataNet(dir_ / "absent_lmdb"));
  EXPECT_TRUE(Contains(
      absent, net + ":2: layer 'data' (Data): " + (dir_ / "absent_lmdb") + ": cannot open LMDB"))
      << absent;
  const std::string hdf5 = CheckError(DataNet(lmdb,
                                              "layer { name: \"h5\" type: \"HDF5Data\" top: "
                                              "\"h\" hdf5_data_param { source: \"h5list.txt\" "
                                              "batch_size: 2 } }\n"));
  // HDF5Data reads its list of files (and each file's datasets) at set-up.
  EXPECT_TRUE(Contains(hdf5, net + ":9: layer 'h5' (HDF5Data): h5list.txt: cannot open the list "
                                   "of HDF5 files"))
      << hdf5;
  // A solver's weights file that is not there stops the check too, named by the solver's line.
  const std::string weights = CheckError(DataNet(lmdb), "weights: \"absent.caffemodel\"\n");
  EXPECT_TRUE(Contains(weights, solver_ + ":4: weights: absent.caffemodel: cannot open"))
      << weights;
}

// The solver's weights: fields, as Caffe's Solver loads them: each a
// comma-separated list, files in order (a later file wins for the layers it
// holds), relative paths from the working folder (here: beside the solver);
// TrainerOptions::weights (-weights) replaces them.
TEST_F(NetCheckTest, SolverWeightsAreLoadedAsCaffeLoadsThem) {
  WriteTextFile(dir_ / "net.prototxt", DataNet(dir_ / "lmdb"));
  auto write_model = [&](const std::string& name, float value) {
    auto net = testing::BuildNet(DataNet(dir_ / "lmdb"));
    ASSERT_NE(net, nullptr);
    for (const auto& p : net->learnable_params()) {
      float* data = p.blob->mutable_cpu_data();
      for (int64_t i = 0; i < p.blob->count(); ++i) data[i] = value;
    }
    ASSERT_TRUE(net->WriteCaffemodel(dir_ / name).ok());
  };
  write_model("one.caffemodel", 1.f);
  write_model("two.caffemodel", 2.f);
  auto first_weight = [&](const std::string& weights_fields, const std::string& flag) {
    WriteTextFile(solver_, std::string(kSolverHead) + "net: \"" + (dir_ / "net.prototxt") + "\"\n" +
                               weights_fields);
    TrainerOptions options;
    options.weights = flag;
    auto trainer = Trainer::FromFile(solver_, options);
    EXPECT_TRUE(trainer.ok()) << trainer.status().message();
    return trainer.ok() ? trainer.value()->net().learnable_params()[0].blob->cpu_data()[0] : -1.f;
  };
  EXPECT_EQ(first_weight("weights: \"one.caffemodel\"\n", ""), 1.f);
  EXPECT_EQ(first_weight("weights: \"one.caffemodel, two.caffemodel\"\n", ""), 2.f);
  EXPECT_EQ(first_weight("weights: \"two.caffemodel\"\nweights: \"one.caffemodel\"\n", ""), 1.f);
  EXPECT_EQ(first_weight("weights: \"two.caffemodel\"\n", dir_ / "one.caffemodel"), 1.f);
  EXPECT_NE(first_weight("", ""), 1.f);  // the filler's values
}

TEST(MultiGpuJobTest, GpuListsAndTheGeneratedJob) {
  EXPECT_EQ(ParseGpuList("0,1", 0).value(), (std::vector<int>{0, 1}));
  EXPECT_EQ(ParseGpuList("all", 3).value(), (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(ParseGpuList("all", 0).value().empty());
  EXPECT_EQ(ParseGpuList("2", 0).value(), (std::vector<int>{2}));
  for (const char* bad : {"0,", "x", "0;1", "-1", ""}) {
    auto parsed = ParseGpuList(bad, 2);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().message(), "-gpu " + std::string(bad) +
                                             ": expected device ids separated by commas (0,1) "
                                             "or 'all'");
  }
  const MultiGpuJob job = MakeMultiGpuJob("nets/lenet solver.prototxt", "a.caffemodel, /w/b",
                                          {0, 1}, "/home/u", "generated by: ps-net train");
  EXPECT_EQ(job.name, "lenet_solver");
  EXPECT_EQ(job.solver, "/home/u/nets/lenet solver.prototxt");
  EXPECT_EQ(job.weights, "/home/u/a.caffemodel,/w/b");
  EXPECT_EQ(job.output, "/home/u/runs");
  const std::string yaml = MultiGpuJobYaml(job);
  for (const char* line :
       {"\nname: \"lenet_solver\"\n", "\nsolver: \"/home/u/nets/lenet solver.prototxt\"\n",
        "\nsolver_overrides: {weights: [\"/home/u/a.caffemodel,/w/b\"]}\n",
        "\ncluster:\n  servers: 1\n  server_device: cpu\n  workers: 2\n  worker_devices: [0, "
        "1]\n",
        "\nconsistency: {mode: bsp}\n", "\ntransport: {kind: ipc}\n",
        "\noutput: \"/home/u/runs\"\n"}) {
    EXPECT_TRUE(Contains(yaml, line)) << line << " in\n" << yaml;
  }
  // A run folder too deep for Unix sockets: TCP.
  const MultiGpuJob deep =
      MakeMultiGpuJob("s.prototxt", "", {0, 1, 2}, "/" + std::string(90, 'd'), "x");
  EXPECT_TRUE(Contains(MultiGpuJobYaml(deep), "\ntransport: {kind: tcp}\n"));
  EXPECT_TRUE(Contains(MultiGpuJobYaml(deep), "  workers: 3\n  worker_devices: [0, 1, 2]\n"));
  EXPECT_FALSE(Contains(MultiGpuJobYaml(deep), "weights"));
}

}  // namespace
}  // namespace pstrain
