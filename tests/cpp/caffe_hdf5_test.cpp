// Caffe's HDF5 snapshots (snapshot_format: HDF5) read and written by PSTrain.
// For reading, the files are written here by hand with libhdf5's C API in the layout BVLC Caffe's
// Net::ToHDF5 and SGDSolver::SnapshotSolverStateToHDF5 produce (a group per
// layer under "data", also for layers without parameters; int datasets of
// shape (1) for iter and current_step; a fixed-length string learned_net;
// history/0..n-1), so that no Caffe is needed. The reference numbers are a
// binary snapshot of the same run: resuming from its HDF5 copy must end where
// the uninterrupted run ends.
#include <hdf5.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "common/proto_io.hpp"
#include "tests/cpp/data_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"
#include "worker/caffe_hdf5.hpp"
#include "worker/data/hdf5_file.hpp"
#include "worker/trainer.hpp"

namespace pstrain {
namespace {

using testing::ParamValues;
using testing::ParseSolver;
using Params = std::vector<std::vector<float>>;

void WriteFloats(hid_t loc, const std::string& name, const caffe::BlobProto& blob) {
  std::vector<hsize_t> dims(blob.shape().dim().begin(), blob.shape().dim().end());
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t set = H5Dcreate2(loc, name.c_str(), H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT,
                               H5P_DEFAULT);
  ASSERT_GE(set, 0) << name;
  ASSERT_GE(H5Dwrite(set, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, blob.data().data()), 0);
  H5Dclose(set);
  H5Sclose(space);
}

// Caffe's hdf5_save_int: H5LTmake_dataset_int(loc, name, 1, {1}, &value).
void WriteInt(hid_t loc, const std::string& name, int value) {
  const hsize_t one = 1;
  const hid_t space = H5Screate_simple(1, &one, nullptr);
  const hid_t set =
      H5Dcreate2(loc, name.c_str(), H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(set, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, &value);
  H5Dclose(set);
  H5Sclose(space);
}

// Caffe's hdf5_save_string: H5LTmake_dataset_string (scalar, fixed length + NUL).
void WriteString(hid_t loc, const std::string& name, const std::string& text) {
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, text.size() + 1);
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t set = H5Dcreate2(loc, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, text.c_str());
  H5Dclose(set);
  H5Sclose(space);
  H5Tclose(type);
}

hid_t CreateGroup(hid_t loc, const std::string& name) {
  return H5Gcreate2(loc, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
}

// A binary .caffemodel rewritten as Caffe's HDF5 model; `skip_blob0_of`: a
// layer whose dataset "0" is left out (as Caffe leaves out a shared blob).
void CaffemodelToHdf5(const std::string& caffemodel, const std::string& h5,
                      const std::string& skip_blob0_of = "") {
  caffe::NetParameter model;
  ASSERT_TRUE(ReadBinaryProto(caffemodel, &model).ok());
  const hid_t file = H5Fcreate(h5.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hid_t data = CreateGroup(file, "data");
  for (const auto& layer : model.layer()) {
    const hid_t group = CreateGroup(data, layer.name());
    for (int j = 0; j < layer.blobs_size(); ++j) {
      if (j == 0 && layer.name() == skip_blob0_of) continue;
      WriteFloats(group, std::to_string(j), layer.blobs(j));
    }
    H5Gclose(group);
  }
  // A layer the net does not have: ignored, as Caffe ignores it.
  const hid_t extra = CreateGroup(data, "not_in_the_net");
  caffe::BlobProto blob;
  blob.mutable_shape()->add_dim(2);
  blob.add_data(1), blob.add_data(2);
  WriteFloats(extra, "0", blob);
  H5Gclose(extra);
  H5Gclose(data);
  H5Fclose(file);
}

void SolverStateToHdf5(const std::string& solverstate, const std::string& h5,
                       const std::string& learned_net) {
  caffe::SolverState state;
  ASSERT_TRUE(ReadBinaryProto(solverstate, &state).ok());
  const hid_t file = H5Fcreate(h5.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  WriteInt(file, "iter", state.iter());
  WriteString(file, "learned_net", learned_net);
  WriteInt(file, "current_step", state.current_step());
  const hid_t history = CreateGroup(file, "history");
  for (int i = 0; i < state.history_size(); ++i) WriteFloats(history, std::to_string(i), state.history(i));
  H5Gclose(history);
  H5Fclose(file);
}

// Two parameter layers and a layer without parameters between them.
std::string Solver(const testing::TempDir& dir) {
  return R"(
    base_lr: 0.2 momentum: 0.9 lr_policy: "inv" gamma: 0.1 power: 0.75 weight_decay: 0.01
    max_iter: 6 snapshot: 3 random_seed: 5 snapshot_prefix: ")" +
         (dir / "snaps/run") + R"(" net_param {
    layer { name: "data" type: "Data" top: "data" top: "label"
            data_param { source: ")" +
         (dir / "lmdb") + R"(" batch_size: 3 } transform_param { scale: 0.015625 } }
    layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "h"
            inner_product_param { num_output: 4 weight_filler { type: "gaussian" std: 0.3 } } }
    layer { name: "relu" type: "ReLU" bottom: "h" top: "h" }
    layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "s"
            inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.3 } } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" top: "loss" } })";
}

std::unique_ptr<Trainer> MakeTrainer(const std::string& solver, TrainerOptions options = {}) {
  auto trainer = Trainer::Create(ParseSolver(solver), "solver.prototxt", options);
  EXPECT_TRUE(trainer.ok()) << trainer.status().message();
  return trainer.ok() ? std::move(trainer).value() : nullptr;
}

TEST(CaffeHdf5Test, ResumingFromCaffesHdf5SnapshotEndsWhereTheUninterruptedRunEnds) {
  testing::TempDir dir;
  testing::WriteMixedLmdb(dir / "lmdb", 10);
  const std::string solver = Solver(dir);
  auto whole = MakeTrainer(solver);
  ASSERT_NE(whole, nullptr);
  ASSERT_TRUE(whole->Solve().ok());
  const Params final_weights = ParamValues(whole->net());

  CaffemodelToHdf5(dir / "snaps/run_iter_3.caffemodel", dir / "run_iter_3.caffemodel.h5");
  SolverStateToHdf5(dir / "snaps/run_iter_3.solverstate", dir / "run_iter_3.solverstate.h5",
                    dir / "run_iter_3.caffemodel.h5");
  TrainerOptions resume;
  resume.resume_from = dir / "run_iter_3.solverstate.h5";
  auto resumed = MakeTrainer(solver, resume);
  ASSERT_NE(resumed, nullptr);
  EXPECT_EQ(resumed->iter(), 3);
  ASSERT_TRUE(resumed->Solve().ok());
  EXPECT_EQ(resumed->iter(), 6);
  // Same iteration counter (the inv learning rate), weights and momentum
  // history: the same float operations as the uninterrupted run.
  EXPECT_EQ(ParamValues(resumed->net()), final_weights);

  // The HDF5 model alone, into a fresh net: the iteration-3 weights exactly.
  auto fresh = MakeTrainer(solver);
  ASSERT_NE(fresh, nullptr);
  ASSERT_TRUE(fresh->LoadWeights(dir / "run_iter_3.caffemodel.h5").ok());
  auto from_binary = MakeTrainer(solver);
  ASSERT_NE(from_binary, nullptr);
  ASSERT_TRUE(from_binary->LoadWeights(dir / "snaps/run_iter_3.caffemodel").ok());
  EXPECT_EQ(ParamValues(fresh->net()), ParamValues(from_binary->net()));
  EXPECT_NE(ParamValues(fresh->net()), final_weights);
}

TEST(CaffeHdf5Test, ReadsTheStateAsCaffeWroteIt) {
  testing::TempDir dir;
  testing::WriteMixedLmdb(dir / "lmdb", 10);
  auto whole = MakeTrainer(Solver(dir));
  ASSERT_NE(whole, nullptr);
  ASSERT_TRUE(whole->Solve().ok());
  caffe::SolverState binary, h5;
  ASSERT_TRUE(ReadBinaryProto(dir / "snaps/run_iter_6.solverstate", &binary).ok());
  SolverStateToHdf5(dir / "snaps/run_iter_6.solverstate", dir / "s.solverstate.h5", "m.caffemodel.h5");
  ASSERT_TRUE(ReadSolverStateFile(dir / "s.solverstate.h5", &h5).ok());
  EXPECT_EQ(h5.iter(), 6);
  EXPECT_EQ(h5.learned_net(), "m.caffemodel.h5");
  ASSERT_EQ(h5.history_size(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(h5.history(i).shape().DebugString(), binary.history(i).shape().DebugString()) << i;
    EXPECT_EQ(std::vector<float>(h5.history(i).data().begin(), h5.history(i).data().end()),
              std::vector<float>(binary.history(i).data().begin(), binary.history(i).data().end()))
        << i;
  }
}

TEST(CaffeHdf5Test, ErrorsNameTheFileAndDataset) {
  testing::TempDir dir;
  testing::WriteMixedLmdb(dir / "lmdb", 10);
  auto whole = MakeTrainer(Solver(dir));
  ASSERT_NE(whole, nullptr);
  ASSERT_TRUE(whole->Solve().ok());
  const std::string gap = dir / "gap.caffemodel.h5";
  CaffemodelToHdf5(dir / "snaps/run_iter_6.caffemodel", gap, "ip2");
  Status s = whole->LoadWeights(gap);
  EXPECT_EQ(s.message(), gap + ": layer 'ip2' has 1 datasets but no 'data/ip2/0' (a parameter "
                               "shared with another layer is left out of Caffe's HDF5 model; only "
                               "trailing ones can be)");

  const std::string no_iter = dir / "no_iter.solverstate.h5";
  const hid_t file = H5Fcreate(no_iter.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  WriteInt(file, "current_step", 0);
  H5Fclose(file);
  caffe::SolverState state;
  EXPECT_EQ(ReadSolverStateFile(no_iter, &state).message(), no_iter + ": dataset 'iter' not found");

  // Not HDF5 despite the name: said so, not parsed as a binary proto.
  const std::string text = dir / "text.caffemodel.h5";
  testing::WriteTextFile(text, "layer { name: 'ip1' }");
  EXPECT_EQ(whole->LoadWeights(text).message(), text + ": not an HDF5 file");
}

// The solver of Solver() with snapshot_format HDF5 (and `extra` fields).
std::string Hdf5Solver(const testing::TempDir& dir, const std::string& extra = "") {
  return Solver(dir) + " snapshot_format: HDF5 " + extra;
}

std::vector<std::string> LinksOf(const Hdf5Reader& file, const std::string& group) {
  auto links = file.Links(group);
  EXPECT_TRUE(links.ok()) << group << ": " << links.status().message();
  return links.ok() ? links.value() : std::vector<std::string>{};
}

TEST(CaffeHdf5Test, WritesCaffesHdf5SnapshotsThatResumeExactly) {
  testing::TempDir dir;
  testing::WriteMixedLmdb(dir / "lmdb", 10);
  auto binary = MakeTrainer(Solver(dir));
  ASSERT_NE(binary, nullptr);
  ASSERT_TRUE(binary->Solve().ok());
  const Params final_weights = ParamValues(binary->net());
  std::filesystem::remove_all(dir / "snaps");

  auto whole = MakeTrainer(Hdf5Solver(dir));
  ASSERT_NE(whole, nullptr);
  ASSERT_TRUE(whole->Solve().ok());
  // The same numbers as the binary run: the format changes no arithmetic.
  EXPECT_EQ(ParamValues(whole->net()), final_weights);
  // Caffe's names, and nothing in the binary format.
  for (const char* name : {"run_iter_3.caffemodel.h5", "run_iter_3.solverstate.h5",
                           "run_iter_6.caffemodel.h5", "run_iter_6.solverstate.h5"}) {
    EXPECT_TRUE(std::filesystem::exists(dir / ("snaps/" + std::string(name)))) << name;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "snaps/run_iter_3.caffemodel"));
  EXPECT_FALSE(std::filesystem::exists(dir / "snaps/run_iter_3.solverstate"));

  // The layout Caffe's Net::ToHDF5 writes: a group per layer, parameters or not.
  auto model = Hdf5Reader::Open(dir / "snaps/run_iter_3.caffemodel.h5");
  ASSERT_TRUE(model.ok()) << model.status().message();
  EXPECT_EQ(LinksOf(*model.value(), "/"), std::vector<std::string>{"data"});
  EXPECT_EQ(LinksOf(*model.value(), "data"),
            (std::vector<std::string>{"data", "ip1", "ip2", "loss", "relu"}));
  EXPECT_EQ(LinksOf(*model.value(), "data/ip1"), (std::vector<std::string>{"0", "1"}));
  EXPECT_TRUE(LinksOf(*model.value(), "data/relu").empty());
  EXPECT_EQ(model.value()->Shape("data/ip1/0").value(), (std::vector<int>{4, 4}));
  EXPECT_EQ(model.value()->Shape("data/ip2/1").value(), std::vector<int>{3});

  // SGDSolver::SnapshotSolverStateToHDF5's: iter, learned_net, current_step, history.
  auto state_file = Hdf5Reader::Open(dir / "snaps/run_iter_3.solverstate.h5");
  ASSERT_TRUE(state_file.ok()) << state_file.status().message();
  EXPECT_EQ(LinksOf(*state_file.value(), "/"),
            (std::vector<std::string>{"current_step", "history", "iter", "learned_net"}));
  EXPECT_EQ(state_file.value()->Shape("iter").value(), std::vector<int>{1});
  EXPECT_EQ(state_file.value()->ReadInt("iter").value(), 3);
  EXPECT_EQ(state_file.value()->ReadString("learned_net").value(),
            dir / "snaps/run_iter_3.caffemodel.h5");
  EXPECT_EQ(LinksOf(*state_file.value(), "history"),
            (std::vector<std::string>{"0", "1", "2", "3"}));

  // Resumed from its own HDF5 snapshot, the run ends where the whole run ends.
  TrainerOptions resume;
  resume.resume_from = dir / "snaps/run_iter_3.solverstate.h5";
  auto resumed = MakeTrainer(Hdf5Solver(dir), resume);
  ASSERT_NE(resumed, nullptr);
  EXPECT_EQ(resumed->iter(), 3);
  ASSERT_TRUE(resumed->Solve().ok());
  EXPECT_EQ(ParamValues(resumed->net()), final_weights);
}

TEST(CaffeHdf5Test, Hdf5ModelLeavesSharedDataToItsOwnerAndKeepsEveryDiff) {
  testing::TempDir dir;
  testing::WriteMixedLmdb(dir / "lmdb", 10);
  // ip2 shares ip1b's weight (both 4 x 4); snapshot_diff writes the diffs.
  const std::string solver = R"(
    base_lr: 0.1 lr_policy: "fixed" max_iter: 2 snapshot_format: HDF5 snapshot_diff: true
    random_seed: 5 snapshot_prefix: ")" + (dir / "snaps/run") + R"(" net_param {
    layer { name: "data" type: "Data" top: "data" top: "label"
            data_param { source: ")" + (dir / "lmdb") + R"(" batch_size: 3 }
            transform_param { scale: 0.015625 } }
    layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "a"
            inner_product_param { num_output: 4 weight_filler { type: "gaussian" std: 0.3 } } }
    layer { name: "ip1b" type: "InnerProduct" bottom: "a" top: "b" param { name: "w" }
            inner_product_param { num_output: 4 weight_filler { type: "gaussian" std: 0.3 } } }
    layer { name: "ip2" type: "InnerProduct" bottom: "b" top: "s" param { name: "w" }
            inner_product_param { num_output: 4 weight_filler { type: "gaussian" std: 0.3 } } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" top: "loss" } })";
  auto trainer = MakeTrainer(solver);
  ASSERT_NE(trainer, nullptr);
  ASSERT_TRUE(trainer->Solve().ok());
  auto model = Hdf5Reader::Open(dir / "snaps/run_iter_2.caffemodel.h5");
  ASSERT_TRUE(model.ok()) << model.status().message();
  EXPECT_EQ(LinksOf(*model.value(), "/"), (std::vector<std::string>{"data", "diff"}));
  // ip2's weight is ip1b's: only its bias is its own (Caffe's param_owners_).
  EXPECT_EQ(LinksOf(*model.value(), "data/ip1b"), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(LinksOf(*model.value(), "data/ip2"), std::vector<std::string>{"1"});
  EXPECT_EQ(LinksOf(*model.value(), "diff/ip2"), (std::vector<std::string>{"0", "1"}));
  std::vector<float> diff;
  ASSERT_TRUE(model.value()->Read("diff/ip1/0", &diff).ok());
  const Blob& ip1 = *trainer->net().layer_by_name("ip1")->blobs()[0];
  ASSERT_EQ(diff.size(), static_cast<size_t>(ip1.count()));
  EXPECT_EQ(diff, std::vector<float>(ip1.cpu_diff(), ip1.cpu_diff() + ip1.count()));
  EXPECT_NE(diff, std::vector<float>(diff.size(), 0.f));
}

TEST(CaffeHdf5Test, ASlashInALayerNameIsRefusedAndNothingIsWritten) {
  testing::TempDir dir;
  caffe::NetParameter model;
  caffe::LayerParameter* layer = model.add_layer();
  layer->set_name("inception_3a/1x1");
  caffe::BlobProto* blob = layer->add_blobs();
  blob->mutable_shape()->add_dim(1);
  blob->add_data(1.f);
  const std::string path = dir / "m.caffemodel.h5";
  EXPECT_EQ(WriteCaffemodelHdf5(model, {}, false, path).message(),
            path + ": layer 'inception_3a/1x1' cannot be written in snapshot_format HDF5 (a "
                   "'/' in its name); use BINARYPROTO");
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  layer->set_name("ip");
  model.add_layer()->set_name("ip");
  EXPECT_EQ(WriteCaffemodelHdf5(model, {}, false, path).message(),
            path + ": layer 'ip' cannot be written in snapshot_format HDF5 (a name an earlier "
                   "layer has); use BINARYPROTO");
  model.mutable_layer()->RemoveLast();
  layer = model.mutable_layer(0);
  layer->set_name(".");
  EXPECT_EQ(WriteCaffemodelHdf5(model, {}, false, path).message(),
            path + ": layer '.' cannot be written in snapshot_format HDF5 (the name '.'); use "
                   "BINARYPROTO");
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

}  // namespace
}  // namespace pstrain
