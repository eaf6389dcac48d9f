# tls_certs.sh -- sourced by the TLS tests: tls_certs DIR SAN makes, with openssl, a throwaway
# CA (ca), a CA that signed nothing of the server's (other-ca), the server's certificate (CN
# simba-tls.test, the subjectAltName SAN, e.g. "subjectAltName=IP:127.0.0.1") and a client's
# (CN certuser, clientAuth), each NAME.crt with NAME.key (mode 600) in DIR. 0 when all are made.
tls_certs() {
    _d=$1
    mkdir -p "$_d" || return 1
    _key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$1" 2>/dev/null; }
    _ca() { _key "$_d/$1.key" && openssl req -x509 -new -key "$_d/$1.key" -days 2 -subj "/CN=$2" -out "$_d/$1.crt" 2>/dev/null; }
    _signed() { # NAME CN EXT
        _key "$_d/$1.key" && openssl req -new -key "$_d/$1.key" -subj "/CN=$2" -out "$_d/$1.csr" 2>/dev/null &&
            printf '%s\n' "$3" >"$_d/$1.ext" &&
            openssl x509 -req -in "$_d/$1.csr" -CA "$_d/ca.crt" -CAkey "$_d/ca.key" -CAcreateserial -days 2 \
                -extfile "$_d/$1.ext" -out "$_d/$1.crt" 2>/dev/null
    }
    _ca ca "simba test CA" && _ca other-ca "another CA" &&
        _signed server simba-tls.test "$2" &&
        _signed client certuser "extendedKeyUsage=clientAuth" &&
        chmod 600 "$_d"/*.key
}
