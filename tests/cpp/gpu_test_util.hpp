// Test support for the GPU suites that compare the GPU path with the CPU
// path through whole nets, trainers and programs: a training setup on a real
// LMDB and float comparisons of nets and .caffemodel files.
#pragma once

#include <string>
#include <vector>

#include "proto/caffe.pb.h"
#include "tests/cpp/process_test_util.hpp"
#include "worker/net.hpp"

namespace pstrain::testing {

// Files for a small classifier trained from a real LMDB under `dir`:
// dir/train_lmdb (32 records of 1 x 4 x 4, WriteCountingLmdb), dir/net.prototxt
// (Data -> InnerProduct -> ReLU -> InnerProduct -> SoftmaxWithLoss in TRAIN;
// Accuracy in TEST) and dir/solver.prototxt with `solver_extra` lines.
// Returns the solver's path.
std::string WriteLmdbClassifier(const std::string& dir, const std::string& solver_extra);

// Every learnable blob of a .caffemodel, in file order (fails the test if unreadable).
std::vector<std::vector<float>> CaffemodelBlobs(const std::string& path);

// |a - b| <= tolerance * max(1, |a|, |b|) element by element; names the first misses.
void ExpectAllNear(const std::vector<std::vector<float>>& expected,
                   const std::vector<std::vector<float>>& actual, float tolerance,
                   const std::string& what);
void ExpectNear(const std::vector<float>& expected, const std::vector<float>& actual,
                float tolerance, const std::string& what);

// A blob's data or diff as a vector (read on the host).
std::vector<float> DataOf(const Blob& blob);
std::vector<float> DiffOf(const Blob& blob);

}  // namespace pstrain::testing
