#!/usr/bin/env bash
# fusec's output file: created with the mode the umask gives (not mkstemp's
# 0600), and no temp file left behind by a failed, interrupted or crashed
# run; temps of writers killed outright are removed by the next run.
#
#   bash tests/golden/frontend/output_file.sh FUSEC SOURCE_DIR
set -u
FUSEC=$1
SRC=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/fg-out.XXXXXX") || exit 2
trap 'rm -rf "$dir"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
g=$SRC/examples/layer_norm.fg

# 1. the umask decides the mode
for m in 022 077 002; do
  rm -f "$dir/o.txt"
  (umask $m; "$FUSEC" "$g" --emit plan -o "$dir/o.txt") || bad "umask $m: fusec failed"
  want=$(printf '%o' $((0666 & ~8#$m)))
  got=$(stat -c %a "$dir/o.txt" 2>/dev/null)
  [ "$got" = "$want" ] || bad "umask $m: mode $got, want $want"
done

# 2. a failed run leaves nothing (an input error)
printf 'graph g(x: f32[4]) {\n  return nosuchop(x)\n}\n' >"$dir/bad.fg"
"$FUSEC" "$dir/bad.fg" -o "$dir/bad.ptx" 2>/dev/null && bad "bad input accepted"
ls "$dir" | grep -q 'bad.ptx' && bad "a failed run left $(ls "$dir" | grep bad.ptx)"

# 3. a run killed by a signal (SIGTERM, SIGHUP, SIGSEGV as a crash would
#    raise it) removes its temp file; the signal still ends it
big=$SRC/bench/norm_bwd.fg
for sig in TERM HUP SEGV; do
  caught=0
  for try in 1 2 3 4 5; do
    rm -f "$dir"/k.ptx*
    "$FUSEC" "$big" --jobs 1 -o "$dir/k.ptx" 2>/dev/null &
    pid=$!
    for i in $(seq 1 400); do
      ls "$dir" | grep -q '^k.ptx.tmp' && break
      sleep 0.005
    done
    if ls "$dir" | grep -q '^k.ptx.tmp'; then
      kill -s $sig $pid 2>/dev/null
      wait $pid; rc=$?
      if [ $rc -ge 128 ]; then caught=1; break; fi
    else
      wait $pid
    fi
  done
  [ $caught = 1 ] || { echo "note: could not catch fusec mid-run for SIG$sig"; continue; }
  left=$(ls "$dir" | grep '^k.ptx.tmp')
  [ -z "$left" ] || bad "SIG$sig left $left"
  [ -e "$dir/k.ptx" ] && bad "SIG$sig left a partial k.ptx"
done

# 4. temps of dead writers are removed; a live writer's temp stays
dead=$(sh -c 'echo $$')
: >"$dir/s.ptx.tmp.$dead.AAAAAA"
: >"$dir/s.ptx.tmp.$$.BBBBBB"
: >"$dir/s.ptx.tmpfoo"
"$FUSEC" "$g" --emit plan -o "$dir/s.ptx" || bad "fusec failed"
[ -e "$dir/s.ptx.tmp.$dead.AAAAAA" ] && bad "a dead writer's temp was left"
[ -e "$dir/s.ptx.tmp.$$.BBBBBB" ] || bad "a live writer's temp was removed"
[ -e "$dir/s.ptx.tmpfoo" ] || bad "a file that is no temp of fusec's was removed"

echo "$((fail == 0 ? 1 : 0)) passed, $fail failed"
[ $fail = 0 ]
