#!/usr/bin/env bash
# Installs the peer load generators `make bench` compares knee with, into bench/tools/.
# Idempotent: a tool already installed is skipped. Usage: bench/install.sh [oha|hey|vegeta|locust|ws|ghz|tonic|grpc-examples ...]
# wrk, ab and nginx are Debian packages: scripts/install-system-deps.sh installs them.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
tools="$here/tools"
venv="${VIRTUAL_ENV:-$root/.venv}"
mkdir -p "$tools/bin"

want=("$@")
[ ${#want[@]} -eq 0 ] && want=(oha hey vegeta locust ws ghz tonic grpc-examples)

install_one() {
  local tool="$1"
  case "$tool" in
    oha)
      # oha's compile is long on 2 cores: lowest priority so it does not starve other work.
      [ -x "$tools/bin/oha" ] || nice -n 19 cargo install --locked --quiet oha --root "$tools"
      ;;
    hey)
      [ -x "$tools/bin/hey" ] || GOBIN="$tools/bin" nice -n 19 go install github.com/rakyll/hey@latest
      ;;
    vegeta)
      if [ ! -x "$tools/bin/vegeta" ]; then
        # Some proxies refuse vegeta's version list (403), which `go install @latest` needs:
        # fall back to downloading a pinned version's module and building it in place.
        GOBIN="$tools/bin" nice -n 19 go install github.com/tsenart/vegeta/v12@latest || {
          ver=v12.12.0
          dir="$(go mod download -json "github.com/tsenart/vegeta/v12@$ver" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
          [ -n "$dir" ] && (cd "$dir" && GOFLAGS=-mod=mod nice -n 19 go build -trimpath -ldflags "-X main.Version=$ver" \
            -o "$tools/bin/vegeta" .)
        }
      fi
      ;;
    locust)
      "$venv/bin/python" -c "import locust" 2>/dev/null || "$venv/bin/python" -m pip install -q locust
      ;;
    ws)
      # Node's ws package: the WebSocket server of bench/ws_bench.py (bench/ws_server.js)
      [ -d "$tools/node/node_modules/ws" ] || npm install --prefix "$tools/node" --no-audit --no-fund --silent ws@8
      ;;
    ghz)
      # ghz: the gRPC load tool bench/grpc_bench.py compares knee with
      [ -x "$tools/bin/ghz" ] || GOBIN="$tools/bin" nice -n 19 go install github.com/bojand/ghz/cmd/ghz@v0.120.0
      ;;
    tonic)
      # bench/tonic_client: the least unary gRPC client on tonic's transport (bench/grpc_bench.py)
      if [ ! -x "$tools/bin/tonic-client" ]; then
        nice -n 19 cargo build --release --quiet --manifest-path "$here/tonic_client/Cargo.toml" \
          --target-dir "$tools/tonic-target"
        cp "$tools/tonic-target/release/tonic-client" "$tools/bin/"
      fi
      ;;
    grpc-examples)
      # grpc-go's own example servers, built unmodified from the Go module proxy: helloworld's greeter_server and
      # route_guide's server (tests/integration/test_grpc_go.py, bench/grpc_bench.py). The examples module's go.mod
      # replaces grpc with its parent directory (it lives inside grpc-go's repository): that replace is dropped.
      if [ ! -x "$tools/bin/grpc_greeter_server" ] || [ ! -x "$tools/bin/grpc_route_guide_server" ]; then
        ver=v0.0.0-20260825154716-030ee8becb20
        dir="$(go mod download -json "google.golang.org/grpc/examples@$ver" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
        [ -n "$dir" ]
        work="$(mktemp -d)"
        cp -r "$dir/." "$work" && chmod -R u+w "$work"
        (cd "$work" && go mod edit -dropreplace=google.golang.org/grpc \
          && GOFLAGS=-mod=mod nice -n 19 go build -trimpath -o "$tools/bin/grpc_greeter_server" ./helloworld/greeter_server \
          && GOFLAGS=-mod=mod nice -n 19 go build -trimpath -o "$tools/bin/grpc_route_guide_server" ./route_guide/server)
        mkdir -p "$tools/share" && cp "$work/route_guide/testdata/route_guide_db.json" "$tools/share/"
        rm -rf "$work"
      fi
      ;;
    *)
      echo "bench/install.sh: unknown tool '$tool' (known: oha hey vegeta locust ws ghz tonic grpc-examples)" >&2
      return 2
      ;;
  esac
}

# One tool failing (no Go, no network) does not stop the others; the exit status says something failed.
status=0
for tool in "${want[@]}"; do
  ( install_one "$tool" ) || { echo "bench/install.sh: could not install $tool" >&2; status=1; }
done
exit "$status"
