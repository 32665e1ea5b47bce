// A layering-check fixture: the engine includes the parameter-server client.
#include "worker/ps/ps_client.hpp"
