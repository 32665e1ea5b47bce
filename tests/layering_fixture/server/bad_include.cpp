// A layering-check fixture: server/ includes the worker.
#include "server/shard_state.hpp"
#include "worker/net.hpp"
