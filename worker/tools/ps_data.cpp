// ps-data: data preparation.
//
//   ps-data mnist IMAGES LABELS OUT_LMDB [--json]
//
// Converts MNIST-format IDX files (gzipped or plain) into an LMDB of Caffe
// Datums, as Caffe's convert_mnist_data does. Prints one line on success
// ("wrote N records (RxC) to OUT", or with --json one JSON object). Errors:
// one line "ps-data: <message>" on stderr; exit 2 for bad arguments, else as
// common/exit_code.hpp maps the failure (1: bad or missing input files).
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "common/command_line.hpp"
#include "common/exit_code.hpp"
#include "common/json_line.hpp"
#include "worker/data/mnist.hpp"

namespace po = boost::program_options;

namespace {

constexpr const char* kUsage =
    "usage: ps-data mnist IMAGES LABELS OUT_LMDB [--json]\n"
    "  Converts MNIST-format IDX image and label files (gzipped or plain) into a new\n"
    "  LMDB of Caffe Datum records (keys %08d, as Caffe's convert_mnist_data).\n";
constexpr const char* kUsageHint = " (usage: ps-data mnist IMAGES LABELS OUT_LMDB [--json])";

int Fail(const std::string& message, int code) {
  std::cerr << "ps-data: " << message << "\n";
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args;
  bool json = false;
  po::options_description visible("options");
  visible.add_options()("help,h", "show this help")("version", "print the version")(
      "json", po::bool_switch(&json), "print the result as one JSON object");
  po::options_description all;
  all.add(visible).add_options()("args", po::value(&args));
  po::positional_options_description positional;
  positional.add("args", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv)
                  .options(all)
                  .positional(positional)
                  .style(pstrain::CommandLineStyle())
                  .run(),
              vm);
    po::notify(vm);
  } catch (const po::error& e) {
    return Fail(std::string(e.what()) + kUsageHint, pstrain::kExitUsage);
  }
  if (vm.count("help")) {
    std::cout << kUsage << visible;
    return 0;
  }
  if (vm.count("version")) {
    std::cout << pstrain::VersionLine("ps-data") << "\n";
    return 0;
  }
  if (args.empty()) return Fail(std::string("missing command") + kUsageHint, pstrain::kExitUsage);
  if (args[0] != "mnist")
    return Fail("unknown command '" + args[0] + "'" + kUsageHint, pstrain::kExitUsage);
  if (args.size() != 4) {
    return Fail("mnist takes IMAGES LABELS OUT_LMDB, got " + std::to_string(args.size() - 1) +
                    " arguments" + kUsageHint,
                pstrain::kExitUsage);
  }
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
