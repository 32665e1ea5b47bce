// ps-data: data preparation.
//
//   ps-data mnist IMAGES LABELS OUT_LMDB [--json]
//   ps-data images ROOTFOLDER LIST_FILE OUT_LMDB [--resize_height H --resize_width W]
//                  [--gray] [--shuffle] [--encoded [--encode_type png|jpg]]
//                  [--check_size] [--backend lmdb|leveldb] [--seed N] [--json]
//   ps-data mean LMDB OUT.binaryproto [--json]
//   ps-data siamese IMAGES LABELS OUT_DB [--backend lmdb|leveldb] [--seed N] [--json]
//
// mnist converts MNIST-format IDX files (gzipped or plain) into an LMDB of
// Caffe Datums, as Caffe's convert_mnist_data does; images converts a list of
// image files, as Caffe's convert_imageset does (its argument order: the
// folder the list's paths are relative to, the list, the new database);
// mean writes the mean image
// of an LMDB as a BlobProto, as Caffe's compute_image_mean does; siamese
// writes the pair records of Caffe's convert_mnist_siamese_data (2-channel
// Datums of two random images, label 1 when their classes agree). Caffe's
// single-dash spellings (-resize_height=32, -gray) are accepted. Prints one
// line on success (or with --json one JSON object). Errors: one line
// "ps-data: <message>" on stderr; exit 2 for bad arguments, else as
// common/exit_code.hpp maps the failure (1: bad or missing input files).
#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "common/command_line.hpp"
#include "common/exit_code.hpp"
#include "common/json_line.hpp"
#include "worker/data/image_set.hpp"
#include "worker/data/mnist.hpp"
#include "worker/data/record_writer.hpp"

namespace po = boost::program_options;

namespace {

constexpr const char* kUsage =
    "usage: ps-data mnist IMAGES LABELS OUT_LMDB [--json]\n"
    "       ps-data images ROOTFOLDER LIST_FILE OUT_LMDB [images options] [--json]\n"
    "       ps-data mean LMDB OUT.binaryproto [--json]\n"
    "       ps-data siamese IMAGES LABELS OUT_DB [--backend lmdb|leveldb] [--seed N] [--json]\n"
    "  mnist:  converts MNIST-format IDX image and label files (gzipped or plain) into a new\n"
    "          LMDB of Caffe Datum records (keys %08d, as Caffe's convert_mnist_data).\n"
    "  images: converts the images listed in LIST_FILE (lines 'relative/path label', read\n"
    "          under ROOTFOLDER) into a new LMDB of Datums (keys %08d_path); Caffe's\n"
    "          convert_imageset with its arguments and flags; PNG and JPEG files.\n"
    "  mean:   writes the mean image of an LMDB of Datums as a binary BlobProto\n"
    "          (1 x C x H x W, as Caffe's compute_image_mean) for transform_param.mean_file.\n"
    "  siamese: pairs of MNIST-format images for Caffe's siamese example, as Caffe's\n"
    "          convert_mnist_siamese_data: one record per image (keys %08d), each two images\n"
    "          drawn at random (seeded by --seed) as one 2-channel Datum, label 1 when their\n"
    "          labels agree, else 0; LMDB by default (Caffe's example reads a LevelDB).\n";
constexpr const char* kUsageHint = " (see ps-data --help)";

int Fail(const std::string& message, int code) {
  std::cerr << "ps-data: " << message << "\n";
  return code;
}

int Usage(const std::string& message) { return Fail(message + kUsageHint, pstrain::kExitUsage); }

int RunMnist(const std::vector<std::string>& args, bool json) {
  auto result = pstrain::ConvertMnistToLmdb(args[1], args[2], args[3]);
  if (!result.ok()) return pstrain::ExitWith(result.status(), "ps-data");
  const auto& r = result.value();
  if (json) {
    std::cout << pstrain::JsonLine()
                     .Add("event", "ps-data")
                     .Add("command", "mnist")
                     .Add("records", static_cast<int64_t>(r.records))
                     .Add("rows", static_cast<int64_t>(r.rows))
                     .Add("cols", static_cast<int64_t>(r.cols))
                     .Add("output", args[3])
                     .str()
              << "\n";
  } else {
    std::cout << "wrote " << r.records << " records (" << r.rows << "x" << r.cols << ") to "
              << args[3] << "\n";
  }
  return 0;
}

bool IsFolder(const std::string& path) {
  std::error_code error;
  return std::filesystem::is_directory(path, error);
}

bool IsFile(const std::string& path) {
  std::error_code error;
  return std::filesystem::is_regular_file(path, error);
}

int RunImages(const std::vector<std::string>& args, pstrain::ImageSetOptions options, bool json) {
  // Caffe's order: ROOTFOLDER LISTFILE DB_NAME. A list file first and a
  // folder second is the order of earlier ps-data releases.
  if (IsFile(args[1]) && IsFolder(args[2])) {
    return Usage("images takes ROOTFOLDER LIST_FILE OUT_LMDB, as Caffe's convert_imageset; '" +
                 args[1] + "' is a file and '" + args[2] +
                 "' a folder: give the folder first (ps-data images " + args[2] + " " + args[1] +
                 " " + args[3] + ")");
  }
  options.root = args[1];
  options.list_file = args[2];
  options.out = args[3];
  auto result = pstrain::ConvertImageSet(options);
  if (!result.ok()) return pstrain::ExitWith(result.status(), "ps-data");
  const auto& r = result.value();
  const std::string shape =
      std::to_string(r.channels) + "x" + std::to_string(r.height) + "x" + std::to_string(r.width);
  if (json) {
    std::cout << pstrain::JsonLine()
                     .Add("event", "ps-data")
                     .Add("command", "images")
                     .Add("records", static_cast<int64_t>(r.records))
                     .Add("channels", static_cast<int64_t>(r.channels))
                     .Add("height", static_cast<int64_t>(r.height))
                     .Add("width", static_cast<int64_t>(r.width))
                     .Add("same_size", r.same_size)
                     .Add("encoded", options.encoded)
                     .Add("output", options.out)
                     .str()
              << "\n";
  } else {
    std::cout << "wrote " << r.records << (options.encoded ? " encoded" : "") << " records ("
              << shape << (r.same_size ? "" : " first; sizes differ") << ") to " << options.out
              << "\n";
  }
  return 0;
}

int RunSiamese(const std::vector<std::string>& args, const std::string& backend_name, uint64_t seed,
               bool json) {
  auto backend = pstrain::ParseDbBackend(backend_name);
  if (!backend.ok()) return Usage(backend.status().message());
  auto result = pstrain::ConvertMnistPairs(args[1], args[2], args[3], backend.value(), seed);
  if (!result.ok()) return pstrain::ExitWith(result.status(), "ps-data");
  const auto& r = result.value();
  if (json) {
    std::cout << pstrain::JsonLine()
                     .Add("event", "ps-data")
                     .Add("command", "siamese")
                     .Add("records", static_cast<int64_t>(r.records))
                     .Add("rows", static_cast<int64_t>(r.rows))
                     .Add("cols", static_cast<int64_t>(r.cols))
                     .Add("backend", backend_name)
                     .Add("output", args[3])
                     .str()
              << "\n";
  } else {
    std::cout << "wrote " << r.records << " pair records (2x" << r.rows << "x" << r.cols << ") to "
              << args[3] << "\n";
  }
  return 0;
}

int RunMean(const std::vector<std::string>& args, bool json) {
  auto result = pstrain::ComputeImageMean(args[1], args[2]);
  if (!result.ok()) return pstrain::ExitWith(result.status(), "ps-data");
  const auto& r = result.value();
  std::ostringstream means;
  means.precision(10);
  for (size_t c = 0; c < r.channel_means.size(); ++c) {
    means << (c == 0 ? "" : ", ") << r.channel_means[c];
  }
  if (json) {
    std::cout << pstrain::JsonLine()
                     .Add("event", "ps-data")
                     .Add("command", "mean")
                     .Add("records", static_cast<int64_t>(r.records))
                     .Add("channels", static_cast<int64_t>(r.channels))
                     .Add("height", static_cast<int64_t>(r.height))
                     .Add("width", static_cast<int64_t>(r.width))
                     .AddRaw("channel_means", "[" + means.str() + "]")
                     .Add("output", args[2])
                     .str()
              << "\n";
  } else {
    std::cout << "wrote the mean of " << r.records << " records (1x" << r.channels << "x"
              << r.height << "x" << r.width << ") to " << args[2]
              << "; channel means (mean_value): " << means.str() << "\n";
  }
  return 0;
}

}  // namespace

// gflags, which Caffe's tools use, also spells a switch -gray=true or
// -gray=false; a switch here takes no value, so those become --gray or
// nothing. Returns false (with `error` set) for another value.
bool RewriteSwitches(int argc, char** argv, std::vector<std::string>* out, std::string* error) {
  static const char* const kSwitches[] = {"gray", "shuffle", "encoded", "check_size", "json"};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const size_t dashes = arg.rfind("--", 0) == 0 ? 2 : (arg.rfind('-', 0) == 0 ? 1 : 0);
    bool rewritten = false;
    if (dashes > 0 && eq != std::string::npos) {
      const std::string name = arg.substr(dashes, eq - dashes);
      const std::string value = arg.substr(eq + 1);
      for (const char* known : kSwitches) {
        if (name != known) continue;
        if (value == "true" || value == "1" || value == "yes" || value == "on") {
          out->push_back("--" + name);
        } else if (!(value == "false" || value == "0" || value == "no" || value == "off")) {
          *error = "--" + name + "=" + value + ": expected true or false";
          return false;
        }
        rewritten = true;
      }
    }
    if (!rewritten) out->push_back(arg);
  }
  return true;
}

int main(int argc, char** argv) {
  std::vector<std::string> argv_rewritten;
  std::string switch_error;
  if (!RewriteSwitches(argc, argv, &argv_rewritten, &switch_error)) return Usage(switch_error);
  std::vector<std::string> args;
  bool json = false;
  pstrain::ImageSetOptions images;
  po::options_description visible("options");
  visible.add_options()("help,h", "show this help")("version", "print the version")(
      "json", po::bool_switch(&json), "print the result as one JSON object");
  po::options_description image_options("images options (Caffe's convert_imageset flags)");
  image_options.add_options()("resize_height", po::value(&images.resize_height)->default_value(0),
                              "resize every image to this height (with --resize_width; bilinear)")(
      "resize_width", po::value(&images.resize_width)->default_value(0),
      "resize every image to this width")("gray", po::bool_switch(&images.gray),
                                          "store 1-channel gray images (else 3 channels, B G R)")(
      "shuffle", po::bool_switch(&images.shuffle),
      "shuffle the list's order (seeded by --seed) before writing")(
      "encoded", po::bool_switch(&images.encoded),
      "store PNG/JPEG bytes (Datum.encoded) instead of raw pixels")(
      "encode_type", po::value(&images.encode_type)->default_value(""),
      "png or jpg: the format of re-encoded images (default: the file's own)")(
      "check_size", po::bool_switch(&images.check_size),
      "refuse images whose size differs from the first one's");
  po::options_description db_options("images and siamese options");
  db_options.add_options()("backend", po::value(&images.backend)->default_value("lmdb"),
                           "lmdb or leveldb: the database written")(
      "seed", po::value(&images.seed)->default_value(0),
      "seed of images --shuffle and of siamese's pair draws");
  po::options_description all;
  all.add(visible).add(image_options).add(db_options).add_options()("args", po::value(&args));
  po::positional_options_description positional;
  positional.add("args", -1);
  po::variables_map vm;
  pstrain::FlagSpec spec;
  spec.program = "ps-data";
  spec.options = &all;
  spec.positional = positional;
  spec.print_help = [&] { std::cout << kUsage << visible << image_options << db_options; };
  spec.usage = Usage;
  if (auto exit_code = pstrain::ParseFlags(argv_rewritten, spec, vm)) return *exit_code;
  if (args.empty()) return Usage("missing command (mnist, images, mean or siamese)");
  const std::string& command = args[0];
  const size_t given = args.size() - 1;
  auto wrong_count = [&](const char* expected) {
    return Usage(command + " takes " + expected + ", got " + std::to_string(given) + " arguments");
  };
  if (command != "images") {
    for (const auto& option : image_options.options()) {
      if (!vm[option->long_name()].defaulted()) {
        return Usage("--" + option->long_name() + " is an option of 'ps-data images', not of '" +
                     command + "'");
      }
    }
  }
  if (command != "images" && command != "siamese") {
    for (const auto& option : db_options.options()) {
      if (!vm[option->long_name()].defaulted()) {
        return Usage("--" + option->long_name() +
                     " is an option of 'ps-data images' and 'ps-data siamese', not of '" + command +
                     "'");
      }
    }
  }
  if (command == "mnist") {
    if (given != 3) return wrong_count("IMAGES LABELS OUT_LMDB");
    return RunMnist(args, json);
  }
  if (command == "images") {
    if (given != 3) return wrong_count("ROOTFOLDER LIST_FILE OUT_LMDB");
    return RunImages(args, images, json);
  }
  if (command == "mean") {
    if (given != 2) return wrong_count("LMDB OUT.binaryproto");
    return RunMean(args, json);
  }
  if (command == "siamese") {
    if (given != 3) return wrong_count("IMAGES LABELS OUT_DB");
    return RunSiamese(args, images.backend, images.seed, json);
  }
  return Usage("unknown command '" + command + "' (mnist, images, mean or siamese)");
}
