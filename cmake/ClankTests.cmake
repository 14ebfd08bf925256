# Every busted spec file is one ctest test, run with plain lua5.4 (/usr/bin/busted
# starts with `env lua`, which may be another Lua or none).
find_program(LUA_INTERPRETER lua5.4 REQUIRED)
find_program(BUSTED busted REQUIRED)

# What every test that starts clank-run needs; the sanitizer build adds its options.
set(CLANK_RUN_ENV
  "CLANK_RUN=$<TARGET_FILE:clank-run>"
  "CLANK_SOURCE_DIR=${CMAKE_SOURCE_DIR}"
  # spec/functional/install_spec installs and packs this build
  "CLANK_BUILD_DIR=${CMAKE_BINARY_DIR}")
if(CLANK_SANITIZE)
  list(APPEND CLANK_RUN_ENV
    "ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=86:suppressions=${CMAKE_SOURCE_DIR}/spec/asan.supp"
    # use_tls=0: LeakSanitizer (gcc 12, glibc 2.36) crashes scanning the dynamic TLS of the
    # libraries clank.so links (libpq's); our code keeps nothing in TLS.
    "LSAN_OPTIONS=suppressions=${CMAKE_SOURCE_DIR}/spec/lsan.supp:print_suppressions=0:use_tls=0"
    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"
    "CLANK_SANITIZED=1")
endif()
# busted specs also load clank.so into plain lua5.4, which then needs the ASan runtime preloaded
# (clank-run has it linked in; Chromium must not get it).
set(CLANK_TEST_ENV
  "LUA_PATH=${CMAKE_SOURCE_DIR}/lua/?.lua\;${CMAKE_SOURCE_DIR}/lua/?/init.lua\;${CMAKE_SOURCE_DIR}/spec/?.lua\;\;"
  "LUA_CPATH=${CMAKE_BINARY_DIR}/?.so\;\;"
  ${CLANK_RUN_ENV})
if(CLANK_SANITIZE)
  list(APPEND CLANK_TEST_ENV "LD_PRELOAD=${CLANK_ASAN_RUNTIME}")
endif()

file(GLOB_RECURSE CLANK_SPECS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/spec/*_spec.lua)
foreach(spec ${CLANK_SPECS})
  file(RELATIVE_PATH name ${CMAKE_SOURCE_DIR}/spec ${spec})
  string(REGEX REPLACE "_spec\\.lua$" "" name ${name})
  add_test(NAME ${name}
    COMMAND ${LUA_INTERPRETER} ${BUSTED} --output=plainTerminal ${spec}
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "${CLANK_TEST_ENV}" TIMEOUT 600)
endforeach()
# The offline build compiles a clone of the source on two jobs: alone, so that its compiler does
# not slow the timing-sensitive specs down, and with time for a loaded machine.
set_tests_properties(functional/offline_build PROPERTIES RUN_SERIAL TRUE TIMEOUT 1200)

# C unit tests: spec/unit/<layer>/<name>_test.c, each a program linked as clank-run links the
# C modules, seeing its layer's include path (cmake/ClankLayers.cmake); it exits non-zero when a
# case fails. Registered as unit/<layer>/<name>.
# The host's (spec/unit/host) link host files too: CMakeLists.txt builds them.
file(GLOB CLANK_C_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/spec/unit/*/*_test.c)
list(FILTER CLANK_C_TESTS EXCLUDE REGEX "/spec/unit/host/")
get_target_property(clank_run_libraries clank-run LINK_LIBRARIES)
foreach(test ${CLANK_C_TESTS})
  get_filename_component(dir ${test} DIRECTORY)
  get_filename_component(layer ${dir} NAME)
  get_filename_component(name ${test} NAME_WE)
  add_executable(${name} ${test} ${CLANK_MODULE_OBJECTS})
  target_include_directories(${name} PRIVATE ${CMAKE_BINARY_DIR}/layers/${layer}
    ${LUA_INCLUDE_DIRS} ${LIBUV_INCLUDE_DIRS} ${PQ_INCLUDE_DIRS})
  target_compile_definitions(${name} PRIVATE _POSIX_C_SOURCE=200809L)
  target_link_libraries(${name} PRIVATE ${clank_run_libraries})
  clank_warnings(${name})
  string(REGEX REPLACE "_test$" "" short ${name})
  add_test(NAME unit/${layer}/${short} COMMAND ${name})
  set_tests_properties(unit/${layer}/${short} PROPERTIES ENVIRONMENT "${CLANK_RUN_ENV}")
endforeach()

# An app's own specs, run as an app author runs them: `clank-run test DIR` (SPEC §16). The
# tasks app's database is a file of this build (each run of its spec is a user of its own).
add_test(NAME apps/tasks
  COMMAND $<TARGET_FILE:clank-run> test apps/tasks --output=plainTerminal
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(apps/tasks PROPERTIES
  ENVIRONMENT "${CLANK_RUN_ENV};CLANK_TASKS_DB=${CMAKE_BINARY_DIR}/tasks-spec.db" TIMEOUT 120)
# apps/hello is what `clank-run new hello` writes (functional/commands checks it byte for byte).
add_test(NAME apps/hello
  COMMAND $<TARGET_FILE:clank-run> test apps/hello --output=plainTerminal
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(apps/hello PROPERTIES ENVIRONMENT "${CLANK_RUN_ENV}" TIMEOUT 120)

# The MCP endpoint against the official TypeScript SDK client (spec/mcp, its
# packages pinned in package-lock.json and installed by ./dev test).
find_program(NODE node)
if(NODE AND EXISTS ${CMAKE_SOURCE_DIR}/spec/mcp/node_modules)
  add_test(NAME mcp/sdk COMMAND ${NODE} --test spec/mcp/tasks.test.mjs
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(mcp/sdk PROPERTIES ENVIRONMENT "${CLANK_RUN_ENV}" TIMEOUT 600)
  # the same client with accounts: API tokens, scopes, revocation, sessions bound to a person
  add_test(NAME mcp/accounts COMMAND ${NODE} --test spec/mcp/accounts.test.mjs
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(mcp/accounts PROPERTIES ENVIRONMENT "${CLANK_RUN_ENV}" TIMEOUT 600)
  # … and with OAuth (issue 31): discovery, registration both ways, consent, step-up, rotation,
  # revocation, through the SDK's own OAuth client side
  add_test(NAME mcp/oauth COMMAND ${NODE} --test spec/mcp/oauth.test.mjs
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(mcp/oauth PROPERTIES ENVIRONMENT "${CLANK_RUN_ENV}" TIMEOUT 600)
endif()

# The official MCP conformance suite's server scenarios (SPEC §6) against apps/conformance
# (spec/mcp/conformance.mjs; @modelcontextprotocol/conformance pinned in spec/mcp's lock).
if(NODE AND EXISTS ${CMAKE_SOURCE_DIR}/spec/mcp/node_modules/@modelcontextprotocol/conformance)
  add_test(NAME mcp/conformance COMMAND ${NODE} spec/mcp/conformance.mjs
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(mcp/conformance PROPERTIES ENVIRONMENT "${CLANK_RUN_ENV}" TIMEOUT 600)
endif()

# Live views against the real clank-run (spec/browser: node --test files driving
# Chromium through playwright-core, or speaking WebSocket through ws; packages
# pinned in spec/browser/package-lock.json and installed by ./dev test).
if(NODE AND EXISTS ${CMAKE_SOURCE_DIR}/spec/browser/node_modules)
  file(GLOB CLANK_BROWSER_SPECS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/spec/browser/*.test.mjs)
  foreach(spec ${CLANK_BROWSER_SPECS})
    get_filename_component(name ${spec} NAME_WE)
    add_test(NAME browser/${name} COMMAND ${NODE} --test --test-reporter=spec ${spec}
      WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(browser/${name} PROPERTIES ENVIRONMENT "${CLANK_RUN_ENV}" TIMEOUT 600)
  endforeach()
endif()

# Style checks, each only where its tool is installed (vendor/deps.sh --test installs both).
# luacheck reads .luacheckrc at the root; any warning fails the test.
find_program(LUACHECK luacheck)
if(LUACHECK)
  add_test(NAME style/luacheck
    COMMAND ${LUACHECK} --formatter plain --codes lua spec apps bench fuzz
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(style/luacheck PROPERTIES TIMEOUT 120)
endif()

# The C as .clang-format at the root lays it out (written for clang-format 14); nothing is
# rewritten, a difference fails. Files generated into a build tree inside the source are skipped.
find_program(CLANG_FORMAT NAMES clang-format clang-format-14)
if(CLANG_FORMAT)
  file(GLOB_RECURSE CLANK_C_SOURCES CONFIGURE_DEPENDS
    ${CMAKE_SOURCE_DIR}/runtime/*.c ${CMAKE_SOURCE_DIR}/runtime/*.h
    ${CMAKE_SOURCE_DIR}/bench/bare/*.c ${CMAKE_SOURCE_DIR}/bench/bare/*.h
    ${CMAKE_SOURCE_DIR}/fuzz/*.c ${CMAKE_SOURCE_DIR}/spec/*.c)
  foreach(source IN LISTS CLANK_C_SOURCES)
    string(FIND "${source}" "${CMAKE_BINARY_DIR}/" at)
    if(at EQUAL 0)
      list(REMOVE_ITEM CLANK_C_SOURCES "${source}")
    endif()
  endforeach()
  add_test(NAME style/clang-format
    COMMAND ${CLANG_FORMAT} --dry-run --Werror ${CLANK_C_SOURCES}
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(style/clang-format PROPERTIES TIMEOUT 120)
endif()
