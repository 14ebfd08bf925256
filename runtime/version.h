/* What `clank-run --version` names: the version (CLANK_VERSION, from CMakeLists.txt's project())
 * and the commit it was built from, generated at every build by cmake/ClankVersion.cmake into
 * generated/git_commit.c: a short git hash ("-dirty" when the tree had uncommitted changes),
 * the commit a source tarball recorded, or "unknown". */
#ifndef CLANK_VERSION_H
#define CLANK_VERSION_H

extern const char clank_git_commit[];

#endif
