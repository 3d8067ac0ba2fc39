#!/bin/sh
# scripts/paper-data.sh (make paper-data), without the network: its arguments and errors;
# the conversion through a stand-in for xlsx2csv over a folder laid out as the authors'
# repository (data/, data/seqpara/), whose CSVs `import --format paper` then loads; and,
# where xlsx2csv and zip are installed, the real conversion of a small spreadsheet built
# here (make test installs neither: only the script needs xlsx2csv, and installs it).
set -u
LB=${BUILD:-build}/layoutbench
root=$(pwd)
case "$LB" in /*) ;; *) LB="$root/$LB" ;; esac
S="$root/scripts/paper-data.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fail=0
expect() { # rc-wanted message-pattern -- args...
	want=$1 pat=$2
	shift 3
	sh "$S" "$@" >stdout.txt 2>err.txt
	rc=$?
	[ $rc = "$want" ] || { echo "FAIL: paper-data.sh $*: exit $rc, want $want ($(cat err.txt))"; fail=1; }
	grep -q -- "$pat" err.txt || { echo "FAIL: paper-data.sh $*: said '$(cat err.txt)', want /$pat/"; fail=1; }
}

# arguments and errors
expect 2 "^error: unknown argument '--bogus'" -- --bogus
expect 2 "^usage: sh scripts/paper-data.sh" -- --bogus
expect 2 "^error: --out needs a value" -- --out
expect 1 "^error: --from '$tmp/nowhere' does not exist (give a local copy" -- --from "$tmp/nowhere"
: >afile
expect 1 "^error: --from 'afile' is not a folder" -- --from afile
mkdir empty
LB_XLSX2CSV=false expect 1 "^error: no llama_\*.xlsx spreadsheet under 'empty'" -- --from empty

# a copy of the repository's layout; the stand-in converter prints each "spreadsheet" (a
# text file here) as xlsx2csv does: CRLF ends (its -l), booleans as TRUE / FALSE
mkdir -p repo/data/seqpara
printf 'llama_13B_bfloat16_64_GPUs_all_runs,,,,,,,,,,,\nTrial ID,World Size,Average Step Time,Average Step Time * World size,Average TFlops Megatron,Average TFlops Aleph Alpha,Average MFU,activation_checkpointing_type,kernel,micro_batch_size,model_parallel_size,pipe_parallel_size\n132173,64,OOM Error,OOM Error,OOM Error,OOM Error,OOM Error,disabled,flash_attention2 + RMS kernel,8,2,2\n132197,64,18.5,1184,150.1,160.2,0.6021,disabled,flash_attention2 + RMS kernel,1,1,1\n' \
	>repo/data/llama_13B_bfloat16_64_GPUs_all_runs.xlsx
printf 'llama_13B_bfloat16_32_GPUs_sequence_parallel,,,,,,,,,,,,\nTrial ID,World Size,Average Step Time,Average Step Time * World size,Average TFlops Megatron,Average TFlops Aleph Alpha,Average MFU,activation_checkpointing_type,kernel,micro_batch_size,model_parallel_size,pipe_parallel_size,sequence_parallel\n132852,32,OOM Error,OOM Error,OOM Error,OOM Error,OOM Error,disabled,flash_attention2 + RMS kernel,8,1,1,TRUE\n132860,32,20.1,643.2,140.0,150.0,0.5512,disabled,flash_attention2 + RMS kernel,1,2,1,FALSE\n' \
	>repo/data/seqpara/llama_13B_bfloat16_32_GPUs_sequence_parallelism.xlsx
printf 'llama_65B_bfloat16_128_GPUs_all_runs,,\nTrial ID,World Size,x\n1,128,2\n' \
	>repo/data/llama_65B_bfloat16_128_GPUs_all_runs.xlsx
cat >conv.sh <<'C'
# xlsx2csv -l '\r\n' FILE
[ "$1" = -l ] && [ "$2" = '\r\n' ] || { echo "unexpected arguments: $*" >&2; exit 2; }
awk '{ printf "%s\r\n", $0 }' "$3"
C
export LB_XLSX2CSV="sh $tmp/conv.sh"
expect 0 "^wrote 2 CSV file(s) to out (1 65B sheet(s) left out; --all converts them)" -- --from repo --out out
sp=out/llama_13B_bfloat16_32_GPUs_sequence_parallelism.csv
[ "$(ls out | wc -l)" = 2 ] || { echo "FAIL: out holds $(ls out)"; fail=1; }
[ "$(sed -n 3p "$sp")" = "$(printf '132852,32,OOM Error,OOM Error,OOM Error,OOM Error,OOM Error,disabled,flash_attention2 + RMS kernel,8,1,1,1\r')" ] ||
	{ echo "FAIL: TRUE is not 1 in $sp: $(sed -n 3p "$sp" | cat -A)"; fail=1; }
[ "$(sed -n 4p "$sp" | sed 's/.*,//')" = "$(printf '0\r')" ] || { echo "FAIL: FALSE is not 0 in $sp"; fail=1; }
[ "$(grep -c "$(printf '\r')\$" "$sp")" = 4 ] || { echo "FAIL: not every line of $sp ends in CRLF"; fail=1; }
[ "$(head -n 1 "$sp")" = "$(printf 'llama_13B_bfloat16_32_GPUs_sequence_parallel,,,,,,,,,,,,\r')" ] ||
	{ echo "FAIL: the title line changed: $(head -n 1 "$sp" | cat -A)"; fail=1; }
"$LB" import --format paper --db paper.db out/*.csv >imp.out 2>imp.err ||
	{ echo "FAIL: import of the converted files: $(cat imp.err)"; fail=1; }
n=$("$LB" sql --db paper.db --format csv "SELECT count(*) FROM runs" | tail -n 1)
[ "$n" = 4 ] || { echo "FAIL: import loaded $n runs from the converted files, want 4"; fail=1; }
expect 0 "^wrote 3 CSV file(s) to all\$" -- --from repo --out all --all
expect 1 "^error: --out 'afile' is a file, not a folder" -- --from repo --out afile
# a converter that fails, and a spreadsheet that is not one of the paper's
LB_XLSX2CSV=false expect 1 "^error: converting '.*llama_.*xlsx' failed" -- --from repo --out o2
printf 'hello\nworld\n' >repo/data/llama_13B_bogus.xlsx
expect 1 "^error: '.*llama_13B_bogus.xlsx' is not one of the paper's sheets" -- --from repo --out o3
rm repo/data/llama_13B_bogus.xlsx
unset LB_XLSX2CSV

# the real converter on a spreadsheet built here (inline strings, numbers, booleans)
if command -v xlsx2csv >/dev/null 2>&1 && command -v zip >/dev/null 2>&1; then
	mkdir -p x/_rels x/xl/_rels x/xl/worksheets real/data/seqpara
	ns=http://schemas.openxmlformats.org
	cat >"x/[Content_Types].xml" <<X
<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="$ns/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>
X
	cat >x/_rels/.rels <<X
<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="$ns/package/2006/relationships"><Relationship Id="rId1" Type="$ns/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>
X
	cat >x/xl/workbook.xml <<X
<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<workbook xmlns="$ns/spreadsheetml/2006/main" xmlns:r="$ns/officeDocument/2006/relationships"><sheets><sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>
X
	cat >x/xl/_rels/workbook.xml.rels <<X
<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="$ns/package/2006/relationships"><Relationship Id="rId1" Type="$ns/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>
X
	s() { printf '<c r="%s" t="inlineStr"><is><t>%s</t></is></c>' "$1" "$2"; }
	v() { printf '<c r="%s"><v>%s</v></c>' "$1" "$2"; }
	b() { printf '<c r="%s" t="b"><v>%s</v></c>' "$1" "$2"; }
	{
		printf '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
		printf '<worksheet xmlns="%s/spreadsheetml/2006/main"><sheetData>' "$ns"
		printf '<row r="1">%s</row>' "$(s A1 llama_13B_bfloat16_32_GPUs_sequence_parallel)"
		printf '<row r="2">%s%s%s</row>' "$(s A2 'Trial ID')" "$(s B2 'World Size')" "$(s C2 sequence_parallel)"
		printf '<row r="3">%s%s%s</row>' "$(v A3 132852)" "$(v B3 32)" "$(b C3 1)"
		printf '<row r="4">%s%s%s</row>' "$(v A4 132853)" "$(s B4 'OOM Error')" "$(b C4 0)"
		printf '</sheetData></worksheet>\n'
	} >x/xl/worksheets/sheet1.xml
	(cd x && zip -q -X -r "$tmp/real/data/seqpara/llama_13B_bfloat16_32_GPUs_sequence_parallelism.xlsx" \
		'[Content_Types].xml' _rels xl)
	expect 0 "^wrote 1 CSV file(s) to rout\$" -- --from real --out rout
	printf 'llama_13B_bfloat16_32_GPUs_sequence_parallel\r\nTrial ID,World Size,sequence_parallel\r\n132852,32,1\r\n132853,OOM Error,0\r\n' >want.csv
	cmp -s want.csv rout/llama_13B_bfloat16_32_GPUs_sequence_parallelism.csv ||
		{ echo "FAIL: xlsx2csv's conversion: $(cat -A rout/*.csv)"; fail=1; }
else
	echo "note: xlsx2csv or zip not installed: the real spreadsheet conversion not tried"
fi
exit $fail
