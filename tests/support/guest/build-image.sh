#!/usr/bin/env bash
# Builds the Debian bookworm guest image the real-guest suite boots: a root filesystem with
# systemd, cloud-init, the QEMU guest agent, sshd and a kernel, but none of the workload
# packages (cloud-init installs those from the payload, through the harness's local repository).
# Usage: build-image.sh MIRROR OUT_DIR. Writes OUT_DIR/root.raw, OUT_DIR/vmlinuz, OUT_DIR/initrd.img.
# Every line of this file is part of the image cache key: editing it rebuilds the image.
set -euo pipefail
mirror=$1
out=$2
work="$out.work"
rm -rf "$work"
mkdir -p "$work"
root="$work/root"

# python3-cffi-backend: cloud-init's dependency chain needs it and debootstrap's resolver misses it.
debootstrap --variant=minbase \
    --include=systemd,systemd-sysv,udev,dbus,cloud-init,qemu-guest-agent,openssh-server,linux-image-amd64,initramfs-tools,python3-cffi-backend,iproute2,procps,netbase,ca-certificates,e2fsprogs,kmod \
    bookworm "$root" "$mirror"

# The guest's only package source is the harness's repository, reached through QEMU's
# guestfwd at 10.0.2.100:80 (the guest has no route anywhere else). The repository is signed
# by nobody: it exists only on 127.0.0.1 for the duration of a test run.
rm -f "$root/etc/apt/sources.list"
rm -rf "$root/etc/apt/sources.list.d" && mkdir -p "$root/etc/apt/sources.list.d"
echo 'deb [trusted=yes] http://10.0.2.100/ ./' > "$root/etc/apt/sources.list.d/virtwork-test.list"
cat > "$root/etc/apt/apt.conf.d/90virtwork-test" <<'APT'
Acquire::Languages "none";
Acquire::Retries "3";
APT::Install-Recommends "false";
APT

# cloud-init: read only the NoCloud seed (as KubeVirt's cloudInitNoCloud presents it), render
# the network-config with systemd-networkd.
mkdir -p "$root/etc/cloud/cloud.cfg.d"
cat > "$root/etc/cloud/cloud.cfg.d/90-virtwork-test.cfg" <<'CFG'
datasource_list: [NoCloud, None]
system_info:
  network:
    renderers: ['networkd']
    activators: ['networkd']
CFG
chroot "$root" systemctl enable systemd-networkd.service qemu-guest-agent.service ssh.service >/dev/null 2>&1 || true
# No serial getty waiting for a login; the console carries boot messages only.
chroot "$root" systemctl mask serial-getty@ttyS0.service >/dev/null 2>&1 || true

# Extra names the harness passes on the kernel command line (virtwork.hosts=ip:name,...) go
# into /etc/hosts before cloud-init runs: how the client guest resolves a Service name
# without touching the payload's user-data.
cat > "$root/usr/local/sbin/virtwork-test-hosts" <<'SH'
#!/bin/sh
for arg in $(cat /proc/cmdline); do
    case "$arg" in
    virtwork.hosts=*)
        echo "${arg#virtwork.hosts=}" | tr ',' '\n' | while IFS=: read -r ip name; do
            [ -n "$ip" ] && [ -n "$name" ] && echo "$ip $name" >> /etc/hosts
        done
        ;;
    esac
done
SH
chmod 755 "$root/usr/local/sbin/virtwork-test-hosts"
cat > "$root/etc/systemd/system/virtwork-test-hosts.service" <<'UNIT'
[Unit]
Description=Harness-provided /etc/hosts entries
DefaultDependencies=no
After=local-fs.target
Before=cloud-init-local.service

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/virtwork-test-hosts

[Install]
WantedBy=sysinit.target
UNIT
chroot "$root" systemctl enable virtwork-test-hosts.service >/dev/null 2>&1

echo 'virtwork-guest' > "$root/etc/hostname"
printf '127.0.0.1 localhost\n' > "$root/etc/hosts"
printf '/dev/vda / ext4 defaults 0 1\n' > "$root/etc/fstab"
# Root login is never needed: the harness speaks to the guest agent only.
chroot "$root" passwd -l root >/dev/null

cp -L "$root/vmlinuz" "$work/vmlinuz"
cp -L "$root/initrd.img" "$work/initrd.img"
chroot "$root" apt-get clean
rm -rf "$root/var/lib/apt/lists/"* "$root/var/cache/apt/"*.bin

# A sparse file system image made from the directory (no loop mount needed); guests boot it
# with QEMU's snapshot=on, so their writes never reach it.
mkfs.ext4 -q -F -L root -d "$root" "$work/root.raw" 6G
rm -rf "$root"
mkdir -p "$out"
mv "$work/root.raw" "$work/vmlinuz" "$work/initrd.img" "$out/"
rm -rf "$work"
