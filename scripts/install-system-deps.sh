#!/usr/bin/env bash
# Installs the Debian packages knee's tests drive (a single-node Slurm with munge among them: tests/slurm.py
# starts its own daemons, so the packages' services are not used). Idempotent; needs root (CI runs as root).
# openssl makes the TLS tests' CAs and certificates; nghttp2-client is h2load, the bench's HTTP/2 reference;
# python3-venv lets make install build .venv on Debian's own python3 (the Makefile's BASE_PYTHON says why).
set -euo pipefail
pkgs=(nginx curl wrk apache2-utils chromium postgresql openssl nghttp2-client slurm-wlm munge prometheus prometheus-node-exporter prometheus-postgres-exporter python3-venv)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
# Commands the tests run, from whichever package provides them here: network namespaces (ip), the Java
# worker example (javac, java), the C worker example (cc).
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v javac >/dev/null 2>&1 || missing+=(default-jdk-headless)
command -v cc >/dev/null 2>&1 || missing+=(gcc)
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo -n"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The tests start their own Prometheus and node_exporter on free ports; the daemons Debian starts are not needed.
if command -v systemctl >/dev/null 2>&1; then
  $SUDO systemctl disable --now prometheus prometheus-node-exporter prometheus-postgres-exporter >/dev/null 2>&1 || true
fi
