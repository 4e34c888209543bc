#!/usr/bin/env bash
# Feeds the docs checks bad input and expects them to fail, and good input and expects them
# to pass: check_docs.py on a made-up tree, bench/report --check on a stale page and on a
# malformed result file.   tests/docs/self_test.sh PYTHON3 SOURCE_DIR
set -u
py=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
expect() {  # WANT_RC WHAT PATTERN -- COMMAND...: the command's exit status and output
  local want=$1 what=$2 pattern=$3 out rc
  shift 4
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" != "$want" ] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL: $what: exit $rc (want $want), output:"; echo "$out" | sed 's/^/  /'
    fails=$((fails + 1))
  else
    echo "ok: $what"
  fi
}
check=("$py" "$src/tests/docs/check_docs.py" --root "$tmp/tree")

# A clean tree passes.
mkdir -p "$tmp/tree/docs/examples"
printf '# A\n\nSee [b](b.md), [ex](examples/), [web](https://example.org/x.md), [here](#a).\n\n    --timestamp-output gives 2026-11-30T06:07:05.123Z lines\n' >"$tmp/tree/docs/a.md"
printf '# B\n\n`[not a link](missing.md)` and a [ref][r].\n\n[r]: a.md#a\n\n```\n[also not](missing.md)\n```\n' >"$tmp/tree/docs/b.md"
printf '# R\n\n[docs](docs/a.md)\n' >"$tmp/tree/README.md"
printf '# Changelog\n\n## 0.1.0 (2026-12-06)\n' >"$tmp/tree/CHANGELOG.md"
expect 0 "a clean tree passes" "files clean" -- "${check[@]}"

# Each kind of work-log line fails, naming file and line.
n=0
for bad in "Measured 2026-12-05 on the VM." "Measured on 5 Dec at load 3." "Re-run at 07:42 UTC." \
           "In the seventeenth session this changed." "The 8th session measured it." \
           "The numbers are in FACTS.md." "Between 10:15-10:45 UTC the machine was busy."; do
  n=$((n + 1))
  printf '# C\n\nfine\n%s\n' "$bad" >"$tmp/tree/docs/c.md"
  expect 1 "work-log line $n ($bad)" "docs/c.md:4: dated work-log entry" -- "${check[@]}"
done
# ... also in README.md, but not in CHANGELOG.md, docs/benchmarks.md or a --skip-worklog file.
printf '# C\n' >"$tmp/tree/docs/c.md"
printf '# R\n\nSince the fifth session.\n' >"$tmp/tree/README.md"
expect 1 "work-log line in README.md" "README.md:3: dated" -- "${check[@]}"
expect 0 "--skip-worklog README.md" "files clean" -- "${check[@]}" --skip-worklog README.md
printf '# R\n' >"$tmp/tree/README.md"
printf '# Benchmarks\n\n### quiet, 2026-12-06T02:28Z\nrun 2026-12-06 02:28 UTC\n' >"$tmp/tree/docs/benchmarks.md"
printf '# Changelog\n\n## 0.1.0 (2026-12-06)\n- fixed on 5 Dec\n' >"$tmp/tree/CHANGELOG.md"
expect 0 "CHANGELOG.md and benchmarks.md may carry dates" "files clean" -- "${check[@]}"

# A broken link fails, in docs/ and in README.md, with and without an anchor.
printf '# D\n\nSee [status](status.md) and [gone](../nothere.md#x).\n' >"$tmp/tree/docs/d.md"
expect 1 "broken links" "docs/d.md:3: link to a file that does not exist: status.md" -- "${check[@]}"
expect 1 "broken link with anchor" "docs/d.md:3: link to a file that does not exist: ../nothere.md#x" -- "${check[@]}"
printf '# D\n\n## A `b` (c)\n\nSee [x](#a-b-c), [y](a.md#a), [z](#nothere) and [w](a.md#gone).\n' >"$tmp/tree/docs/d.md"
expect 1 "broken anchor in the same file" "docs/d.md:5: link to an anchor that does not exist: #nothere" -- "${check[@]}"
expect 1 "broken anchor in another file" "docs/d.md:5: link to an anchor that does not exist: a.md#gone" -- "${check[@]}"
rm "$tmp/tree/docs/d.md"
printf '# R\n\n[ref]: docs/gone.md\n' >"$tmp/tree/README.md"
expect 1 "broken reference definition" "README.md:3: link to a file that does not exist: docs/gone.md" -- "${check[@]}"

# bench/report: the real results make the committed page; a stale page and a bad record fail.
mkdir -p "$tmp/results"
cp "$src"/bench/results/*.json "$tmp/results/"
report=("$py" "$src/bench/report" --results "$tmp/results" --out "$tmp/benchmarks.md")
expect 0 "bench/report writes a page" "wrote" -- "${report[@]}"
expect 0 "bench/report --check on the page it wrote" "" -- "${report[@]}" --check
sed -i 's/| met |/| NOT met |/' "$tmp/benchmarks.md"
expect 1 "bench/report --check on a hand-edited page" "^\+\+\+ bench/report" -- "${report[@]}" --check
"${report[@]}" >/dev/null
f=$(ls "$tmp/results"/*.json | head -1)
"$py" - "$f" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d["rows"][0]["ours"] = 1e9; d["rows"][0].pop("ratio", None); d["rows"][0]["peer"] = 1
json.dump(d, open(sys.argv[1], "w"))
PY
expect 1 "bench/report --check after a result changed" "^-" -- "${report[@]}" --check
echo '{"bench": "x", "rows": []}' >"$tmp/results/bad.json"
expect 2 "bench/report on a malformed result file" "bad.json: no 'variant'" -- "${report[@]}" --check

[ "$fails" = 0 ] && echo "docs self test: PASS" || { echo "docs self test: $fails FAILED"; exit 1; }
