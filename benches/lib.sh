# What the benchmark scripts share: a work directory removed on exit, a free port, kapi and
# etcd started and stopped (`$kapi` is the binary). Sourced by benches/run and benches/authz.
work=$(mktemp -d)
kapi_pid=""
etcd_pid=""
cleanup() {
    [ -n "$kapi_pid" ] && kill "$kapi_pid" 2>/dev/null
    [ -n "$etcd_pid" ] && kill "$etcd_pid" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)

ready() {
    local pki=$1/pki
    [ -f "$pki/admin.key" ] || return 1
    [ "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "https://127.0.0.1:$port/readyz")" = 200 ]
}

# start_kapi DIR [ARGS...]: starts kapi on DIR and waits for /readyz; prints nothing.
start_kapi() {
    local dir=$1
    shift
    "$kapi" serve --data-dir "$dir" --secure-port "$port" "$@" >>"$work/kapi.log" 2>&1 &
    kapi_pid=$!
    until ready "$dir"; do
        kill -0 "$kapi_pid" 2>/dev/null || { tail -20 "$work/kapi.log" >&2; exit 1; }
        sleep 0.005
    done
}

stop_kapi() {
    kill "$kapi_pid"
    wait "$kapi_pid" 2>/dev/null || true
    kapi_pid=""
}

# start_etcd DIR: a fresh etcd with its data in DIR, at $etcd_url.
start_etcd() {
    local client peer
    client=$(free_port)
    peer=$(free_port)
    etcd_url=http://127.0.0.1:$client
    etcd --name bench --data-dir "$1" --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
        --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
        --initial-cluster "bench=http://127.0.0.1:$peer" --experimental-watch-progress-notify-interval=1s \
        --quota-backend-bytes=8589934592 >>"$work/etcd.log" 2>&1 &
    etcd_pid=$!
    until curl -sf "$etcd_url/health" >/dev/null; do sleep 0.05; done
}

# CPU time a process has used, in clock ticks (1/100 s).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

stop_etcd() {
    kill "$etcd_pid"
    wait "$etcd_pid" 2>/dev/null || true
    etcd_pid=""
}

