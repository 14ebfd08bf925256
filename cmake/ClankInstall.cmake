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
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION web)
# What clank-run and clank.so link, and busted for `clank-run test` (Debian 12, with
# libllhttp9.2 from trixie as vendor/deps.sh pins it).
set(CPACK_DEBIAN_PACKAGE_DEPENDS
  "liblua5.4-0, libuv1, libwslay1, libllhttp9.2, libssl3, libsqlite3-0, libpq5, libsodium23, libcmark0.30.2, lua-busted")
include(CPack)
