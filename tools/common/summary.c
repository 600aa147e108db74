#include "summary.h"

#include <math.h>

static void put_value(FILE *f, const fg_tensor *t, int64_t i) {
  if (fg_dtype_is_float(t->dtype))
    fprintf(f, "%.6g", fg_tensor_get_f(t, i));
  else if (t->dtype == FG_BOOL)
    fputs(fg_tensor_get_i(t, i) ? "true" : "false", f);
  else
    fprintf(f, "%lld", (long long)fg_tensor_get_i(t, i));
}

void fg_print_summary(FILE *f, int index, const fg_tensor *t) {
  fprintf(f, "result %d: %s[", index, fg_dtype_name(t->dtype));
  for (int d = 0; d < t->rank; d++)
    fprintf(f, "%s%lld", d ? "," : "", (long long)t->sizes[d]);
  fputs("] = [", f);
  int64_t n = fg_tensor_numel(t);
  enum { HEAD = 6 };
  for (int64_t i = 0; i < n && i < HEAD; i++) {
    if (i)
      fputs(", ", f);
    put_value(f, t, i);
  }
  if (n > HEAD + 1)
    fputs(", ...", f);
  if (n > HEAD) {
    fputs(", ", f);
    put_value(f, t, n - 1);
  }
  fputs("]", f);
  double mn = INFINITY, mx = -INFINITY, sum = 0;
  int64_t nans = 0;
  for (int64_t i = 0; i < n; i++) {
    double v = fg_tensor_get_f(t, i);
    if (isnan(v)) {
      nans++;
      continue;
    }
    mn = v < mn ? v : mn;
    mx = v > mx ? v : mx;
    sum += v;
  }
  if (n > nans)
    fprintf(f, " min=%.6g max=%.6g mean=%.6g", mn, mx, sum / (double)(n - nans));
  if (nans)
    fprintf(f, " nan=%lld", (long long)nans);
  fputc('\n', f);
}
