// A layering-check fixture: ZeroMQ in a transport source is fine.
#include <zmq.hpp>
#include "common/transport/socket.hpp"
