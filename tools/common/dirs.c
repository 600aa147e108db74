#include "dirs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

bool fg_make_dirs(const char *dir) {
  char *p = strdup(dir);
  if (!p)
    return false;
  bool ok = true;
  for (char *s = p + 1; ok; s++) {
    if (*s != '/' && *s != 0)
      continue;
    char c = *s;
    *s = 0;
    if (mkdir(p, 0777) != 0 && errno != EEXIST)
      ok = false;
    *s = c;
    if (!c)
      break;
  }
  struct stat st;
  if (ok && (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)))
    ok = false;
  free(p);
  return ok;
}
