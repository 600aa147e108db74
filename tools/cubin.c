/* `fusec --cubin`: ptxas run on the artifact's PTX once per architecture,
 * the cubins appended as SASS sections (cubin.h, loader/sass.h). */
#include "cubin.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exit_status.h"
#include "sass.h"

extern char **environ;

int fg_cubin_arch(const char *a) {
  if (strncmp(a, "sm_", 3) != 0)
    return 0;
  const char *p = a + 3;
  int sm = 0, digits = 0;
  for (; *p >= '0' && *p <= '9' && digits < 4; p++, digits++)
    sm = sm * 10 + (*p - '0');
  if (*p == 'a')
    p++;
  return *p || digits < 2 || digits > 3 || sm < 50 ? 0 : sm;
}

static bool executable(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

const char *fg_cubin_find_ptxas(const char *explicit_path, char *buf, size_t buflen) {
  if (explicit_path) {
    if (executable(explicit_path)) {
      snprintf(buf, buflen, "%s", explicit_path);
      return buf;
    }
    fprintf(stderr, "fusec: error: --ptxas '%s' is not an executable file\n", explicit_path);
    return NULL;
  }
  const char *home = getenv("CUDA_HOME");
  if (home && *home && (size_t)snprintf(buf, buflen, "%s/bin/ptxas", home) < buflen &&
      executable(buf))
    return buf;
  const char *path = getenv("PATH");
  for (const char *p = path; p && *p;) {
    const char *e = strchr(p, ':');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n && (size_t)snprintf(buf, buflen, "%.*s/ptxas", (int)n, p) < buflen && executable(buf))
      return buf;
    p = e ? e + 1 : NULL;
  }
  if ((size_t)snprintf(buf, buflen, "/usr/local/cuda/bin/ptxas") < buflen && executable(buf))
    return buf;
  fputs("fusec: error: --cubin needs ptxas, the CUDA toolkit's PTX assembler, and there is none in "
        "$CUDA_HOME/bin, on PATH or in /usr/local/cuda/bin: install the CUDA toolkit (or pass "
        "--ptxas PATH), or leave --cubin out (the loader then compiles the PTX at the first load "
        "and caches the result; see fgwarm)\n",
        stderr);
  return NULL;
}

static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  char *b = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n == cap) {
      cap = cap ? 2 * cap : 1 << 16;
      char *nb = realloc(b, cap + 1);
      if (!nb) {
        free(b);
        fclose(f);
        return NULL;
      }
      b = nb;
    }
    size_t r = fread(b + n, 1, cap - n, f);
    n += r;
    if (r == 0)
      break;
  }
  bool bad = ferror(f);
  fclose(f);
  if (bad) {
    free(b);
    return NULL;
  }
  b[n] = 0;
  *len = n;
  return b;
}

typedef struct job {
  char out[4200], log[4200];
  pid_t pid;
  int status;
} job;

int fg_cubin_append(FILE *out, const char *ptxas, const char *ptx, size_t len,
                    const char *const *archs, int n) {
  const char *tmpdir = getenv("TMPDIR");
  char dir[4000];
  if ((size_t)snprintf(dir, sizeof dir, "%s/fusec-cubin.XXXXXX",
                       tmpdir && *tmpdir ? tmpdir : "/tmp") >= sizeof dir ||
      !mkdtemp(dir)) {
    fprintf(stderr, "fusec: error: cannot make a temporary directory for ptxas: %s\n",
            strerror(errno));
    return FG_EXIT_INPUT;
  }
  int rc = FG_EXIT_OK;
  job jobs[FG_CUBIN_MAX];
  int started = 0;
  char in[4200];
  snprintf(in, sizeof in, "%s/artifact.ptx", dir);
  FILE *f = fopen(in, "wb");
  if (!f || fwrite(ptx, 1, len, f) != len || fclose(f) != 0) {
    fprintf(stderr, "fusec: error: cannot write '%s' for ptxas: %s\n", in, strerror(errno));
    if (f)
      fclose(f);
    rc = FG_EXIT_INPUT;
    goto clean;
  }
  for (int i = 0; i < n && i < FG_CUBIN_MAX; i++) {
    job *j = &jobs[i];
    snprintf(j->out, sizeof j->out, "%s/%s.cubin", dir, archs[i]);
    snprintf(j->log, sizeof j->log, "%s/%s.log", dir, archs[i]);
    char arch_flag[64];
    snprintf(arch_flag, sizeof arch_flag, "-arch=%s", archs[i]);
    char *argv[] = {(char *)ptxas, arch_flag, in, (char *)"-o", j->out, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, j->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    int e = posix_spawn(&j->pid, ptxas, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (e) {
      unlink(j->log);
      fprintf(stderr, "fusec: error: cannot run '%s': %s\n", ptxas, strerror(e));
      rc = FG_EXIT_INPUT;
      break;
    }
    started++;
  }
  for (int i = 0; i < started; i++)
    while (waitpid(jobs[i].pid, &jobs[i].status, 0) < 0 && errno == EINTR)
      ;
  for (int i = 0; i < started && rc == FG_EXIT_OK; i++) {
    job *j = &jobs[i];
    if (!WIFEXITED(j->status) || WEXITSTATUS(j->status) != 0) {
      size_t ll = 0;
      char *log = read_all(j->log, &ll);
      fprintf(stderr, "fusec: error: ptxas -arch=%s failed (%s %d) on the compiled PTX:\n%s",
              archs[i], WIFEXITED(j->status) ? "exit status" : "signal",
              WIFEXITED(j->status) ? WEXITSTATUS(j->status) : WTERMSIG(j->status),
              log && ll ? log : "(no message)\n");
      free(log);
      rc = FG_EXIT_INPUT;
      break;
    }
    size_t cl = 0;
    char *cubin = read_all(j->out, &cl);
    if (!cubin || cl == 0) {
      fprintf(stderr, "fusec: error: ptxas -arch=%s wrote no cubin to '%s'\n", archs[i], j->out);
      free(cubin);
      rc = FG_EXIT_INPUT;
      break;
    }
    if (fgl_sass_write(out, archs[i], cubin, cl, ptx, len) != 0) {
      fprintf(stderr, "fusec: error: writing the SASS for %s failed: %s\n", archs[i],
              strerror(errno));
      rc = FG_EXIT_INPUT;
    }
    free(cubin);
  }
clean:
  for (int i = 0; i < started; i++) {
    unlink(jobs[i].out);
    unlink(jobs[i].log);
  }
  unlink(in);
  rmdir(dir);
  return rc;
}
