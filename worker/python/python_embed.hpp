// The embedded interpreter of ps-net and ps-worker (for Python layers).
#pragma once

namespace pstrain {

// Makes the first Python layer the program builds start an interpreter and
// import pstrain._core (worker/layers/python_layer.hpp). `argv0` locates the
// extension module of a build tree (<bin>/../python/pstrain). Call once, at
// start-up; nothing starts until a net has a Python layer.
void EnablePythonLayers(const char* argv0);

}  // namespace pstrain
