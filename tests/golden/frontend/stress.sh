#!/usr/bin/env bash
# Frontend stress test: hostile and huge inputs must end quickly with exit 0
# (valid input) or exit 1 and a "file:line:col: error:" line -- never a
# crash, a hang, a stack overflow or a partial output file.
#
#   bash tests/golden/frontend/stress.sh [FUSEC]      (default: $FUSEC)
set -u
FUSEC=${1:-${FUSEC:?set FUSEC or pass the fusec path}}
LIMIT=${STRESS_TIME_LIMIT:-10}   # seconds per input; the fast path is < 1 s
dir=$(mktemp -d "${TMPDIR:-/tmp}/fg-stress.XXXXXX") || exit 2
trap 'rm -rf "$dir"' EXIT
failures=0

# check NAME WANT_STATUS [REGEX]: runs fusec on $dir/NAME.fg
check() {
  local name=$1 want=$2 regex=${3:-}
  local in=$dir/$name.fg out=$dir/$name.out
  local t0=$(date +%s%N)
  timeout "$LIMIT" "$FUSEC" "$in" --emit ir -o "$out" 2> "$dir/$name.err" >/dev/null
  local rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  local bad=""
  if (( rc == 124 )); then bad="timed out after ${LIMIT}s"
  elif (( rc >= 128 )); then bad="crashed (exit status $rc)"
  elif (( rc != want )); then bad="exit status $rc, expected $want"
  elif (( want != 0 )) && [[ -e $out ]]; then bad="left an output file"
  elif (( want != 0 )) && ! head -c 4096 "$dir/$name.err" | grep -qaE "^$in:[0-9]+:[0-9]+: error: "; then
    bad="no file:line:col error"
  elif [[ -n $regex ]] && ! head -c 4096 "$dir/$name.err" | grep -qaE "$regex"; then
    bad="message does not match /$regex/"
  fi
  if [[ -n $bad ]]; then
    echo "FAIL: $name: $bad"
    head -c 600 "$dir/$name.err"; echo
    cp "$in" "${TMPDIR:-/tmp}/fg-stress-$name.fg" && echo "  input kept in ${TMPDIR:-/tmp}/fg-stress-$name.fg"
    failures=$((failures + 1))
  else
    printf 'ok:   %-22s exit %d  %6d ms  %s\n' "$name" "$rc" "$ms" "$(head -n1 "$dir/$name.err" | cut -c1-90 | sed "s|$dir/||")"
  fi
}

rep() { # rep N STRING: STRING repeated N times, fast
  head -c "$(( $1 * ${#2} ))" < <(yes "$2" | tr -d '\n')
}

# 20,000 nested calls: the depth limit, not the stack, stops it.
{ printf 'graph g(x: f32[4]) {\n  return '; rep 20000 'neg('; printf x; rep 20000 ')'; printf '\n}\n'; } > "$dir/nested.fg"
check nested 1 'nested too deeply'

# 20,000 nested lists in an attribute.
{ printf 'graph g(x: f32[4]) {\n  return sum(x, dims='; rep 20000 '['; rep 20000 ']'; printf ')\n}\n'; } > "$dir/nested_list.fg"
check nested_list 1 'nested too deeply'

# 20,000 unclosed parentheses and brackets up to end of file.
{ printf 'graph g(x: f32[4]) {\n  return '; rep 20000 '(['; } > "$dir/unclosed.fg"
check unclosed 1

# A 1 MB identifier as a value name (valid), as an op name, a parameter
# name, a dtype and a graph name (errors with a cut-down quote).
id=$(rep 1000000 a)
printf 'graph g(x: f32[4]) {\n  %s = neg(x)\n  return %s\n}\n' "$id" "$id" > "$dir/long_name.fg"
check long_name 0
printf 'graph g(x: f32[4]) {\n  y = %s(x)\n  return y\n}\n' "$id" > "$dir/long_op.fg"
check long_op 1 "unknown op 'a{40}\.\.\.'"
printf 'graph g(x: %s[4]) {\n  return x\n}\n' "$id" > "$dir/long_dtype.fg"
check long_dtype 1 'unknown dtype'
printf 'graph %s(%s: f32[4]) {\n  return %s\n}\ngraph %s() {\n  return 1\n}\n' "$id" "$id" "$id" "$id" > "$dir/long_graph.fg"
check long_graph 1 'graph name of 1000000 characters; at most 200'
printf 'graph g(x: f32[4]) {\n  return add(x, %s)\n}\n' "$(rep 1000000 9)" > "$dir/long_int.fg"
check long_int 1 'out of range'
printf 'graph g(x: f32[4]) {\n  return add(x, 0.%s1)\n}\n' "$(rep 1000000 0)" > "$dir/long_float.fg"
check long_float 0
printf 'graph g(x: f32[4]) {\n  return gelu(x, approximate="%s")\n}\n' "$id" > "$dir/long_string.fg"
check long_string 1 'invalid value'

# Binary garbage with NUL bytes (several fixed seeds, then random ones).
for seed in 1 2 3; do
  awk -v s="$seed" 'BEGIN { srand(s); for (i = 0; i < 200000; i++) printf "%c", int(rand() * 255) + 1 }' > "$dir/garbage$seed.fg"
  printf '\0\0\0' >> "$dir/garbage$seed.fg"
  check "garbage$seed" 1
done
for i in 1 2 3; do
  head -c 200000 /dev/urandom > "$dir/urandom$i.fg"
  check "urandom$i" 1
done
# Garbage after a valid prefix: the error is deep inside the file.
{ printf 'graph g(x: f32[4]) {\n  y = add(x, 1.0)\n  z = mul(y, '; head -c 10000 /dev/urandom; } > "$dir/prefix_garbage.fg"
check prefix_garbage 1

# A 5 MB graph of ~200,000 statements (valid) and 20,000 small graphs.
awk 'BEGIN { print "graph big(x: f32[8], y: f32[8]) {"; print "  v0 = add(x, y)";
  for (i = 1; i < 200000; i++) printf "  v%d = add(mul(v%d, 0.5), y)\n", i, i - 1;
  print "  return v199999"; print "}" }' > "$dir/big.fg"
check big 0
awk 'BEGIN { for (i = 0; i < 20000; i++) printf "graph g%d(x: f32[2]) {\n  return neg(x)\n}\n", i }' > "$dir/many_graphs.fg"
check many_graphs 0
# The same big graph with an error on its last line.
sed '$d' "$dir/big.fg" | sed '$d' > "$dir/big_error.fg"
printf '  return v200000\n}\n' >> "$dir/big_error.fg"
check big_error 1 "undefined name 'v200000'"
# A statement with 100,000 names and a split into as many results.
awk 'BEGIN { printf "graph s(x: f32[100000]) {\n  "; for (i = 0; i < 100000; i++) printf "%sa%d", i ? ", " : "", i;
  printf " = split(x, sizes=["; for (i = 0; i < 100000; i++) printf "%s1", i ? ", " : "";
  printf "], dim=0)\n  return a99999\n}\n" }' > "$dir/wide_split.fg"
check wide_split 0

if (( failures )); then
  echo "$failures stress input(s) failed"
  exit 1
fi
echo "all stress inputs passed"
