# `cmake --install build --prefix P` lays PSTrain out as
#   P/bin/                   ps-net, ps-data, ps-worker, ps-server (installed where each is
#                            defined; RUNPATH $ORIGIN/../lib, set in the top-level file)
#   P/lib/                   the shared libraries
#   P/include/pstrain/       the public headers in their folders (common/, worker/,
#                            server/) and the generated proto/*.pb.h, so installed code
#                            includes them as the tree does: #include "common/status.hpp"
#   P/lib/cmake/PSTrain/     PSTrainConfig.cmake, its version file and the exported
#                            targets PSTrain::pstrain_common etc., for find_package(PSTrain)
include(CMakePackageConfigHelpers)

set(pstrain_libraries pstrain_proto pstrain_common pstrain_worker pstrain_ps_client)
if(TARGET pstrain_server)
  list(APPEND pstrain_libraries pstrain_server)
endif()
install(TARGETS ${pstrain_libraries} EXPORT PSTrainTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

set(pstrain_include_dir ${CMAKE_INSTALL_INCLUDEDIR}/pstrain)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/common ${PROJECT_SOURCE_DIR}/worker
                  ${PROJECT_SOURCE_DIR}/server
        DESTINATION ${pstrain_include_dir}
        FILES_MATCHING PATTERN "*.hpp" PATTERN "tools" EXCLUDE)
install(FILES ${CMAKE_BINARY_DIR}/generated/proto/caffe.pb.h
              ${CMAKE_BINARY_DIR}/generated/proto/pstrain.pb.h
              ${PROJECT_SOURCE_DIR}/proto/caffe.proto ${PROJECT_SOURCE_DIR}/proto/pstrain.proto
        DESTINATION ${pstrain_include_dir}/proto)

# What PSTrainConfig.cmake must find again for the exported targets' link interface.
set(PSTRAIN_CONFIG_DNNL_PACKAGE OFF)
if(TARGET DNNL::dnnl)
  set(PSTRAIN_CONFIG_DNNL_PACKAGE ON)
endif()
set(pstrain_config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/PSTrain)
install(EXPORT PSTrainTargets NAMESPACE PSTrain:: DESTINATION ${pstrain_config_dir})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/PSTrainConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/PSTrainConfig.cmake
                              INSTALL_DESTINATION ${pstrain_config_dir})
# 0.x: a minor version may break the API, so only the same minor version matches.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/PSTrainConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/PSTrainConfig.cmake ${CMAKE_BINARY_DIR}/PSTrainConfigVersion.cmake
        DESTINATION ${pstrain_config_dir})
