/* clank-run: serves a Clank app (SPEC §2). */
#include <stdio.h>

#include "host/command.h"
#include "host/host.h"
#include "options.h"

int main(int argc, char **argv) {
  clank_options_t opts;
  switch (clank_options_parse(&opts, argc, argv)) {
    case CLANK_OPTIONS_EXIT_OK: return 0;
    case CLANK_OPTIONS_USAGE: return 2;
    default:
      return opts.command == CLANK_COMMAND_SERVE ? clank_host_main(&opts)
                                                 : clank_command_main(&opts);
  }
}
