/* fgl_stub_run: an fgl_run that checks nothing and launches nothing, for
 * measuring the Python binding's own host time per call on the CPU
 * (python/tests/bench_fastcall.py rebinds a graph's fast path to it with
 * _fg_setup; every other loader function stays the real library's). */
#include "fgload.h"

fgl_status fgl_run(fgl_graph *g, const fgl_arg *inputs, int n_inputs, fgl_tensor *outputs,
                   int n_outputs, fgl_stream stream, fgl_error *err) {
  (void)g;
  (void)inputs;
  (void)n_inputs;
  (void)outputs;
  (void)n_outputs;
  (void)stream;
  (void)err;
  return FGL_OK;
}
