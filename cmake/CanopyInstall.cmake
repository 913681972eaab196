# CanopyInstall: `cmake --install` puts the library where a host's find_package(canopy)
# finds it: the headers a host may include (the engine API's, and the cache, backends and
# messages headers they name; not the actors'), the static libraries, the SentencePiece plugin, and
# lib/cmake/canopy/ with canopyConfig.cmake (which finds the same dependencies again:
# LibTorch, CAF through the FindCAF.cmake installed beside it, nlohmann_json, OpenSSL,
# and pkg-config's PCRE2, utf8proc and xxHash) and the exported targets, canopy::canopy among them.

include(CMakePackageConfigHelpers)

set(CANOPY_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/canopy)

set_target_properties(canopy_cache PROPERTIES EXPORT_NAME cache)
set_target_properties(canopy_backends PROPERTIES EXPORT_NAME backends)
set_target_properties(canopy_checkpoints PROPERTIES EXPORT_NAME checkpoints)
set_target_properties(canopy_tokenizers PROPERTIES EXPORT_NAME tokenizers)
set_target_properties(canopy_kv PROPERTIES EXPORT_NAME kv)
set_target_properties(canopy_messages PROPERTIES EXPORT_NAME messages)
set_target_properties(canopy_engine_types PROPERTIES EXPORT_NAME engine_types)
set_target_properties(canopy_actors PROPERTIES EXPORT_NAME actors)
set_target_properties(canopy_engine PROPERTIES EXPORT_NAME canopy)
set_target_properties(canopy_torch PROPERTIES EXPORT_NAME torch_interface)
set_target_properties(canopy_warnings PROPERTIES EXPORT_NAME warnings)

install(TARGETS canopy_cache canopy_checkpoints canopy_tokenizers canopy_kv canopy_backends
                canopy_messages canopy_engine_types canopy_actors canopy_engine
                canopy_torch canopy_warnings
        EXPORT canopyTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET canopy_sentencepiece)
  # backends/CMakeLists.txt compiles this place in as the plugin's installed path.
  install(TARGETS canopy_sentencepiece LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/canopy)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/cache/include/
                  ${PROJECT_SOURCE_DIR}/backends/include/
                  ${PROJECT_SOURCE_DIR}/messages/include/
                  ${PROJECT_SOURCE_DIR}/actors/types/include/
                  ${PROJECT_SOURCE_DIR}/actors/api/include/
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT canopyTargets NAMESPACE canopy:: DESTINATION ${CANOPY_CMAKE_DIR})

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/canopyConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/canopyConfig.cmake
                              INSTALL_DESTINATION ${CANOPY_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/canopyConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/canopyConfig.cmake
              ${PROJECT_BINARY_DIR}/canopyConfigVersion.cmake
              ${CMAKE_CURRENT_LIST_DIR}/FindCAF.cmake
        DESTINATION ${CANOPY_CMAKE_DIR})
