// A layering-check fixture: the PS client may include the engine.
#include "worker/net.hpp"
#include "worker/ps/ps_client.hpp"
