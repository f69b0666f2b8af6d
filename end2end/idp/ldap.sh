#!/usr/bin/env bash
# A throwaway OpenLDAP slapd for the test suite: a fresh cn=config and mdb database under
# $LDAP_DIR, seeded with a small directory, listening on 127.0.0.1 only.
#
#   ldap.sh install                     apt-get install slapd ldap-utils (skipped if present)
#   ldap.sh start [port]                fresh instance (port: $LDAP_PORT, default 3389)
#   ldap.sh stop                        kill it and remove $LDAP_DIR
#   ldap.sh add-member <group> <uid>    e.g. add-member ml-research eve
#   ldap.sh remove-member <group> <uid> e.g. remove-member ml-research bob
#   ldap.sh status                      exit 0 if the instance answers
#
# Directory (suffix dc=acme,dc=test):
#   rootdn   cn=admin,dc=acme,dc=test               admin-pw
#   service  cn=switchyard,ou=services,dc=acme,dc=test  svc-pw  (reads people and groups)
#   users    uid={alice,bob,eve},ou=people,dc=acme,dc=test  {alice,bob,eve}-pw
#   groups   cn=ml-research,ou=groups,dc=acme,dc=test      (alice, bob)
#            cn=platform-admins,ou=groups,dc=acme,dc=test  (alice)
# Users carry the operational attribute memberOf (memberof overlay; request it explicitly).
#
# StartTLS is not set up. To add it: make a CA and a server certificate for 127.0.0.1 with
# openssl into $LDAP_DIR, add olcTLSCACertificateFile / olcTLSCertificateFile /
# olcTLSCertificateKeyFile to the cn=config entry below, and have clients use `ldapsearch -ZZ`
# with LDAPTLS_CACERT=$LDAP_DIR/ca.pem (or add an ldaps:// URL to -h for implicit TLS).
set -euo pipefail

LDAP_DIR=${LDAP_DIR:-/tmp/switchyard-ldap}
SUFFIX="dc=acme,dc=test"
ROOT_DN="cn=admin,$SUFFIX"
ROOT_PW="admin-pw"
SVC_DN="cn=switchyard,ou=services,$SUFFIX"
SVC_PW="svc-pw"
MODULE_DIR=/usr/lib/ldap
SCHEMA_DIR=/etc/ldap/schema
# Ignore /etc/ldap/ldap.conf and ~/.ldaprc: every client call here names its server and bind.
export LDAPNOINIT=1

log() { echo "[ldap] $*" >&2; }
die() { log "error: $*"; exit 1; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Stop a system slapd (Debian's init script) so it holds no port or lock we care about.
stop_system_slapd() {
  if [ -x /etc/init.d/slapd ] && pidof slapd >/dev/null 2>&1; then
    local sys_pid
    sys_pid=$(cat /run/slapd/slapd.pid 2>/dev/null || true)
    if [ -n "$sys_pid" ] && kill -0 "$sys_pid" 2>/dev/null; then
      log "stopping the system slapd service (pid $sys_pid)"
      as_root /etc/init.d/slapd stop >/dev/null 2>&1 || as_root kill "$sys_pid" || true
    fi
  fi
  if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    as_root systemctl disable --now slapd >/dev/null 2>&1 || true
  fi
}

cmd_install() {
  if command -v slapd >/dev/null 2>&1 || [ -x /usr/sbin/slapd ]; then
    if ! command -v ldapsearch >/dev/null 2>&1; then
      as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q ldap-utils
    fi
    log "slapd already installed ($(dpkg-query -W -f='${Version}' slapd 2>/dev/null || echo '?'))"
    stop_system_slapd
    return 0
  fi
  log "installing slapd ldap-utils"
  # "Omit OpenLDAP server configuration": the postinst then creates no system database and
  # asks nothing; the system service has no config and does not come up. The rest is
  # answered too in case an earlier selection says otherwise.
  as_root debconf-set-selections <<'EOF'
slapd slapd/no_configuration boolean true
slapd slapd/domain string acme.test
slapd shared/organization string Acme
slapd slapd/password1 password admin-pw
slapd slapd/password2 password admin-pw
slapd slapd/purge_database boolean true
slapd slapd/move_old_database boolean true
slapd slapd/dump_database select when needed
EOF
  if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends slapd ldap-utils; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends slapd ldap-utils
  fi
  stop_system_slapd
  log "installed slapd $(dpkg-query -W -f='${Version}' slapd)"
}

port_in_use() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

state_port() {
  if [ -n "${LDAP_PORT:-}" ]; then echo "$LDAP_PORT"
  elif [ -f "$LDAP_DIR/port" ]; then cat "$LDAP_DIR/port"
  else echo 3389; fi
}

# Alive and not a zombie: once the calling shell has exited, slapd's parent is PID 1, which
# in some containers reaps only now and then, so `kill -0` alone would wait on a corpse.
alive() {
  kill -0 "$1" 2>/dev/null || return 1
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null || true)
  [ "$state" != Z ]
}

running_pid() {
  local pid
  pid=$(cat "$LDAP_DIR/slapd.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && alive "$pid"; then echo "$pid"; fi
}

now_ms() { date +%s%3N; }

hash_pw() { /usr/sbin/slappasswd -n -h '{SSHA}' -s "$1"; }

write_config_ldif() {
  local dir=$1 root_hash=$2
  cat <<EOF
dn: cn=config
objectClass: olcGlobal
cn: config
olcPidFile: $dir/slapd.pid
olcArgsFile: $dir/slapd.args
olcLogLevel: stats

dn: cn=module{0},cn=config
objectClass: olcModuleList
cn: module{0}
olcModulePath: $MODULE_DIR
olcModuleLoad: {0}back_mdb
olcModuleLoad: {1}memberof
olcModuleLoad: {2}refint

dn: cn=schema,cn=config
objectClass: olcSchemaConfig
cn: schema

include: file://$SCHEMA_DIR/core.ldif

include: file://$SCHEMA_DIR/cosine.ldif

include: file://$SCHEMA_DIR/inetorgperson.ldif

dn: olcDatabase={-1}frontend,cn=config
objectClass: olcDatabaseConfig
objectClass: olcFrontendConfig
olcDatabase: {-1}frontend
olcSizeLimit: 500

dn: olcDatabase={0}config,cn=config
objectClass: olcDatabaseConfig
olcDatabase: {0}config
olcAccess: {0}to * by * none

dn: olcDatabase={1}mdb,cn=config
objectClass: olcDatabaseConfig
objectClass: olcMdbConfig
olcDatabase: {1}mdb
olcSuffix: $SUFFIX
olcRootDN: $ROOT_DN
olcRootPW: $root_hash
olcDbDirectory: $dir/data
olcDbMaxSize: 104857600
olcDbIndex: objectClass eq
olcDbIndex: uid,cn,mail eq
olcDbIndex: member eq
olcAccess: {0}to attrs=userPassword
  by self =xw
  by anonymous auth
  by * none
olcAccess: {1}to dn.subtree="ou=people,$SUFFIX"
  by dn.exact="$SVC_DN" read
  by self read
  by * none
olcAccess: {2}to dn.subtree="ou=groups,$SUFFIX"
  by dn.exact="$SVC_DN" read
  by * none
olcAccess: {3}to *
  by dn.exact="$SVC_DN" read
  by self read
  by * none

dn: olcOverlay={0}memberof,olcDatabase={1}mdb,cn=config
objectClass: olcOverlayConfig
objectClass: olcMemberOf
olcOverlay: {0}memberof
olcMemberOfDangling: ignore
olcMemberOfRefInt: TRUE
olcMemberOfGroupOC: groupOfNames
olcMemberOfMemberAD: member
olcMemberOfMemberOfAD: memberOf

dn: olcOverlay={1}refint,olcDatabase={1}mdb,cn=config
objectClass: olcOverlayConfig
objectClass: olcRefintConfig
olcOverlay: {1}refint
olcRefintAttribute: memberof member
EOF
}

write_seed_ldif() {
  cat <<EOF
dn: $SUFFIX
objectClass: dcObject
objectClass: organization
dc: acme
o: Acme

dn: ou=people,$SUFFIX
objectClass: organizationalUnit
ou: people

dn: ou=groups,$SUFFIX
objectClass: organizationalUnit
ou: groups

dn: ou=services,$SUFFIX
objectClass: organizationalUnit
ou: services

dn: $SVC_DN
objectClass: organizationalRole
objectClass: simpleSecurityObject
cn: switchyard
description: Switchyard service account (reads people and groups)
userPassword: $(hash_pw "$SVC_PW")
EOF
  local uid cn sn given
  while IFS='|' read -r uid given sn; do
    cn="$given $sn"
    cat <<EOF

dn: uid=$uid,ou=people,$SUFFIX
objectClass: inetOrgPerson
uid: $uid
cn: $cn
givenName: $given
sn: $sn
displayName: $cn
mail: $uid@acme.test
userPassword: $(hash_pw "$uid-pw")
EOF
  done <<'EOF'
alice|Alice|Admin
bob|Bob|Builder
eve|Eve|Outsider
EOF
  # Groups after the people, so the memberof overlay writes memberOf onto existing entries.
  cat <<EOF

dn: cn=ml-research,ou=groups,$SUFFIX
objectClass: groupOfNames
cn: ml-research
member: uid=alice,ou=people,$SUFFIX
member: uid=bob,ou=people,$SUFFIX

dn: cn=platform-admins,ou=groups,$SUFFIX
objectClass: groupOfNames
cn: platform-admins
member: uid=alice,ou=people,$SUFFIX
EOF
}

cmd_start() {
  local port=${1:-${LDAP_PORT:-3389}}
  [ -x /usr/sbin/slapd ] || die "slapd is not installed (run: $0 install)"
  command -v ldapsearch >/dev/null 2>&1 || die "ldapsearch is not installed (run: $0 install)"
  # Fresh every time: an instance left by an earlier run goes first.
  if [ -e "$LDAP_DIR" ]; then cmd_stop; fi
  if port_in_use "$port"; then die "127.0.0.1:$port is already in use"; fi

  local t0
  t0=$(now_ms)
  mkdir -p "$LDAP_DIR/slapd.d" "$LDAP_DIR/data"
  chmod 755 "$LDAP_DIR"
  echo "$port" >"$LDAP_DIR/port"
  write_config_ldif "$LDAP_DIR" "$(hash_pw "$ROOT_PW")" >"$LDAP_DIR/config.ldif"
  /usr/sbin/slapadd -q -n0 -F "$LDAP_DIR/slapd.d" -l "$LDAP_DIR/config.ldif" \
    >"$LDAP_DIR/slapadd.log" 2>&1 || { cat "$LDAP_DIR/slapadd.log" >&2; die "slapadd -n0 failed"; }
  # slapadd writes 0600 files; keep the state readable for whoever inspects it.
  chmod -R a+rX "$LDAP_DIR/slapd.d"

  # -d keeps slapd in the foreground with its log on stderr (stats: one line per operation);
  # setsid detaches it from our process group so it outlives the calling shell.
  setsid /usr/sbin/slapd -d "${LDAP_LOGLEVEL:-stats}" -h "ldap://127.0.0.1:$port/" \
    -F "$LDAP_DIR/slapd.d" </dev/null >"$LDAP_DIR/slapd.log" 2>&1 &
  local pid=$!
  echo "$pid" >"$LDAP_DIR/slapd.pid"

  local url="ldap://127.0.0.1:$port" ok=
  for _ in $(seq 1 300); do
    if ! alive "$pid"; then
      tail -n 40 "$LDAP_DIR/slapd.log" >&2; die "slapd exited during startup"
    fi
    if ldapsearch -x -H "$url" -D "$ROOT_DN" -w "$ROOT_PW" -b "" -s base >/dev/null 2>&1; then
      ok=1; break
    fi
    sleep 0.1
  done
  [ -n "$ok" ] || { tail -n 40 "$LDAP_DIR/slapd.log" >&2; die "slapd did not answer in 30s"; }
  # slapd rewrites its pid file (olcPidFile) at startup with the same pid; keep ours if not.
  [ -s "$LDAP_DIR/slapd.pid" ] || echo "$pid" >"$LDAP_DIR/slapd.pid"

  write_seed_ldif >"$LDAP_DIR/seed.ldif"
  ldapadd -x -H "$url" -D "$ROOT_DN" -w "$ROOT_PW" -f "$LDAP_DIR/seed.ldif" \
    >"$LDAP_DIR/seed.log" 2>&1 || { cat "$LDAP_DIR/seed.log" >&2; die "seeding failed"; }

  # Ready means: the service account can bind and read the tree.
  ldapsearch -x -LLL -H "$url" -b "$SUFFIX" -D "$SVC_DN" -w "$SVC_PW" "(uid=alice)" dn \
    | grep -q "^dn: uid=alice,ou=people,$SUFFIX" || die "service account cannot read the directory"
  log "started in $(($(now_ms) - t0)) ms (pid $pid, state $LDAP_DIR)"
  echo "slapd ready at $url"
}

cmd_stop() {
  local pid
  pid=$(running_pid)
  if [ -n "$pid" ]; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do alive "$pid" || break; sleep 0.05; done
    if alive "$pid"; then kill -9 "$pid" 2>/dev/null || true; sleep 0.2; fi
    log "stopped slapd (pid $pid)"
  fi
  case "$LDAP_DIR" in
    ""|/) die "refusing to remove LDAP_DIR='$LDAP_DIR'" ;;
  esac
  rm -rf "$LDAP_DIR"
}

cmd_status() {
  local port
  port=$(state_port)
  if ldapsearch -x -H "ldap://127.0.0.1:$port" -D "$SVC_DN" -w "$SVC_PW" -b "$SUFFIX" -s base \
    >/dev/null 2>&1; then
    echo "slapd ready at ldap://127.0.0.1:$port"
  else
    echo "slapd not answering at ldap://127.0.0.1:$port" >&2; return 1
  fi
}

modify_member() {
  local op=$1 group=${2:?group} uid=${3:?uid} port
  port=$(state_port)
  ldapmodify -x -H "ldap://127.0.0.1:$port" -D "$ROOT_DN" -w "$ROOT_PW" <<EOF
dn: cn=$group,ou=groups,$SUFFIX
changetype: modify
$op: member
member: uid=$uid,ou=people,$SUFFIX
EOF
}

case "${1:-}" in
  install) cmd_install ;;
  start) shift; cmd_start "$@" ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  add-member) shift; modify_member add "$@" ;;
  remove-member) shift; modify_member delete "$@" ;;
  *) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
