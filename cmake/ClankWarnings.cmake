# Our own code builds warning-free; third-party headers are included as system headers.
function(clank_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror -Wshadow
    -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter)
endfunction()
