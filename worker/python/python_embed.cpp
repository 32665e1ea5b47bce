#include "worker/python/python_embed.hpp"

#include <Python.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "worker/layers/python_layer.hpp"

namespace pstrain {
namespace {

// The Python code that finds and imports the extension module: the
// installed pstrain package if there is one, else this checkout's.
constexpr const char* kImportCore = R"(
import sys
try:
    import pstrain
except ImportError:
    sys.path.insert(0, SOURCE_DIR)
    import pstrain
from pstrain import _native
_native.core()
)";

std::string PythonErrorText() {
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  std::string text = "unknown error";
  if (value != nullptr) {
    PyObject* str = PyObject_Str(value);
    if (str != nullptr) {
      const char* utf8 = PyUnicode_AsUTF8(str);
      text = std::string(type != nullptr ? reinterpret_cast<PyTypeObject*>(type)->tp_name : "") +
             ": " + (utf8 != nullptr ? utf8 : "");
      Py_DECREF(str);
    }
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  PyErr_Clear();
  return text;
}

Status StartInterpreter(const std::string& core_dir) {
  if (!core_dir.empty()) setenv("PSTRAIN_CORE_DIR", core_dir.c_str(), /*overwrite=*/0);
  const bool started_here = !Py_IsInitialized();
  if (started_here) {
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0;  // the program keeps its own SIGINT/SIGTERM handling
    config.parse_argv = 0;
    PyStatus status = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(status)) {
      return Status::FailedPrecondition(std::string("cannot start Python for a Python layer: ") +
                                        (status.err_msg != nullptr ? status.err_msg : "?"));
    }
  }
  PyGILState_STATE gil = PyGILState_Ensure();
  Status result;
  PyObject* globals = PyDict_New();
  PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins());
  PyObject* source = PyUnicode_FromString(PSTRAIN_PYTHON_SOURCE_DIR);
  PyDict_SetItemString(globals, "SOURCE_DIR", source);
  Py_DECREF(source);
  // Modules of Python layers are looked up on PYTHONPATH and in the current
  // folder, as `python -c` does.
  PyRun_SimpleString("import sys\nsys.path.insert(0, '')\n");
  PyObject* done = PyRun_String(kImportCore, Py_file_input, globals, globals);
  if (done == nullptr) {
    result =
        Status::FailedPrecondition("cannot import pstrain._core for a Python layer (" +
                                   PythonErrorText() + "); build it with bash scripts/setup.sh");
  }
  Py_XDECREF(done);
  Py_DECREF(globals);
  PyGILState_Release(gil);
  if (started_here) PyEval_SaveThread();  // other threads and the layers take the GIL as needed
  return result;
}

}  // namespace

void EnablePythonLayers(const char* argv0) {
  std::string core_dir;
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec && argv0 != nullptr) exe = std::filesystem::absolute(argv0, ec);
  if (!ec) {
    const std::filesystem::path dir = exe.parent_path().parent_path() / "python" / "pstrain";
    if (std::filesystem::is_directory(dir, ec)) core_dir = dir.string();
  }
  SetPythonLayerBridgeLoader([core_dir] { return StartInterpreter(core_dir); });
}

}  // namespace pstrain
