/* An output file written whole or not at all: the text goes to a temp file
 * beside the target (PATH.tmp.PID.XXXXXX, with the mode the umask gives a
 * new file) that is renamed over PATH only on success. A run that fails
 * removes its temp; one that crashes or is interrupted removes it from its
 * signal handler; one killed outright (SIGKILL) leaves it behind, and the
 * next run for the same PATH removes the temps of writers no longer alive. */
#ifndef FG_OUT_FILE_H
#define FG_OUT_FILE_H
#include <stdbool.h>
#include <stdio.h>

typedef struct fg_out_file {
  FILE *f;
  char *tmp;        /* the temp file's path (malloc'd) */
  const char *path; /* the target */
} fg_out_file;

/* Opens a temp file for path. Returns false with errno set on failure. */
bool fg_out_open(fg_out_file *o, const char *path);
/* Closes the temp file and, when keep is true and every write succeeded,
 * renames it over the target; otherwise removes it. Returns true when the
 * target was written (errno set on a failed write or rename). */
bool fg_out_close(fg_out_file *o, bool keep);

#endif
