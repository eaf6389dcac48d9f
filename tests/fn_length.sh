#!/bin/sh
# fn_length.sh [LIMIT [FILE...]] -- fails when a function in the headers is longer than
# LIMIT lines (default 80; files: simba*.h adapters/*.h tools/simba.c). A function's length counts every
# line from the one holding its opening brace to the one holding its closing brace, both
# included, blank and comment lines too. Braces inside comments, strings, character
# literals and preprocessor lines do not count; `extern "C" {` opens no function.
cd "$(dirname "$0")/.." || exit 2
LIMIT=${1:-80}
[ $# -gt 0 ] && shift
[ $# -eq 0 ] && set -- simba*.h adapters/*.h tools/simba.c
awk -v limit="$LIMIT" '
FNR == 1 { depth = 0; incomment = 0; cont = 0; sig = ""; start = 0 }
{
    raw = $0
    if (cont || (!incomment && raw ~ /^[ \t]*#/)) { cont = raw ~ /\\$/; next }
    line = ""; n = length(raw); i = 1
    while (i <= n) { # keep code only: drop comments, string and character literals
        c = substr(raw, i, 1); c2 = substr(raw, i, 2)
        if (incomment) { if (c2 == "*/") { incomment = 0; i += 2 } else i++; continue }
        if (c2 == "/*") { incomment = 1; i += 2; continue }
        if (c2 == "//") break
        if (c == "\"" || c == "\047") {
            q = c; i++
            while (i <= n && substr(raw, i, 1) != q) i += substr(raw, i, 1) == "\\" ? 2 : 1
            i++; line = line q q; continue
        }
        line = line c; i++
    }
    if (depth == 0 && line ~ /^extern "" \{/) next
    if (depth == 0 && line ~ /^[ \t]*\}[ \t]*$/) next # the close of extern "C"
    for (i = 1; i <= length(line); i++) {
        c = substr(line, i, 1)
        if (depth == 0) sig = sig c
        if (c == "{") {
            if (depth == 0) {
                isfn = sig ~ /\(/ && sig !~ /=/ && sig !~ /^[ \t\n]*(typedef|struct|union|enum)[ \t\n]/
                if (isfn) {
                    start = FNR; name = sig
                    sub(/\(.*/, "", name); sub(/.*[ \t\n*]/, "", name)
                } else start = 0
            }
            depth++
        } else if (c == "}") {
            depth--
            if (depth == 0) {
                if (start) {
                    len = FNR - start + 1; fns++
                    if (len > longest) { longest = len; lname = FILENAME ":" start " " name }
                    if (len > limit) { printf "%s:%d: %s is %d lines (limit %d)\n", FILENAME, start, name, len, limit; over++ }
                }
                sig = ""; start = 0
            }
        } else if (c == ";" && depth == 0) sig = ""
    }
    if (depth == 0) sig = sig "\n"
}
END {
    printf "fn_length: %d functions, longest %d lines (%s), %d over %d\n", fns, longest, lname, over, limit
    exit over > 0
}' "$@"
