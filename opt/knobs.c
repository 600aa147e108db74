#include "knobs.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

const fg_knob_def fg_knob_defs[FG_NKNOBS] = {
#define FG_KNOB_ROW(name, lo, hi, form, dflt, help) {#name, lo, hi, form, dflt, help},
    FG_KNOB_LIST(FG_KNOB_ROW)
#undef FG_KNOB_ROW
};

static bool in_form(const fg_knob_def *d, int64_t v) {
  if (v < d->lo || v > d->hi)
    return false;
  switch (d->form) {
  case FG_KNOB_WARPS:
    return v % 32 == 0;
  case FG_KNOB_POW2:
    return (v & (v - 1)) == 0;
  case FG_KNOB_ANY:
    break;
  }
  return true;
}

static const char *form_text(fg_knob_form f) {
  return f == FG_KNOB_WARPS ? ", a multiple of 32" : f == FG_KNOB_POW2 ? ", a power of two" : "";
}

bool fg_knob_parse(fg_knobs *ks, const char *text, char *err, size_t cap) {
  const char *eq = strchr(text, '=');
  if (!eq || eq == text || !eq[1]) {
    snprintf(err, cap, "--knob needs NAME=VALUE, got '%s'", text);
    return false;
  }
  size_t n = (size_t)(eq - text);
  for (int i = 0; i < FG_NKNOBS; i++) {
    const fg_knob_def *d = &fg_knob_defs[i];
    if (strlen(d->name) != n || strncmp(d->name, text, n) != 0)
      continue;
    char *end;
    errno = 0;
    long long v = strtoll(eq + 1, &end, 10);
    if (errno || *end || !in_form(d, v)) {
      snprintf(err, cap, "knob %s takes %" PRId64 "..%" PRId64 "%s, got '%s'", d->name, d->lo,
               d->hi, form_text(d->form), eq + 1);
      return false;
    }
    ks->set[i] = true;
    ks->val[i] = v;
    return true;
  }
  int used = snprintf(err, cap, "unknown knob in '%s' (knobs:", text);
  for (int i = 0; i < FG_NKNOBS && used >= 0 && (size_t)used < cap; i++)
    used += snprintf(err + used, cap - (size_t)used, " %s", fg_knob_defs[i].name);
  if (used >= 0 && (size_t)used < cap)
    snprintf(err + used, cap - (size_t)used, ")");
  return false;
}

bool fg_knob_get(const fg_knobs *ks, fg_knob id, int64_t *v) {
  if (!ks || !ks->set[id])
    return false;
  *v = ks->val[id];
  return true;
}

void fg_knob_help(FILE *f) {
  for (int i = 0; i < FG_NKNOBS; i++) {
    const fg_knob_def *d = &fg_knob_defs[i];
    fprintf(f, "    %-15s %" PRId64 "..%" PRId64 "%s (default %s): %s\n", d->name, d->lo, d->hi,
            form_text(d->form), d->dflt, d->help);
  }
}

void fg_knob_print(FILE *f, const fg_knobs *ks) {
  for (int i = 0; ks && i < FG_NKNOBS; i++)
    if (ks->set[i])
      fprintf(f, " %s=%" PRId64, fg_knob_defs[i].name, ks->val[i]);
}
