/* clank-run new NAME and clank-run test [DIR] (SPEC §16): each is a Lua
   script of the runtime (lua/clank/cli/), run in a Lua state of its own with
   clank-run's modules, so app specs run on the Lua 5.4 the app is written for. */
#ifndef CLANK_HOST_COMMAND_H
#define CLANK_HOST_COMMAND_H

#include "options.h"

/* Runs the command o->command names; returns the process's exit status. */
int clank_command_main(const clank_options_t *o);

#endif
