# `score bleu` prints exactly sacreBLEU's line (Python's str(BLEUScore), i.e. `sacrebleu REF -i HYP
# -f text -w 2` without its signature) on files it writes here: English, German with typographic
# quotes, entities, empty lines, a larger random corpus; each compared with sacrebleu run here.
# Then the usage errors: exit 2 and a message naming the problem.
source "$(dirname "$0")/lib/common.bash" "$@"
PY=${PYTHON:-python3}
"$PY" -c 'import sacrebleu' 2> /dev/null ||
  fail "sacrebleu is not installed for $PY: run launch/install-deps, or: $PY -m pip install sacrebleu"
echo "score_bleu: reference is sacrebleu $("$PY" -c 'import sacrebleu; print(sacrebleu.__version__)')"

# sacrebleu's own CLI on the same files, its signature ("BLEU|nrefs:1|...|version:2.6.0 = ") cut.
sacrebleu_line() {  # sacrebleu_line REF HYP [sacrebleu options]
  local ref=$1 hyp=$2; shift 2
  "$PY" -m sacrebleu "$ref" -i "$hyp" -f text -w 2 "$@" 2> /dev/null | sed 's/^BLEU|[^ ]* = /BLEU = /'
}

compare() {  # compare NAME REF HYP: ours == sacrebleu's, with each tokenizer and case setting
  local name=$1 ref=$2 hyp=$3 ours theirs
  for opts in "" "--lowercase" "--tokenize none" "--tokenize none --lowercase"; do
    # shellcheck disable=SC2086
    ours=$("$BIN" score bleu --ref "$ref" --hyp "$hyp" $opts) || fail "$name [$opts]: exit $?"
    # shellcheck disable=SC2086
    theirs=$(sacrebleu_line "$ref" "$hyp" $(echo "$opts" | sed 's/--tokenize/-tok/; s/--lowercase/-lc/'))
    [ -n "$theirs" ] || fail "$name [$opts]: sacrebleu printed nothing"
    [ "$ours" = "$theirs" ] || fail "$name [$opts]: ours '$ours', sacrebleu '$theirs'"
    echo "  $name [${opts:-13a}]: $ours"
  done
}

cat > "$WORK/de.ref" <<'TXT'
Er sagte: „Guten Tag“ und ging heim.
Die Straße ist 3,5 Kilometer lang – sagt man.
„Das ist nicht wahr!“, rief ÄRGERLICH der Bürgermeister.
Die Preise stiegen 2019–2020 um 5-10 %.
Wir sehen uns vielleicht im Mai.
TXT
cat > "$WORK/de.hyp" <<'TXT'
Er sagte: „Guten Tag“ und ging nach Hause.
Die Straße ist 3,5 km lang - sagt man.
"Das ist nicht wahr!", rief der ärgerliche Bürgermeister.
Die Preise stiegen 2019-2020 um 5-10%.

TXT
cat > "$WORK/en.ref" <<'TXT'
He said "no" twice and then left.
It costs $1,000.50 and not 900.
"Tom & Jerry" (1940) is an old cartoon.
See the U.S.A., e.g. here.
The cat is sitting on the mat.
TXT
printf '%s\r\n' 'He said “no” twice -- and left.' 'It costs $1,000.50, not 900.' \
  '&quot;Tom &amp; Jerry&quot; (1940) is a cartoon.' 'See U.S.A. e.g. here...' 'THE CAT SAT ON THE MAT.' > "$WORK/en.hyp"
compare "German" "$WORK/de.ref" "$WORK/de.hyp"
compare "English (CRLF hypotheses)" "$WORK/en.ref" "$WORK/en.hyp"

# A larger corpus: 400 noisy copies of random "sentences" (words, numbers, punctuation, umlauts,
# quotes, entities), so every n-gram order has partial matches.
"$PY" - "$WORK/big.ref" "$WORK/big.hyp" <<'PY'
import random, sys
r = random.Random(7)
words = ("der die das und ist nicht Straße Ärger über „Guten Tag“ – 3,5 1,000.50 2019-2020 U.S.A. e.g. "
         "don't (1940) $5 50% &amp; &quot;x&quot; Öl-Preise « » ... ! ? : ; cat mat sat on the").split()
with open(sys.argv[1], "w") as ref, open(sys.argv[2], "w") as hyp:
    for _ in range(400):
        s = [r.choice(words) for _ in range(r.randint(3, 20))]
        h = [w for w in s if r.random() > 0.15]
        for _ in range(r.randint(0, 3)):
            h.insert(r.randint(0, len(h)), r.choice(words))
        ref.write(" ".join(s) + (r.choice([".", "!", ""])) + "\n")
        hyp.write(" ".join(h) + (r.choice([".", "!", ""])) + "\n")
PY
compare "random corpus" "$WORK/big.ref" "$WORK/big.hyp"

# Nothing in common: BLEU 0 with every precision 0, as sacreBLEU prints it.
printf 'a b c d\n' > "$WORK/z.hyp"
printf 'w x y z\n' > "$WORK/z.ref"
compare "no match" "$WORK/z.ref" "$WORK/z.hyp"
out=$("$BIN" score bleu --ref "$WORK/z.ref" --hyp "$WORK/z.hyp")
[ "$out" = "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 1.000 ratio = 1.000 hyp_len = 4 ref_len = 4)" ] || fail "no match: $out"

# ---- usage errors: exit 2, the message says what is wrong ----
expect2() {  # expect2 WHAT PATTERN CMD...
  local what=$1 pattern=$2 out rc; shift 2
  set +e
  out=$("$@" 2>&1); rc=$?
  set -e
  [ $rc -eq 2 ] || fail "$what: exit $rc, expected 2: $out"
  echo "$out" | contains -i -- "$pattern" || fail "$what: message does not say '$pattern': $out"
}
expect2 "missing --hyp file" "does not exist" "$BIN" score bleu --ref "$WORK/de.ref" --hyp "$WORK/nope.txt"
expect2 "missing --ref file" "nope.txt" "$BIN" score bleu --ref "$WORK/nope.txt" --hyp "$WORK/de.hyp"
expect2 "no --hyp" "--hyp" "$BIN" score bleu --ref "$WORK/de.ref"
head -n 3 "$WORK/de.hyp" > "$WORK/short.hyp"
expect2 "unequal line counts" "has 3 lines but --ref .* has 5" "$BIN" score bleu --ref "$WORK/de.ref" --hyp "$WORK/short.hyp"
printf 'gut\nschlecht \xff kaputt\n' > "$WORK/bad.hyp"
printf 'gut\nschlecht\n' > "$WORK/two.ref"
expect2 "invalid UTF-8" "bad.hyp line 2: invalid UTF-8" "$BIN" score bleu --ref "$WORK/two.ref" --hyp "$WORK/bad.hyp"
expect2 "invalid UTF-8 in --ref" "--ref .*bad.hyp line 2" "$BIN" score bleu --ref "$WORK/bad.hyp" --hyp "$WORK/two.ref"
expect2 "unknown tokenizer" "intl" "$BIN" score bleu --ref "$WORK/de.ref" --hyp "$WORK/de.hyp" --tokenize intl
expect2 "score without a metric" "available: bleu" "$BIN" score
expect2 "unknown metric" "chrf" "$BIN" score chrf --ref "$WORK/de.ref" --hyp "$WORK/de.hyp"

"$BIN" score bleu --help | contains -- "--tokenize" || fail "score bleu --help does not list --tokenize"
"$BIN" score bleu --help | contains "Exit codes: 0 scored; 2 usage error" || fail "score bleu --help does not state the exit codes"
"$BIN" score --help | contains "bleu" || fail "score --help does not list bleu"
"$BIN" --help | contains "score" || fail "--help does not list score"
echo "score_bleu: ok"
