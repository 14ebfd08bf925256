# bench/callgrind_totals.awk: "instructions allocs frees" of a callgrind output file (written
# with --compress-strings=no --compress-pos=no), for instructions.sh and db_cost.sh.
#   totals: every event of the run (summary: in older files)
#   calls=: how often a call site called the cfn named above it; allocs are the calls of
#           malloc, calloc and realloc, frees those of free
/^totals:/ { total = $2 }
/^summary:/ { if (!total) total = $2 }
/^cfn=/ { sub(/^cfn=(\([0-9]+\) ?)?/, ""); callee = $0 }
/^calls=/ {
  split(substr($0, 7), c, " ")
  if (callee == "malloc" || callee == "calloc" || callee == "realloc") allocs += c[1]
  else if (callee == "free") frees += c[1]
}
END { printf "%.0f %.0f %.0f\n", total, allocs, frees } # %.0f: mawk writes no %d past 2^31 - 1
