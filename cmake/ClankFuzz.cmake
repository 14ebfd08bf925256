# CLANK_FUZZ=ON (with CC=clang, in a build directory of its own, e.g. build-fuzz): every
# object is built for libFuzzer with ASan and UBSan, and fuzz/CMakeLists.txt adds the
# harnesses (fuzz/run.sh builds and runs them).
option(CLANK_FUZZ "Build the libFuzzer harnesses in fuzz/ (needs clang)" OFF)
if(CLANK_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "CLANK_FUZZ needs clang (CC=clang cmake -DCLANK_FUZZ=ON ...); "
      "the compiler is ${CMAKE_C_COMPILER_ID}")
  endif()
  if(CLANK_SANITIZE)
    message(FATAL_ERROR "CLANK_FUZZ brings its own sanitizers: leave CLANK_SANITIZE off")
  endif()
  # Coverage everywhere; libFuzzer's main only in the harnesses (fuzz/CMakeLists.txt).
  set(CLANK_FUZZ_FLAGS -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
    -fno-omit-frame-pointer)
  add_compile_options(${CLANK_FUZZ_FLAGS})
  add_link_options(-fsanitize=address,undefined)
endif()
