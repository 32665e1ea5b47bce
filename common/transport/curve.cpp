#include "common/transport/curve.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <vector>

namespace pstrain::transport {
namespace {

constexpr size_t kZ85KeyLength = 40;

// The key in `path`: one line of 40 Z85 characters that decode to 32 bytes.
Result<std::string> ReadKeyFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": cannot read the key file");
  std::string key;
  std::getline(in, key);
  while (!key.empty() && (key.back() == '\r' || key.back() == ' ')) key.pop_back();
  uint8_t decoded[32];
  if (key.size() != kZ85KeyLength || zmq_z85_decode(decoded, key.c_str()) == nullptr) {
    return Status::InvalidArgument(path + ": not a CURVE key (40 Z85 characters)");
  }
  return key;
}

// The keys folder must be this user's and writable by nobody else: another
// user who can add a file there could add a public key (admitted as a peer of
// the job) or swap a secret key (docs/security.md, "A hostile local user").
Status CheckKeysFolder(const std::string& dir) {
  struct stat info {};
  if (stat(dir.c_str(), &info) != 0) {
    return Status::NotFound(dir + ": cannot read the keys folder: " + std::strerror(errno));
  }
  if (!S_ISDIR(info.st_mode)) return Status::NotFound(dir + ": the keys folder is not a folder");
  if (info.st_uid != geteuid()) {
    return Status::FailedPrecondition(dir + ": the keys folder belongs to uid " +
                                      std::to_string(info.st_uid) + ", not to this user (uid " +
                                      std::to_string(geteuid()) + ")");
  }
  if ((info.st_mode & 022) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(info.st_mode & 07777));
    return Status::FailedPrecondition(dir + ": the keys folder is writable by others (mode " +
                                      mode + "); it must be 0700");
  }
  return Status::Ok();
}

}  // namespace

std::string PeerName(Role role, int rank) {
  const char* what = role == WORKER ? "worker" : role == SERVER ? "server" : "control";
  return std::string(what) + " " + std::to_string(rank);
}

std::string KeyFileName(Role role, int rank) {
  if (role == CONTROL) return "control";
  return std::string(role == WORKER ? "worker-" : "server-") + std::to_string(rank);
}

Result<KeyPair> ReadKeyPair(const std::string& dir, const std::string& name) {
  PSTRAIN_RETURN_IF_ERROR(CheckKeysFolder(dir));
  const std::string secret_path = dir + "/" + name + ".key";
  struct stat info {};
  if (lstat(secret_path.c_str(), &info) != 0) {
    return Status::NotFound(secret_path + ": no such key file");
  }
  if (!S_ISREG(info.st_mode)) {
    return Status::FailedPrecondition(secret_path + ": is not a regular file (a symlink?)");
  }
  if (info.st_uid != geteuid()) {
    return Status::FailedPrecondition(secret_path + ": belongs to uid " +
                                      std::to_string(info.st_uid) + ", not to this user (uid " +
                                      std::to_string(geteuid()) + ")");
  }
  if ((info.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(info.st_mode & 07777));
    return Status::FailedPrecondition(secret_path + ": is readable by others (mode " + mode +
                                      "); it must be 0600");
  }
  KeyPair pair;
  PSTRAIN_ASSIGN_OR_RETURN(pair.secret_key, ReadKeyFile(secret_path));
  PSTRAIN_ASSIGN_OR_RETURN(pair.public_key, ReadPublicKey(dir, name));
  return pair;
}

Result<std::string> ReadPublicKey(const std::string& dir, const std::string& name) {
  return ReadKeyFile(dir + "/" + name + ".pub");
}

Result<std::map<std::string, std::string>> ReadAdmittedKeys(const std::string& dir) {
  static const std::regex kName("^(server|worker)-(0|[1-9][0-9]{0,8})\\.pub$|^control\\.pub$");
  PSTRAIN_RETURN_IF_ERROR(CheckKeysFolder(dir));
  std::map<std::string, std::string> admitted;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string file = entry.path().filename().string();
    std::smatch m;
    if (!std::regex_match(file, m, kName)) continue;
    PSTRAIN_ASSIGN_OR_RETURN(std::string key, ReadKeyFile(entry.path().string()));
    const Role role = !m[1].matched ? CONTROL : m[1] == "server" ? SERVER : WORKER;
    const int rank = m[2].matched ? std::stoi(m[2].str()) : 0;
    admitted[key] = PeerName(role, rank);
  }
  if (error) return Status::NotFound(dir + ": cannot read the keys folder: " + error.message());
  if (admitted.empty())
    return Status::NotFound(dir + ": no public keys (*.pub) in the keys folder");
  return admitted;
}

namespace {

Status WriteOwnerOnly(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Status::IOError(path + ": cannot create: " + std::strerror(errno));
  const std::string line = text + "\n";
  const bool written = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  close(fd);
  if (!written) return Status::IOError(path + ": cannot write");
  return Status::Ok();
}

}  // namespace

Status WriteKeyFolder(const std::string& dir, int servers, int workers) {
  if (mkdir(dir.c_str(), 0700) != 0) {
    return Status::IOError(dir + ": cannot create the keys folder: " + std::strerror(errno));
  }
  std::vector<std::string> names = {"control"};
  for (int k = 0; k < servers; ++k) names.push_back(KeyFileName(SERVER, k));
  for (int r = 0; r < workers; ++r) names.push_back(KeyFileName(WORKER, r));
  for (const std::string& name : names) {
    char public_key[41], secret_key[41];
    if (zmq_curve_keypair(public_key, secret_key) != 0) {
      return Status::FailedPrecondition(std::string("cannot make CURVE keys: ") +
                                        zmq_strerror(zmq_errno()));
    }
    PSTRAIN_RETURN_IF_ERROR(WriteOwnerOnly(dir + "/" + name + ".key", secret_key));
    PSTRAIN_RETURN_IF_ERROR(WriteOwnerOnly(dir + "/" + name + ".pub", public_key));
  }
  return Status::Ok();
}

}  // namespace pstrain::transport
