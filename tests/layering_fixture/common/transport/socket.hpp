// A layering-check fixture: ZeroMQ in a header.
#include <zmq.hpp>
