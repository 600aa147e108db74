/* Status/dtype names, error filling and logging helpers. */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "internal.h"

static const char *const dtype_names[FGL_DTYPE_COUNT] = {
    "bool", "i8",  "u8",  "i16",    "i32",    "i64",    "f16",
    "bf16", "f32", "f64", "f8e4m3", "f8e5m2", "f8e8m0", "f4e2m1"};
static const int dtype_sizes[FGL_DTYPE_COUNT] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8, 1, 1, 1, 1};

const char *fgl_dtype_name(fgl_dtype t) {
  return (unsigned)t < FGL_DTYPE_COUNT ? dtype_names[t] : "?";
}
int fgl_dtype_size(fgl_dtype t) { return (unsigned)t < FGL_DTYPE_COUNT ? dtype_sizes[t] : 0; }
long long fgl_dtype_bytes(fgl_dtype t, long long n) {
  return t == FGL_F4E2M1 ? (n + 1) / 2 : n * fgl_dtype_size(t);
}
int fgl_dtype_is_float(fgl_dtype t) { return t >= FGL_F16 && t < FGL_DTYPE_COUNT; }

const char *fgl_status_name(fgl_status s) {
  switch (s) {
  case FGL_OK:
    return "FGL_OK";
  case FGL_ERR_INVALID_ARGUMENT:
    return "FGL_ERR_INVALID_ARGUMENT";
  case FGL_ERR_NO_DRIVER:
    return "FGL_ERR_NO_DRIVER";
  case FGL_ERR_CUDA:
    return "FGL_ERR_CUDA";
  case FGL_ERR_IO:
    return "FGL_ERR_IO";
  case FGL_ERR_PLAN:
    return "FGL_ERR_PLAN";
  case FGL_ERR_UNSUPPORTED:
    return "FGL_ERR_UNSUPPORTED";
  case FGL_ERR_NOT_FOUND:
    return "FGL_ERR_NOT_FOUND";
  case FGL_ERR_MISMATCH:
    return "FGL_ERR_MISMATCH";
  case FGL_ERR_NO_MEMORY:
    return "FGL_ERR_NO_MEMORY";
  }
  return "FGL_ERR_?";
}

fgl_status fgl_fail(fgl_error *err, fgl_status status, const char *fmt, ...) {
  if (err) {
    err->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
  }
  return status;
}

void fgl_logf(fgl_log_fn log, void *user, fgl_log_level level, const char *fmt, ...) {
  if (!log)
    return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  log(user, level, buf);
}

double fgl_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}
