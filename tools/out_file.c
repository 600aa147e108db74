/* Output files written whole or not at all (out_file.h). */
#include "out_file.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The temp file a signal handler removes: one at a time, armed before the
 * file exists (mkstemp writes its name here) and cleared once it is
 * renamed or removed. */
static char pending[4096];
static volatile sig_atomic_t have_pending;

static void on_fatal_signal(int sig) {
  if (have_pending)
    unlink(pending);
  raise(sig); /* SA_RESETHAND: the default action now */
}

static void install_handlers(void) {
  static bool done;
  static char altstack[64 * 1024]; /* the handler must run after a stack overflow too */
  if (done)
    return;
  done = true;
  stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack};
  sigaltstack(&ss, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_fatal_signal;
  sa.sa_flags = SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  static const int sigs[] = {SIGSEGV, SIGBUS,  SIGFPE, SIGILL,  SIGABRT,
                             SIGINT,  SIGTERM, SIGHUP, SIGXCPU, SIGXFSZ};
  for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
    struct sigaction old;
    /* a signal the parent ignores (SIGINT of a background job) stays ignored */
    if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
      continue;
    sigaction(sigs[i], &sa, NULL);
  }
}

/* Removes PATH.tmp.PID.* left by writers that are no longer alive (kill
 * says no such process; a writer of another user is left alone). */
static void remove_stale(const char *path) {
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  char *dir = slash == path ? strdup("/")
              : slash       ? strndup(path, (size_t)(slash - path))
                            : strdup(".");
  DIR *dp = dir ? opendir(dir) : NULL;
  size_t blen = strlen(base);
  for (struct dirent *de; dp && (de = readdir(dp));) {
    const char *nm = de->d_name;
    if (strncmp(nm, base, blen) != 0 || strncmp(nm + blen, ".tmp.", 5) != 0)
      continue;
    char *end;
    long pid = strtol(nm + blen + 5, &end, 10);
    if (pid <= 0 || *end != '.' || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
      continue;
    char *full = malloc(strlen(dir) + strlen(nm) + 2);
    if (!full)
      break;
    sprintf(full, "%s/%s", dir, nm);
    struct stat st;
    if (lstat(full, &st) == 0 && S_ISREG(st.st_mode))
      unlink(full);
    free(full);
  }
  if (dp)
    closedir(dp);
  free(dir);
}

bool fg_out_open(fg_out_file *o, const char *path) {
  memset(o, 0, sizeof *o);
  o->path = path;
  remove_stale(path);
  size_t cap = strlen(path) + 48;
  o->tmp = malloc(cap);
  if (!o->tmp)
    return false;
  snprintf(o->tmp, cap, "%s.tmp.%ld.XXXXXX", path, (long)getpid());
  install_handlers();
  /* The handler's name is armed before mkstemp, which fills in the suffix
   * of that very buffer and then creates the file: a signal at any point
   * removes what exists under the name so far (nothing before the file is
   * created). Arming it after mkstemp left a window in which a SIGTERM
   * kept the file (CI, tests/golden/frontend/output_file.sh). */
  bool tracked = strlen(o->tmp) < sizeof pending;
  if (tracked) {
    have_pending = 0;
    memcpy(pending, o->tmp, strlen(o->tmp) + 1);
    have_pending = 1;
  }
  int fd = mkstemp(tracked ? pending : o->tmp);
  if (fd < 0) {
    int e = errno;
    have_pending = 0;
    free(o->tmp);
    o->tmp = NULL;
    errno = e;
    return false;
  }
  if (tracked)
    memcpy(o->tmp, pending, strlen(pending) + 1);
  /* mkstemp makes the file 0600; a compiler's output takes the umask's mode. */
  mode_t mask = umask(0);
  umask(mask);
  fchmod(fd, 0666 & ~mask);
  o->f = fdopen(fd, "w");
  if (!o->f) {
    int e = errno;
    close(fd);
    fg_out_close(o, false);
    errno = e;
    return false;
  }
  return true;
}

bool fg_out_close(fg_out_file *o, bool keep) {
  bool ok = keep;
  if (o->f) {
    ok = ok && !ferror(o->f);
    if (fclose(o->f) != 0)
      ok = false;
    o->f = NULL;
  }
  int e = errno;
  if (ok && rename(o->tmp, o->path) != 0) {
    e = errno;
    ok = false;
  }
  if (!ok && o->tmp)
    unlink(o->tmp);
  have_pending = 0;
  free(o->tmp);
  o->tmp = NULL;
  errno = e;
  return ok;
}
