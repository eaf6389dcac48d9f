#!/bin/sh
# doc_links.sh -- every relative link of README.md, CHANGELOG.md, bench/README.md and docs/*.md
# names a file or directory of the repository (an #anchor is cut off; http(s) and mailto
# links are not followed). Run by make test (group core); prints each broken link.
set -u
cd "$(dirname "$0")/.."
PASS=0
FAIL=0
for md in README.md CHANGELOG.md bench/README.md docs/*.md; do
    [ -f "$md" ] || continue
    dir=$(dirname "$md")
    # [text](target) outside code: the targets, one per line (code spans and fences dropped)
    links=$(awk '/^```/ { code = !code; next } !code' "$md" | sed 's/`[^`]*`//g' |
        grep -o '\]([^) ]*)' | sed 's/^](//; s/)$//')
    for l in $links; do
        case $l in http://* | https://* | mailto:*) continue ;; esac
        path=${l%%#*}
        [ -z "$path" ] && continue # an anchor in the same page
        if [ -e "$dir/$path" ]; then
            PASS=$((PASS + 1))
        else
            FAIL=$((FAIL + 1))
            echo "  FAIL $md: link to $l: no file $dir/$path"
        fi
    done
done
echo "doc_links: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
