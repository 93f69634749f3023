# shellcheck shell=bash
# Sourced by scripts/test and scripts/bench: installs and starts the real
# peers the tests and benchmarks use, on a bare Debian machine as root, and
# exports where they are. Idempotent: what is already there is reused.

HG_STATE=${HG_STATE:-/tmp/hostgate-test-env}
mkdir -p "$HG_STATE"

log() { printf '==> %s\n' "$*" >&2; }

need_pkgs() {
	local missing=()
	local p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		if [ "$(id -u)" != 0 ]; then
			log "missing Debian packages: ${missing[*]} (run as root, or install them)"
			return 1
		fi
		log "installing ${missing[*]}"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
	fi
}

# start_docker starts dockerd when no engine answers.
start_docker() {
	if docker info >/dev/null 2>&1; then return 0; fi
	log "starting dockerd"
	mkdir -p /etc/docker
	nohup dockerd >"$HG_STATE/dockerd.log" 2>&1 &
	local i
	for i in $(seq 1 120); do
		docker info >/dev/null 2>&1 && return 0
		sleep 0.5
	done
	log "dockerd did not answer in 60 s; its log:"
	tail -50 "$HG_STATE/dockerd.log" >&2
	return 1
}

# start_registry runs Debian's docker-registry on 127.0.0.1:5000 without auth.
start_registry() {
	if curl -fsS http://127.0.0.1:5000/v2/ >/dev/null 2>&1; then return 0; fi
	log "starting docker-registry on 127.0.0.1:5000"
	mkdir -p "$HG_STATE/registry"
	cat >"$HG_STATE/registry.yml" <<YML
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $HG_STATE/registry
http:
  addr: 127.0.0.1:5000
YML
	nohup docker-registry serve "$HG_STATE/registry.yml" >"$HG_STATE/registry.log" 2>&1 &
	local i
	for i in $(seq 1 60); do
		curl -fsS http://127.0.0.1:5000/v2/ >/dev/null 2>&1 && return 0
		sleep 0.5
	done
	log "docker-registry did not answer; its log:"
	tail -20 "$HG_STATE/registry.log" >&2
	return 1
}

# build_test_image imports a busybox-static root filesystem (sh, sleep, tar
# and the rest of busybox) and pushes it to the loopback registry, so tests
# can pin it by digest. Exports HOSTGATE_TEST_IMAGE=127.0.0.1:5000/…@sha256:….
build_test_image() {
	local ref=127.0.0.1:5000/hostgate/busybox:test
	if ! docker image inspect "$ref" >/dev/null 2>&1; then
		log "building the test image from busybox-static"
		local root="$HG_STATE/rootfs"
		rm -rf "$root"
		mkdir -p "$root/bin" "$root/tmp" "$root/etc" "$root/workspace" "$root/usr/bin"
		cp /bin/busybox "$root/bin/busybox"
		local app
		for app in $(/bin/busybox --list); do
			[ "$app" = busybox ] || ln -sf busybox "$root/bin/$app"
		done
		printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/tmp:/bin/sh\n' >"$root/etc/passwd"
		printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
		chmod 1777 "$root/tmp"
		tar -C "$root" -c . | docker import -c 'ENV PATH=/usr/bin:/bin' - "$ref" >/dev/null
	fi
	docker push -q "$ref" >/dev/null
	local digest
	digest=$(docker image inspect -f '{{range .RepoDigests}}{{println .}}{{end}}' "$ref" | grep '^127.0.0.1:5000/hostgate/busybox@' | head -1)
	if [ -z "$digest" ]; then
		log "no registry digest for $ref"
		return 1
	fi
	export HOSTGATE_TEST_IMAGE="$digest"
	log "test image $HOSTGATE_TEST_IMAGE"
}

# setup_browser installs playwright-core next to the browser tests.
setup_browser() {
	if [ -f e2e/browser/package.json ] && [ ! -d e2e/browser/node_modules/playwright-core ]; then
		log "installing playwright-core"
		(cd e2e/browser && npm ci --no-audit --no-fund --silent 2>/dev/null || npm install --no-audit --no-fund --silent)
	fi
}

# setup_vite installs the Vite dev server the preview's browser test runs
# (e2e/testdata/vite) with npm ci, outside the repo, in a directory named by
# its lock's hash: a lock that changes gets a new install, an unchanged one
# is reused. Exports HOSTGATE_VITE_DIR (its node_modules/.bin/vite runs it).
setup_vite() {
	local src=e2e/testdata/vite
	if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		need_pkgs nodejs npm || return 1
	fi
	local dir
	dir="$HG_STATE/vite/$(sha256sum "$src/package-lock.json" | cut -c1-12)"
	if [ ! -f "$dir/.installed" ]; then
		log "installing Vite for the preview's browser test (npm ci into $dir)"
		rm -rf "$dir"
		mkdir -p "$dir"
		cp "$src/package.json" "$src/package-lock.json" "$dir/"
		if ! (cd "$dir" && timeout 300 npm ci --prefer-offline --no-audit --no-fund --loglevel=error >"$dir/npm.log" 2>&1); then
			tail -20 "$dir/npm.log" >&2
			log "npm ci of $src failed or took over 300 s (log above, all of it in $dir/npm.log): the npm registry must answer npm (npm config get registry; behind a proxy: npm config set proxy URL), then run this again"
			return 1
		fi
		touch "$dir/.installed"
	fi
	export HOSTGATE_VITE_DIR="$dir"
}

# arch32 prints the 32-bit GOARCH the test command runs its raw-syscall
# packages as: 386 where this kernel runs 386 binaries; where it cannot (a
# kernel without IA32 emulation, as some VMs boot), 32-bit ARM under
# qemu-user, registered with binfmt_misc so that a test which runs itself
# again runs too. (qemu-user's 386 cannot run Go's 386 binaries, and it has
# no preadv2: the tests of that call say they checked the fallback alone.)
arch32() {
	local probe="$HG_STATE/probe32"
	mkdir -p "$probe"
	printf 'package main\n\nfunc main() {}\n' >"$probe/main.go"
	if GOARCH=386 go build -o "$probe/p386" "$probe/main.go" && "$probe/p386" 2>/dev/null; then
		echo 386
		return 0
	fi
	log "this kernel cannot run 386 binaries (no IA32 emulation): the 32-bit stage runs as 32-bit ARM under qemu-user"
	need_pkgs qemu-user qemu-user-binfmt >&2 || return 1
	if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
		mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc || {
			log "cannot mount binfmt_misc to run ARM binaries under qemu-user: run the test command on a kernel with IA32 emulation, or with binfmt_misc"
			return 1
		}
	fi
	if [ ! -e /proc/sys/fs/binfmt_misc/qemu-arm ]; then
		cat /usr/lib/binfmt.d/qemu-arm.conf >/proc/sys/fs/binfmt_misc/register
	fi
	echo arm
}

# setup_nginx installs nginx, the README's front for a gateway: a preview
# test runs one of its own in front of the preview proxy (on a Unix socket,
# in its own prefix). The package's own server (port 80, every interface)
# is kept from starting, now and at boot.
setup_nginx() {
	if dpkg-query -W -f='${Status}' nginx 2>/dev/null | grep -q 'install ok installed'; then return 0; fi
	local policy=/usr/sbin/policy-rc.d added= rc=0
	if [ ! -e "$policy" ] && [ "$(id -u)" = 0 ]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && added=1
	fi
	need_pkgs nginx || rc=$?
	if [ -n "$added" ]; then rm -f "$policy"; fi
	if [ "$rc" = 0 ] && command -v systemctl >/dev/null 2>&1; then
		systemctl disable --now nginx >/dev/null 2>&1 || true
	fi
	return "$rc"
}

setup_env() {
	need_pkgs openssh-server openssh-client git curl ca-certificates busybox-static docker.io docker-registry chromium iproute2 procps rsync sshfs systemd
	# sshfs's e2e test mounts through FUSE; a kernel with it as a module
	# has no /dev/fuse until the module loads.
	[ -e /dev/fuse ] || modprobe fuse 2>/dev/null || log "no /dev/fuse: the sshfs test will fail (load the fuse module)"
	setup_nginx
	start_docker
	start_registry
	build_test_image
	# Before setup_browser: it installs Node.js and npm when they are missing.
	setup_vite
	setup_browser
	export HOSTGATE_CHROMIUM=/usr/bin/chromium
}
