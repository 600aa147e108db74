/* The exit statuses of fusec and fgrun (shared spec tools.md), named once
 * for both tools and for the library calls that return one. */
#ifndef FG_EXIT_STATUS_H
#define FG_EXIT_STATUS_H

enum fg_exit_status {
  FG_EXIT_OK = 0,       /* success */
  FG_EXIT_INPUT = 1,    /* an error in the input, reported at file:line:col */
  FG_EXIT_USAGE = 2,    /* bad usage of the command line */
  FG_EXIT_INTERNAL = 3, /* a bug in fusec, reported as "internal error" */
};

#endif
