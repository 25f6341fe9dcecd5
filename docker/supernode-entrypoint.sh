#!/bin/sh
# A demo client machine in one container: on first start it makes its key pair and registers
# it with the control plane (the same steps as a client on another machine), then it runs its
# SuperNode. Until an operator approves the client (and the coordinator admits its key to the
# SuperLink), flower-supernode exits at once (Flower's exit code 305) and compose restarts it.
set -eu

: "${PHALANX_API_URL:?set PHALANX_API_URL, e.g. http://api:8080}"
: "${PHALANX_SUPERLINK:?set PHALANX_SUPERLINK, e.g. superlink:8000}"
: "${PHALANX_ROOT_CERTIFICATES:?set PHALANX_ROOT_CERTIFICATES to the CA certificate}"

identity="${PHALANX_IDENTITY_DIR:-/var/lib/phalanx/identity}"
key="${identity}/client.key"
mkdir -p "${identity}"

if [ ! -f "${key}" ]; then
    phalanx client keygen --out "${key}"
fi
if [ ! -s "${identity}/client-id" ]; then
    phalanx client register --key "${key}" --api "${PHALANX_API_URL}" \
        --name "${PHALANX_CLIENT_NAME:-$(hostname)}" --format json > "${identity}/registration.json"
    python -c 'import json, sys; print(json.load(open(sys.argv[1]))["id"])' \
        "${identity}/registration.json" > "${identity}/client-id"
fi

PHALANX_CLIENT_KEY="${key}"
PHALANX_CLIENT_ID="$(cat "${identity}/client-id")"
export PHALANX_CLIENT_KEY PHALANX_CLIENT_ID
exec phalanx client start --flwr-home "${identity}/flwr"
