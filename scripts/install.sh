#!/usr/bin/env bash
# Install (or upgrade, or remove) edge-agent from an offline bundle; no network is used.
#
#   sudo ./install.sh                 install or upgrade: /opt/edge-agent, /var/lib/edge-agent, /etc/edge-agent
#   sudo ./install.sh --uninstall     remove the program and the units; data and config stay
#   sudo ./install.sh --uninstall --purge   ... and the data folder and the config too
#
# Idempotent: a second run changes nothing that is already right. An upgrade replaces the program
# and models/default, and keeps the data, the index, imported models and /etc/edge-agent/config.toml.
set -euo pipefail

PREFIX=/opt/edge-agent
DATA=/var/lib/edge-agent
CONFIG_DIR=/etc/edge-agent
SERVICE_USER=edge-agent
PYTHON=${PYTHON:-}
SYSTEMD=auto
COMPILE=1
ACTION=install
PURGE=0
HERE=$(cd "$(dirname "$0")" && pwd)

usage() {
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
  cat <<EOF

options:
  --prefix DIR       program folder (default $PREFIX; the virtual environment is DIR/venv)
  --data DIR         data folder: models, index, database, embedding cache (default $DATA)
  --config-dir DIR   where config.toml lives (default $CONFIG_DIR)
  --user NAME        service user, created when missing (default $SERVICE_USER);
                     --no-user runs everything as the invoking user (no chown)
  --python PATH      Python 3.11 interpreter for the virtual environment (default: python3.11, then python3)
  --no-systemd       do not install units even where systemd runs
  --no-compile       skip byte-compiling (faster install, slower first start)
  --uninstall [--purge]
EOF
}

say() { printf 'install.sh: %s\n' "$*"; }
die() { printf 'install.sh: error: %s\n' "$*" >&2; exit 2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) PREFIX=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --config-dir) CONFIG_DIR=$2; shift 2 ;;
    --user) SERVICE_USER=$2; shift 2 ;;
    --no-user) SERVICE_USER=; shift ;;
    --python) PYTHON=$2; shift 2 ;;
    --no-systemd) SYSTEMD=no; shift ;;
    --no-compile) COMPILE=0; shift ;;
    --uninstall) ACTION=uninstall; shift ;;
    --purge) PURGE=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown option $1" ;;
  esac
done
for v in PREFIX DATA CONFIG_DIR; do
  case "${!v}" in /*) ;; *) die "$v must be an absolute path, not ${!v}" ;; esac
done
CONFIG=$CONFIG_DIR/config.toml
UNIT_DIR=/etc/systemd/system
VENV=$PREFIX/venv

systemd_here() {  # systemd is PID 1 (the documented test: /run/systemd/system exists) and we may install units
  [ "$SYSTEMD" != no ] && [ -n "$SERVICE_USER" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null
}

as_user() {  # run a command as the service user (or as ourselves with --no-user)
  if [ -n "$SERVICE_USER" ] && [ "$(id -un)" != "$SERVICE_USER" ]; then
    if command -v runuser >/dev/null; then runuser -u "$SERVICE_USER" -- "$@"; else su -s /bin/sh "$SERVICE_USER" -c "$(printf '%q ' "$@")"; fi
  else
    "$@"
  fi
}

write_path_dropins() {  # UNIT_DIR: 10-paths.conf for the daemon and the job units when a path or the user is not the default
  local unit command dir
  for unit in edge-agent.service edge-agent-job@.service; do
    dir=$1/$unit.d
    if [ "$PREFIX" != /opt/edge-agent ] || [ "$DATA" != /var/lib/edge-agent ] || [ "$CONFIG_DIR" != /etc/edge-agent ] || [ "$SERVICE_USER" != edge-agent ]; then
      case $unit in edge-agent.service) command=serve ;; *) command='jobs run %i' ;; esac
      mkdir -p "$dir"
      cat > "$dir/10-paths.conf" <<EOF
# written by install.sh for a non-default prefix, data folder, config folder or user
[Service]
ExecStart=
ExecStart=$VENV/bin/edge-agent $command
User=$SERVICE_USER
Group=$(id -gn "$SERVICE_USER")
WorkingDirectory=$DATA
ReadWritePaths=$DATA
Environment=EDGE_AGENT_CONFIG=$CONFIG HOME=$DATA
EOF
    else
      rm -f "$dir/10-paths.conf"
    fi
  done
}

install_models() {  # HERE -> DATA: models/default, the embedding models (multilingual-e5-small) and their ONNX exports
  local new=$HERE/models/default old=$DATA/models/default folder name dest
  mkdir -p "$DATA/models" "$DATA/data/embedding-cache"
  if [ ! -f "$old/manifest.json" ] || ! cmp -s "$new/manifest.json" "$old/manifest.json"; then
    rm -rf "$DATA/models/.default.new" "$DATA/models/.default.old"
    cp -r "$new" "$DATA/models/.default.new"
    [ -d "$old" ] && mv "$old" "$DATA/models/.default.old"
    mv "$DATA/models/.default.new" "$old"
    rm -rf "$DATA/models/.default.old"
    say "model bundle default installed in $old"
  fi
  # an embedding model already there is kept (an upgrade, or one imported by hand): its export stays valid
  for folder in "$HERE"/models/embeddings/*/; do
    [ -f "$folder/config.json" ] || continue
    name=$(basename "$folder")
    dest=$DATA/models/embeddings/$name
    if [ -f "$dest/config.json" ]; then say "kept embedding model $name in $dest"; continue; fi
    mkdir -p "$DATA/models/embeddings"
    rm -rf "$DATA/models/embeddings/.$name.new"
    cp -r "$folder" "$DATA/models/embeddings/.$name.new"
    rm -rf "$dest"  # a folder without config.json is no model (a copy that died): resolve_embedding ignores it
    mv "$DATA/models/embeddings/.$name.new" "$dest"
    say "embedding model $name installed in $dest (no conversion at setup)"
  done
  for folder in "$HERE"/embedding-cache/*/; do
    [ -d "$folder" ] || continue
    name=$(basename "$folder")
    [ -d "$DATA/data/embedding-cache/$name" ] || cp -r "$folder" "$DATA/data/embedding-cache/$name"
  done
}

if [ "${BASH_SOURCE[0]}" != "$0" ]; then return 0; fi  # sourced (tests/test_systemd.py): the options and functions only

if [ "$ACTION" = uninstall ]; then
  if systemd_here; then
    systemctl disable --now edge-agent.service 2>/dev/null || true
    for t in $(systemctl list-units --all --plain --no-legend 'edge-agent-job@*' 2>/dev/null | awk '{print $1}'); do systemctl disable --now "$t" || true; done
    rm -rf "$UNIT_DIR/edge-agent.service" "$UNIT_DIR/edge-agent.service.d" "$UNIT_DIR/edge-agent-job@.service" "$UNIT_DIR/edge-agent-job@.service.d" "$UNIT_DIR/edge-agent-job@.timer"
    systemctl daemon-reload
  fi
  rm -rf "$PREFIX"
  say "removed $PREFIX and the units"
  if [ "$PURGE" = 1 ]; then
    rm -rf "$DATA" "$CONFIG_DIR"
    [ -n "$SERVICE_USER" ] && id "$SERVICE_USER" >/dev/null 2>&1 && userdel "$SERVICE_USER" 2>/dev/null || true
    say "purged $DATA and $CONFIG_DIR"
  else
    say "kept $DATA (models, index, database) and $CONFIG_DIR; --purge removes them"
  fi
  exit 0
fi

# --- checks -------------------------------------------------------------------------------------
[ -f "$HERE/requirements.txt" ] && [ -d "$HERE/wheels" ] || die "run install.sh from the unpacked bundle (wheels/ and requirements.txt beside it)"
if [ -z "$PYTHON" ]; then
  PYTHON=$(command -v python3.11 || command -v python3 || true)
fi
[ -n "$PYTHON" ] && "$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null \
  || die "needs Python 3.11 (the wheels are built for CPython 3.11 on x86_64): install python3.11 and python3.11-venv, or pass --python"
"$PYTHON" -c 'import venv, ensurepip' 2>/dev/null || die "$PYTHON lacks venv/ensurepip: install the python3.11-venv package"
if command -v sha256sum >/dev/null && [ -f "$HERE/SHA256SUMS" ]; then
  (cd "$HERE" && grep -v '  SHA256SUMS$' SHA256SUMS | sha256sum --quiet -c -) || die "the bundle is damaged (SHA256SUMS does not match): copy it again"
fi
if [ -n "$SERVICE_USER" ] && [ "$(id -u)" != 0 ] && [ "$(id -un)" != "$SERVICE_USER" ]; then
  die "run as root (sudo ./install.sh), or pass --no-user to install for yourself"
fi

# --- user and folders ---------------------------------------------------------------------------
if [ -n "$SERVICE_USER" ] && ! id "$SERVICE_USER" >/dev/null 2>&1; then
  if [ "$SERVICE_USER" = edge-agent ] && [ "$DATA" = /var/lib/edge-agent ] && command -v systemd-sysusers >/dev/null; then
    systemd-sysusers "$HERE/systemd/edge-agent.sysusers"
  else
    useradd --system --user-group --home-dir "$DATA" --no-create-home --shell /usr/sbin/nologin "$SERVICE_USER"
  fi
  say "created system user $SERVICE_USER"
fi
mkdir -p "$PREFIX" "$DATA/models" "$DATA/index" "$DATA/data/embedding-cache" "$CONFIG_DIR"
chmod 0750 "$DATA"

# --- program ------------------------------------------------------------------------------------
# pip sees only the bundle's wheels: no index, no machine or user pip configuration
for v in $(env | sed -n 's/^\(PIP_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
export PIP_CONFIG_FILE=/dev/null PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
if [ -x "$VENV/bin/python" ] && ! "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
  say "replacing $VENV (made with another Python)"; rm -rf "$VENV"
fi
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
compile=(); [ "$COMPILE" = 1 ] || compile=(--no-compile)
# exactly the bundle's versions; then edge-agent's own wheel again, in case it was rebuilt with the same version
"$VENV/bin/python" -m pip install --quiet ${compile[@]+"${compile[@]}"} --no-index --find-links "$HERE/wheels" -r "$HERE/requirements.txt"
"$VENV/bin/python" -m pip install --quiet ${compile[@]+"${compile[@]}"} --no-index --no-deps --force-reinstall "$HERE"/wheels/edge_agent-*.whl
cp "$HERE/README.md" "$PREFIX/README.md"
cp "$HERE/BUNDLE.json" "$PREFIX/BUNDLE.json" 2>/dev/null || true
say "installed $("$VENV/bin/edge-agent" --help >/dev/null && "$VENV/bin/python" -c 'import importlib.metadata as m; print("edge-agent", m.version("edge-agent"))') in $VENV"

# --- models and the prepared embedding models (the data folder is kept; models/default is replaced when it changed)
install_models

# --- configuration (written once; an upgrade keeps it) -------------------------------------------
if [ ! -f "$CONFIG" ]; then
  cat > "$CONFIG" <<EOF
# edge-agent configuration (every key and its default: \`edge-agent doctor\`).
# Environment variables EDGE_AGENT_<KEY> override this file; this file overrides the defaults.
models_dir = "$DATA/models"
data_dir = "$DATA/data"
index_dir = "$DATA/index"
host = "127.0.0.1"
port = 8080
# To serve a LAN: host = "0.0.0.0", api_key_file = "$CONFIG_DIR/api-keys" (0640, group $SERVICE_USER),
# and the LAN drop-in (systemd/lan.conf.example) so that the unit lets those addresses in.
EOF
  say "wrote $CONFIG"
else
  say "kept $CONFIG"
fi
if [ -n "$SERVICE_USER" ]; then
  group=$(id -gn "$SERVICE_USER")
  chown -R "$SERVICE_USER:$group" "$DATA"
  chown "root:$group" "$CONFIG"
  chmod 0640 "$CONFIG"
fi

# --- check: the bundle matches its manifest, the embedding model needs no export ----------------
as_user "$VENV/bin/python" -c pass 2>/dev/null \
  || die "the user ${SERVICE_USER:-$(id -un)} cannot run $VENV/bin/python (made from $PYTHON; under a private home such as /root?): use a system-wide Python 3.11 (--python /usr/bin/python3.11)"
as_user env HOME="$DATA" EDGE_AGENT_CONFIG="$CONFIG" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$VENV/bin/edge-agent" setup --no-build-model \
  || die "edge-agent setup failed (see above)"

# --- systemd ------------------------------------------------------------------------------------
if systemd_here; then
  install -m 0644 "$HERE/systemd/edge-agent.service" "$HERE/systemd/edge-agent-job@.service" "$HERE/systemd/edge-agent-job@.timer" "$UNIT_DIR/"
  write_path_dropins "$UNIT_DIR"
  dropins=$UNIT_DIR/edge-agent.service.d
  mkdir -p "$dropins"
  if [ -e /dev/nvidiactl ]; then
    install -m 0644 "$HERE/systemd/gpu.conf" "$dropins/gpu.conf"; say "NVIDIA devices found: installed the GPU drop-in"
  fi
  systemctl daemon-reload
  systemctl enable edge-agent.service >/dev/null
  if systemctl is-active --quiet edge-agent.service; then
    say "restarting edge-agent (upgrade; waits for READY=1)"; systemctl restart edge-agent.service
  else
    say "starting edge-agent (waits for READY=1)"; systemctl start edge-agent.service
  fi
  say "edge-agent is running: systemctl status edge-agent; journalctl -u edge-agent; curl -s localhost:8080/ready"
else
  say "systemd is not PID 1 here (or --no-systemd, --no-user): units not installed. Start the daemon with"
  say "  ${SERVICE_USER:+runuser -u $SERVICE_USER -- }env EDGE_AGENT_CONFIG=$CONFIG $VENV/bin/edge-agent serve"
fi
say "done"
