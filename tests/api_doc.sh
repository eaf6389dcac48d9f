#!/bin/sh
# api_doc.sh -- docs/api.md names every SIMBA_API function, public type and result code of the
# headers (their declaration parts, before the implementation guard), and every name it lists
# exists there. A missing name is printed with its header; a stale one with its line.
cd "$(dirname "$0")/.." || exit 2
DOC=docs/api.md
tmp=${TMPDIR:-/tmp}/simba-api-doc.$$
trap 'rm -f "$tmp".*' EXIT
# the declaration part of each header: up to its "#if defined(SIMBA_..._IMPLEMENTATION) && !defined(SIMBA__..._IMPLEMENTED)"
for h in simba*.h; do
    awk '/^#if defined\(SIMBA_[A-Z_]*IMPLEMENTATION\) && !defined\(SIMBA__[A-Z_]*_IMPLEMENTED\)/ { exit } { print }' "$h" |
        awk -v h="$h" '
        /^SIMBA_API/ { api = 1; sig = "" }
        api { sig = sig " " $0; if (sig ~ /\(/) { s = sig; sub(/\(.*/, "", s); n = split(s, w, /[ *]+/); if (w[n] !~ /^simba__/) print w[n] " " h; api = 0 } }
        /^(typedef .*[ *]|} )simba_[a-z0-9_]+;/ { s = $0; sub(/;.*/, "", s); n = split(s, w, /[ *}]+/); if (w[n] !~ /^simba__/) print w[n] " " h }
        /^ *SIMBA_(OK|E[A-Z]+) = / { s = $0; sub(/^ */, "", s); sub(/ .*/, "", s); print s " " h }'
done | sort -u >"$tmp.names"
# every name listed by the page: the first identifier of each "- `" line
sed -n 's/^- `\([A-Za-z_][A-Za-z0-9_]*\).*/\1/p' "$DOC" | sort -u >"$tmp.doc"
fail=0
while read -r name h; do
    if ! grep -qx "$name" "$tmp.doc"; then echo "api_doc: $name ($h) is missing from $DOC"; fail=$((fail + 1)); fi
done <"$tmp.names"
cut -d' ' -f1 "$tmp.names" >"$tmp.known"
while read -r name; do
    if ! grep -qx "$name" "$tmp.known"; then
        echo "api_doc: $DOC:$(grep -n "^- \`$name\b" "$DOC" | head -1 | cut -d: -f1): $name is not a public name of any header"
        fail=$((fail + 1))
    fi
done <"$tmp.doc"
echo "api_doc: $(wc -l <"$tmp.names") public names, $(wc -l <"$tmp.doc") listed, $fail problems"
[ "$fail" -eq 0 ]
