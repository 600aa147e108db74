# The backend's unit tests (tests/unit/test_backend_*.c) are created by
# tests/CMakeLists.txt with the LLVM-free link line; they also need
# fg_backend_ptx. tests/ is added after backend_ptx/, so the link is added
# by a call deferred to the end of the top-level directory.
function(fgb_link_backend_tests)
  file(GLOB srcs ${PROJECT_SOURCE_DIR}/tests/unit/test_backend_*.c)
  foreach(src ${srcs})
    get_filename_component(name ${src} NAME_WE)
    if(TARGET ${name})
      target_link_libraries(${name} PRIVATE fg_backend_ptx)
      target_compile_definitions(${name} PRIVATE FGB_PTXAS="${PTXAS}" FGB_LIBDEVICE="${LIBDEVICE}")
    endif()
  endforeach()
endfunction()
cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL fgb_link_backend_tests)
