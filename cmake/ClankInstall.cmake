# Installing Clank (SPEC §16): `cmake --install build --prefix P`, `make install` and
# `cpack -G DEB` all lay it out as
#   P/bin/clank-run                 finds its Lua side at ../share/clank/lua (runtime/host/lua_dir.c)
#   P/share/clank/lua               lua/ (with clank/starter, the app `clank-run new` writes)
#   P/lib/lua/5.4/clank.so          for plain lua5.4 (on its default cpath when P is /usr)
#   P/share/man/man1/clank-run.1
#   P/share/clank/doc               doc/*.md, the manual clank-run serves at /__clank/docs
#                                   (found like the Lua side: runtime/host/lua_dir.c)

# A build folder finds the source's Lua side the same way, through a link beside the binary:
# nothing in the binary names the tree it was built from.
file(CREATE_LINK ${CMAKE_SOURCE_DIR}/lua ${CMAKE_BINARY_DIR}/lua SYMBOLIC)
file(CREATE_LINK ${CMAKE_SOURCE_DIR}/doc ${CMAKE_BINARY_DIR}/doc SYMBOLIC)

install(TARGETS clank-run RUNTIME DESTINATION bin)
install(TARGETS clank LIBRARY DESTINATION lib/lua/5.4)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/lua/ DESTINATION share/clank/lua)
install(FILES ${CMAKE_SOURCE_DIR}/doc/clank-run.1 DESTINATION share/man/man1)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/doc/ DESTINATION share/clank/doc FILES_MATCHING PATTERN "*.md")

set(CPACK_PACKAGE_NAME clank)
set(CPACK_PACKAGE_VENDOR "Clank")
set(CPACK_PACKAGE_CONTACT "Clank maintainers <clank@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Runtime for AI-first applications written in Lua 5.4")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# No CPACK_PACKAGING_INSTALL_PREFIX: the DEB generator's is /usr already, and one set here
# would also put the source tarball's files under usr/.
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION web)
# What clank-run and clank.so link (Lua is inside clank-run), and busted for `clank-run test`
# (Debian 12, with libllhttp9.2 from trixie as vendor/deps.sh pins it).
set(CPACK_DEBIAN_PACKAGE_DEPENDS
  "libuv1, libwslay1, libllhttp9.2, libssl3, libsqlite3-0, libpq5, libsodium23, libcmark0.30.2, lua-busted")

# The source tarball, `cpack --config CPackSourceConfig.cmake` in a build folder:
# clank-0.1.0-Source.tar.gz, which builds with `cmake -S . -B build && cmake --build build` and
# the Debian packages alone (morphdom is in vendor/morphdom). It holds what the source folder
# holds except what a checkout, a build or npm adds: .git, build folders, node_modules and the
# test and bench outputs. The paths are matched from the source folder, so that a clone kept
# under a folder named build (or node_modules) still packs. CPack's step records the commit in
# .git-commit for `clank-run --version` (cmake/ClankVersion.cmake).
string(REGEX REPLACE "([][+.*()^$?|])" "\\\\\\1" clank_source_re "${CMAKE_SOURCE_DIR}")
# the values as written here, in the binary and the source config alike
set(CPACK_VERBATIM_VARIABLES YES)
set(CPACK_SOURCE_GENERATOR TGZ)
set(CPACK_SOURCE_PACKAGE_FILE_NAME clank-${PROJECT_VERSION}-Source)
set(CPACK_SOURCE_IGNORE_FILES
  "^${clank_source_re}/\\.git(/|$)"
  "^${clank_source_re}/build[^/]*(/|$)"
  "^${clank_source_re}/(.*/)?node_modules(/|$)"
  "^${clank_source_re}/(.*/)?\\.[^/]*\\.swp$"
  "^${clank_source_re}/tmp(/|$)")
# where a build folder is not named build*: it is never packed either
file(RELATIVE_PATH clank_build_rel ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
if(NOT clank_build_rel MATCHES "^\\.\\./" AND NOT IS_ABSOLUTE "${clank_build_rel}")
  string(REGEX REPLACE "([][+.*()^$?|])" "\\\\\\1" clank_build_re "${CMAKE_BINARY_DIR}")
  list(APPEND CPACK_SOURCE_IGNORE_FILES "^${clank_build_re}(/|$)")
endif()
set(CPACK_CLANK_SOURCE_DIR ${CMAKE_SOURCE_DIR})
set(CPACK_PRE_BUILD_SCRIPTS ${CLANK_VERSION_SCRIPT})
include(CPack)
