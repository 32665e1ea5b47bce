#include "worker/caffe_hdf5.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/proto_io.hpp"
#include "worker/data/hdf5_file.hpp"

namespace pstrain {
namespace {

Status ReadBlob(const Hdf5Reader& file, const std::string& dataset, caffe::BlobProto* out) {
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<int> shape, file.Shape(dataset));
  std::vector<float> values;
  PSTRAIN_RETURN_IF_ERROR(file.Read(dataset, &values));
  out->Clear();
  for (int d : shape) out->mutable_shape()->add_dim(d);
  out->mutable_data()->Add(values.begin(), values.end());
  return Status::Ok();
}

std::vector<int> ShapeOf(const caffe::BlobProto& blob) {
  std::vector<int> shape;
  if (blob.has_shape()) {
    for (int64_t d : blob.shape().dim()) shape.push_back(static_cast<int>(d));
  } else {
    shape = {blob.num(), blob.channels(), blob.height(), blob.width()};
  }
  return shape;
}

Status AddBlob(Hdf5ImageWriter& file, const std::string& dataset, const caffe::BlobProto& blob,
               bool diff) {
  const auto& values = diff ? blob.diff() : blob.data();
  return file.AddFloats(dataset, ShapeOf(blob), values.data());
}

Status WriteImage(Hdf5ImageWriter& file, const std::string& path) {
  PSTRAIN_ASSIGN_OR_RETURN(std::string bytes, file.Image());
  return WriteFileAtomically(path, bytes);
}

}  // namespace

std::optional<std::pair<std::string, std::string>> UnwritableHdf5LayerName(
    const std::vector<std::string>& names) {
  std::set<std::string> seen;
  for (const std::string& name : names) {
    const char* why = !seen.insert(name).second             ? "a name an earlier layer has"
                      : name.empty()                         ? "an empty name"
                      : name == "."                          ? "the name '.'"
                      : name.find('/') != std::string::npos ? "a '/' in its name"
                                                             : nullptr;
    if (why != nullptr) return std::make_pair(name, std::string(why));
  }
  return std::nullopt;
}

std::string SnapshotSuffix(const caffe::SolverParameter& solver) {
  return solver.snapshot_format() == caffe::SolverParameter::HDF5 ? ".h5" : "";
}

bool IsHdf5SnapshotPath(const std::string& path) {
  return path.size() >= 3 && path.compare(path.size() - 3, 3, ".h5") == 0;
}

Status ReadCaffemodelHdf5(const std::string& path, caffe::NetParameter* out) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Hdf5Reader> file, Hdf5Reader::Open(path));
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> layers, file->Links("data"));
  out->Clear();
  for (const std::string& name : layers) {
    const std::string group = "data/" + name;
    PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> datasets, file->Links(group));
    caffe::LayerParameter* layer = out->add_layer();
    layer->set_name(name);
    for (size_t j = 0; j < datasets.size(); ++j) {
      const std::string dataset = group + "/" + std::to_string(j);
      if (!file->Exists(dataset)) {
        return Status::InvalidArgument(
            path + ": layer '" + name + "' has " + std::to_string(datasets.size()) +
            " datasets but no '" + dataset +
            "' (a parameter shared with another layer is left out of Caffe's HDF5 model; "
            "only trailing ones can be)");
      }
      PSTRAIN_RETURN_IF_ERROR(ReadBlob(*file, dataset, layer->add_blobs()));
    }
  }
  return Status::Ok();
}

Status ReadSolverStateHdf5(const std::string& path, caffe::SolverState* out) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Hdf5Reader> file, Hdf5Reader::Open(path));
  out->Clear();
  PSTRAIN_ASSIGN_OR_RETURN(int64_t iter, file->ReadInt("iter"));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t current_step, file->ReadInt("current_step"));
  if (iter < 0 || iter > INT32_MAX || current_step < 0 || current_step > INT32_MAX) {
    return Status::InvalidArgument(path + ": iter " + std::to_string(iter) + ", current_step " +
                                   std::to_string(current_step) + ": out of range");
  }
  out->set_iter(static_cast<int32_t>(iter));
  out->set_current_step(static_cast<int32_t>(current_step));
  if (file->Exists("learned_net")) {
    PSTRAIN_ASSIGN_OR_RETURN(std::string learned_net, file->ReadString("learned_net"));
    out->set_learned_net(learned_net);
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> history, file->Links("history"));
  for (size_t i = 0; i < history.size(); ++i) {
    const std::string dataset = "history/" + std::to_string(i);
    if (!file->Exists(dataset)) {
      return Status::InvalidArgument(path + ": group 'history' has " +
                                     std::to_string(history.size()) + " entries but no '" +
                                     dataset + "'");
    }
    PSTRAIN_RETURN_IF_ERROR(ReadBlob(*file, dataset, out->add_history()));
  }
  return Status::Ok();
}

Status WriteCaffemodelHdf5(const caffe::NetParameter& model,
                           const std::set<std::pair<int, int>>& shared, bool write_diff,
                           const std::string& path) {
  std::vector<std::string> names;
  for (const caffe::LayerParameter& layer : model.layer()) names.push_back(layer.name());
  if (const auto bad = UnwritableHdf5LayerName(names)) {
    return Status::InvalidArgument(path + ": layer '" + bad->first +
                                   "' cannot be written in snapshot_format HDF5 (" +
                                   bad->second + "); use BINARYPROTO");
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Hdf5ImageWriter> file, Hdf5ImageWriter::Create(path));
  PSTRAIN_RETURN_IF_ERROR(file->AddGroup("data"));
  if (write_diff) PSTRAIN_RETURN_IF_ERROR(file->AddGroup("diff"));
  for (int l = 0; l < model.layer_size(); ++l) {
    const caffe::LayerParameter& layer = model.layer(l);
    const std::string data = "data/" + layer.name(), diff = "diff/" + layer.name();
    PSTRAIN_RETURN_IF_ERROR(file->AddGroup(data));
    if (write_diff) PSTRAIN_RETURN_IF_ERROR(file->AddGroup(diff));
    for (int b = 0; b < layer.blobs_size(); ++b) {
      const std::string index = "/" + std::to_string(b);
      if (!shared.count({l, b})) {
        PSTRAIN_RETURN_IF_ERROR(AddBlob(*file, data + index, layer.blobs(b), false));
      }
      if (write_diff) PSTRAIN_RETURN_IF_ERROR(AddBlob(*file, diff + index, layer.blobs(b), true));
    }
  }
  return WriteImage(*file, path);
}

Status WriteSolverStateHdf5(const caffe::SolverState& state, const std::string& path) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Hdf5ImageWriter> file, Hdf5ImageWriter::Create(path));
  PSTRAIN_RETURN_IF_ERROR(file->AddInt("iter", state.iter()));
  PSTRAIN_RETURN_IF_ERROR(file->AddString("learned_net", state.learned_net()));
  PSTRAIN_RETURN_IF_ERROR(file->AddInt("current_step", state.current_step()));
  PSTRAIN_RETURN_IF_ERROR(file->AddGroup("history"));
  for (int i = 0; i < state.history_size(); ++i) {
    PSTRAIN_RETURN_IF_ERROR(
        AddBlob(*file, "history/" + std::to_string(i), state.history(i), false));
  }
  return WriteImage(*file, path);
}

Status ReadCaffemodelFile(const std::string& path, caffe::NetParameter* out) {
  if (IsHdf5SnapshotPath(path)) return ReadCaffemodelHdf5(path, out);
  return ReadBinaryProto(path, out);
}

Status ReadSolverStateFile(const std::string& path, caffe::SolverState* out) {
  if (IsHdf5SnapshotPath(path)) return ReadSolverStateHdf5(path, out);
  return ReadBinaryProto(path, out);
}

Status WriteSolverStateFile(const caffe::SolverState& state, const std::string& path) {
  if (IsHdf5SnapshotPath(path)) return WriteSolverStateHdf5(state, path);
  return WriteBinaryProto(state, path);
}

}  // namespace pstrain
