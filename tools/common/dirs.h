/* Creating an output directory and its parents (mkdir -p). */
#ifndef FG_DIRS_H
#define FG_DIRS_H
#include <stdbool.h>

/* True when dir exists as a directory afterwards. */
bool fg_make_dirs(const char *dir);

#endif
