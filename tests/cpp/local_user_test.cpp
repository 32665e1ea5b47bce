// Another local user against the files and shared memory PSTrain creates
// (docs/security.md, "A hostile local user"): a symlink planted in a shared
// folder where a snapshot is written, a keys folder or key file that is not
// ours, a host group's segment that another user created first.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/proto_io.hpp"
#include "common/transport/curve.hpp"
#include "tests/cpp/transport_test_util.hpp"
#include "worker/ps/host_group.hpp"

namespace pstrain {
namespace {

using pstrain::testing::TempFolder;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// A snapshot_prefix in a shared folder: the other user knows our pid (ps) and
// plants symlinks where a predictable temporary name would be, and at the
// target itself. Our file must land where it belongs and nothing they point at
// may change.
TEST(LocalUserFiles, AnAtomicWriteNeverFollowsAPlantedSymlink) {
  TempFolder shared, ours;
  const std::string victim = ours.path() + "/precious.txt";
  std::ofstream(victim) << "keep me\n";
  const std::string target = shared.path() + "/lenet_iter_100.caffemodel";
  // The name a writer that appends ".tmp.<pid>" would open with O_TRUNC.
  const std::string guessed = target + ".tmp." + std::to_string(::getpid());
  ASSERT_EQ(::symlink(victim.c_str(), guessed.c_str()), 0);
  const mode_t old_umask = ::umask(022);
  const Status written = WriteFileAtomically(target, "weights");
  ::umask(old_umask);
  ASSERT_TRUE(written.ok()) << written.message();
  EXPECT_EQ(Slurp(victim), "keep me\n");
  EXPECT_EQ(Slurp(target), "weights");
  struct stat info {};
  ASSERT_EQ(::lstat(target.c_str(), &info), 0);
  EXPECT_TRUE(S_ISREG(info.st_mode));
  EXPECT_EQ(info.st_mode & 07777, 0644u);  // as before: 0644 less the umask
  // No temporary file left behind; the planted link is still only a link.
  const std::string base = "lenet_iter_100.caffemodel";
  EXPECT_EQ(Names(shared.path()),
            (std::vector<std::string>{base, base + ".tmp." + std::to_string(::getpid())}));

  // The target itself a planted symlink: replaced by our file, never followed.
  const std::string linked = shared.path() + "/lenet_iter_200.caffemodel";
  ASSERT_EQ(::symlink(victim.c_str(), linked.c_str()), 0);
  ASSERT_TRUE(WriteFileAtomically(linked, "more weights").ok());
  EXPECT_EQ(Slurp(victim), "keep me\n");
  ASSERT_EQ(::lstat(linked.c_str(), &info), 0);
  EXPECT_TRUE(S_ISREG(info.st_mode));
  EXPECT_EQ(Slurp(linked), "more weights");
}

class LocalUserKeys : public ::testing::Test {
 protected:
  void SetUp() override {
    keys_ = folder_.path() + "/keys";
    ASSERT_TRUE(transport::WriteKeyFolder(keys_, 1, 1).ok());
  }
  TempFolder folder_;
  std::string keys_;
};

// A keys folder others may write to: they could add a public key (admitted as
// a peer of the job) or replace a secret key. Refused by both readers.
TEST_F(LocalUserKeys, AKeysFolderOthersCanWriteIsRefused) {
  ASSERT_TRUE(transport::ReadAdmittedKeys(keys_).ok());
  ASSERT_EQ(::chmod(keys_.c_str(), 0777), 0);
  const std::string expected =
      keys_ + ": the keys folder is writable by others (mode 0777); it must be 0700";
  auto admitted = transport::ReadAdmittedKeys(keys_);
  ASSERT_FALSE(admitted.ok());
  EXPECT_EQ(admitted.status().message(), expected);
  auto pair = transport::ReadKeyPair(keys_, "worker-0");
  ASSERT_FALSE(pair.ok());
  EXPECT_EQ(pair.status().message(), expected);
  ASSERT_EQ(::chmod(keys_.c_str(), 0730), 0);  // group-writable: refused too
  EXPECT_FALSE(transport::ReadAdmittedKeys(keys_).ok());
  ASSERT_EQ(::chmod(keys_.c_str(), 0700), 0);
  EXPECT_TRUE(transport::ReadKeyPair(keys_, "worker-0").ok());
}

// Keys that belong to another user (a folder or a secret key they made, which
// root could read): refused, naming the owner.
TEST_F(LocalUserKeys, KeysOfAnotherUserAreRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user";
  const uid_t other = 65534;  // nobody
  const std::string secret = keys_ + "/worker-0.key";
  ASSERT_EQ(::chown(secret.c_str(), other, static_cast<gid_t>(-1)), 0);
  auto pair = transport::ReadKeyPair(keys_, "worker-0");
  ASSERT_FALSE(pair.ok());
  EXPECT_EQ(pair.status().message(), secret + ": belongs to uid 65534, not to this user (uid 0)");
  ASSERT_EQ(::chown(secret.c_str(), 0, static_cast<gid_t>(-1)), 0);

  ASSERT_EQ(::chown(keys_.c_str(), other, static_cast<gid_t>(-1)), 0);
  auto admitted = transport::ReadAdmittedKeys(keys_);
  ASSERT_FALSE(admitted.ok());
  EXPECT_EQ(admitted.status().message(),
            keys_ + ": the keys folder belongs to uid 65534, not to this user (uid 0)");
  ASSERT_EQ(::chown(keys_.c_str(), 0, static_cast<gid_t>(-1)), 0);

  // A secret key that is a symlink (to a key file elsewhere): refused.
  const std::string elsewhere = folder_.path() + "/stolen.key";
  std::filesystem::rename(secret, elsewhere);
  ASSERT_EQ(::symlink(elsewhere.c_str(), secret.c_str()), 0);
  pair = transport::ReadKeyPair(keys_, "worker-0");
  ASSERT_FALSE(pair.ok());
  EXPECT_EQ(pair.status().message(), secret + ": is not a regular file (a symlink?)");
}

// Another user created the host group's segment first (its name is on the
// workers' command lines): the worker refuses it and never maps it.
TEST(LocalUserSharedMemory, AHostGroupSegmentOfAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a segment to another user";
  const std::string name = "/pstrain-local-user-test-" + std::to_string(::getpid());
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fchown(fd, 65534, 65534), 0);
  ::close(fd);
  HostGroupOptions options;
  options.name = name;
  options.ranks = {0, 1};
  options.rank = 1;
  options.world_size = 2;
  auto group = HostGroup::Open(options, 6);
  ::shm_unlink(name.c_str());
  ASSERT_FALSE(group.ok());
  EXPECT_EQ(group.status().message(),
            "host group " + name +
                ": owned by uid 65534 with mode 0600: not this user's private segment (uid 0, "
                "mode 0600); refused");
}

}  // namespace
}  // namespace pstrain
