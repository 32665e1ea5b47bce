#include "worker/upgrade.hpp"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/text_format.h>

#include <string_view>
#include <utility>
#include <vector>

namespace pstrain {
namespace {

using caffe::LayerParameter;
using caffe::NetParameter;
using caffe::V1LayerParameter;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// V1 layer type enum -> V2 type string, for every V1 type Caffe's V2 knows.
constexpr std::pair<V1LayerParameter::LayerType, const char*> kV1TypeNames[] = {
    {V1LayerParameter::ABSVAL, "AbsVal"},
    {V1LayerParameter::ACCURACY, "Accuracy"},
    {V1LayerParameter::ARGMAX, "ArgMax"},
    {V1LayerParameter::BNLL, "BNLL"},
    {V1LayerParameter::CONCAT, "Concat"},
    {V1LayerParameter::CONTRASTIVE_LOSS, "ContrastiveLoss"},
    {V1LayerParameter::CONVOLUTION, "Convolution"},
    {V1LayerParameter::DATA, "Data"},
    {V1LayerParameter::DECONVOLUTION, "Deconvolution"},
    {V1LayerParameter::DROPOUT, "Dropout"},
    {V1LayerParameter::DUMMY_DATA, "DummyData"},
    {V1LayerParameter::EUCLIDEAN_LOSS, "EuclideanLoss"},
    {V1LayerParameter::ELTWISE, "Eltwise"},
    {V1LayerParameter::EXP, "Exp"},
    {V1LayerParameter::FLATTEN, "Flatten"},
    {V1LayerParameter::HDF5_DATA, "HDF5Data"},
    {V1LayerParameter::HDF5_OUTPUT, "HDF5Output"},
    {V1LayerParameter::HINGE_LOSS, "HingeLoss"},
    {V1LayerParameter::IM2COL, "Im2col"},
    {V1LayerParameter::IMAGE_DATA, "ImageData"},
    {V1LayerParameter::INFOGAIN_LOSS, "InfogainLoss"},
    {V1LayerParameter::INNER_PRODUCT, "InnerProduct"},
    {V1LayerParameter::LRN, "LRN"},
    {V1LayerParameter::MEMORY_DATA, "MemoryData"},
    {V1LayerParameter::MULTINOMIAL_LOGISTIC_LOSS, "MultinomialLogisticLoss"},
    {V1LayerParameter::MVN, "MVN"},
    {V1LayerParameter::POOLING, "Pooling"},
    {V1LayerParameter::POWER, "Power"},
    {V1LayerParameter::RELU, "ReLU"},
    {V1LayerParameter::SIGMOID, "Sigmoid"},
    {V1LayerParameter::SIGMOID_CROSS_ENTROPY_LOSS, "SigmoidCrossEntropyLoss"},
    {V1LayerParameter::SILENCE, "Silence"},
    {V1LayerParameter::SOFTMAX, "Softmax"},
    {V1LayerParameter::SOFTMAX_LOSS, "SoftmaxWithLoss"},
    {V1LayerParameter::SPLIT, "Split"},
    {V1LayerParameter::SLICE, "Slice"},
    {V1LayerParameter::TANH, "TanH"},
    {V1LayerParameter::WINDOW_DATA, "WindowData"},
    {V1LayerParameter::THRESHOLD, "Threshold"},
};

constexpr std::pair<caffe::SolverParameter::SolverType, const char*> kSolverTypeNames[] = {
    {caffe::SolverParameter::SGD, "SGD"},           {caffe::SolverParameter::NESTEROV, "Nesterov"},
    {caffe::SolverParameter::ADAGRAD, "AdaGrad"},   {caffe::SolverParameter::RMSPROP, "RMSProp"},
    {caffe::SolverParameter::ADADELTA, "AdaDelta"}, {caffe::SolverParameter::ADAM, "Adam"},
};

// Data layer types and the parameter message that used to hold their
// transformation fields.
constexpr std::pair<std::string_view, const char*> kDataParamFields[] = {
    {"Data", "data_param"},
    {"ImageData", "image_data_param"},
    {"WindowData", "window_data_param"},
};
// Fields that moved from those messages to transform_param (same names, same types).
constexpr const char* kTransformFields[] = {"scale", "mean_file", "crop_size", "mirror"};

std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

std::string V1Where(const std::string& source, int index, const V1LayerParameter& v1) {
  return source + ": V1 layer " + std::to_string(index) + " " + Quoted(v1.name());
}

// ---------------------------------------------------------------- V1 -> V2

// Fills `out` from `v1` except for the blobs (moved later, once every layer
// converted). Errors carry `where`.
Status ConvertV1Layer(const V1LayerParameter& v1, const std::string& where, LayerParameter* out) {
  const std::string type = V1LayerTypeName(v1.type());
  if (type.empty()) {
    if (!v1.has_type()) {
      return Status::Error(where + ": has no type (or one this reader does not know)");
    }
    return Status::Error(where + ": type " + V1LayerParameter::LayerType_Name(v1.type()) +
                         " has no V2 equivalent");
  }
  out->set_name(v1.name());
  out->set_type(type);
  out->mutable_bottom()->CopyFrom(v1.bottom());
  out->mutable_top()->CopyFrom(v1.top());
  out->mutable_include()->CopyFrom(v1.include());
  out->mutable_exclude()->CopyFrom(v1.exclude());
  out->mutable_loss_weight()->CopyFrom(v1.loss_weight());

  // Per-blob settings: each V1 list may be shorter or longer than the others.
  auto param = [out](int i) {
    while (out->param_size() <= i) out->add_param();
    return out->mutable_param(i);
  };
  for (int i = 0; i < v1.param_size(); ++i) param(i)->set_name(v1.param(i));
  for (int i = 0; i < v1.blob_share_mode_size(); ++i) {
    param(i)->set_share_mode(v1.blob_share_mode(i) == V1LayerParameter::PERMISSIVE
                                 ? caffe::ParamSpec::PERMISSIVE
                                 : caffe::ParamSpec::STRICT);
  }
  for (int i = 0; i < v1.blobs_lr_size(); ++i) param(i)->set_lr_mult(v1.blobs_lr(i));
  for (int i = 0; i < v1.weight_decay_size(); ++i) param(i)->set_decay_mult(v1.weight_decay(i));

  // Every set *_param message goes to the LayerParameter field of the same name.
  const Reflection* v1_reflection = v1.GetReflection();
  const Reflection* out_reflection = out->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  v1_reflection->ListFields(v1, &fields);
  for (const FieldDescriptor* field : fields) {
    const std::string& name = field->name();
    if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE || field->is_repeated() ||
        !name.ends_with("_param")) {
      continue;
    }
    const FieldDescriptor* target = LayerParameter::descriptor()->FindFieldByName(name);
    if (target == nullptr || target->message_type() != field->message_type()) {
      return Status::Error(where + ": " + name + " has no V2 counterpart");
    }
    out_reflection->MutableMessage(out, target)->CopyFrom(v1_reflection->GetMessage(v1, field));
  }
  return Status::Ok();
}

Status UpgradeV1Layers(NetParameter* net, const std::string& source) {
  if (net->layer_size() > 0) {
    return Status::Error(source +
                         ": the net has both V2 'layer' and V1 'layers' entries; "
                         "refusing to upgrade");
  }
  google::protobuf::RepeatedPtrField<LayerParameter> converted;
  for (int i = 0; i < net->layers_size(); ++i) {
    const V1LayerParameter& v1 = net->layers(i);
    PSTRAIN_RETURN_IF_ERROR(ConvertV1Layer(v1, V1Where(source, i, v1), converted.Add()));
  }
  // Learned weights can be large: move them rather than copy.
  for (int i = 0; i < net->layers_size(); ++i) {
    converted.Mutable(i)->mutable_blobs()->Swap(net->mutable_layers(i)->mutable_blobs());
  }
  net->clear_layers();
  net->mutable_layer()->Swap(&converted);
  return Status::Ok();
}

// ------------------------------------------- data_param -> transform_param

// The field of `layer` (data_param, ...) that may still hold transformation
// fields, when the layer type has one and it is set; null otherwise.
const FieldDescriptor* OldTransformHolder(const LayerParameter& layer) {
  for (const auto& [type, field_name] : kDataParamFields) {
    if (layer.type() != type) continue;
    const FieldDescriptor* field = LayerParameter::descriptor()->FindFieldByName(field_name);
    PSTRAIN_CHECK(field != nullptr);
    return layer.GetReflection()->HasField(layer, field) ? field : nullptr;
  }
  return nullptr;
}

bool NeedsTransformUpgrade(const LayerParameter& layer) {
  const FieldDescriptor* holder_field = OldTransformHolder(layer);
  if (holder_field == nullptr) return false;
  const Message& holder = layer.GetReflection()->GetMessage(layer, holder_field);
  for (const char* name : kTransformFields) {
    const FieldDescriptor* field = holder.GetDescriptor()->FindFieldByName(name);
    if (field != nullptr && holder.GetReflection()->HasField(holder, field)) return true;
  }
  return false;
}

std::string FieldText(const Message& message, const FieldDescriptor* field) {
  std::string text;
  google::protobuf::TextFormat::PrintFieldValueToString(message, field, -1, &text);
  return text;
}

Status UpgradeTransform(LayerParameter* layer, const std::string& source) {
  if (!NeedsTransformUpgrade(*layer)) return Status::Ok();
  const std::string where = source + ": layer " + Quoted(layer->name());
  const FieldDescriptor* holder_field = OldTransformHolder(*layer);
  const std::string& holder_name = holder_field->name();
  Message* holder = layer->GetReflection()->MutableMessage(layer, holder_field);
  const Reflection* from = holder->GetReflection();
  caffe::TransformationParameter* transform = layer->mutable_transform_param();
  const Reflection* to = transform->GetReflection();
  for (const char* name : kTransformFields) {
    const FieldDescriptor* src = holder->GetDescriptor()->FindFieldByName(name);
    const FieldDescriptor* dst = transform->GetDescriptor()->FindFieldByName(name);
    if (src == nullptr || !from->HasField(*holder, src)) continue;
    PSTRAIN_CHECK(dst != nullptr && dst->cpp_type() == src->cpp_type());
    const std::string old_value = FieldText(*holder, src);
    if (to->HasField(*transform, dst) && FieldText(*transform, dst) != old_value) {
      return Status::Error(where + ": " + holder_name + "." + name + " " + old_value +
                           " disagrees with transform_param." + name + " " +
                           FieldText(*transform, dst));
    }
    switch (src->cpp_type()) {
      case FieldDescriptor::CPPTYPE_FLOAT:
        to->SetFloat(transform, dst, from->GetFloat(*holder, src));
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        to->SetUInt32(transform, dst, from->GetUInt32(*holder, src));
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        to->SetBool(transform, dst, from->GetBool(*holder, src));
        break;
      case FieldDescriptor::CPPTYPE_STRING:
        to->SetString(transform, dst, from->GetString(*holder, src));
        break;
      default:
        PSTRAIN_CHECK_MSG(false, std::string("unexpected type of transform field ") + name);
    }
    from->ClearField(holder, src);
  }
  return Status::Ok();
}

// ------------------------------------------------- net inputs -> Input layer

bool NeedsInputUpgrade(const NetParameter& net) {
  return net.input_size() > 0 || net.input_shape_size() > 0 || net.input_dim_size() > 0;
}

Status UpgradeInput(NetParameter* net, const std::string& source) {
  if (!NeedsInputUpgrade(*net)) return Status::Ok();
  const int inputs = net->input_size();
  const bool has_shape = net->input_shape_size() > 0;
  const bool has_dim = net->input_dim_size() > 0;
  if (has_shape && has_dim) {
    return Status::Error(source + ": input_shape and input_dim cannot both be given");
  }
  if (!has_shape && !has_dim) {
    return Status::Error(source + ": input " + Quoted(net->input(0)) +
                         " has no shape: give input_shape or input_dim");
  }
  if (has_shape && net->input_shape_size() != inputs) {
    return Status::Error(source + ": " + std::to_string(inputs) + " input(s) need " +
                         std::to_string(inputs) + " input_shape entries, got " +
                         std::to_string(net->input_shape_size()));
  }
  if (has_dim && net->input_dim_size() != 4 * inputs) {
    return Status::Error(source + ": " + std::to_string(inputs) + " input(s) need " +
                         std::to_string(4 * inputs) + " input_dim values (4 per input), got " +
                         std::to_string(net->input_dim_size()));
  }
  LayerParameter input;
  input.set_name("input");
  input.set_type("Input");
  for (int i = 0; i < inputs; ++i) {
    input.add_top(net->input(i));
    caffe::BlobShape* shape = input.mutable_input_param()->add_shape();
    if (has_shape) {
      shape->CopyFrom(net->input_shape(i));
    } else {
      for (int j = 4 * i; j < 4 * i + 4; ++j) shape->add_dim(net->input_dim(j));
    }
  }
  // Put the new layer first: every other layer may read its tops.
  net->add_layer()->Swap(&input);
  for (int i = net->layer_size() - 1; i > 0; --i) {
    net->mutable_layer()->SwapElements(i, i - 1);
  }
  net->clear_input();
  net->clear_input_shape();
  net->clear_input_dim();
  return Status::Ok();
}

// ---------------------------------------------------------------- BatchNorm

bool NeedsBatchNormUpgrade(const LayerParameter& layer) {
  if (layer.type() != "BatchNorm" || layer.param_size() == 0) return false;
  for (const caffe::ParamSpec& spec : layer.param()) {
    if (spec.lr_mult() != 0.f) return false;
  }
  return true;
}

}  // namespace

std::string V1LayerTypeName(V1LayerParameter::LayerType type) {
  for (const auto& [v1_type, name] : kV1TypeNames) {
    if (v1_type == type) return name;
  }
  return "";
}

bool NetNeedsUpgrade(const NetParameter& net) {
  if (net.layers_size() > 0 || NeedsInputUpgrade(net)) return true;
  for (const LayerParameter& layer : net.layer()) {
    if (NeedsTransformUpgrade(layer) || NeedsBatchNormUpgrade(layer)) return true;
  }
  return false;
}

Status UpgradeNet(NetParameter* net, const std::string& source_name) {
  for (int i = 0; i < net->layers_size(); ++i) {
    const V1LayerParameter& v1 = net->layers(i);
    if (!v1.has_layer()) continue;
    const std::string& name = v1.name().empty() ? v1.layer().name() : v1.name();
    return Status::Error("V0 (pre-2014) nets are not supported: " + source_name + " (layers[" +
                         std::to_string(i) + "] " + Quoted(name) + " holds a V0 layer)");
  }
  if (net->layers_size() > 0) PSTRAIN_RETURN_IF_ERROR(UpgradeV1Layers(net, source_name));
  for (LayerParameter& layer : *net->mutable_layer()) {
    PSTRAIN_RETURN_IF_ERROR(UpgradeTransform(&layer, source_name));
    if (NeedsBatchNormUpgrade(layer)) layer.clear_param();
  }
  return UpgradeInput(net, source_name);
}

bool SolverNeedsUpgrade(const caffe::SolverParameter& solver) {
  if (solver.has_solver_type()) return true;
  if (solver.has_net_param() && NetNeedsUpgrade(solver.net_param())) return true;
  if (solver.has_train_net_param() && NetNeedsUpgrade(solver.train_net_param())) return true;
  for (const NetParameter& net : solver.test_net_param()) {
    if (NetNeedsUpgrade(net)) return true;
  }
  return false;
}

Status UpgradeSolver(caffe::SolverParameter* solver, const std::string& source_name) {
  if (solver->has_solver_type()) {
    std::string type;
    for (const auto& [enum_value, name] : kSolverTypeNames) {
      if (enum_value == solver->solver_type()) type = name;
    }
    PSTRAIN_CHECK(!type.empty());  // kSolverTypeNames covers the whole enum
    const std::string old_name = caffe::SolverParameter::SolverType_Name(solver->solver_type());
    if (solver->has_type() && solver->type() != type) {
      return Status::Error(source_name + ": solver_type " + old_name + " (deprecated) means type " +
                           Quoted(type) + " but type is " + Quoted(solver->type()) +
                           "; give only type");
    }
    solver->set_type(type);
    solver->clear_solver_type();
  }
  if (solver->has_net_param()) {
    PSTRAIN_RETURN_IF_ERROR(UpgradeNet(solver->mutable_net_param(), source_name + " net_param"));
  }
  if (solver->has_train_net_param()) {
    PSTRAIN_RETURN_IF_ERROR(
        UpgradeNet(solver->mutable_train_net_param(), source_name + " train_net_param"));
  }
  for (int i = 0; i < solver->test_net_param_size(); ++i) {
    PSTRAIN_RETURN_IF_ERROR(UpgradeNet(solver->mutable_test_net_param(i),
                                       source_name + " test_net_param " + std::to_string(i)));
  }
  return Status::Ok();
}

}  // namespace pstrain
