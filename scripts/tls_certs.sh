#!/usr/bin/env bash
# Makes TLS certificates for the internal links (docs/security.md §5, docs/operations.md §9):
#   scripts/tls_certs.sh DIR CA NODE...
# DIR/CA.pem and DIR/CA.key: a CA (made unless it exists); DIR/NODE.pem and DIR/NODE.key for each
# NODE: a certificate that CA signs (CN=NODE, for TLS clients and servers both). ECDSA P-256 keys,
# mode 600. Every node of a cluster gets --tls-ca DIR/CA.pem, --tls-cert DIR/NODE.pem and
# --tls-key DIR/NODE.key. Keep DIR/CA.key offline in production: nodes never need it.
set -euo pipefail
# --help: the comment above.
[[ "${1:-}" == --help || "${1:-}" == -h ]] && { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | grep -v '^shellcheck'; exit 0; }
if [[ $# -lt 2 ]]; then
  echo "usage: $0 DIR CA [NODE...]" >&2
  exit 64
fi
dir=$1 ca=$2
shift 2
mkdir -p "$dir"
umask 077
ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
if [[ ! -f $dir/$ca.pem ]]; then
  openssl req -x509 "${ec[@]}" -keyout "$dir/$ca.key" -out "$dir/$ca.pem" -days 3650 \
    -subj "/CN=$ca" -addext basicConstraints=critical,CA:TRUE \
    -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
fi
ext=$dir/.node.ext
printf '%s\n' basicConstraints=CA:FALSE keyUsage=critical,digitalSignature \
  extendedKeyUsage=serverAuth,clientAuth >"$ext"
for node in "$@"; do
  openssl req -new "${ec[@]}" -keyout "$dir/$node.key" -out "$dir/$node.csr" -subj "/CN=$node" \
    2>/dev/null
  openssl x509 -req -in "$dir/$node.csr" -CA "$dir/$ca.pem" -CAkey "$dir/$ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -days 825 -extfile "$ext" -out "$dir/$node.pem" \
    2>/dev/null
  rm -f "$dir/$node.csr"
done
rm -f "$ext"
chmod 644 "$dir"/*.pem
