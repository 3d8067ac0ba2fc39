#!/bin/sh
# Get the paper's measured runs and convert them to the CSV files that `import --format
# paper` and the tests read. The authors publish them as spreadsheets in their repository
# (Aleph-Alpha/NeurIPS-WANT-submission-efficient-parallelization-layouts, data/*.xlsx and
# data/seqpara/*.xlsx), under CC BY-NC-SA 4.0: so they are fetched, never shipped here.
#
#   sh scripts/paper-data.sh [--from DIR|GIT_URL] [--out DIR] [--all]     (make paper-data)
#
# --from: a local copy of that repository (a clone, an unpacked archive, or any folder
# holding its .xlsx files), or a git URL; default: a shallow clone of the authors'
# repository (needs the network and git). --out: where the CSV files go (default
# ./paper-data; one <sheet>.csv per spreadsheet; an existing file is replaced). --all: also
# the two 65B sheets, which the tests and the documented figures were not checked against
# (the tests read every .csv of LB_PAPER_DATA, so leave them out of that folder).
#
# Format of each CSV, as the importer expects (results/paper_csv.h): line 1 the sheet's
# title, line 2 the header, then one row per run; CRLF line ends; booleans (the
# sequence_parallel column) as 1 and 0. Converted with Debian's xlsx2csv, which this
# script installs when missing (scripts/deps.sh --install; as root, else it prints the
# command); LB_XLSX2CSV names another converter with xlsx2csv's arguments.
set -eu
url=https://github.com/Aleph-Alpha/NeurIPS-WANT-submission-efficient-parallelization-layouts
from="" out=paper-data all=0
here=$(cd "$(dirname "$0")" && pwd)

die() {
	echo "error: $*" >&2
	exit 1
}
usage() {
	echo "usage: sh scripts/paper-data.sh [--from DIR|GIT_URL] [--out DIR] [--all]" >&2
	exit 2
}
while [ $# -gt 0 ]; do
	case "$1" in
	--from | --out)
		[ $# -ge 2 ] && [ -n "$2" ] || { echo "error: $1 needs a value" >&2; usage; }
		[ "$1" = --from ] && from=$2 || out=$2
		shift 2 ;;
	--from=*) from=${1#--from=}; shift ;;
	--out=*) out=${1#--out=}; shift ;;
	--all) all=1; shift ;;
	-h | --help) usage ;;
	*) echo "error: unknown argument '$1'" >&2; usage ;;
	esac
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# the source: a folder here, else a git URL (the authors' repository by default)
if [ -n "$from" ] && [ -d "$from" ]; then
	src=$from
elif [ -n "$from" ] && [ -e "$from" ]; then
	die "--from '$from' is not a folder (give a copy of the repository, or its git URL)"
else
	case "${from:-$url}" in
	*://* | git@*) ;;
	*) die "--from '$from' does not exist (give a local copy of the repository, or its git URL)" ;;
	esac
	command -v git >/dev/null 2>&1 || sh "$here/deps.sh" --install git ||
		die "git is needed to fetch '${from:-$url}' (or give a local copy with --from DIR)"
	echo "fetching ${from:-$url}" >&2
	git clone -q --depth 1 "${from:-$url}" "$tmp/repo" ||
		die "cannot fetch '${from:-$url}' (no network? clone or download the repository elsewhere and give it with --from DIR)"
	src=$tmp/repo
fi

conv=${LB_XLSX2CSV:-}
if [ -z "$conv" ]; then
	command -v xlsx2csv >/dev/null 2>&1 || sh "$here/deps.sh" --install xlsx2csv ||
		die "xlsx2csv is needed to convert the spreadsheets (Debian package xlsx2csv)"
	conv=xlsx2csv
fi

find "$src" -name 'llama_*.xlsx' | LC_ALL=C sort >"$tmp/sheets"
[ -s "$tmp/sheets" ] ||
	die "no llama_*.xlsx spreadsheet under '$src' (the repository keeps them in data/ and data/seqpara/)"
[ ! -e "$out" ] || [ -d "$out" ] || die "--out '$out' is a file, not a folder"
mkdir -p "$out" 2>/dev/null || die "cannot make the folder '$out' (--out DIR)"
n=0 skipped=0
while IFS= read -r x; do
	name=$(basename "$x" .xlsx)
	case "$name" in
	*_65B_*) [ $all = 1 ] || { skipped=$((skipped + 1)); continue; } ;;
	esac
	$conv -l '\r\n' "$x" >"$tmp/raw.csv" 2>"$tmp/conv.err" ||
		die "converting '$x' failed: $(head -n 3 "$tmp/conv.err")"
	# booleans as the importer reads them; every line ends in CRLF, as the sheets' export
	awk 'BEGIN { FS = OFS = "," }
	     { sub(/\r$/, "") }
	     NR > 2 { for (i = 1; i <= NF; i++) { if ($i == "TRUE") $i = 1; else if ($i == "FALSE") $i = 0 } }
	     { printf "%s\r\n", $0 }' "$tmp/raw.csv" >"$tmp/$name.csv"
	head -n 2 "$tmp/$name.csv" | tail -n 1 | grep -q '^Trial ID,World Size,' ||
		die "'$x' is not one of the paper's sheets (its second line is not the header 'Trial ID,World Size,...')"
	mv "$tmp/$name.csv" "$out/$name.csv" || die "cannot write '$out/$name.csv'"
	n=$((n + 1))
done <"$tmp/sheets"
[ $n -gt 0 ] || die "no sheet converted from '$src'"
echo "wrote $n CSV file(s) to $out$([ $skipped = 0 ] || echo " ($skipped 65B sheet(s) left out; --all converts them)")" >&2
echo "use them: build/layoutbench import --format paper $out/*.csv; tests: LB_PAPER_DATA=$out make test" >&2
echo "licence CC BY-NC-SA 4.0 (the authors'): keep them out of this repository" >&2
