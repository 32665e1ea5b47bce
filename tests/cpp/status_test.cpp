// Tests of common/status.hpp and common/exit_code.hpp: each code's factory and
// predicate, that context keeps the code, Result's status, the one mapping
// from Status to exit codes, and the codes real failures carry (a missing
// file, a corrupt .caffemodel, a bad prototxt, an unknown layer type).
#include "common/status.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "common/exit_code.hpp"
#include "common/proto_io.hpp"
#include "proto/caffe.pb.h"
#include "tests/cpp/data_test_util.hpp"
#include "tests/cpp/net_test_util.hpp"
#include "worker/net.hpp"

namespace pstrain {
namespace {

struct CodeCase {
  Status status;
  StatusCode code;
  const char* name;
  int exit_code;
};

std::vector<CodeCase> AllCodes() {
  return {
      {Status::InvalidArgument("m"), StatusCode::kInvalidArgument, "InvalidArgument", 1},
      {Status::NotFound("m"), StatusCode::kNotFound, "NotFound", 1},
      {Status::Corruption("m"), StatusCode::kCorruption, "Corruption", 1},
      {Status::IOError("m"), StatusCode::kIOError, "IOError", 1},
      {Status::FailedPrecondition("m"), StatusCode::kFailedPrecondition, "FailedPrecondition", 1},
      {Status::Diverged("m"), StatusCode::kDiverged, "Diverged", 3},
      {Status::ResourceExhausted("m"), StatusCode::kResourceExhausted, "ResourceExhausted", 1},
      {Status::Unavailable("m"), StatusCode::kUnavailable, "Unavailable", 75},
      {Status::DeadlineExceeded("m"), StatusCode::kDeadlineExceeded, "DeadlineExceeded", 75},
      {Status::Unknown("m"), StatusCode::kUnknown, "Unknown", 1},
      {Status::Error("m"), StatusCode::kUnknown, "Unknown", 1},
  };
}

TEST(StatusTest, OkHasNoCodeOrMessage) {
  const Status ok = Status::Ok();
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.code(), StatusCode::kOk);
  EXPECT_EQ(ok.message(), "");
  EXPECT_EQ(ok.ToString(), "OK");
  EXPECT_FALSE(ok.IsRetryable());
  EXPECT_TRUE(Status().ok());
  EXPECT_EQ(ExitCodeFor(ok), 0);
}

TEST(StatusTest, EachFactoryGivesItsCode) {
  for (const CodeCase& c : AllCodes()) {
    SCOPED_TRACE(c.name);
    EXPECT_FALSE(c.status.ok());
    EXPECT_EQ(c.status.code(), c.code);
    EXPECT_EQ(c.status.message(), "m");
    EXPECT_EQ(c.status.ToString(), std::string(c.name) + ": m");
    EXPECT_EQ(StatusCodeName(c.code), std::string(c.name));
    // Exactly one predicate holds (none for Unknown).
    const std::vector<std::pair<StatusCode, bool>> predicates = {
        {StatusCode::kInvalidArgument, c.status.IsInvalidArgument()},
        {StatusCode::kNotFound, c.status.IsNotFound()},
        {StatusCode::kCorruption, c.status.IsCorruption()},
        {StatusCode::kIOError, c.status.IsIOError()},
        {StatusCode::kFailedPrecondition, c.status.IsFailedPrecondition()},
        {StatusCode::kDiverged, c.status.IsDiverged()},
        {StatusCode::kResourceExhausted, c.status.IsResourceExhausted()},
        {StatusCode::kUnavailable, c.status.IsUnavailable()},
        {StatusCode::kDeadlineExceeded, c.status.IsDeadlineExceeded()},
    };
    for (const auto& [code, holds] : predicates) {
      EXPECT_EQ(holds, code == c.code) << StatusCodeName(code);
    }
    EXPECT_EQ(c.status.IsRetryable(), c.exit_code == 75);
  }
}

TEST(StatusTest, WithContextKeepsTheCode) {
  for (const CodeCase& c : AllCodes()) {
    SCOPED_TRACE(c.name);
    const Status wrapped = c.status.WithContext("net.prototxt:4").WithContext("worker 1");
    EXPECT_EQ(wrapped.code(), c.code);
    EXPECT_EQ(wrapped.message(), "worker 1: net.prototxt:4: m");
    EXPECT_EQ(ExitCodeFor(wrapped), c.exit_code);
  }
  const Status ok = Status::Ok().WithContext("ignored");
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.message(), "");
}

TEST(StatusTest, FromCodeNeverMakesAnOkFailure) {
  EXPECT_EQ(Status::FromCode(StatusCode::kCorruption, "x").code(), StatusCode::kCorruption);
  const Status s = Status::FromCode(StatusCode::kOk, "x");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kUnknown);
}

TEST(StatusTest, ResultCarriesTheCode) {
  Result<int> value(7);
  EXPECT_TRUE(value.ok());
  EXPECT_TRUE(value.status().ok());
  Result<int> failed(Status::NotFound("a.caffemodel: cannot open"));
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(failed.status().IsNotFound());
  EXPECT_EQ(failed.status().message(), "a.caffemodel: cannot open");
  Result<int> from_ok{Status::Ok()};  // our bug: made into an Unknown failure
  EXPECT_FALSE(from_ok.ok());
  EXPECT_EQ(from_ok.status().code(), StatusCode::kUnknown);
}

TEST(ExitCodeTest, OneMappingFromStatusToExitCode) {
  EXPECT_EQ(kExitOk, 0);
  EXPECT_EQ(kExitFailure, 1);
  EXPECT_EQ(kExitUsage, 2);
  EXPECT_EQ(kExitDiverged, 3);
  EXPECT_EQ(kExitRetryable, 75);  // EX_TEMPFAIL
  for (const CodeCase& c : AllCodes()) {
    EXPECT_EQ(ExitCodeFor(c.status), c.exit_code) << c.name;
    EXPECT_NE(ExitCodeFor(c.status), kExitUsage) << c.name << ": usage is main's decision";
  }
}

TEST(ExitCodeTest, ExitWithPrintsTheMessageOnce) {
  ::testing::internal::CaptureStderr();
  const int code = ExitWith(Status::Unavailable("server tcp://h:1 is gone"), "ps-worker 2");
  const int ok_code = ExitWith(Status::Ok(), "ps-worker 2");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "ps-worker 2: server tcp://h:1 is gone\n");
  EXPECT_EQ(code, 75);
  EXPECT_EQ(ok_code, 0);
}

// The codes real failures carry.
TEST(StatusCodesOfFailuresTest, FilesAndNets) {
  testing::TempDir dir;
  caffe::NetParameter param;
  const Status missing = ReadTextProto(dir / "absent.prototxt", &param);
  EXPECT_TRUE(missing.IsNotFound()) << missing.ToString();
  EXPECT_EQ(missing.message(),
            dir / "absent.prototxt" + ": cannot open (No such file or directory)");
  EXPECT_TRUE(ReadBinaryProto(dir / "absent.caffemodel", &param).IsNotFound());

  testing::WriteTextFile(dir / "bad.prototxt", "name: \"x\"\nlayer { name: \n");
  const Status bad_text = ReadTextProto(dir / "bad.prototxt", &param);
  EXPECT_TRUE(bad_text.IsInvalidArgument()) << bad_text.ToString();
  EXPECT_EQ(bad_text.message().rfind(dir / "bad.prototxt" + ":3:", 0), 0u) << bad_text.message();

  testing::WriteFile(dir / "corrupt.caffemodel", std::string("\x0a\xff\xff\xff\x0f", 5), false);
  const Status corrupt = ReadBinaryProto(dir / "corrupt.caffemodel", &param);
  EXPECT_TRUE(corrupt.IsCorruption()) << corrupt.ToString();
  EXPECT_EQ(ExitCodeFor(corrupt), 1);

  testing::WriteTextFile(dir / "net.prototxt", R"(name: "n"
layer { name: "data" type: "DummyData" top: "data"
        dummy_data_param { shape { dim: 2 dim: 3 } } }
layer { name: "x" type: "Frobnicate" bottom: "data" top: "y" }
)");
  auto net = Net::FromFile(dir / "net.prototxt", NetOptions());
  ASSERT_FALSE(net.ok());
  EXPECT_TRUE(net.status().IsInvalidArgument()) << net.status().ToString();
  EXPECT_EQ(
      net.status().message().rfind(
          dir / "net.prototxt" + ":4: layer 'x' (Frobnicate): unknown layer type 'Frobnicate'", 0),
      0u)
      << net.status().message();
}

}  // namespace
}  // namespace pstrain
