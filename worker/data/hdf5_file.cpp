#include "worker/data/hdf5_file.hpp"

#include <hdf5.h>

#include <climits>
#include <cstring>
#include <filesystem>

#include "common/blob.hpp"

namespace pstrain {
namespace {

// libhdf5 prints an error stack to stderr for every failed call unless told
// not to; our errors are Status values.
void SilenceHdf5() {
  static const bool silenced = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)silenced;
}

std::string ClassName(H5T_class_t c) {
  switch (c) {
    case H5T_STRING:
      return "string";
    case H5T_COMPOUND:
      return "compound";
    case H5T_ENUM:
      return "enum";
    case H5T_BITFIELD:
      return "bitfield";
    case H5T_OPAQUE:
      return "opaque";
    case H5T_REFERENCE:
      return "reference";
    case H5T_VLEN:
      return "variable-length";
    case H5T_ARRAY:
      return "array";
    case H5T_TIME:
      return "time";
    default:
      return "unknown";
  }
}

// An open dataset, closed at scope exit.
class DatasetId {
 public:
  explicit DatasetId(hid_t id) : id_(id) {}
  ~DatasetId() {
    if (id_ >= 0) H5Dclose(id_);
  }
  DatasetId(const DatasetId&) = delete;
  DatasetId& operator=(const DatasetId&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
};

struct Space {
  explicit Space(hid_t id) : id(id) {}
  ~Space() {
    if (id >= 0) H5Sclose(id);
  }
  Space(const Space&) = delete;
  Space& operator=(const Space&) = delete;
  hid_t id;
};

struct Type {
  explicit Type(hid_t id) : id(id) {}
  ~Type() {
    if (id >= 0) H5Tclose(id);
  }
  Type(const Type&) = delete;
  Type& operator=(const Type&) = delete;
  hid_t id;
};

std::string RowShapeString(const std::vector<int>& row) {
  std::string s;
  for (int d : row) s += (s.empty() ? "" : " x ") + std::to_string(d);
  return s.empty() ? "scalars" : s;
}

}  // namespace

Result<std::unique_ptr<Hdf5Reader>> Hdf5Reader::Open(const std::string& path) {
  SilenceHdf5();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Status::NotFound(path + ": no such file");
  if (H5Fis_hdf5(path.c_str()) <= 0) return Status::Corruption(path + ": not an HDF5 file");
  std::unique_ptr<Hdf5Reader> reader(new Hdf5Reader(path));
  reader->file_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (reader->file_ < 0) return Status::IOError(path + ": cannot open HDF5 file");
  return reader;
}

Hdf5Reader::~Hdf5Reader() {
  if (file_ >= 0) H5Fclose(file_);
}

Result<std::vector<int>> Hdf5Reader::Shape(const std::string& dataset) const {
  const std::string where = path_ + ": dataset '" + dataset + "'";
  if (H5Lexists(file_, dataset.c_str(), H5P_DEFAULT) <= 0) {
    return Status::NotFound(where + " not found");
  }
  DatasetId id(H5Dopen2(file_, dataset.c_str(), H5P_DEFAULT));
  if (!id.ok()) return Status::Corruption(where + " is not a dataset");
  Type type(H5Dget_type(id.get()));
  const H5T_class_t c = H5Tget_class(type.id);
  if (c != H5T_FLOAT && c != H5T_INTEGER) {
    return Status::InvalidArgument(where + " holds " + ClassName(c) +
                                   " values; HDF5Data reads float, double and integer datasets");
  }
  Space space(H5Dget_space(id.get()));
  const int ndims = H5Sget_simple_extent_ndims(space.id);
  if (ndims < 0) return Status::Corruption(where + ": cannot read its dimensions");
  if (ndims == 0) return Status::InvalidArgument(where + " is a scalar; it needs an axis of rows");
  if (ndims > Blob::kMaxAxes) {
    return Status::InvalidArgument(where + " has " + std::to_string(ndims) + " axes, more than " +
                                   std::to_string(Blob::kMaxAxes));
  }
  std::vector<hsize_t> dims(static_cast<size_t>(ndims));
  H5Sget_simple_extent_dims(space.id, dims.data(), nullptr);
  std::vector<int> shape;
  for (hsize_t d : dims) {
    if (d > static_cast<hsize_t>(INT_MAX)) {
      return Status::InvalidArgument(where + " has a dimension of " + std::to_string(d) +
                                     ", more than " + std::to_string(INT_MAX));
    }
    shape.push_back(static_cast<int>(d));
  }
  return shape;
}

Status Hdf5Reader::Read(const std::string& dataset, std::vector<float>* values) const {
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<int> shape, Shape(dataset));
  int64_t count = 1;
  for (int d : shape) count *= d;
  values->resize(static_cast<size_t>(count));
  if (count == 0) return Status::Ok();
  DatasetId id(H5Dopen2(file_, dataset.c_str(), H5P_DEFAULT));
  if (H5Dread(id.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values->data()) < 0) {
    return Status::Corruption(path_ + ": dataset '" + dataset + "': cannot read its values");
  }
  return Status::Ok();
}

bool Hdf5Reader::Exists(const std::string& path) const {
  if (path == "/") return true;  // the root group
  // H5Lexists fails (negative) when a group on the way is missing: test each part.
  std::string prefix;
  size_t begin = 0;
  while (begin <= path.size()) {
    size_t end = path.find('/', begin);
    if (end == std::string::npos) end = path.size();
    prefix += (prefix.empty() ? "" : "/") + path.substr(begin, end - begin);
    if (H5Lexists(file_, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    begin = end + 1;
  }
  return true;
}

Result<std::vector<std::string>> Hdf5Reader::Links(const std::string& group) const {
  if (!Exists(group)) return Status::NotFound(path_ + ": group '" + group + "' not found");
  const hid_t id = H5Gopen2(file_, group.c_str(), H5P_DEFAULT);
  if (id < 0) return Status::Corruption(path_ + ": '" + group + "' is not a group");
  std::vector<std::string> names;
  H5G_info_t info;
  herr_t status = H5Gget_info(id, &info);
  for (hsize_t i = 0; status >= 0 && i < info.nlinks; ++i) {
    const ssize_t size =
        H5Lget_name_by_idx(id, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (size < 0) {
      status = -1;
      break;
    }
    std::string name(static_cast<size_t>(size) + 1, '\0');
    H5Lget_name_by_idx(id, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(),
                       H5P_DEFAULT);
    name.resize(static_cast<size_t>(size));
    names.push_back(std::move(name));
  }
  H5Gclose(id);
  if (status < 0) return Status::Corruption(path_ + ": group '" + group + "': cannot list it");
  return names;
}

namespace {

// Opens `dataset` of `file`, which must hold one value of class `want` (named
// `wanted` in errors), and returns what `read(dataset id, type id)` makes of
// it. Errors name `where`: not a dataset, the class it holds instead, or how
// many values.
template <typename T, typename F>
Result<T> ReadOne(hid_t file, const std::string& where, const std::string& dataset,
                  H5T_class_t want, const char* wanted, F&& read) {
  DatasetId id(H5Dopen2(file, dataset.c_str(), H5P_DEFAULT));
  if (!id.ok()) return Status::Corruption(where + " is not a dataset");
  Type type(H5Dget_type(id.get()));
  const H5T_class_t c = H5Tget_class(type.id);
  if (c != want) {
    return Status::InvalidArgument(where + " holds " +
                                   (c == H5T_FLOAT     ? std::string("float")
                                    : c == H5T_INTEGER ? std::string("integer")
                                                       : ClassName(c)) +
                                   " values, not " + wanted);
  }
  Space space(H5Dget_space(id.get()));
  const hssize_t points = H5Sget_simple_extent_npoints(space.id);
  if (points != 1) {
    return Status::InvalidArgument(where + " holds " + std::to_string(points) +
                                   " values, not one");
  }
  return read(id.get(), type.id);
}

}  // namespace

Result<int64_t> Hdf5Reader::ReadInt(const std::string& dataset) const {
  const std::string where = path_ + ": dataset '" + dataset + "'";
  if (!Exists(dataset)) return Status::NotFound(where + " not found");
  return ReadOne<int64_t>(file_, where, dataset, H5T_INTEGER, "integers",
                          [&](hid_t id, hid_t) -> Result<int64_t> {
                            int64_t value = 0;
                            if (H5Dread(id, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                        &value) < 0) {
                              return Status::Corruption(where + ": cannot read its value");
                            }
                            return value;
                          });
}

Result<std::string> Hdf5Reader::ReadString(const std::string& dataset) const {
  const std::string where = path_ + ": dataset '" + dataset + "'";
  if (!Exists(dataset)) return Status::NotFound(where + " not found");
  return ReadOne<std::string>(
      file_, where, dataset, H5T_STRING, "a string", [&](hid_t id, hid_t type) -> Result<std::string> {
        if (H5Tis_variable_str(type) > 0) {
          char* text = nullptr;
          if (H5Dread(id, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, &text) < 0) {
            return Status::Corruption(where + ": cannot read its value");
          }
          std::string value = text == nullptr ? std::string() : std::string(text);
          H5free_memory(text);
          return value;
        }
        std::string value(H5Tget_size(type), '\0');
        if (H5Dread(id, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, value.data()) < 0) {
          return Status::Corruption(where + ": cannot read its value");
        }
        value.resize(std::strlen(value.c_str()));  // fixed-length: NUL-terminated or -padded
        return value;
      });
}

Result<std::unique_ptr<Hdf5AppendWriter>> Hdf5AppendWriter::Create(const std::string& path) {
  SilenceHdf5();
  std::unique_ptr<Hdf5AppendWriter> writer(new Hdf5AppendWriter(path));
  writer->file_ = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (writer->file_ < 0) return Status::IOError(path + ": cannot create HDF5 file");
  return writer;
}

Hdf5AppendWriter::~Hdf5AppendWriter() {
  for (Dataset& d : datasets_) {
    if (d.id >= 0) H5Dclose(d.id);
  }
  if (file_ >= 0) H5Fclose(file_);
}

int64_t Hdf5AppendWriter::rows(const std::string& dataset) const {
  for (const Dataset& d : datasets_) {
    if (d.name == dataset) return d.rows;
  }
  return 0;
}

Status Hdf5AppendWriter::Append(const std::string& dataset, const std::vector<int>& shape,
                                const float* values) {
  const std::string where = path_ + ": dataset '" + dataset + "'";
  PSTRAIN_CHECK(!shape.empty());
  const std::vector<int> row_shape(shape.begin() + 1, shape.end());
  const size_t rank = shape.size();
  Dataset* d = nullptr;
  for (Dataset& existing : datasets_) {
    if (existing.name == dataset) d = &existing;
  }
  if (d == nullptr) {
    std::vector<hsize_t> dims(rank), max_dims(rank), chunk(rank);
    for (size_t a = 0; a < rank; ++a) {
      dims[a] = 0;
      max_dims[a] = a == 0 ? H5S_UNLIMITED : static_cast<hsize_t>(shape[a]);
      chunk[a] = a == 0 ? 1 : std::max<hsize_t>(1, static_cast<hsize_t>(shape[a]));
    }
    chunk[0] = std::max<hsize_t>(1, static_cast<hsize_t>(shape[0]));
    Space space(H5Screate_simple(static_cast<int>(rank), dims.data(), max_dims.data()));
    const hid_t properties = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(properties, static_cast<int>(rank), chunk.data());
    const hid_t id = H5Dcreate2(file_, dataset.c_str(), H5T_IEEE_F32LE, space.id, H5P_DEFAULT,
                                properties, H5P_DEFAULT);
    H5Pclose(properties);
    if (id < 0) return Status::IOError(where + ": cannot create it");
    datasets_.push_back({dataset, id, row_shape, 0});
    d = &datasets_.back();
  } else if (d->row_shape != row_shape) {
    return Status::InvalidArgument(where + " has rows of " + RowShapeString(d->row_shape) +
                                   ", got " + RowShapeString(row_shape));
  }
  if (shape[0] == 0) return Status::Ok();
  std::vector<hsize_t> total(rank), start(rank, 0), count(rank);
  for (size_t a = 0; a < rank; ++a) {
    total[a] = static_cast<hsize_t>(shape[a]);
    count[a] = static_cast<hsize_t>(shape[a]);
  }
  total[0] = static_cast<hsize_t>(d->rows + shape[0]);
  start[0] = static_cast<hsize_t>(d->rows);
  if (H5Dset_extent(d->id, total.data()) < 0) return Status::IOError(where + ": cannot grow it");
  Space file_space(H5Dget_space(d->id));
  H5Sselect_hyperslab(file_space.id, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
  Space memory_space(H5Screate_simple(static_cast<int>(rank), count.data(), nullptr));
  if (H5Dwrite(d->id, H5T_NATIVE_FLOAT, memory_space.id, file_space.id, H5P_DEFAULT, values) < 0) {
    return Status::IOError(where + ": cannot write rows " + std::to_string(d->rows) + " to " +
                           std::to_string(d->rows + shape[0] - 1));
  }
  d->rows += shape[0];
  if (H5Fflush(file_, H5F_SCOPE_LOCAL) < 0) return Status::IOError(path_ + ": cannot flush");
  return Status::Ok();
}

Result<std::unique_ptr<Hdf5ImageWriter>> Hdf5ImageWriter::Create(const std::string& name) {
  SilenceHdf5();
  std::unique_ptr<Hdf5ImageWriter> writer(new Hdf5ImageWriter(name));
  const hid_t access = H5Pcreate(H5P_FILE_ACCESS);
  // 1 MiB growth steps; no backing store: the file exists only in memory.
  if (access >= 0 && H5Pset_fapl_core(access, 1 << 20, /*backing_store=*/false) >= 0) {
    writer->file_ = H5Fcreate(name.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access);
  }
  if (access >= 0) H5Pclose(access);
  if (writer->file_ < 0) return Status::IOError(name + ": cannot create HDF5 file");
  return writer;
}

Hdf5ImageWriter::~Hdf5ImageWriter() {
  if (file_ >= 0) H5Fclose(file_);
}

Status Hdf5ImageWriter::Written(int64_t id, const std::string& what, const std::string& dataset) {
  if (id < 0) return Status::IOError(name_ + ": cannot " + what + " '" + dataset + "'");
  return Status::Ok();
}

Status Hdf5ImageWriter::AddGroup(const std::string& group) {
  const hid_t id = H5Gcreate2(file_, group.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (id >= 0) H5Gclose(id);
  return Written(id, "create group", group);
}

Status Hdf5ImageWriter::AddDataset(const std::string& dataset, int64_t type, int64_t space,
                                   const void* values) {
  hid_t id = type < 0 || space < 0 ? -1
                                   : H5Dcreate2(file_, dataset.c_str(), type, space, H5P_DEFAULT,
                                                H5P_DEFAULT, H5P_DEFAULT);
  if (id >= 0) {
    const herr_t wrote = H5Dwrite(id, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values);
    H5Dclose(id);
    if (wrote < 0) id = -1;
  }
  return Written(id, "write dataset", dataset);
}

Status Hdf5ImageWriter::AddFloats(const std::string& dataset, const std::vector<int>& shape,
                                  const float* values) {
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Space space(dims.empty() ? H5Screate(H5S_SCALAR)
                           : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  return AddDataset(dataset, H5T_NATIVE_FLOAT, space.id, values);
}

Status Hdf5ImageWriter::AddInt(const std::string& dataset, int value) {
  const hsize_t one = 1;
  Space space(H5Screate_simple(1, &one, nullptr));
  return AddDataset(dataset, H5T_NATIVE_INT, space.id, &value);
}

Status Hdf5ImageWriter::AddString(const std::string& dataset, const std::string& value) {
  Type type(H5Tcopy(H5T_C_S1));
  const bool sized = type.id >= 0 && H5Tset_size(type.id, value.size() + 1) >= 0 &&
                     H5Tset_strpad(type.id, H5T_STR_NULLTERM) >= 0;
  Space space(H5Screate(H5S_SCALAR));
  return AddDataset(dataset, sized ? type.id : -1, space.id, value.c_str());
}

Result<std::string> Hdf5ImageWriter::Image() {
  if (H5Fflush(file_, H5F_SCOPE_GLOBAL) < 0) return Status::IOError(name_ + ": cannot flush");
  const ssize_t size = H5Fget_file_image(file_, nullptr, 0);
  if (size < 0) return Status::IOError(name_ + ": cannot take the file's image");
  std::string bytes(static_cast<size_t>(size), '\0');
  if (H5Fget_file_image(file_, bytes.data(), bytes.size()) != size) {
    return Status::IOError(name_ + ": cannot take the file's image");
  }
  return bytes;
}

}  // namespace pstrain
