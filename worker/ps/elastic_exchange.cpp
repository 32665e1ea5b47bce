#include "worker/ps/elastic_exchange.hpp"

#include <algorithm>

namespace pstrain {
namespace {

void CopyOut(const Blob* blob, std::vector<float>* out) {
  const float* data = blob->cpu_data();
  out->assign(data, data + blob->count());
}

}  // namespace

Result<ElasticOptions::Method> ParseElasticMethod(const std::string& name) {
  if (name == "none") return ElasticOptions::Method::kNone;
  if (name == "easgd") return ElasticOptions::Method::kEasgd;
  if (name == "average") return ElasticOptions::Method::kAverage;
  return Status::InvalidArgument("\"" + name + "\" is not one of none, easgd, average");
}

ElasticExchange::ElasticExchange(
    const ElasticOptions& options, PsClient* client, std::vector<Blob*> blobs, int world_size,
    std::function<Status(int64_t, const std::vector<std::string>&)> on_center)
    : options_(options),
      client_(client),
      blobs_(std::move(blobs)),
      world_size_(world_size),
      on_center_(std::move(on_center)),
      local_(blobs_.size()),
      center_(blobs_.size()),
      delta_(blobs_.size()) {
  for (size_t i = 0; i < blobs_.size(); ++i) ids_.push_back(static_cast<int>(i));
}

void ElasticExchange::Started() {
  for (size_t i = 0; i < blobs_.size(); ++i) CopyOut(blobs_[i], &center_[i]);
}

Status ElasticExchange::WaitCenter() {
  int64_t version = 0;
  std::vector<std::string> files;
  PSTRAIN_RETURN_IF_ERROR(client_->WaitPull(&version, &files));
  return on_center_ ? on_center_(version, files) : Status::Ok();
}

Status ElasticExchange::Exchange(int64_t e) {
  std::vector<const float*> deltas;
  if (options_.method == ElasticOptions::Method::kEasgd) {
    for (size_t i = 0; i < blobs_.size(); ++i) CopyOut(blobs_[i], &local_[i]);
    PSTRAIN_RETURN_IF_ERROR(client_->Pull(e));
    PSTRAIN_RETURN_IF_ERROR(WaitCenter());  // the blobs hold the center c
    const float alpha = options_.alpha;
    for (size_t i = 0; i < blobs_.size(); ++i) {
      float* x = blobs_[i]->mutable_cpu_data();
      std::vector<float>& d = delta_[i];
      d.resize(local_[i].size());
      for (size_t j = 0; j < d.size(); ++j) {
        d[j] = alpha * (local_[i][j] - x[j]);
        x[j] = local_[i][j] - d[j];
      }
      deltas.push_back(d.data());
    }
    return client_->Push(ids_, e, -1.0, deltas);
  }
  const float share = 1.f / static_cast<float>(world_size_);
  for (size_t i = 0; i < blobs_.size(); ++i) {
    const float* x = blobs_[i]->cpu_data();
    std::vector<float>& d = delta_[i];
    d.resize(center_[i].size());
    for (size_t j = 0; j < d.size(); ++j) d[j] = (x[j] - center_[i][j]) * share;
    deltas.push_back(d.data());
  }
  PSTRAIN_RETURN_IF_ERROR(client_->Push(ids_, e, -1.0, deltas));
  PSTRAIN_RETURN_IF_ERROR(client_->Pull(e + 1));
  PSTRAIN_RETURN_IF_ERROR(WaitCenter());
  Started();  // the center just pulled is the next c_prev
  return Status::Ok();
}

}  // namespace pstrain
