#include "worker/layers/recurrent_layer.hpp"

#include <map>
#include <string>
#include <utility>

#include "worker/net.hpp"

namespace pstrain {
namespace {

std::string Str(int v) { return std::to_string(v); }

void AddShape(const Blob& blob, caffe::InputParameter* input) {
  caffe::BlobShape* shape = input->add_shape();
  for (int d : blob.shape()) shape->add_dim(d);
}

}  // namespace

RecurrentLayer::RecurrentLayer(const caffe::LayerParameter& param) : Layer(param) {}
RecurrentLayer::~RecurrentLayer() = default;

int RecurrentLayer::NumExposedStates() const {
  return param_.recurrent_param().expose_hidden() ? static_cast<int>(RecurrentInputNames().size())
                                                  : 0;
}

Status RecurrentLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& /*top*/) {
  const caffe::RecurrentParameter& p = param_.recurrent_param();
  if (p.num_output() == 0) return Status::Error("recurrent_param.num_output must be positive");
  if (p.num_output() > 1u << 30) {
    return Status::Error("recurrent_param.num_output " + std::to_string(p.num_output()) +
                         " is too large");
  }
  if (bottom[0]->num_axes() < 2) {
    return Status::Error("bottom 0 (x) must have at least 2 axes (timesteps, streams, ...), got " +
                         bottom[0]->shape_string());
  }
  T_ = bottom[0]->shape(0);
  N_ = bottom[0]->shape(1);
  if (T_ < 1) return Status::Error("bottom 0 (x) has no timesteps: " + bottom[0]->shape_string());
  const int exposed = NumExposedStates();
  static_input_ = static_cast<int>(bottom.size()) > 2 + exposed;
  if (static_input_ && (bottom[2]->num_axes() < 1 || bottom[2]->shape(0) != N_)) {
    return Status::Error("bottom 2 (x_static) must start with the " + Str(N_) +
                         " streams of bottom 0, got " + bottom[2]->shape_string());
  }
  PSTRAIN_RETURN_IF_ERROR(Reshape(bottom, {}).WithContext("bottom shapes"));  // checks cont

  caffe::NetParameter net_param;
  net_param.set_name(name() + " unrolled");
  net_param.set_force_backward(true);  // the gradient reaches x and the parameters
  caffe::LayerParameter* input = net_param.add_layer();
  input->set_name("input");
  input->set_type("Input");
  input->add_top("x");
  AddShape(*bottom[0], input->mutable_input_param());
  input->add_top("cont");
  AddShape(*bottom[1], input->mutable_input_param());
  if (static_input_) {
    input->add_top("x_static");
    AddShape(*bottom[2], input->mutable_input_param());
  }
  FillUnrolledNet(&net_param);
  for (caffe::LayerParameter& layer : *net_param.mutable_layer()) {
    layer.set_name(name() + "_" + layer.name());
  }
  NetOptions options;
  options.context = context();
  options.context.engine = engine();
  options.state.set_phase(phase());
  options.source = "unrolled net";
  options.fuse_layers = false;
  PSTRAIN_ASSIGN_OR_RETURN(net_, Net::Create(net_param, options));

  x_ = net_->blob_by_name("x");
  cont_ = net_->blob_by_name("cont");
  x_static_ = static_input_ ? net_->blob_by_name("x_static") : nullptr;
  output_ = net_->blob_by_name(OutputName());
  state_in_.clear();
  state_out_.clear();
  for (const std::string& n : RecurrentInputNames()) state_in_.push_back(net_->blob_by_name(n));
  for (const std::string& n : RecurrentOutputNames()) state_out_.push_back(net_->blob_by_name(n));

  // Each parameter once, at its owner, in the unrolled net's order (Caffe's).
  blobs_.clear();
  inner_params_.clear();
  std::map<const Blob*, int> owner_index;
  for (const LearnableParam& lp : net_->learnable_params()) {
    owner_index[lp.blob] = static_cast<int>(blobs_.size());
    blobs_.push_back(net_->layers()[lp.layer_index]->blobs()[lp.index]);
  }
  std::map<std::string, int> by_spec_name;
  for (const LearnableParam& lp : net_->learnable_params()) {
    by_spec_name[lp.name] = owner_index[lp.blob];
  }
  for (const auto& layer : net_->layers()) {
    const caffe::LayerParameter& lp = layer->layer_param();
    for (int j = 0; j < static_cast<int>(layer->blobs().size()); ++j) {
      auto own = owner_index.find(layer->blobs()[j].get());
      int outer = own != owner_index.end() ? own->second : -1;
      if (outer < 0 && j < lp.param_size()) {
        auto named = by_spec_name.find(lp.param(j).name());
        if (named != by_spec_name.end()) outer = named->second;
      }
      if (outer < 0) return Status::Error("unrolled net: a parameter without an owner");  // our bug
      inner_params_.push_back({layer.get(), j, outer});
    }
  }
  return Status::Ok();
}

Status RecurrentLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const Blob& x = *bottom[0];
  if (x.num_axes() < 2 || x.shape(0) != T_) {
    return Status::Error("bottom 0 (x) must be " + Str(T_) +
                         " timesteps x streams x ... (the timesteps are fixed at set-up), got " +
                         x.shape_string());
  }
  N_ = x.shape(1);
  if (bottom[1]->shape() != std::vector<int>{T_, N_}) {
    return Status::Error("bottom 1 (cont) must be " + Str(T_) + " x " + Str(N_) +
                         " (timesteps x streams of bottom 0), got " + bottom[1]->shape_string());
  }
  const int first_state = 2 + (static_input_ ? 1 : 0);
  const int num_output = static_cast<int>(param_.recurrent_param().num_output());
  const std::vector<int> state_shape = {1, N_, num_output};
  for (int i = first_state; i < static_cast<int>(bottom.size()); ++i) {
    if (bottom[i]->shape() != state_shape) {
      return Status::Error("bottom " + Str(i) + " (initial state " +
                           RecurrentInputNames()[i - first_state] + ") must be " +
                           ShapeString(state_shape) + ", got " + bottom[i]->shape_string());
    }
  }
  if (static_input_ && bottom[2]->shape(0) != N_) {
    return Status::Error("bottom 2 (x_static) must start with the " + Str(N_) +
                         " streams of bottom 0, got " + bottom[2]->shape_string());
  }
  if (net_ == nullptr) return Status::Ok();  // called by LayerSetUp to check shapes

  x_->ReshapeLike(x);
  cont_->ReshapeLike(*bottom[1]);
  if (static_input_) x_static_->ReshapeLike(*bottom[2]);
  for (Blob* s : state_in_) s->Reshape(state_shape);
  PSTRAIN_RETURN_IF_ERROR(net_->Reshape().WithContext("unrolled net"));
  x_->ShareData(x);
  x_->ShareDiff(x);
  cont_->ShareData(*bottom[1]);  // not its diff: cont takes no gradient
  if (static_input_) {
    x_static_->ShareData(*bottom[2]);
    x_static_->ShareDiff(*bottom[2]);
  }
  for (int i = first_state, j = 0; i < static_cast<int>(bottom.size()); ++i, ++j) {
    state_in_[j]->ShareData(*bottom[i]);
    state_in_[j]->ShareDiff(*bottom[i]);
  }
  top[0]->ReshapeLike(*output_);
  top[0]->ShareData(*output_);
  top[0]->ShareDiff(*output_);
  for (size_t j = 0; j + 1 < top.size(); ++j) {
    top[j + 1]->ReshapeLike(*state_out_[j]);
    top[j + 1]->ShareData(*state_out_[j]);  // data only: no gradient across the sequence's end
  }
  // No gradient reaches a final state from outside the sequence.
  for (Blob* s : state_out_) s->SetDiffZero();
  return Status::Ok();
}

Status RecurrentLayer::RuntimeStatus() const {
  return net_ == nullptr ? Status::Ok() : net_->RuntimeStatus();
}

void RecurrentLayer::BindParams() {
  for (const InnerParam& p : inner_params_) {
    Blob& inner = *p.layer->blobs()[p.index];
    const Blob& outer = *blobs_[p.outer];
    if (&inner != &outer) {
      if (!inner.SharesDataWith(outer)) inner.ShareData(outer);
      inner.ShareDiff(outer);
    }
    p.layer->set_param_propagate_down(p.index, param_propagate_down(p.outer));
  }
}

void RecurrentLayer::RunForward(Engine engine) {
  for (const auto& layer : net_->layers()) layer->set_engine(engine);
  BindParams();
  if (NumExposedStates() == 0) {
    // Carry the last forward's final state over (cont = 0 discards it).
    for (size_t i = 0; i < state_in_.size(); ++i) state_in_[i]->CopyFrom(*state_out_[i]);
  }
  net_->Forward();
}

void RecurrentLayer::RunBackward(Engine engine) {
  for (const auto& layer : net_->layers()) layer->set_engine(engine);
  BindParams();
  net_->Backward();
}

void RecurrentLayer::ForwardReference(const BlobVec&, const BlobVec&) {
  RunForward(Engine::kReference);
}
void RecurrentLayer::BackwardReference(const BlobVec&, const std::vector<bool>&, const BlobVec&) {
  RunBackward(Engine::kReference);
}
void RecurrentLayer::ForwardFast(const BlobVec&, const BlobVec&) { RunForward(Engine::kFast); }
void RecurrentLayer::BackwardFast(const BlobVec&, const std::vector<bool>&, const BlobVec&) {
  RunBackward(Engine::kFast);
}
#ifdef PSTRAIN_HAVE_CUDA
void RecurrentLayer::ForwardGpu(const BlobVec&, const BlobVec&) { RunForward(Engine::kGpu); }
void RecurrentLayer::BackwardGpu(const BlobVec&, const std::vector<bool>&, const BlobVec&) {
  RunBackward(Engine::kGpu);
}
#endif

}  // namespace pstrain
