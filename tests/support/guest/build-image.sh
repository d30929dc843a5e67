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

# The guest's only package source is the harness's repository, laid out like a Debian mirror
# (main; non-free only when a payload enables it) and reached through QEMU's guestfwd at
# 10.0.2.100:80 (the guest has no route anywhere else). The repository is signed by nobody:
# it exists only on 127.0.0.1 for the duration of a test run.
rm -f "$root/etc/apt/sources.list"
rm -rf "$root/etc/apt/sources.list.d" && mkdir -p "$root/etc/apt/sources.list.d"
echo 'deb [trusted=yes arch=amd64] http://10.0.2.100/ bookworm main' > "$root/etc/apt/sources.list.d/debian.list"
cat > "$root/etc/apt/apt.conf.d/90virtwork-test" <<'APT'
Acquire::Languages "none";
Acquire::Retries "3";
APT::Install-Recommends "false";
APT

# Package installation is most of a guest's time to ready under TCG. These guests are
# throw-away (QEMU snapshot=on), so: no fsync per unpacked file; no docs, man pages or
# locales unpacked; no initramfs rebuilt by package triggers (xfsprogs' trigger alone took
# over 13 minutes under TCG, and the harness boots the kernel and initrd copied out at build
# time, so a rebuilt initramfs would never be used); no timers that could take the dpkg lock
# while cloud-init installs.
echo 'force-unsafe-io' > "$root/etc/dpkg/dpkg.cfg.d/90virtwork-test-unsafe-io"
cat > "$root/etc/dpkg/dpkg.cfg.d/90virtwork-test-nodoc" <<'DPKG'
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
DPKG
sed -i 's/^update_initramfs=.*/update_initramfs=no/' "$root/etc/initramfs-tools/update-initramfs.conf"
chroot "$root" systemctl mask apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer man-db.timer >/dev/null 2>&1 || true

# `systemctl enable` of a unit that also has an init script (qemu-guest-agent has one) runs
# Debian's update-rc.d, a Perl program that took 48 s under TCG; systemd starts the units
# anyway, so systemctl in the payload's runcmd skips the SysV sync.
mkdir -p "$root/etc/systemd/system/cloud-final.service.d"
printf '[Service]\nEnvironment=SYSTEMCTL_SKIP_SYSV=1\n' > "$root/etc/systemd/system/cloud-final.service.d/90-virtwork-test.conf"

# cloud-init: read only the NoCloud seed (as KubeVirt's cloudInitNoCloud presents it), render
# the network-config with systemd-networkd.
mkdir -p "$root/etc/cloud/cloud.cfg.d"
cat > "$root/etc/cloud/cloud.cfg.d/90-virtwork-test.cfg" <<'CFG'
datasource_list: [NoCloud, None]
# One host key type: RSA and DSA key generation cost tens of seconds under TCG, and nothing in
# the suite logs in over ssh (sshd only has to run, for the chaos-process check).
ssh_genkeytypes: [ed25519]
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
