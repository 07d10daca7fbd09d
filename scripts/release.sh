#!/usr/bin/env bash
# idgen's release, as `make release VERSION=vX.Y.Z` runs it (docs/releasing.md):
#
#   scripts/release.sh                 build, verify and tag VERSION (env)
#   scripts/release.sh verify DIR      verify the artifacts in DIR against VERSION
#
# From the commit at HEAD (exported with git archive, so nothing uncommitted
# or untracked gets in) it builds into DIST (default dist/):
#
#   idgen-VERSION-linux-amd64.tar.gz   the static binary stamped with VERSION
#   idgen-VERSION-linux-arm64.tar.gz   (-X main.linkVersion), LICENSE, README.md
#   idgen-client-X.Y.Z.tgz             the npm package (npm pack of clients/typescript)
#   idgen_client-X.Y.Z.tar.gz          the Python sdist and wheel of clients/python
#   idgen_client-X.Y.Z-py3-none-any.whl
#   RELEASE_NOTES.md                   the CHANGELOG section of the release
#   SHA256SUMS                         of all of the above
#
# and the image IMAGE:X.Y.Z from deploy/Dockerfile when a Docker engine
# answers (RELEASE_IMAGE=auto, the default; 1 requires it, 0 skips it;
# RELEASE_DOCKER_BUILD_ARGS adds build arguments, e.g. the base images;
# DOCKER names the client, default docker).
# Every artifact carries VERSION, written into the exported copy (package.json,
# pyproject.toml, __version__), and is verified after the build. Then, and
# only then, it creates the annotated tag VERSION on the commit it built.
# It never pushes or publishes anything: it prints the commands that do.
#
# It refuses: a VERSION that is not vMAJOR.MINOR.PATCH, a tag VERSION that
# exists, uncommitted changes to tracked files, a CHANGELOG.md with no
# "## [X.Y.Z] - YYYY-MM-DD" section, and client manifests (package.json,
# pyproject.toml, __version__, the Helm chart's appVersion) that say another
# version than X.Y.Z: the tagged source must say what its artifacts say.
#
# DRY_RUN=1 does all of it except the tag, with allowances so that CI can
# rehearse the release on any commit: VERSION may also be
# vMAJOR.MINOR.PATCH-dryrun (the Python packages get X.Y.Z+dryrun, a local
# version PyPI refuses), a VERSION without a CHANGELOG section takes the
# [Unreleased] section as its notes, and uncommitted changes and manifests
# that say another version are reported, not refused.
set -euo pipefail

root=$(git rev-parse --show-toplevel)
cd "$root"

VERSION=${VERSION:-}
DRY_RUN=${DRY_RUN:-0}
DIST=${DIST:-dist}
IMAGE=${IMAGE:-idgen}
RELEASE_IMAGE=${RELEASE_IMAGE:-auto}
RELEASE_DOCKER_BUILD_ARGS=${RELEASE_DOCKER_BUILD_ARGS:-}
GO=${GO:-go}
DOCKER=${DOCKER:-docker}
ARCHES="amd64 arm64"

# scratch prints a new temporary directory, removed when the script exits.
scratch_root=$(mktemp -d)
trap 'rm -rf "$scratch_root"' EXIT
scratch() { mktemp -d -p "$scratch_root"; }

log() { printf 'release: %s\n' "$*"; }
die() { printf 'release: %s\n' "$*" >&2; exit 2; }

# check_version sets plain (X.Y.Z or X.Y.Z-dryrun, npm's and the image's
# version) and pyver (the Python package's: X.Y.Z or X.Y.Z+dryrun).
check_version() {
	local semver='v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)'
	if [[ $VERSION =~ ^${semver}$ ]]; then
		:
	elif [[ $DRY_RUN == 1 && $VERSION =~ ^${semver}-dryrun$ ]]; then
		:
	elif [[ $VERSION =~ ^${semver}-dryrun$ ]]; then
		die "VERSION=$VERSION: the -dryrun suffix is for DRY_RUN=1 only"
	else
		die "VERSION=\"$VERSION\" is not vMAJOR.MINOR.PATCH: run make release VERSION=v1.2.3 (DRY_RUN=1 for a rehearsal)"
	fi
	plain=${VERSION#v}
	pyver=${plain/-dryrun/+dryrun}
}

# artifact names, from plain and pyver.
names() {
	npm_tgz=idgen-client-$plain.tgz
	py_sdist=idgen_client-$pyver.tar.gz
	py_wheel=idgen_client-$pyver-py3-none-any.whl
}

# elf_machine FILE prints the ELF e_machine of a 64-bit little-endian ELF
# file (62 x86-64, 183 AArch64), or "not-elf".
elf_machine() {
	local magic class data
	magic=$(od -An -tx1 -N4 "$1" | tr -d ' \n')
	class=$(od -An -tu1 -j4 -N1 "$1" | tr -d ' ')
	data=$(od -An -tu1 -j5 -N1 "$1" | tr -d ' ')
	if [[ $magic != 7f454c46 || $class != 2 || $data != 1 ]]; then
		echo not-elf
		return
	fi
	od -An -tu2 -j18 -N2 "$1" | tr -d ' '
}

# verify DIR: every artifact of VERSION in DIR carries VERSION, and
# SHA256SUMS matches. Prints one line per artifact; fails on the first
# that is wrong or missing.
verify() {
	local dir=$1 tmp want machine got arch
	tmp=$(scratch)
	for arch in $ARCHES; do
		local tgz=$dir/idgen-$VERSION-linux-$arch.tar.gz
		[[ -f $tgz ]] || die "verify: $tgz is missing"
		tar -xzf "$tgz" -C "$tmp"
		local bin=$tmp/idgen-$VERSION-linux-$arch/idgen
		[[ -x $bin ]] || die "verify: $tgz has no executable idgen-$VERSION-linux-$arch/idgen"
		case $arch in amd64) want=62 ;; arm64) want=183 ;; esac
		machine=$(elf_machine "$bin")
		[[ $machine == "$want" ]] || die "verify: $tgz: ELF machine $machine, want $want (linux/$arch)"
		# -trimpath leaves -ldflags out of the build information, so the
		# stamp of a binary this machine cannot run is checked as the
		# string it is in the binary; the one it can run is asked.
		"$GO" version -m "$bin" | grep "GOARCH=$arch\$" >/dev/null || die "verify: $tgz: built for another GOARCH than $arch"
		if [[ $arch == "$("$GO" env GOHOSTARCH)" ]]; then
			got=$("$bin" version)
			[[ $got == "idgen $VERSION (go"*", linux/$arch)" ]] ||
				die "verify: $tgz: idgen version says \"$got\", want idgen $VERSION (go…, linux/$arch)"
			log "ok  idgen-$VERSION-linux-$arch.tar.gz: $got"
		else
			grep -qaF -- "$VERSION" "$bin" || die "verify: $tgz: VERSION $VERSION is not stamped in the binary"
			log "ok  idgen-$VERSION-linux-$arch.tar.gz: ELF machine $machine, GOARCH=$arch, contains $VERSION (not run on $(uname -m))"
		fi
	done

	[[ -f $dir/$npm_tgz ]] || die "verify: $dir/$npm_tgz is missing"
	got=$(tar -xzOf "$dir/$npm_tgz" package/package.json | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).version))')
	[[ $got == "$plain" ]] || die "verify: $npm_tgz: package.json version \"$got\", want $plain"
	tar -tzf "$dir/$npm_tgz" | grep -x 'package/dist/src/index.js' >/dev/null || die "verify: $npm_tgz has no dist/src/index.js (was it built?)"
	log "ok  $npm_tgz: version $got"

	for f in "$py_sdist" "$py_wheel"; do
		[[ -f $dir/$f ]] || die "verify: $dir/$f is missing"
		got=$(python3 scripts/release/pypkg.py version "$dir/$f")
		[[ $got == "$pyver" ]] || die "verify: $f: version \"$got\", want $pyver"
		log "ok  $f: version $got"
	done

	[[ -s $dir/RELEASE_NOTES.md ]] || die "verify: $dir/RELEASE_NOTES.md is missing or empty"
	[[ -f $dir/SHA256SUMS ]] || die "verify: $dir/SHA256SUMS is missing"
	(cd "$dir" && sha256sum --quiet -c SHA256SUMS) || die "verify: SHA256SUMS does not match the files in $dir"
	log "ok  SHA256SUMS: $(wc -l <"$dir/SHA256SUMS") files"
}

# notes FILE: the CHANGELOG section of the release into FILE (the
# [Unreleased] section in a dry run whose version has none).
notes() {
	local out=$1 section
	section=$(awk -v v="$plain" '
		/^## \[/ { inside = (index($0, "## [" v "]") == 1) }
		inside' CHANGELOG.md)
	if [[ -n $section ]]; then
		local heading=${section%%$'\n'*}
		if [[ $DRY_RUN != 1 && ! $heading =~ ^"## [$plain] - "[0-9]{4}-[0-9]{2}-[0-9]{2}$ ]]; then
			die "CHANGELOG.md: the heading must be \"## [$plain] - YYYY-MM-DD\", not \"$heading\""
		fi
	elif [[ $DRY_RUN == 1 ]]; then
		section=$(awk '/^## \[/ { inside = ($0 == "## [Unreleased]") } inside' CHANGELOG.md)
		[[ -n $section ]] || die "CHANGELOG.md has neither a [$plain] nor an [Unreleased] section"
		log "dry run: CHANGELOG.md has no [$plain] section; the notes are the [Unreleased] section"
	else
		die "CHANGELOG.md has no \"## [$plain] - YYYY-MM-DD\" section: move [Unreleased] under it in the release commit"
	fi
	printf '%s\n' "$section" >"$out"
}

# manifests: the versions the tree's client manifests and Helm chart say;
# a real release refuses any that differs from X.Y.Z.
manifests() {
	local bad=0 file got
	if [[ $VERSION == *-dryrun ]]; then
		log "dry run: $VERSION is no release; the manifests' versions are not compared with it"
		return
	fi
	while IFS='|' read -r file got; do
		if [[ $got != "$plain" ]]; then
			if [[ $DRY_RUN == 1 ]]; then
				log "dry run: $file says $got (the artifacts say $plain; a release of $VERSION must set it)"
			else
				log "$file says $got, want $plain"
				bad=1
			fi
		fi
	done < <(
		echo "clients/typescript/package.json|$(node -p 'require("./clients/typescript/package.json").version')"
		echo "clients/python/pyproject.toml|$(sed -n 's/^version = "\(.*\)"$/\1/p' clients/python/pyproject.toml)"
		echo "clients/python/idgen_client/__init__.py|$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' clients/python/idgen_client/__init__.py)"
		echo "deploy/helm/idgen/Chart.yaml appVersion|$(sed -n 's/^appVersion: "\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' deploy/helm/idgen/Chart.yaml)"
	)
	[[ $bad == 0 ]] || die "set these to $plain in the release commit (docs/releasing.md)"
}

docker_answers() { "$DOCKER" info >/dev/null 2>&1; }

main() {
	check_version
	names
	[[ $DRY_RUN == 0 || $DRY_RUN == 1 ]] || die "DRY_RUN=$DRY_RUN: want 0 or 1"
	for tool in "$GO" node npm python3 tar sha256sum od; do
		command -v "$tool" >/dev/null || die "$tool is not installed"
	done

	git update-index -q --refresh
	if ! git diff-index --quiet HEAD --; then
		local changed
		changed=$(git diff-index --name-only HEAD -- | head -n 3 | tr '\n' ' ')
		[[ $DRY_RUN == 1 ]] || die "uncommitted changes to tracked files: commit or stash them first ($changed)"
		log "dry run: uncommitted changes ($changed) are left out: the artifacts are built from HEAD"
	fi
	if git rev-parse -q --verify "refs/tags/$VERSION" >/dev/null; then
		die "tag $VERSION exists already (on $(git rev-parse --short "$VERSION^{commit}"))"
	fi
	local commit epoch
	commit=$(git rev-parse HEAD)
	epoch=$(git log -1 --format=%ct "$commit")
	export SOURCE_DATE_EPOCH=$epoch

	case $RELEASE_IMAGE in
	1) docker_answers || die "RELEASE_IMAGE=1 but no Docker engine answers" ;;
	auto) if docker_answers; then RELEASE_IMAGE=1; else RELEASE_IMAGE=0; fi ;;
	0) ;;
	*) die "RELEASE_IMAGE=$RELEASE_IMAGE: want auto, 1 or 0" ;;
	esac

	local mode=release work
	[[ $DRY_RUN == 1 ]] && mode="dry run"
	log "$mode of $VERSION from $(git rev-parse --short "$commit")"
	work=$(scratch)
	notes "$work/RELEASE_NOTES.md"
	manifests

	# Everything is checked: only now is an earlier build's output replaced.
	mkdir -p "$DIST"
	DIST=$(cd "$DIST" && pwd)
	rm -f "$DIST"/idgen-* "$DIST"/idgen_client-* "$DIST"/RELEASE_NOTES.md "$DIST"/SHA256SUMS
	mv "$work/RELEASE_NOTES.md" "$DIST/"
	log "building into $DIST"
	git archive --format=tar "$commit" | tar -x -C "$work"

	local arch dir
	for arch in $ARCHES; do
		log "binary linux/$arch"
		dir=$work/pkg/idgen-$VERSION-linux-$arch
		mkdir -p "$dir"
		(cd "$work" && CGO_ENABLED=0 GOOS=linux GOARCH=$arch "$GO" build -trimpath -buildvcs=false \
			-ldflags "-s -w -X main.linkVersion=$VERSION" -o "$dir/idgen" ./cmd/idgen)
		cp "$work/LICENSE" "$work/README.md" "$dir/"
		tar -C "$work/pkg" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
			-cf - "idgen-$VERSION-linux-$arch" | gzip -n >"$DIST/idgen-$VERSION-linux-$arch.tar.gz"
	done

	log "npm package"
	(
		cd "$work/clients/typescript"
		npm version --no-git-tag-version --allow-same-version "$plain" >/dev/null
		npm ci --no-audit --no-fund --loglevel=error >/dev/null
		npm pack --pack-destination "$DIST" --loglevel=error >/dev/null
	)

	log "Python packages"
	python3 "$work/scripts/release/pypkg.py" build "$work/clients/python" "$DIST" "$pyver" "$work/LICENSE" >/dev/null

	(cd "$DIST" && sha256sum idgen-* idgen_client-* RELEASE_NOTES.md >SHA256SUMS)

	local image_id=
	if [[ $RELEASE_IMAGE == 1 ]]; then
		log "image $IMAGE:$plain"
		# shellcheck disable=SC2086 # RELEASE_DOCKER_BUILD_ARGS is a list of words
		DOCKER_BUILDKIT=1 "$DOCKER" build -q -f "$work/deploy/Dockerfile" -t "$IMAGE:$plain" \
			--build-arg VERSION="$VERSION" $RELEASE_DOCKER_BUILD_ARGS "$work" >/dev/null
		local got
		got=$("$DOCKER" run --rm "$IMAGE:$plain" version)
		[[ $got == "idgen $VERSION (go"*", linux/"* ]] || die "image $IMAGE:$plain: idgen version says \"$got\", want idgen $VERSION"
		image_id=$("$DOCKER" image inspect -f '{{.Id}}' "$IMAGE:$plain")
	else
		log "image: skipped (no Docker engine answers, or RELEASE_IMAGE=0)"
	fi

	log "verifying $DIST"
	verify "$DIST"
	[[ -n $image_id ]] && log "ok  image $IMAGE:$plain ($image_id): $got"

	if [[ $DRY_RUN == 1 ]]; then
		log "dry run: would create the annotated tag $VERSION on $(git rev-parse --short "$commit")"
	else
		# whitespace: the default cleanup would drop the notes' "## " headings as comments.
		git tag -a --cleanup=whitespace "$VERSION" -F "$DIST/RELEASE_NOTES.md" "$commit"
		log "created the tag $VERSION on $(git rev-parse --short "$commit")"
	fi

	local no_image=
	[[ -n $image_id ]] || no_image="   (no image was built here)"
	local publish="to publish:"
	[[ $DRY_RUN == 1 ]] && publish="a release would publish with (not for a dry run's artifacts):"
	cat <<EOF
release: $mode of $VERSION done. Nothing has been pushed or published; $publish
  git push origin $VERSION
  (attach $DIST/idgen-$VERSION-linux-*.tar.gz and $DIST/SHA256SUMS to the release; its text: $DIST/RELEASE_NOTES.md)
  npm publish $DIST/$npm_tgz
  python3 -m twine upload $DIST/$py_sdist $DIST/$py_wheel
  docker tag $IMAGE:$plain REGISTRY/idgen:$plain && docker push REGISTRY/idgen:$plain$no_image
  (or both platforms: docker buildx build --platform linux/amd64,linux/arm64 -f deploy/Dockerfile --build-arg VERSION=$VERSION -t REGISTRY/idgen:$plain --push .)
EOF
}

case ${1:-} in
"") main ;;
verify)
	[[ $# == 2 ]] || die "usage: VERSION=vX.Y.Z scripts/release.sh verify DIR"
	DRY_RUN=1 # a dry run's artifacts (-dryrun) are verified too
	check_version
	names
	verify "$2"
	;;
*) die "usage: scripts/release.sh [verify DIR] (VERSION, DRY_RUN, DIST, IMAGE, RELEASE_IMAGE in the environment)" ;;
esac
