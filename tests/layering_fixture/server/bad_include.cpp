// A layering-check fixture: server/ includes the worker.
#include "server/shard_server.hpp"
#include "worker/net.hpp"
