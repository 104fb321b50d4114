#!/bin/sh
# splice.sh FILE NAME PART: replace the lines between "<!-- NAME begin -->"
# and "<!-- NAME end -->" in FILE with the contents of PART (make
# benchmarks puts each report's tables into docs/benchmarks.md this way).
set -eu
file=$1 name=$2 part=$3
grep -q "^<!-- $name begin -->\$" "$file" || { echo "splice.sh: $file has no <!-- $name begin --> marker" >&2; exit 2; }
awk -v b="<!-- $name begin -->" -v e="<!-- $name end -->" -v part="$part" '
	$0 == b { print; while ((getline l < part) > 0) print l; skip = 1; next }
	$0 == e { skip = 0 }
	!skip { print }
' "$file" > "$file.tmp"
mv "$file.tmp" "$file"
