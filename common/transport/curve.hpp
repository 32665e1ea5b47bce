// CURVE keys: the key files ps-train writes into a run folder's keys/ and the
// peer names the servers' ZAP handler gives authenticated connections.
//
// A keys folder (mode 0700) holds one key pair per process of a job:
//   <name>.key   its secret key: ZeroMQ's 40-character Z85 text, one line,
//                readable by its owner only (mode 0600; anything wider is refused)
//   <name>.pub   its public key, the same format
// with <name> "server-K", "worker-R" or "control" (the orchestrator). A server
// admits exactly the public keys of its folder, each as the peer it names; a
// process reads only its own secret key. Keys travel as file paths: never on
// a command line, never in a log.
#pragma once

#include <map>
#include <string>

#include "common/status.hpp"
#include "proto/pstrain.pb.h"

namespace pstrain::transport {

struct KeyPair {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;  // Z85, 40 characters
};

// "worker 3", "server 0", "control 0": the name a ZAP handler gives the
// connection of a key, which a server compares with each header's (role, sender).
std::string PeerName(Role role, int rank);

// The key file name of a peer: "worker-3", "server-0", "control".
std::string KeyFileName(Role role, int rank);

// Reads DIR/<name>.key and DIR/<name>.pub. Errors name the file: absent or
// unreadable, not 40 Z85 characters, the secret file readable by group or
// others ("... is readable by others (mode 0644); it must be 0600"), not a
// regular file or not this user's; the folder not this user's or writable by
// group or others ("DIR: the keys folder is writable by others (mode 0777);
// it must be 0700").
Result<KeyPair> ReadKeyPair(const std::string& dir, const std::string& name);

// Reads DIR/<name>.pub.
Result<std::string> ReadPublicKey(const std::string& dir, const std::string& name);

// Every DIR/<name>.pub whose name is a peer's (server-K, worker-R, control):
// public key -> PeerName. Errors: the folder cannot be read, is not this
// user's or is writable by group or others (as ReadKeyPair), a bad key file,
// no key at all.
Result<std::map<std::string, std::string>> ReadAdmittedKeys(const std::string& dir);

// Writes a keys folder for a job of `servers` shards and `workers` workers:
// a fresh key pair each for control, server-K and worker-R (libzmq's
// zmq_curve_keypair), the folder 0700 and every file 0600. What ps-train's
// keys.py writes, for programs and tests that start processes themselves.
// Errors name the path: the folder exists, a file cannot be written.
Status WriteKeyFolder(const std::string& dir, int servers, int workers);

}  // namespace pstrain::transport
