# The layering rules, checked on every build (a target of the top-level
# CMakeLists.txt that every library depends on) and by a test that feeds it a
# tree breaking them.
#
#   cmake -DROOT=<source tree> -P scripts/check_layering.cmake
#
# Which project folders a source file may include (#include "folder/..."):
#   common/                 common/ and proto/ only: it sits below both roles
#   worker/ps/              common/, proto/, worker/ (the engine) and worker/ps/
#   worker/ (the engine)    common/, proto/ and worker/, never worker/ps/
#   server/                 common/, proto/ and server/
# worker/ and server/ never include each other. ZeroMQ (<zmq.h>, <zmq.hpp>,
# <zmq_addon.hpp>) is private to the transport: only common/transport/*.cpp
# include it. oneDNN (<oneapi/dnnl/dnnl.hpp>, <dnnl.hpp> and
# "common/dnnl_context.hpp") is private to the layers' fast paths: only
# worker/layers/*_dnnl.cpp and common/dnnl_context.* include it.
# A violation names the file, its line and the rule, and fails.
if(NOT ROOT)
  message(FATAL_ERROR "check_layering: pass -DROOT=<source tree>")
endif()
# A relative ROOT ("." as in the usage above) would make GLOB's RELATIVE paths
# start with "../", and no rule would match them.
get_filename_component(ROOT "${ROOT}" ABSOLUTE)

# A file's rule: allowed include prefixes, and denied ones among those.
set(allow_common "common/" "proto/")
set(allow_worker_ps "common/" "proto/" "worker/")
set(allow_worker "common/" "proto/" "worker/")
set(deny_worker "worker/ps/")
set(allow_server "common/" "proto/" "server/")

set(violations "")
foreach(folder common worker server)
  if(NOT IS_DIRECTORY "${ROOT}/${folder}")
    continue()
  endif()
  file(GLOB_RECURSE sources RELATIVE "${ROOT}" "${ROOT}/${folder}/*.hpp" "${ROOT}/${folder}/*.cpp"
       "${ROOT}/${folder}/*.cu" "${ROOT}/${folder}/*.cuh" "${ROOT}/${folder}/*.h")
  foreach(src ${sources})
    if(src MATCHES "^worker/ps/")
      set(allowed ${allow_worker_ps})
      set(denied "")
    elseif(src MATCHES "^worker/")
      set(allowed ${allow_worker})
      set(denied ${deny_worker})
    elseif(src MATCHES "^server/")
      set(allowed ${allow_server})
      set(denied "")
    else()
      set(allowed ${allow_common})
      set(denied "")
    endif()
    # One list element per line. Characters that CMake's lists treat
    # specially go first: ';' would split a line, '[' ']' and a '\' before the
    # separator would join lines (and shift every line number after them).
    file(READ "${ROOT}/${src}" text)
    string(REGEX REPLACE "[][;\\]" "_" text "${text}")
    string(REPLACE "\n" ";" lines "${text}")
    set(line_no 0)
    foreach(line IN LISTS lines)
      math(EXPR line_no "${line_no} + 1")
      if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*\"([a-z_]+/)[^\"]*\"")
        set(target "${CMAKE_MATCH_1}")
        string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]*)\".*" "\\1" path "${line}")
        set(ok FALSE)
        foreach(prefix ${allowed})
          if(target STREQUAL prefix)
            set(ok TRUE)
          endif()
        endforeach()
        foreach(prefix ${denied})
          string(LENGTH "${prefix}" n)
          string(SUBSTRING "${path}" 0 ${n} head)
          if(head STREQUAL prefix)
            set(ok FALSE)
          endif()
        endforeach()
        if(NOT ok)
          list(APPEND violations "${src}:${line_no}: includes \"${path}\", which its folder may not")
        endif()
      elseif(line MATCHES "^[ \t]*#[ \t]*include[ \t]*[<\"](zmq|zmq_addon)\\.(h|hpp)[>\"]")
        if(NOT src MATCHES "^common/transport/[^/]*\\.cpp$")
          list(APPEND violations
               "${src}:${line_no}: includes ZeroMQ, which only common/transport/*.cpp may")
        endif()
      endif()
      if(line MATCHES
         "^[ \t]*#[ \t]*include[ \t]*[<\"](oneapi/dnnl/dnnl|dnnl|common/dnnl_context)\\.hpp[>\"]")
        if(NOT src MATCHES "^worker/layers/[a-z_]+_dnnl\\.cpp$"
           AND NOT src MATCHES "^common/dnnl_context\\.(hpp|cpp)$")
          list(APPEND violations "${src}:${line_no}: includes oneDNN, which only \
worker/layers/*_dnnl.cpp and common/dnnl_context.* may")
        endif()
      endif()
    endforeach()
  endforeach()
endforeach()

if(violations)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "layering rules broken (see scripts/check_layering.cmake):\n  ${text}")
endif()
