#!/usr/bin/env bash
# Kernel arguments on a real kernel: one Debian 12 VM under QEMU without KVM (TCG), joined to a
# `mco server` on this machine as README "Running as services" says, gets
# examples/kernel-args.yaml; the figures are the time from the apply to the node Done on the new
# rendered config (the daemon checks the arguments on the real /proc/cmdline of the next boot,
# so Done and not Degraded means they took effect) and each boot's length.
#
# Explicitly opted in, never run by the test suite or CI: it needs root, apt (qemu-system-x86,
# qemu-utils, e2fsprogs, systemd-container, debootstrap), the Debian mirror, a few GiB in
# $QEMU_KARGS_DIR and about 3-5 minutes (two TCG boots of 30-60 s each).
#
#   sudo benches/qemu-kargs.sh [path/to/mco]        # default target/release/mco
#
# What it plays: the boot loader. The VM boots with QEMU's direct kernel boot (-kernel/-initrd
# of Debian's linux-image-cloud-amd64, root on a raw ext4 image), so no boot loader reads the
# BootLoaderSpec entry /boot/loader/entries/<machine-id>-<release>.conf the daemon edits (its
# bootloader-spec backend: no grubby, no rpm-ostree). This script does that job: before each
# boot it reads the entry's `options` line out of the image (debugfs, no mount, no loop device)
# and passes it as -append. A guest reboot ends QEMU (-no-reboot); the script boots it again.
#
# Settings (environment): QEMU_KARGS_DIR (work dir, default /var/tmp/mco-qemu-kargs),
# MCO_REALHOST_CACHE (default /var/cache/mco-test: the nspawn harness's cached debootstrap root
# is reused, and the guest root with its kernel is cached beside it), MCO_DEBIAN_MIRROR,
# QEMU_KARGS_PORT (server port, default 17443), QEMU_KARGS_SMP (vCPUs, default 1),
# QEMU_KARGS_MEM (MiB, default 1024, at most 1024), QEMU_KARGS_TIMEOUT (seconds per wait, 600).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
mco_bin=$(readlink -f "${1:-$repo/target/release/mco}")
work=${QEMU_KARGS_DIR:-/var/tmp/mco-qemu-kargs}
cache=${MCO_REALHOST_CACHE:-/var/cache/mco-test}
mirror=${MCO_DEBIAN_MIRROR:-http://deb.debian.org/debian}
port=${QEMU_KARGS_PORT:-17443}
smp=${QEMU_KARGS_SMP:-1}
mem=${QEMU_KARGS_MEM:-1024}
timeout=${QEMU_KARGS_TIMEOUT:-600}
node=worker-q
base=$cache/bookworm-minbase-systemd-dbus   # the nspawn harness's root (tests/common/nspawn.rs)
guest=$cache/qemu-kargs-root                # base + kernel, initramfs, udev

say() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { say "FAILED: $*"; exit 1; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, systemd-nspawn, mkfs of the guest root)"
[ -x "$mco_bin" ] || die "no mco binary at $mco_bin (cargo build --release, or pass its path)"
[ "$mem" -le 1024 ] || die "QEMU_KARGS_MEM=$mem: at most 1024 MiB"

# 1. Tools, from the machine's apt sources.
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v qemu-img >/dev/null || need+=(qemu-utils)
command -v debugfs >/dev/null || need+=(e2fsprogs)
command -v systemd-nspawn >/dev/null || need+=(systemd-container)
[ -e "$base/usr/lib/systemd/systemd" ] || command -v debootstrap >/dev/null || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
    say "installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >/dev/null
fi

# 2. The Debian root: the nspawn harness's cached one, else built the same way.
mkdir -p "$cache"
if [ ! -e "$base/usr/lib/systemd/systemd" ]; then
    say "debootstrap of bookworm into $base (about 90 s)"
    rm -rf "$base.tmp.$$"
    debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus bookworm "$base.tmp.$$" "$mirror" \
        >"$base.log" 2>&1 || die "debootstrap failed, see $base.log"
    mv "$base.tmp.$$" "$base"
fi

# 3. The guest root: that root plus Debian's cloud kernel, its initramfs and udev (cached).
if ! ls "$guest"/boot/vmlinuz-* >/dev/null 2>&1; then
    say "installing linux-image-cloud-amd64 into a copy of $base (about 2 min)"
    rm -rf "$guest.tmp"
    cp -a "$base" "$guest.tmp"
    systemd-nspawn -q -D "$guest.tmp" --register=no --keep-unit --pipe \
        sh -c 'export DEBIAN_FRONTEND=noninteractive; apt-get update -q &&
               apt-get install -y -q --no-install-recommends linux-image-cloud-amd64 initramfs-tools udev' \
        >"$guest.log" 2>&1 </dev/null || die "kernel install failed, see $guest.log"
    ls "$guest.tmp"/boot/initrd.img-* >/dev/null || die "no initrd built, see $guest.log"
    mv "$guest.tmp" "$guest"
fi
release=$(basename "$(ls "$guest"/boot/vmlinuz-* | sort -V | tail -1)" | sed 's/^vmlinuz-//')

# 4. The control plane on this machine: TLS, a serving certificate valid for 10.0.2.2 (the
#    host as QEMU's user-mode network shows it to the guest), listening on loopback.
qemu_pid=
server_pid=
cleanup() {
    [ -n "$qemu_pid" ] && kill "$qemu_pid" 2>/dev/null && wait "$qemu_pid" 2>/dev/null || true
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
    rm -rf "$work/root" "$work/disk.raw"
}
trap cleanup EXIT
rm -rf "$work"
mkdir -p "$work"
data=$work/mco-data
"$mco_bin" server init --data-dir "$data" --tls-san 10.0.2.2 >"$work/init.log"
"$mco_bin" server --data-dir "$data" --listen "127.0.0.1:$port" --platform none >"$work/server.log" 2>&1 &
server_pid=$!
export MCO_SERVER=https://127.0.0.1:$port MCO_TOKEN_FILE=$data/admin.token MCO_CA_FILE=$data/pki/ca.crt
deadline=$((SECONDS + 60))
until "$mco_bin" get nodes >/dev/null 2>&1; do
    kill -0 "$server_pid" 2>/dev/null || die "mco server exited: $(tail -5 "$work/server.log")"
    [ $SECONDS -lt $deadline ] || die "mco server not answering on 127.0.0.1:$port within 60 s"
    sleep 0.2
done
token=$("$mco_bin" token create --kind node --node "$node" --label node-role.kubernetes.io/worker= 2>"$work/token.log")

# 5. The node's disk: the guest root with mco, its unit, CA, daemon.env and token (README
#    "Running as services"), DHCP by systemd-networkd, a fixed machine id and the BLS entry.
say "building the disk image (kernel $release)"
root=$work/root
cp -a "$guest" "$root"
install -m 0755 "$mco_bin" "$root/usr/local/bin/mco"
install -m 0644 "$repo/config/systemd/mco-daemon.service" "$root/etc/systemd/system/mco-daemon.service"
install -D -m 0644 "$data/pki/ca.crt" "$root/etc/mco/ca.crt"
cat >"$root/etc/mco/daemon.env" <<EOF
MCO_SERVER=https://10.0.2.2:$port
MCO_CA_FILE=/etc/mco/ca.crt
MCO_NODE=$node
MCO_LABELS=--label=node-role.kubernetes.io/worker=
EOF
install -m 0600 /dev/null "$root/etc/mco/node.token"
printf '%s' "$token" >"$root/etc/mco/node.token"
echo "$node" >"$root/etc/hostname"
machine_id=$(tr -d '-' </proc/sys/kernel/random/uuid)
echo "$machine_id" >"$root/etc/machine-id"
cat >"$root/etc/systemd/network/10-dhcp.network" <<'EOF'
[Match]
Name=en* eth*
[Network]
DHCP=ipv4
EOF
systemctl --root="$root" enable mco-daemon.service systemd-networkd.service systemd-networkd-wait-online.service >/dev/null 2>&1
entry=/boot/loader/entries/$machine_id-$release.conf
mkdir -p "$root/boot/loader/entries"
cat >"$root$entry" <<EOF
title      Debian GNU/Linux 12 (bookworm)
version    $release
machine-id $machine_id
linux      /vmlinuz-$release
initrd     /initrd.img-$release
options    root=/dev/vda rw console=ttyS0 net.ifnames=1
EOF
disk=$work/disk.raw
mkfs.ext4 -q -F -L mco-root -d "$root" "$disk" 3G >/dev/null
rm -rf "$root"

# The boot loader's part: the entry's options line, read from the disk.
options() {
    debugfs -R "cat $entry" "$disk" 2>/dev/null | sed -n 's/^options[[:space:]]\+//p'
}

# One boot of the VM; QEMU exits when the guest reboots or powers off.
boots=0
boot() {
    boots=$((boots + 1))
    local append
    append=$(options)
    [ -n "$append" ] || die "no options line in $entry on the disk"
    say "boot $boots: -append '$append'"
    boot_started[$boots]=$(now)
    qemu-system-x86_64 -accel tcg -machine q35 -cpu max -smp "$smp" -m "$mem" \
        -kernel "$guest/boot/vmlinuz-$release" -initrd "$guest/boot/initrd.img-$release" \
        -append "$append" -drive "file=$disk,format=raw,if=virtio" \
        -nic user,model=virtio-net-pci -display none -monitor "unix:$work/monitor.sock,server,nowait" \
        -serial "file:$work/console-$boots.log" -no-reboot &
    qemu_pid=$!
}

# Waits for the guest's serial console to show multi-user.target or the getty's login prompt
# (systemd does not always print the target's line, e.g. when audit=1 messages interleave):
# that boot's length.
wait_booted() {
    local deadline=$((SECONDS + timeout))
    until grep -aqE 'Reached target.*Multi-User|login: ' "$work/console-$boots.log" 2>/dev/null; do
        kill -0 "$qemu_pid" 2>/dev/null || die "QEMU exited during boot $boots: $(tail -20 "$work/console-$boots.log")"
        [ $SECONDS -lt $deadline ] || die "boot $boots did not reach multi-user.target in ${timeout} s"
        sleep 0.2
    done
    boot_length[$boots]=$(secs "${boot_started[$boots]}" "$(now)")
    say "boot $boots: multi-user.target or login prompt after ${boot_length[$boots]} s"
}

# The node's annotation $1 (state, currentConfig, desiredConfig, reason), empty when absent.
annotation() {
    "$mco_bin" get node "$node" -o json 2>/dev/null |
        jq -r --arg k "machineconfiguration.openshift.io/$1" '.metadata.annotations[$k] // ""'
}

# Waits until the node is Done on rendered config $1 (any when empty); Degraded fails.
wait_done() {
    local want=$1 deadline=$((SECONDS + timeout)) state cur
    while :; do
        state=$(annotation state)
        cur=$(annotation currentConfig)
        [ "$state" = Degraded ] && die "node $node Degraded: $(annotation reason)"
        if [ "$state" = Done ] && [ -n "$cur" ] && { [ -z "$want" ] || [ "$cur" = "$want" ]; } &&
            [ "$cur" = "$(annotation desiredConfig)" ]; then
            return
        fi
        [ $SECONDS -lt $deadline ] || die "node $node not Done on ${want:-a config} within ${timeout} s (state '$state', current '$cur')"
        sleep 0.5
    done
}

declare -a boot_started boot_length
# 6. First boot: the node joins and is Done on the pool's first rendered config.
boot
wait_booted
wait_done ""
joined=$(secs "${boot_started[1]}" "$(now)")
first=$(annotation currentConfig)
say "node $node Done on $first ${joined} s after QEMU started"

# 7. The kernel arguments: apply, the daemon edits the entry and reboots (QEMU exits), the
#    script boots the VM with the entry's new options, the daemon checks /proc/cmdline.
applied=$(now)
"$mco_bin" apply -f "$repo/examples/kernel-args.yaml" >/dev/null
deadline=$((SECONDS + timeout))
while kill -0 "$qemu_pid" 2>/dev/null; do
    [ "$(annotation state)" = Degraded ] && die "node $node Degraded: $(annotation reason)"
    [ $SECONDS -lt $deadline ] || die "the VM did not reboot within ${timeout} s of the apply"
    sleep 0.5
done
wait "$qemu_pid" || true
qemu_pid=
rebooted=$(now)
run1=$(secs "${boot_started[1]}" "$rebooted")
grep -q 'audit=1' <<<"$(options)" || die "the entry's options line has no audit=1: $(options)"
boot
wait_booted
want=$("$mco_bin" get mcp worker -o json | jq -r '.spec.configuration.name')
[ "$want" != "$first" ] || die "the pool's rendered config did not change"
wait_done "$want"
done_at=$(now)
cmdline=$(grep -m1 -a 'Command line:' "$work/console-2.log" | sed 's/.*Command line: //' | tr -d '\r')
for k in audit=1 audit_backlog_limit=8192; do
    grep -qw -- "$k" <<<"$cmdline" || die "boot 2's kernel command line lacks $k: $cmdline"
done

# The guest powered off (ACPI power button, logind; killed after 90 s), then its journal read
# off the disk: which backend the daemon used, and its check of the new boot's command line.
python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"system_powerdown\n")' \
    "$work/monitor.sock" 2>/dev/null || true
deadline=$((SECONDS + 90))
while kill -0 "$qemu_pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.5; done
kill "$qemu_pid" 2>/dev/null || true
wait "$qemu_pid" 2>/dev/null || true
qemu_pid=
debugfs -R "rdump /var/log/journal $work" "$disk" >/dev/null 2>&1 || true
journalctl --directory="$work/journal" -u mco-daemon.service -o cat >"$work/daemon.log" 2>/dev/null || true
backend=$(grep -o '"backend":"[a-z-]*"' "$work/daemon.log" | sort -u | tr '\n' ' ')

cat <<EOF
qemu-kargs: Debian 12 VM, TCG, ${smp} vCPU, ${mem} MiB, kernel $release, $("$mco_bin" --version)
  boot 1 (to multi-user.target/login prompt)     ${boot_length[1]} s
  boot 1, QEMU start to node Done (joined)       $joined s
  apply to guest reboot (QEMU exit)              $(secs "$applied" "$rebooted") s
  boot 2 (to multi-user.target/login prompt)     ${boot_length[2]} s
  apply to node Done on $want  $(secs "$applied" "$done_at") s
  boot 2 kernel command line                     $cmdline
  daemon's kernel-argument backend               ${backend:-(not found in the guest journal)}
EOF
say "logs in $work (console-1.log, console-2.log, server.log, daemon.log); run 1 lasted $run1 s"
