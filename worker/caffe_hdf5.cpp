#include "worker/caffe_hdf5.hpp"

#include <cstdint>
#include <memory>
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

}  // namespace

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

Status ReadCaffemodelFile(const std::string& path, caffe::NetParameter* out) {
  if (IsHdf5SnapshotPath(path)) return ReadCaffemodelHdf5(path, out);
  return ReadBinaryProto(path, out);
}

Status ReadSolverStateFile(const std::string& path, caffe::SolverState* out) {
  if (IsHdf5SnapshotPath(path)) return ReadSolverStateHdf5(path, out);
  return ReadBinaryProto(path, out);
}

}  // namespace pstrain
