#!/usr/bin/env bash
# buf breaking: checks that the proto in the work tree keeps the contract of
# the last commit on main (the FILE rules of buf.yaml), as `make lint` and CI
# run it.
#
# "The last commit on main" is the one the work tree's changes are measured
# against:
#   - on a branch: where it forked from main (git merge-base HEAD main), so
#     that changes main made since are not mistaken for this branch's;
#   - on main itself with a clean proto/ (CI's fresh clone of main, or a
#     branch with no commit of its own): the commit before HEAD on main's
#     first-parent line, i.e. main before the change that landed last;
#     comparing HEAD with itself would prove nothing;
#   - on main with uncommitted changes to proto/: HEAD.
# PROTO_AGAINST=<commit> overrides the choice. When the chosen commit has no
# proto/idgen/v1, there was no contract to break: the script says so and
# passes. A shallow clone, whose history lacks the commit to compare with,
# fails instead of passing unchecked.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"

buf=(${BUF:-go tool -modfile=proto/tools.mod buf})

commit() { git rev-parse -q --verify "$1^{commit}" 2>/dev/null; }

against=${PROTO_AGAINST:-}
if [ -z "$against" ]; then
	main=$(commit main || commit origin/main || true)
	head=$(commit HEAD)
	if [ -z "$main" ]; then
		echo "buf breaking: no branch main or origin/main to compare with; comparing with the commit before HEAD" >&2
		base=$head
	else
		base=$(git merge-base "$head" "$main")
	fi
	if [ "$base" = "$head" ] && git diff --quiet HEAD -- proto && [ -z "$(git ls-files --others --exclude-standard -- proto)" ]; then
		if ! base=$(commit "HEAD^1") && [ "$(git rev-parse --is-shallow-repository)" = true ]; then
			# A shallow clone (as some CI systems make): fetch the one
			# commit needed before giving up.
			git fetch -q --deepen=1 2>/dev/null || true
			base=$(commit "HEAD^1") || true
		fi
		if [ -z "$base" ] || [ "$base" = "$head" ]; then
			if [ "$(git rev-parse --is-shallow-repository)" = true ]; then
				echo "buf breaking: a shallow clone lacks the commit before HEAD; fetch more history (git fetch --deepen=1) or set PROTO_AGAINST" >&2
				exit 1
			fi
			echo "buf breaking: HEAD is the first commit: no earlier contract to break"
			exit 0
		fi
	fi
	against=$base
else
	against=$(commit "$against") || { echo "buf breaking: PROTO_AGAINST=$PROTO_AGAINST is not a commit" >&2; exit 1; }
fi

what="$(git rev-parse --short "$against") ($(git log -1 --format=%s "$against"))"
if ! git cat-file -e "$against:proto/idgen/v1" 2>/dev/null; then
	echo "buf breaking: proto/idgen/v1 does not exist at $what: no earlier contract to break"
	exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git archive "$against" proto | tar -x -C "$tmp"
# The rules and module layout of today's buf.yaml apply to both sides.
cp buf.yaml "$tmp/"
if [ -z "$(find "$tmp/proto" -name '*.proto' -print -quit)" ]; then
	echo "buf breaking: no .proto file at $what under proto/" >&2
	exit 1
fi
"${buf[@]}" breaking --against "$tmp"
echo "buf breaking: proto/ keeps the contract of $what"
