"""The Megatron bash reader (tree-sitter-bash and the evaluator on its syntax tree).

1. Every script of the in-repo corpus (the scripts the adapter tests give the reader, and the
   bundled recipes) reads exactly as the hand-written reader read it: commands with the provenance
   of every character, variables, warnings, the picked training command and its arguments, errors
   (expectations in ``tests/data/bash_corpus.json``, written by that reader; see
   ``tests/bash_corpus.py``).
2. Where tree-sitter-bash 0.25.1 mis-parses valid bash (the workarounds in ``megatron_bash``), the
   reader's arguments equal what ``bash`` itself passes to the command.
3. Scripts bash cannot parse give one line naming the line and the construct.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from bash_corpus import entries, materialize, reading
from primus_launch.adapters.megatron_bash import ShellState
from primus_launch.errors import UserError, one_line

ENTRIES = entries()


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.get("recipe") or f"{i}-{e['from'].split('::')[-1][:60]}"
                                                for i, e in enumerate(ENTRIES)])
def test_corpus_reads_as_the_hand_written_reader_did(entry, tmp_path):
    path = materialize(entry, tmp_path)
    got = reading(path, entry.get("argv", []), entry.get("shell_only", False), tmp_path)
    want = entry["expect"]
    for key in sorted(set(got) | set(want)):  # one section at a time: the first that differs is named
        assert got.get(key) == want.get(key), key


# --------------------------------------------------------------------------- bash as the truth
# each snippet ends with `python x.py ARGS`; bash runs it with python() printing its arguments
SNIPPETS = {
    # tree-sitter-bash #180/#315: `$A/$B/c` split into two arguments / an assignment into a command
    "slash-separated variables": 'A=root; B=data\nX=$A/$B/c\npython x.py $A/$B/c ${A}/$B/c "$X"\n',
    # #280: ${X:-$_Y} read as a word
    "default naming an underscore variable": '_Y=/opt/y\npython x.py ${X:-$_Y} "${X:-$_Y/z}"\n',
    # expansion arguments the grammar rejects: | ; --- [ inside ${...}
    "default with a pipe": 'python x.py "${L:-Et*10|t*12|t*9mL}" ${M:-a|b}\n',
    "default with a semicolon": 'python x.py "${G:-gfx942;gfx950}"\n',
    "default starting with dashes": 'W=8\npython x.py ${E:---executor local --gpus ${W}}\n',
    "pattern with a bracket": "S='node[1-4],x'\npython x.py \"${S%%[*}\" \"${S#*]}\"\n",
    "quotes and variables in an unreadable default": 'P=9\npython x.py "${R:-a|"b c"}" "${S:-$P|${P}x;$(( P + 1 ))}"\n',
    # $((...)) inside ${x:-...} read as a subshell
    "arithmetic in a default": 'TP=2; PP=4\npython x.py ${N:-$((TP * PP))} --n $(( -3 + TP ))\n',
    # `python - <<EOF`: the "-" is in no node
    "dash before a here-document": "python x.py - <<'PY'\nprint(1)\nPY\n",
    # `cmd > out a b`: tree-sitter-bash gives the redirection all three words
    "words after a redirection": 'python x.py --a 1 2> /dev/null --b 2\n',
    # a "\" on the last line continues onto nothing
    "continuation at the end": 'python x.py --a 1 \\\n',
    # c-style for with base-10 numbers: skipped, not an error
    "c-style loop with 10#": 'a=1; b=3\nfor (( n=10#$a; n<=10#$b; n++ )); do :; done\npython x.py ok\n',
    # bash's scoping: a function's `local` (and `declare`) ends with the call; each command of a pipeline
    # runs in a subshell (the reader kept TP=8 from both)
    "local in a function": 'TP=4\nf() { local TP=8; declare PP=2; }\nf\npython x.py $TP ${PP:-none}\n',
    "local over a global, read by a callee": 'X=1\ng() { Y=$X; }\nf() { local X=4; g; }\nf\npython x.py $X $Y\n',
    "assignment in a pipeline": 'TP=4\necho | TP=8\nf() { PP=2; }\necho | f\npython x.py $TP ${PP:-none}\n',
    # a blank after the continuation backslash: "\\ " is an argument and the line ends
    "escaped blank at the end of a line": 'true --a 1 \\ \npython x.py --b \\  y \\ \n',
    # `NAME=<file`: bash's empty assignment and a redirection (tree-sitter-bash cannot parse it)
    "empty assignment before a redirection": 'P=9\nD=</dev/null\npython x.py "$D" $P\n',
    "positional $10 is $1 then 0": 'set -- p q\npython x.py $10 "$2"0\n',
    "strings and escapes": 'V="a b"\npython x.py "$V" \'$V\' a\\ b "x\\"y" $V ""\n',
    "arrays and lengths": 'A=(p "q r")\nA+=(s)\npython x.py "${A[@]}" ${#A[@]} ${A[1]} "${A[*]}"\n',
    "regex match and BASH_REMATCH": (': "${D:=MI355X_1x8x1}"\nif [[ -z "${P:-}" && "$D" =~ ^(MI[0-9]+)([A-Z]*) ]]; then\n'
                                     '  P="${BASH_REMATCH[1]}"\nfi\npython x.py "$P" "${BASH_REMATCH[@]}"\n'),
    "case and functions": ('f() { J=$1; K=$2; }\ncase "$M" in\n  big|large) L=80 ;;\n  *) L=8 ;;\nesac\n'
                           'f one two\npython x.py $L $K $J\n'),
    # bash's arithmetic is signed 64-bit and wraps: 10**10**10 is 0 at once (the reader computed the 10^10-digit
    # integer: a hang), 2**63 the most negative number; / and % truncate toward zero, exactly
    "64-bit arithmetic": ('A=$((10**10**10)); B=$((2**63)); C=$((99999999999999999999)); D=$((-7/2)); E=$((-7%2))\n'
                          'F=$(( (2**62) * 4 + 3 )); G=$((-9223372036854775807 / 3))\npython x.py $A $B $C $D $E $F $G\n'),
    # an element assigned from the end (bash 4.3+; the reader's list raised IndexError before the start)
    "negative array index": 'X=(a b c)\nX[-1]=z\nX[-3]=y\npython x.py "${X[@]}"\n',
    # Pai-Megatron-Patch's examples/*/run_mcore_*.sh: TP_COMM_OVERLAP=$(( ($TP > 1) ? 1 : 0 )), then
    # `if [ $TP_COMM_OVERLAP -eq 1 ]` adds --tp-comm-overlap (read as opaque text before: the flag was lost)
    "arithmetic comparison, ternary and logic": (
        'TP=4\nO=$(( ($TP > 1) ? 1 : 0 ))\nif [ $O -eq 1 ]; then F="--tp-comm-overlap"; fi\n'
        'python x.py $O $F $(( TP<2 ? 7 : TP<8 ? 8 : 9 )) $(( TP == 4 && 1 || 0 )) $(( !TP )) $(( ~TP ))'
        ' $(( TP >= 4 )) $(( TP != 4 )) $(( 1 << 3 | 5 & 6 ^ 1 )) $(( -2**2 )) $(( 2**3**2 ))\n'),
    # `eval $cmd` reads the joined string again (Pai-Megatron-Patch examples/deepseek_v3/run_mcore_deepseek_lite.sh:
    # an array element 'Et\|\(tt\|\)*30L' reaches Megatron as Et|(tt|)*30L, "'([0]*3+[1]*58)'" without its quotes)
    "eval of a joined command": ("A=(\n  --layout 'Et\\|\\(tt\\|\\)*30L'\n  --freq \"'([0]*3+[1]*58)'\"\n  --n \"a b\"\n)\n"
                                 'cmd="python x.py ${A[@]} --q \\"c d\\""\neval $cmd\n'),
    # the KEY=VALUE argument loop of Megatron-LM's functional-test scripts (core_r0.8.0 tests/functional_tests/
    # test_scripts/gpt3/pretrain_gpt3_distributed_test.sh) and of ROCm/Megatron-LM's databricks scripts: a for
    # loop over "$@", `$(echo .. | cut ..)`, a substring with an arithmetic offset, `export "$KEY"="$VALUE"`
    "argument loop with echo | cut, substring and export": (
        'set -- TP=4 "ADD=--a b --freq ([0]*3+[1])" MBS=2\nfor ARGUMENT in "$@"\ndo\n'
        '   KEY=$(echo $ARGUMENT | cut -f1 -d=)\n   KEY_LENGTH=${#KEY}\n   VALUE="${ARGUMENT:$KEY_LENGTH+1}"\n'
        '   export "$KEY"="$VALUE"\ndone\npython x.py $TP ${ADD:+$ADD} --mbs ${MBS:-4} --gbs ${GBS:-32} "$KEY"\n'),
    "for loops over words": ('X=; for n in a b "c d"; do X="$X-$n"; done\nfor w; do Y=$w; done\n'
                             'for k in 1 2 3; do Z=$((Z + k)); done\npython x.py "$X" "$n" "$Y" $Z\n'),
    "substrings": 'A=abcdef; N=2\npython x.py ${A:2} ${A:1:3} ${A: -2} ${A:$N+1} "${A:2:-1}" ${A:9} x${U:0:2}x\n',
    "echo | cut": ('V=a=b=c\npython x.py $(echo $V | cut -d= -f2-) "$(echo "p q r" | cut -d" " -f1,3)" '
                   '$(echo abcdef | cut -c2-4) `echo $V | cut -f1 -d=` "$(echo -n x y)" $(echo nodelim | cut -d, -f2)\n'),
    "arithmetic constants: hex, octal, BASE#N": 'python x.py $(( 0x1F + 010 )) $(( 2#101 )) $(( 36#zz )) $(( 64#_@ ))\n',
    # bash does not evaluate the side && / || / ?: skip: its division by zero is no error (bash 5.2 expr.c noeval)
    # a variable inside $(( )) is read as an expression (bash expr.c expr_streval): a name, a sum, a negative value
    "arithmetic: values read as expressions": ('A=-3; B=A; C="2+3"; D="8/2"\n'
                                               'python x.py $(( -A )) $(( B + 1 )) $(( C * 2 )) $(( D + 1 )) $(( -$A ))\n'),
    # `local "$K=8"`: the builtin reads NAME=value after expansion; the name is the function's (TP stays 1)
    "local of an expanded name": 'TP=1\nf() { K=TP; local "$K=8"; }\nf\npython x.py $TP\n',
    "arithmetic short-circuit": 'N=1\npython x.py $(( 0 && 1/0 )) $(( N || 5%0 )) $(( N ? 2 : 1/0 )) $(( 0 ? 1/0 : 3 ))\n',
    # read17: a function of echoes building part of the command line, called in a substitution (the words were
    # opaque and dropped: TP read as 1 for the function's 2); quoted, its lines stay one word
    "function of echoes in a substitution": ('TP=2\npar() { echo "--tp $TP --pp $1"; echo --sp; }\n'
                                             'python x.py $(par 4) "$(par 8)" `par "a  b"`\n'),
    # read17: backquoted comments between a long command's lines (Megatron-LM branch dmc examples/dmc/train.sh):
    # bash runs the comment, which prints nothing; tree-sitter-bash ran the comment past the closing backquote
    # (the script was refused as not bash)
    "backquoted comments": ('X="p `# c3` q"\npython x.py a `# c1` b \\\n  `# c2 x` \\\n  c $X "$X"\n'),
}


def _bash_args(snippet: str) -> list[str]:
    prog = "python() { printf '%s\\0' \"$@\"; }\n" + snippet
    out = subprocess.run(["bash", "-c", prog], capture_output=True, timeout=10, check=True, stdin=subprocess.DEVNULL)
    return out.stdout.decode().split("\0")[:-1]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_arguments_equal_what_bash_passes(name):
    snippet = SNIPPETS[name]
    st = ShellState(snippet)
    cmd = [c for c in st.commands if c.args and c.args[0].text == "python"][-1]
    assert [t.text for t in cmd.args[1:]] == _bash_args(snippet)


def test_loops_it_cannot_follow_are_noted_not_run():
    """A for loop whose words come from a command, a file-name pattern, or a body that leaves early is not
    run (one note each); the variables it would set stay as they were."""
    text = ('X=0\nfor i in $(seq 1 4); do X=$i; done\nfor f in *.sh; do X=$f; done\n'
            'for j in 1 2; do X=$j; break; done\npython x.py $X\n')
    st = ShellState(text, "run.sh")
    assert [t.text for t in st.commands[-1].args] == ["python", "x.py", "0"]
    notes = [w for w in st.warnings if "'for' loop not evaluated" in w]
    assert [n.split(":")[0] for n in notes] == ["line 2", "line 3", "line 4"]
    assert "command" in notes[0] and "*.sh" in notes[1] and "break" in notes[2]


def test_values_edit_where_they_are_written():
    """Provenance survives the workarounds: the characters of `$B` in `$A/$B/c` come from B's
    assignment, and a default inside an unreadable ${...} stays at its offset in the script."""
    text = 'A=root; B=data\npython x.py $A/$B/c "${L:-Et*10|t*12}"\n'
    st = ShellState(text)
    a, b = st.commands[-1].args[2:]
    assert [text[p.lit] for p in a.pcs] == list("root/data/c")
    assert b.literal_span() is not None and text[slice(*b.literal_span())] == "Et*10|t*12"
    ref = st.refs[b.exact_refs(st.refs)[0]]
    assert text[ref.start:ref.end] == "${L:-Et*10|t*12}"


@pytest.mark.parametrize("text,line,construct", [
    # bash: "line 1: syntax error near unexpected token `newline'" (tree-sitter-bash reads on)
    ("echo a >\npython x.py\n", 1, "unexpected newline after '>'"),
    ("X=1\nexport P=<slurm partition>\n", 2, "unexpected newline after '>'"),
    ('A="--num-layers 2\n', 1, "unterminated double quote"),
    # bash: "line 2 (3): syntax error near unexpected token `('" (NAME=<file is bash's empty assignment
    # and a redirection, which tree-sitter-bash 0.25 cannot parse)
    ("X=1\nDATA=<PATH_TO_DATA> (e.g. /data)\npython x.py\n", 2, "unexpected '(' after '>'"),
    ("X=1\nDATA=<PATH_TO_DATA> \\\n  (e.g. /data)\npython x.py\n", 3, "unexpected '(' after '>'"),
    ("if true; then\n  X=1\n", 3, "missing 'fi'"),
    ("echo ${ x}\n", 1, "bad substitution ${ x}"),
])
def test_script_bash_cannot_parse_is_one_line(text, line, construct):
    with pytest.raises(UserError) as e:
        ShellState(text, "run.sh")
    msg = one_line(e.value)
    assert msg.startswith(f"run.sh:{line}: cannot parse launch script:") and construct in msg and "\n" not in msg


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("text", [
    "echo a >\npython x.py\n",
    "X=1\nexport P=<slurm partition>\n",
    "X=1\nDATA=<PATH_TO_DATA> (e.g. /data)\npython x.py\n",
    "X=1\nDATA=<PATH_TO_DATA> \\\n  (e.g. /data)\npython x.py\n",
    # Megatron-LM's msdp examples: `NAME=<placeholder> \ ` (an escaped blank: the file " "), then a
    # command whose last redirection has no file
    "G=<PATH_OF_GENERATION> \\ \n        (e.g., /x.txt)\nnlg-eval \\\n    --hypothesis=<G> \\\n    --references=<R>\n",
])
def test_syntax_error_names_the_line_bash_names(text, tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(text)
    said = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=10).stderr
    line = re.search(r"line (\d+): syntax error", said).group(1)
    with pytest.raises(UserError) as e:
        ShellState(text, "run.sh")
    assert one_line(e.value).startswith(f"run.sh:{line}: cannot parse launch script:")


DEEP = {  # shapes a mutated or hostile script can nest without end
    "braces": lambda n: "{ " * n + "python x.py" + "; }" * n + "\n",
    "subshells": lambda n: "(" * n + "python x.py" + ")" * n + "\n",
    "defaults": lambda n: 'X="' + "${a:-" * n + "b" + "}" * n + '"\npython x.py "$X"\n',
    "ifs": lambda n: "if true; then\n" * n + "python x.py\n" + "fi\n" * n,
    "and-lists": lambda n: "true && " * n + "python x.py\n",
    "arithmetic": lambda n: "X=$((" + "(" * n + "1" + ")" * n + "))\npython x.py $X\n",
}


@pytest.mark.parametrize("shape", sorted(DEEP))
def test_nesting_reads_to_a_depth_and_is_one_line_beyond(shape):
    """40 levels read (launch scripts reach ~20 syntax-tree levels); 5000 levels give one line, not a
    RecursionError."""
    st = ShellState(DEEP[shape](40))
    if shape != "subshells":  # ( ... ) is not evaluated
        assert [t.text for t in st.commands[-1].args[:2]] == ["python", "x.py"]
    with pytest.raises(UserError) as e:
        ShellState(DEEP[shape](5000), "run.sh")
    assert "nests more than" in one_line(e.value) and "\n" not in one_line(e.value)


@pytest.mark.parametrize("assign", ["X[99999999]=b", "X[-5]=b"])
def test_array_index_far_outside_is_not_materialised(assign):
    """Regression: ``X[99999999]=b`` appended 10^8 empty elements (a minute, gigabytes), ``X[-5]=b`` on a
    one-element array raised IndexError (exit 70).  Bash arrays are sparse; such an index is said in a
    warning and not followed."""
    st = ShellState(f"X=(a)\n{assign}\npython x.py ${{X[0]}}\n")
    cmd = [c for c in st.commands if c.args and c.args[0].text == "python"][-1]
    assert [t.text for t in cmd.args[1:]] == ["x.py", "a"]
    assert any("not followed" in w for w in st.warnings), st.warnings


# --------------------------------------------------------------------------- assignments ending their line
# tree-sitter-bash 0.25 parses `B=1 C=2` NEWLINE `export P=LL` as ONE command (export with the prefixes B=1 C=2):
# the export was read as an ordinary command and dropped.  bash ends the command at the newline.  Each script calls
# torchrun (a function printing its arguments and the environment it would pass to a program); the reader's
# torchrun commands must carry the same arguments and, of the script's own names, the same environment.
_NAMES = ("A", "B", "C", "D", "P", "X", "Y", "NCCL_PROTO")
PREFIX_LINES = {
    "export": "A=1\nB=1 C=2\nexport NCCL_PROTO=LL\ntorchrun --nproc_per_node 8 pretrain_gpt.py \"$B\" \"$C\"\n",
    "declare -x": "B=1 C=2\ndeclare -x P=LL\ntorchrun x.py \"$B$C$P\"\n",
    "readonly": "B=1 C=2\nreadonly P=LL\nexport P\ntorchrun x.py \"$P\" \"$B\"\n",
    "local in a function": ("P=out\nf() {\n  B=1 C=2\n  local P=LL\n  torchrun x.py \"$P\" \"$B\"\n}\nf\n"
                            "torchrun x.py \"$P\" \"$B$C\"\n"),
    "unset": "export P=LL\nB=1 C=2\nunset P\ntorchrun x.py \"${P-unset}\" \"$C\"\n",
    "plain assignment": "B=1 C=2\nD=3\nexport D\ntorchrun x.py \"$B$C$D\"\n",
    "a command next": "export B=0\nB=1 C=2\ntorchrun x.py \"$B\" \"$C\"\n",
    "a command with its own prefixes next": "B=1 C=2\nX=1 Y=2 torchrun x.py \"$B$C\" \"${X-unset}\"\n",
    "a comment after the assignments": "B=1 C=2 # two\nexport P=LL\ntorchrun x.py \"$B\"\n",
    "blank lines between": "B=1 C=2\n\n\nexport P=LL\ntorchrun x.py \"$C\"\n",
    "prefixes continued onto the next line": "X=1 Y=2 \\\n  torchrun x.py \"${X-unset}\"\n",
    "in a then branch": "if true; then\n  B=1 C=2\n  export P=LL\nfi\ntorchrun x.py \"$B\"\n",
}


def _bash_launches(script: str) -> list[tuple[list[str], dict[str, str]]]:
    """What bash passes to each ``torchrun``: its arguments, and the script's names in its environment."""
    prog = ("torchrun() { printf '%s\\0' \"$@\"; printf '\\1\\0'; env -0; printf '\\2\\0'; }\n"
            + "unset " + " ".join(_NAMES) + "\n" + script)
    out = subprocess.run(["bash", "--norc", "--noprofile", "-c", prog], capture_output=True, timeout=10, check=True,
                         stdin=subprocess.DEVNULL).stdout.decode().split("\0")[:-1]
    calls = []
    while out:
        args, env = out[:out.index("\1")], out[out.index("\1") + 1:out.index("\2")]
        out = out[out.index("\2") + 1:]
        pairs = dict(e.split("=", 1) for e in env if "=" in e)
        calls.append((args, {k: v for k, v in pairs.items() if k in _NAMES}))
    return calls


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("env") is None, reason="needs bash and env")
@pytest.mark.parametrize("name", sorted(PREFIX_LINES))
@pytest.mark.parametrize("lead", ["", "A=1\n"], ids=["first", "after-assignment"])  # the parse depends on what
def test_assignments_ending_their_line_are_not_prefixes(name, lead):              # comes before (both mis-parse)
    script = lead + PREFIX_LINES[name]
    st = ShellState(script)
    got = [([t.text for t in c.args[1:]], {k: "".join(p.ch for p in v) for k, v in c.env.items() if k in _NAMES})
           for c in st.commands if c.args and c.args[0].text == "torchrun"]
    assert got == _bash_launches(script)
