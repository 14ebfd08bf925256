# CLANK_SANITIZE=ON builds everything with AddressSanitizer + UBSan; any report
# aborts the process, so a test that triggers one fails.
option(CLANK_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
if(CLANK_SANITIZE)
  set(CLANK_SANITIZE_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all
    -fno-omit-frame-pointer)
  add_compile_options(${CLANK_SANITIZE_FLAGS})
  add_link_options(${CLANK_SANITIZE_FLAGS})
  # Specs load clank.so into plain lua5.4, which is not instrumented: the ASan
  # runtime has to be preloaded there.
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so
    OUTPUT_VARIABLE CLANK_ASAN_RUNTIME OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()
