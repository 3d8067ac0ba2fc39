#!/bin/sh
# README.md and every page under docs/ render as their author wrote them: each line that
# starts a heading ("## Running on a GPU machine") outside a code block renders as a
# heading, as CommonMark's reference renderer (Debian's cmark) reads the file. A fence
# that does not close (a closing ``` with text after it is no closing fence) swallows the
# headings after it, and this fails naming the file and the line. The code blocks are
# found leniently (any line starting with ``` opens or closes one), as a writer means them.
set -u
command -v cmark >/dev/null 2>&1 || {
	echo "cmark not installed (Debian package cmark; make deps installs it)"
	exit 77
}
fail=0
for f in README.md $(find docs -name '*.md' | sort); do
	# headings the writer meant: line numbers of "#..# text" outside ``` blocks
	want=$(awk '/^```/ { code = !code; next } !code && /^##?#?#?#?#?( |$)/ { print NR }' "$f")
	# headings cmark renders: the first line of each heading node's sourcepos
	got=$(cmark -t xml --sourcepos "$f" |
		sed -n 's/^ *<heading sourcepos="\([0-9]*\):.*/\1/p')
	for n in $want; do
		echo "$got" | grep -qx "$n" && continue
		echo "FAIL: $f:$n: '$(sed -n "${n}p" "$f")' does not render as a heading (an unclosed code block above it? a closing fence is \`\`\` alone on its line)"
		fail=1
	done
done
exit $fail
