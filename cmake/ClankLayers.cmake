# The C runtime in layers (runtime/README.md): each folder of runtime/ is one
# layer, built as an object library whose include path holds links to itself
# and the layers below it only (build/layers/<name>/), so an #include of a
# layer above fails to compile. Each layer also builds alone as a test
# (layers/<name>).
#
#   clank_layer(NAME SOURCES file.c ... SEES folder ...)
#
# CLANK_MODULE_OBJECTS collects every layer's objects: the C modules, linked
# into clank-run and the loadable clank.so alike.
set(CLANK_MODULE_OBJECTS "")
# clank_layer_dir(NAME folder ...): the include folder of a layer that sees
# those folders of runtime/ (its own among them), in CLANK_LAYER_DIR.
function(clank_layer_dir name)
  set(dir ${CMAKE_BINARY_DIR}/layers/${name})
  file(MAKE_DIRECTORY ${dir})
  foreach(folder ${ARGN})
    if(NOT EXISTS ${dir}/${folder})
      file(CREATE_LINK ${CMAKE_SOURCE_DIR}/runtime/${folder} ${dir}/${folder} SYMBOLIC)
    endif()
  endforeach()
  set(CLANK_LAYER_DIR ${dir} PARENT_SCOPE)
endfunction()

function(clank_layer name)
  cmake_parse_arguments(L "" "" "SOURCES;SEES" ${ARGN})
  clank_layer_dir(${name} ${L_SEES})
  set(dir ${CLANK_LAYER_DIR})
  add_library(clank_${name} OBJECT ${L_SOURCES})
  set_target_properties(clank_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  # Calls into liblua go through the GOT directly (no PLT stub): the request
  # path is mostly Lua API calls.
  target_compile_options(clank_${name} PRIVATE -fno-plt)
  target_include_directories(clank_${name} PRIVATE ${dir} ${LUA_INCLUDE_DIRS}
    ${LIBUV_INCLUDE_DIRS} ${SQLITE3_INCLUDE_DIRS} ${PQ_INCLUDE_DIRS} ${LLHTTP_INCLUDE_DIRS}
    ${SSL_INCLUDE_DIRS} ${SODIUM_INCLUDE_DIRS})
  target_compile_definitions(clank_${name} PRIVATE _POSIX_C_SOURCE=200809L
    CLANK_VERSION="${PROJECT_VERSION}")
  clank_warnings(clank_${name})
  add_test(NAME layers/${name}
    COMMAND ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR} --target clank_${name})
  set(CLANK_MODULE_OBJECTS ${CLANK_MODULE_OBJECTS} $<TARGET_OBJECTS:clank_${name}> PARENT_SCOPE)
endfunction()
